//! The one path every plugin call of a check takes, whoever makes it
//! ([`Route`]): [`Calls`](super::Calls) for the calls Nomad makes, and a
//! [`Variant`](super::Variant) for the same plugin with other call options.
//! A call is let in (aligned with its burst, through the run's gate, counted
//! as under way in the check and the run), made, then ended: accounted in the
//! check's ledger with what was expected of it, its volume's life recorded,
//! and, for Nomad's calls only, logged for the run-wide checks and kept to be
//! made again alone.

use std::path::Path;
use std::sync::Arc;

use super::attempt::{Again, Attempt, By, End, Failed, Made, Nth, When};
use super::held;
use super::ledger::{BurstGate, Gate, Redo, Routed, Solo};
use super::{Calls, Expect, LoggedCall, listing};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::plugin::{Fingerprint, HostVolumePlugin, PluginCall};

/// When a call starts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum Start<'b> {
    /// As soon as the run's gate lets it in (shared with the other calls).
    #[default]
    Now,
    /// With no other call of the run in flight (see [`Gate`]): a re-run that
    /// tells a call that failed or timed out under the run's own load from
    /// one that fails anyway.
    Alone,
    /// As one call of a burst ([`Race`]): once every call of the burst has
    /// reached the barrier, so their starts are aligned, and held at its
    /// first change of state until every call of the burst has reached its
    /// own (a race between them is met by design, not by chance).
    Raced(&'b Race),
}

/// A burst of racing calls: aligned starts, and a plugin handle whose calls
/// are held at their first change of state under the check's dir and let
/// go together (see [`crate::exec::Rendezvous`]), the first one chosen by
/// the round so that which call goes first varies.
pub(crate) struct Race {
    start: tokio::sync::Barrier,
    /// The run's gate, held once for the whole burst.
    gate: BurstGate,
    plugin: Arc<dyn HostVolumePlugin>,
}

impl std::fmt::Debug for Race {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Race").finish_non_exhaustive()
    }
}

impl Race {
    /// A burst of `size` calls of `calls`' plugin in round `round`.
    pub(crate) fn new(calls: &Calls, size: usize, round: usize) -> Race {
        let mut opts = calls.shared.call_options(&calls.recorder, &calls.owner);
        opts.at_changes = Some(crate::exec::AtChanges::Hold(crate::exec::Rendezvous::new(
            size, round, &calls.dir,
        )));
        Race {
            start: tokio::sync::Barrier::new(size),
            gate: BurstGate::default(),
            plugin: calls.shared.settings.target.open(&opts),
        }
    }

    /// Whether the burst's calls are held at their changes here, or only
    /// started aligned: a plugin run as a process, on a host that can hold.
    pub(crate) fn holds(calls: &Calls) -> bool {
        !calls.shared.settings.target.is_builtin() && calls.shared.host.can_hold_changes()
    }
}

/// Which handle of the plugin under test a call goes through, and whether it
/// is one Nomad makes.
#[derive(Clone, Copy)]
pub(super) struct Route<'a> {
    /// The check's calls: its ledger, recorder and run.
    pub calls: &'a Calls,
    /// The plugin, opened with the options of this route.
    pub plugin: &'a dyn HostVolumePlugin,
    /// Whose calls these are: where they are logged, and whether one that
    /// fails is made again alone.
    pub caller: Caller,
}

/// Whose calls a [`Route`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Nomad's (the plugin as Nomad runs it): logged for the run-wide checks
    /// and, when one fails in a bystander check, made again alone through the
    /// same handle (see [`repeat`](super::repeat)).
    Nomad,
    /// Nomad's, on a host that refuses a step: logged apart, for the checks
    /// that judge answers ([`Shared::refused_log`](super::Shared::refused_log)).
    RefusingHost,
    /// A variant's (another working dir, other variables, ...): not logged,
    /// as they are not what Nomad makes; one that failed in company is made
    /// again alone as Nomad's are.
    Variant,
    /// A variant whose calls are killed part way on purpose (the crash
    /// checks'): neither logged nor ever made again (a kill is their point).
    Crasher,
}

impl Route<'_> {
    /// Creates. A failed create made alone (by Nomad's route) is logged with
    /// what it left in the volumes dir, for `failure.clean`. A create
    /// expected to succeed that failed beside other calls is made again
    /// alone, and that one is the answer when it succeeds (see
    /// [`repeat`](super::repeat)).
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        start: Start<'_>,
        nth: Nth,
    ) -> Made<CreateResponse> {
        let (first, alone) = self.create_once(req, expect, step, start, nth).await;
        // Either: a create that may be refused, made again alone only when
        // it failed; the check judges whichever is the answer.
        let expect = match expect {
            Expect::Either => Expect::Success,
            e => e,
        };
        if !self.repeats_alone(&first, expect, start, alone, true) {
            return first;
        }
        let nth = Nth::Again(Again::Alone, first.attempt().id);
        let again = Again::Alone.shown(step);
        let (second, _) = self
            .create_once(req, Expect::Either, &again, Start::Alone, nth)
            .await;
        self.calls.settle_repeat(step, first, second)
    }

    /// One create, and whether it was alone in the run.
    async fn create_once(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        start: Start<'_>,
        nth: Nth,
    ) -> (Made<CreateResponse>, bool) {
        let (_gate, solo) = self.admit(start).await;
        let dir = Path::new(&req.volumes_dir);
        let host = &*self.calls.shared.host;
        let before =
            (self.caller == Caller::Nomad && solo.started_alone).then(|| listing(host, dir));
        self.calls.shared.live.creating(req);
        let call = self.plugin(start).create(req).await;
        let residue = match (&call.result, before, solo.alone()) {
            (Err(_), Some(before), true) => {
                Some(listing(host, dir).difference(&before).cloned().collect())
            }
            _ => None,
        };
        let (alone, attempt) = self.ended(solo, &call, residue, step, expect, nth);
        self.keep_redo(attempt, &call, || Redo::Create(req.clone()));
        let ledger = &self.calls.ledger;
        if let Ok(resp) = &call.result {
            ledger.created(req, &resp.path);
        }
        let path = call.result.as_ref().ok().map(|r| r.path.as_str());
        self.calls.shared.live.create_ended(req, path);
        (Made::new(call, attempt), alone)
    }

    /// Sends exactly this delete request. A volume deleted is gone from the
    /// check and the run; one whose delete timed out is left to the run's
    /// teardown. A delete expected to succeed that failed beside other calls,
    /// of a volume the check made, is made again alone, and that one is the
    /// answer when it succeeds (see [`repeat`](super::repeat)).
    pub async fn delete(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        start: Start<'_>,
        nth: Nth,
    ) -> Made<()> {
        let (first, alone) = self.delete_once(req, expect, step, start, nth).await;
        if let Some(again) = self.held_elsewhere(req, &first, expect, step).await {
            return again;
        }
        let made = self.calls.ledger.is_live(&req.volume_id);
        if !self.repeats_alone(&first, expect, start, alone, made) {
            return first;
        }
        let nth = Nth::Again(Again::Alone, first.attempt().id);
        let again = Again::Alone.shown(step);
        let (second, _) = self
            .delete_once(req, Expect::Either, &again, Start::Alone, nth)
            .await;
        self.calls.settle_repeat(step, first, second)
    }

    /// A delete that failed by its exit while a process that is not the
    /// plugin's held a device of the check's volumes (see
    /// [`held`](super::held)): the holders are waited for, and the delete made
    /// again alone once they let go, which is the answer. The failed one is
    /// taken back; when the one made again fails too while such a holder
    /// still holds a device, the check is inconclusive, naming it. `None`
    /// (the call stands) when no such holder holds one.
    async fn held_elsewhere(
        &self,
        req: &DeleteRequest,
        call: &Made<()>,
        expect: Expect,
        step: &str,
    ) -> Option<Made<()>> {
        let first = call.attempt();
        if self.caller == Caller::Crasher
            || expect == Expect::Failure
            || call.result.is_ok()
            || call.timed_out()
            || matches!(first.nth, Nth::Again(Again::LetGo, _))
        {
            return None;
        }
        let host = &self.calls.shared.host;
        let dir = &self.calls.dir;
        let holding = held::holders(host, dir).await;
        if holding.is_empty() {
            return None;
        }
        self.calls.ledger.repeated(first.id);
        self.calls.ledger.excuse(first.id);
        let waited = held::wait_let_go(host, dir).await;
        let again = Again::LetGo.shown(step);
        let nth = Nth::Again(Again::LetGo, first.id);
        let (second, _) = self
            .delete_once(req, expect, &again, Start::Alone, nth)
            .await;
        if second.result.is_ok() {
            return Some(second);
        }
        let still = held::holders(host, dir).await;
        if still.is_empty() && waited.is_empty() {
            // Let go, and it failed all the same: the plugin's failure.
            return Some(second);
        }
        let second_id = second.attempt().id;
        self.calls.ledger.repeated(second_id);
        self.calls.ledger.excuse(second_id);
        let holders = if still.is_empty() { holding } else { still };
        self.calls.inconclusive(held::held_words(step, &holders));
        Some(second)
    }

    /// Whether a call that ended is made again alone before the check sees
    /// it (the policy: [`Failed::again`], [`When::Ended`]); `own_volume`:
    /// not a delete of a volume the check did not make.
    fn repeats_alone<T>(
        &self,
        call: &Made<T>,
        expect: Expect,
        start: Start<'_>,
        alone: bool,
        own_volume: bool,
    ) -> bool {
        let failed = Failed {
            expect,
            at_once: matches!(start, Start::Now),
            company: !alone,
            repeats: self.calls.asker.repeats,
            own_volume,
            ..Failed::new(By::Route(self.caller), call.attempt().nth, End::of(call))
        };
        failed.again(When::Ended) == Some(Again::Alone)
    }

    /// One delete, and whether it was alone in the run.
    async fn delete_once(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        start: Start<'_>,
        nth: Nth,
    ) -> (Made<()>, bool) {
        let (_gate, solo) = self.admit(start).await;
        let call = self.plugin(start).delete(req).await;
        let (alone, attempt) = self.ended(solo, &call, None, step, expect, nth);
        self.keep_redo(attempt, &call, || Redo::Delete(req.clone()));
        if call.ok() {
            self.calls.ledger.deleted(&req.volume_id);
            self.calls
                .shared
                .live
                .deleted(&req.volumes_dir, &req.volume_id);
        } else if call.timed_out() {
            self.calls.ledger.hung(&req.volume_id);
        }
        (Made::new(call, attempt), alone)
    }

    /// Fingerprints.
    pub async fn fingerprint(
        &self,
        expect: Expect,
        step: &str,
        start: Start<'_>,
        nth: Nth,
    ) -> Made<Fingerprint> {
        let (_gate, solo) = self.admit(start).await;
        let call = self.plugin(start).fingerprint().await;
        let (_, attempt) = self.ended(solo, &call, None, step, expect, nth);
        Made::new(call, attempt)
    }

    /// The handle a call goes through: its race's, when it is one of a burst.
    fn plugin<'s>(&'s self, start: Start<'s>) -> &'s dyn HostVolumePlugin {
        match start {
            Start::Raced(race) => &*race.plugin,
            _ => self.plugin,
        }
    }

    /// Lets a call in: once every call of its burst has reached the barrier
    /// (when aligned), through the run's gate (exclusively when alone),
    /// counted as under way in the check and the run.
    async fn admit(&self, start: Start<'_>) -> (Gate<'_>, Solo<'_>) {
        // Aligned before the gate: a burst call holding the gate while it
        // waits for the others could deadlock behind a call made alone; and
        // let in as one, for the same reason (see [`BurstGate`]).
        let shared = &self.calls.shared;
        let gate = match start {
            Start::Raced(race) => {
                race.start.wait().await;
                race.gate.hold(shared).await
            }
            _ => Gate::hold(shared, matches!(start, Start::Alone)).await,
        };
        let solo = self
            .calls
            .ledger
            .enter(&shared.in_flight, &shared.calls_started);
        (gate, solo)
    }

    /// A call let in by [`admit`](Self::admit) ended: it no longer counts as
    /// under way, it is logged for the run-wide checks when it is Nomad's
    /// (with what its failed create left, `residue`), and accounted in the
    /// ledger as the attempt `nth`, shown as `step`. Whether it was alone in
    /// the run all along, and the attempt it was.
    fn ended<T>(
        &self,
        solo: Solo<'_>,
        call: &PluginCall<T>,
        residue: Option<Vec<String>>,
        step: &str,
        expect: Expect,
        nth: Nth,
    ) -> (bool, Attempt) {
        let attempt = Attempt { id: solo.id(), nth };
        let in_flight = solo.run_in_flight;
        let alone = solo.alone_in_run();
        drop(solo);
        match self.caller {
            Caller::Nomad => self.log(&self.calls.shared.log, call, in_flight, residue),
            Caller::RefusingHost => {
                self.log(&self.calls.shared.refused_log, call, in_flight, residue)
            }
            Caller::Variant | Caller::Crasher => {}
        }
        let error = call.result.as_ref().err().map(|e| e.to_string());
        let routed = Routed {
            attempt,
            caller: self.caller,
            end: End::of(call),
        };
        let op = call.operation.as_str();
        self.calls
            .ledger
            .note(Some(routed), step, op, expect, error);
        (alone, attempt)
    }

    /// Keeps what a failed call of Nomad's needs to be made again alone
    /// (see [`Failed::keeps_request`]).
    fn keep_redo<T>(&self, attempt: Attempt, call: &PluginCall<T>, redo: impl FnOnce() -> Redo) {
        if Failed::keeps_request(By::Route(self.caller), End::of(call)) {
            self.calls
                .ledger
                .keep_redo(attempt.id, redo(), call.run.clone());
        }
    }

    /// Logs a call into `log`; `in_flight`: the run's calls in flight when it started.
    fn log<T>(
        &self,
        log: &super::CallLog,
        call: &PluginCall<T>,
        in_flight: usize,
        residue: Option<Vec<String>>,
    ) {
        let shared = &self.calls.shared;
        log.push(LoggedCall {
            check: self.calls.asker.id,
            op: call.operation,
            duration: call.duration,
            limit: shared.settings.timeouts().limit(call.operation),
            phase: self.calls.phase,
            in_flight,
            plugin_failed: !call.exited_zero(),
            run: call.run.clone().map(Arc::new),
            residue,
            error: call.result.as_ref().err().map(ToString::to_string),
        });
    }
}
