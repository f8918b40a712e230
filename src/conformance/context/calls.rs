//! The calls a check makes. Each states what it expects ([`Expect`]); the
//! check's ledger keeps every call with its expectation, and an unmet one is
//! the check's finding (see [`Ctx::settle`]). Calls of the plugin as Nomad
//! runs it are also logged for the run-wide checks ([`CallLog`](super::CallLog)).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::repeat::{Redo, again_alone};
use super::{Ctx, Finding, LoggedCall, listing};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::exec::KillMode;
use crate::lock;
use crate::manager::{HostVolumeManager, ManagerError, Volume};
use crate::plugin::{CallOptions, Fingerprint, HostVolumePlugin, PluginCall, PluginRun};

/// What a check expects of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The call must succeed (exit 0, output accepted).
    Success,
    /// The call must fail (non-zero exit).
    Failure,
    /// Either is fine: the check's rule judges the outcome itself (say why at the call).
    Either,
}

/// One call in a check's ledger.
#[derive(Debug, Clone)]
struct Entry {
    step: String,
    /// The operation, when it is one of Nomad's.
    op: Option<Operation>,
    /// The operation word sent.
    word: String,
    expect: Expect,
    /// Nomad's error text; `None` when the call succeeded.
    error: Option<String>,
    /// The request, to make a failed call again alone (see [`repeat`](super::repeat)).
    redo: Option<Redo>,
    /// The raw call, when it failed.
    run: Option<PluginRun>,
}

impl Entry {
    fn met(&self) -> bool {
        match self.expect {
            Expect::Success => self.error.is_none(),
            Expect::Failure => self.error.is_some(),
            Expect::Either => true,
        }
    }

    /// "step: expected create to succeed; got: …".
    fn describe(&self) -> String {
        match (&self.error, self.expect) {
            (Some(e), _) => format!("{}: expected {} to succeed; got: {e}", self.step, self.word),
            (None, _) => format!(
                "{}: expected {} to fail; it succeeded",
                self.step, self.word
            ),
        }
    }
}

/// A check's own record of its calls: what each was expected to do, which
/// volumes are live, and how many calls are under way.
#[derive(Default)]
pub(super) struct Ledger {
    entries: Mutex<Vec<Entry>>,
    /// Volumes created and not yet deleted: [`Ctx::cleanup`] deletes them, so
    /// a check that stops early leaves no mount or device behind.
    live: Mutex<BTreeMap<String, (CreateRequest, String)>>,
    /// Volumes whose delete ran out of time: [`Ctx::cleanup`] leaves them to
    /// the run's teardown, which deletes whatever is left all at once, so a
    /// plugin whose deletes hang costs one more limit per run, not per check.
    hung: Mutex<std::collections::BTreeSet<String>>,
    in_flight: AtomicUsize,
    /// Calls started so far: a call was alone only if no other started before it ended.
    started: AtomicUsize,
}

impl Ledger {
    fn note(&self, step: &str, op: &str, expect: Expect, error: Option<String>) {
        lock(&self.entries).push(Entry {
            step: step.to_string(),
            op: op.parse().ok(),
            word: op.to_string(),
            expect,
            error,
            redo: None,
            run: None,
        });
    }

    /// The request and raw call of the last failed call made as `step`.
    fn failed(&self, step: &str) -> Option<(Redo, String, Option<PluginRun>)> {
        lock(&self.entries)
            .iter()
            .rev()
            .find(|e| e.step == step && e.error.is_some())
            .and_then(|e| Some((e.redo.clone()?, e.error.clone()?, e.run.clone())))
    }

    /// Takes back the expectation of the calls made as `step`: they timed
    /// out under the run's load and were made again alone, which is judged
    /// instead (they stay in the run's log as evidence).
    pub(super) fn excuse(&self, step: &str) {
        for entry in lock(&self.entries).iter_mut().filter(|e| e.step == step) {
            entry.expect = Expect::Either;
        }
    }

    fn unmet(&self) -> Vec<Entry> {
        lock(&self.entries)
            .iter()
            .filter(|e| !e.met())
            .cloned()
            .collect()
    }

    /// Marks a call as under way, to tell calls made alone from deliberate
    /// bursts; `run` counts the run's calls in flight.
    fn enter<'a>(&'a self, run: &'a AtomicUsize) -> Solo<'a> {
        Solo {
            ticket: self.started.fetch_add(1, Ordering::SeqCst),
            started_alone: self.in_flight.fetch_add(1, Ordering::SeqCst) == 0,
            run_in_flight: run.fetch_add(1, Ordering::SeqCst) + 1,
            run,
            ledger: self,
        }
    }
}

/// A call under way in a sandbox; [`alone`](Solo::alone) tells whether any
/// other call of the same check overlapped it.
struct Solo<'a> {
    /// How many calls had started before this one.
    ticket: usize,
    started_alone: bool,
    /// The run's calls in flight when it started, itself included.
    run_in_flight: usize,
    run: &'a AtomicUsize,
    ledger: &'a Ledger,
}

impl Solo<'_> {
    /// Nothing ran when it started, and nothing started since: a call that
    /// began and ended alone may still have had a whole other call inside it.
    fn alone(&self) -> bool {
        self.started_alone
            && self.ledger.in_flight.load(Ordering::SeqCst) == 1
            && self.ledger.started.load(Ordering::SeqCst) == self.ticket + 1
    }
}

impl Drop for Solo<'_> {
    fn drop(&mut self) {
        self.ledger.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.run.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ctx {
    /// Creates, logging the call for the run-wide checks.
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<CreateResponse> {
        self.create_as(req, expect, step, false).await
    }

    /// Creates; `alone`: with no other call of the run in flight (see [`Gate`]).
    pub(super) async fn create_as(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        alone: bool,
    ) -> PluginCall<CreateResponse> {
        self.create_started(req, expect, step, alone, None).await
    }

    /// Creates as one call of a burst: it starts once every call of the
    /// burst has reached `start`, so their starts are aligned (a race
    /// between them is met by design, not by chance).
    pub async fn create_aligned(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        start: &tokio::sync::Barrier,
    ) -> PluginCall<CreateResponse> {
        self.create_started(req, expect, step, false, Some(start))
            .await
    }

    async fn create_started(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        alone: bool,
        start: Option<&tokio::sync::Barrier>,
    ) -> PluginCall<CreateResponse> {
        // Aligned before the gate: a burst call holding the gate while it
        // waits for the others could deadlock behind a call made alone.
        if let Some(start) = start {
            start.wait().await;
        }
        let _gate = Gate::hold(&self.shared, alone).await;
        let solo = self.calls.enter(&self.shared.in_flight);
        let before = solo
            .started_alone
            .then(|| listing(Path::new(&req.volumes_dir)));
        self.shared.live.creating(req);
        let call = self.plugin.create(req).await;
        let alone = solo.alone();
        let residue = match (&call.result, before, alone) {
            (Err(_), Some(before), true) => {
                let after = listing(Path::new(&req.volumes_dir));
                Some(after.difference(&before).cloned().collect())
            }
            _ => None,
        };
        let in_flight = solo.run_in_flight;
        drop(solo);
        self.log(&call, in_flight, residue);
        self.account(step, expect, &call);
        self.keep_redo(step, &call, || Redo::Create(req.clone()));
        if let Ok(resp) = &call.result {
            lock(&self.calls.live).insert(req.volume_id.clone(), (req.clone(), resp.path.clone()));
        }
        let path = call.result.as_ref().ok().map(|r| r.path.as_str());
        self.shared.live.create_ended(req, path);
        call
    }

    /// Deletes the volume `req` created at `created_path`.
    pub async fn delete(
        &self,
        req: &CreateRequest,
        created_path: &str,
        expect: Expect,
        step: &str,
    ) -> PluginCall<()> {
        self.delete_raw(&DeleteRequest::for_created(req, created_path), expect, step)
            .await
    }

    /// Sends exactly this delete request.
    pub async fn delete_raw(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<()> {
        self.delete_as(req, expect, step, false).await
    }

    /// Sends this delete request; `alone`: as for [`create_as`](Self::create_as).
    pub(super) async fn delete_as(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        alone: bool,
    ) -> PluginCall<()> {
        self.delete_started(req, expect, step, alone, None).await
    }

    /// Deletes as one call of a burst (see [`create_aligned`](Self::create_aligned)).
    pub async fn delete_aligned(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        start: &tokio::sync::Barrier,
    ) -> PluginCall<()> {
        self.delete_started(req, expect, step, false, Some(start))
            .await
    }

    async fn delete_started(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        alone: bool,
        start: Option<&tokio::sync::Barrier>,
    ) -> PluginCall<()> {
        if let Some(start) = start {
            start.wait().await;
        }
        let _gate = Gate::hold(&self.shared, alone).await;
        let solo = self.calls.enter(&self.shared.in_flight);
        let call = self.plugin.delete(req).await;
        let in_flight = solo.run_in_flight;
        drop(solo);
        self.log(&call, in_flight, None);
        self.account(step, expect, &call);
        self.keep_redo(step, &call, || Redo::Delete(req.clone()));
        if call.ok() {
            lock(&self.calls.live).remove(&req.volume_id);
            self.shared.live.deleted(&req.volumes_dir, &req.volume_id);
        } else if call.timed_out() {
            lock(&self.calls.hung).insert(req.volume_id.clone());
        }
        call
    }

    /// Fingerprints once more (the probe is [`fingerprint_probe`](Self::fingerprint_probe)).
    pub async fn fingerprint(&self, expect: Expect, step: &str) -> PluginCall<Fingerprint> {
        self.fingerprint_as(expect, step, false).await
    }

    /// Fingerprints; `alone`: as for [`create_as`](Self::create_as).
    pub(super) async fn fingerprint_as(
        &self,
        expect: Expect,
        step: &str,
        alone: bool,
    ) -> PluginCall<Fingerprint> {
        let _gate = Gate::hold(&self.shared, alone).await;
        let solo = self.calls.enter(&self.shared.in_flight);
        let call = self.plugin.fingerprint().await;
        let in_flight = solo.run_in_flight;
        drop(solo);
        self.log(&call, in_flight, None);
        self.account(step, expect, &call);
        call
    }

    /// Creates, expecting success: the response, or the finding for this
    /// step (see [`need`](Self::need)).
    pub async fn create_ok(
        &self,
        req: &CreateRequest,
        step: &str,
    ) -> Result<CreateResponse, Finding> {
        let call = self.create(req, Expect::Success, step).await;
        self.need(call, step).await
    }

    /// Deletes, expecting success; `Err` is the finding for this step.
    pub async fn delete_ok(
        &self,
        req: &CreateRequest,
        path: &str,
        step: &str,
    ) -> Result<(), Finding> {
        let call = self.delete(req, path, Expect::Success, step).await;
        self.need(call, step).await
    }

    /// A call's value, or the finding its failure makes: a skip naming the
    /// prerequisite when that prerequisite itself did not pass, else this
    /// check's failure.
    pub async fn need<T: 'static>(&self, call: PluginCall<T>, step: &str) -> Result<T, Finding> {
        match call.result {
            Ok(value) => Ok(value),
            Err(e) => match self.failed_prerequisite(call.operation).await {
                Some(needs) => Err(Finding::Skip(needs)),
                None => match self.raced(step, call.operation).await {
                    // It failed by chance: the check goes on from the call
                    // made again alone.
                    Some(value) => match value.downcast::<T>() {
                        Ok(value) => Ok(*value),
                        Err(_) => Err(Finding::Skip("needs process.repeatable".into())),
                    },
                    None => Err(Finding::Fail(format!(
                        "{step}: expected {} to succeed; got: {e}",
                        call.operation
                    ))),
                },
            },
        }
    }

    /// Records a call made some other way (through the manager, or an
    /// operation Nomad does not have) in the ledger.
    pub fn note(&self, step: &str, op: &str, expect: Expect, error: Option<String>) {
        self.calls.note(step, op, expect, error);
    }

    /// Keeps what a failed call needs to be made again alone.
    fn keep_redo<T>(&self, step: &str, call: &PluginCall<T>, redo: impl FnOnce() -> Redo) {
        // A call that timed out is not made again here: the deadline checks
        // own that, and a call made again alone would cost its whole limit.
        if call.result.is_ok() || call.timed_out() {
            return;
        }
        if let Some(entry) = lock(&self.calls.entries)
            .iter_mut()
            .rev()
            .find(|e| e.step == step)
        {
            entry.redo = Some(redo());
            entry.run = call.run.clone();
        }
    }

    /// Whether the failed call of `step` is a bystander's race: made again
    /// alone, it succeeded (see [`repeat`](super::repeat)). Calls made again
    /// alone are not made again once more.
    /// Its value is the call's made again alone.
    async fn raced(&self, step: &str, op: Operation) -> Option<Box<dyn std::any::Any + Send>> {
        if !self.is_bystander(op) || step.ends_with(&again_alone("")) {
            return None;
        }
        let (redo, error, run) = self.calls.failed(step)?;
        self.repeat_alone(step, &redo, &error, run).await
    }

    fn account<T>(&self, step: &str, expect: Expect, call: &PluginCall<T>) {
        let error = call.result.as_ref().err().map(|e| e.to_string());
        self.calls
            .note(step, call.operation.as_str(), expect, error);
    }

    /// Logs a call; `in_flight`: the run's calls in flight when it started.
    fn log<T>(&self, call: &PluginCall<T>, in_flight: usize, residue: Option<Vec<String>>) {
        self.shared.log.push(LoggedCall {
            check: self.check,
            op: call.operation,
            duration: call.duration,
            limit: self.shared.settings.timeouts().limit(call.operation),
            phase: self.phase,
            in_flight,
            plugin_failed: !call.exited_zero(),
            run: call.run.clone().map(Arc::new),
            residue,
            error: call.result.as_ref().err().map(ToString::to_string),
        });
    }

    /// The check's finding once every call is accounted for. A call that did
    /// not do what was expected of it is the check's failure, with that call
    /// as evidence, unless the check already failed, or the call failed only
    /// because its prerequisite did (then the finding stands: the
    /// prerequisite's own check reports the cause).
    pub async fn settle(&self, finding: Finding) -> Finding {
        let mut own = Vec::new();
        for entry in self.calls.unmet() {
            let explained = match entry.op {
                Some(op) if entry.expect == Expect::Success => {
                    self.failed_prerequisite(op).await.is_some()
                        || self.raced(&entry.step, op).await.is_some()
                }
                _ => false,
            };
            if !explained {
                own.push(entry.describe());
            }
        }
        match (finding, own.first()) {
            (finding @ Finding::Fail(_), _) | (finding, None) => finding,
            (_, Some(first)) => Finding::Fail(if own.len() == 1 {
                first.clone()
            } else {
                format!(
                    "{first} (and {} more calls did not do what was expected)",
                    own.len() - 1
                )
            }),
        }
    }

    /// The same plugin with other call options (a working dir, extra
    /// variables), sharing this check's recorder and ledger. Its calls are
    /// not what Nomad makes, so they are not logged for the run-wide checks.
    pub fn variant(&self, adjust: impl FnOnce(&mut CallOptions)) -> Variant<'_> {
        let mut opts = self.shared.call_options(&self.recorder);
        adjust(&mut opts);
        Variant {
            ctx: self,
            plugin: self.shared.settings.target.open(&opts),
            alone: false,
        }
    }

    /// Runs `create` and kills it (SIGKILL to its whole group) after `after`.
    /// Killed on purpose, so either outcome is expected.
    pub async fn crash_create(&self, req: &CreateRequest, after: Duration, step: &str) {
        self.crasher(after).create(req, Expect::Either, step).await;
    }

    /// Runs `delete` and kills it after `after` (see [`crash_create`](Self::crash_create)).
    pub async fn crash_delete(&self, req: &DeleteRequest, after: Duration, step: &str) {
        self.crasher(after).delete(req, Expect::Either, step).await;
    }

    fn crasher(&self, after: Duration) -> Variant<'_> {
        self.variant(|o| {
            o.kill_mode = Some(KillMode::GroupKill);
            o.timeouts.create = after;
            o.timeouts.delete = after;
        })
    }

    /// Runs an operation Nomad does not have; `None` for the built-in.
    pub async fn run_unknown(&self, op: &str, env: Vec<(String, String)>) -> Option<PluginRun> {
        self.plugin.run_unknown(op, env).await
    }

    /// A manager over this sandbox (state in `<dir>/state`) that drives the
    /// plugin under test, for the checks that exercise what a Nomad client does
    /// around plugins (restore).
    pub fn manager(&self) -> Result<HostVolumeManager, ManagerError> {
        let template = self.request();
        let mut manager = HostVolumeManager::open(self.sandbox.dir.join("state"))?
            .with_volumes_dir(&self.sandbox.volumes)
            .with_node_id(template.node_id)
            .with_node_pool(template.node_pool)
            .with_timeouts(self.shared.settings.timeouts())
            .with_restore_timeout(
                crate::contract::RESTORE_TIMEOUT.mul_f64(self.shared.settings.timeout_scale),
            )
            .with_plugin(self.plugin.clone());
        if let Some(dir) = self.plugin.plugin_dir() {
            manager = manager.with_plugin_dir(dir);
        }
        Ok(manager)
    }

    /// Remembers a volume made through the manager, for [`cleanup`](Self::cleanup).
    pub fn track(&self, volume: &Volume) {
        if let Some(req) = &volume.create_request {
            lock(&self.calls.live)
                .insert(volume.id.clone(), (req.clone(), volume.host_path.clone()));
            self.shared.live.created(req, &volume.host_path);
        }
    }

    /// Forgets a volume deleted through the manager.
    pub fn untrack(&self, id: &str) {
        if let Some((req, _)) = lock(&self.calls.live).remove(id) {
            self.shared.live.deleted(&req.volumes_dir, id);
        }
    }

    /// Logs, for the run-wide checks, the raw calls recorded since the
    /// recorder held `start` calls (calls the manager made on our behalf).
    pub fn log_runs_from(&self, start: usize) {
        let timeouts = self.shared.settings.timeouts();
        for run in self.recorder.runs().into_iter().skip(start) {
            let Ok(op) = run.operation.parse::<Operation>() else {
                continue;
            };
            self.shared.log.push(LoggedCall {
                check: self.check,
                op,
                duration: run.duration(),
                limit: timeouts.limit(op),
                plugin_failed: !run.succeeded(),
                residue: None,
                error: None,
                run: Some(Arc::new(run)),
                phase: self.phase,
                // Calls the manager made; not counted as they ran.
                in_flight: 0,
            });
        }
    }

    /// Deletes every volume this sandbox created and did not delete (a check
    /// that stopped early). Not logged: it is housekeeping after the verdict.
    ///
    /// All at once: a plugin whose deletes hang costs one delete limit here,
    /// not one per volume; a volume whose delete already hung is left to the
    /// run's teardown.
    pub async fn cleanup(&self) {
        let live = std::mem::take(&mut *lock(&self.calls.live));
        let hung = lock(&self.calls.hung).clone();
        let deletes: Vec<DeleteRequest> = live
            .into_values()
            .filter(|(req, _)| !hung.contains(&req.volume_id))
            .map(|(req, path)| DeleteRequest::for_created(&req, &path))
            .collect();
        crate::conformance::live::join_all(deletes.iter().map(|req| async move {
            if self.plugin.delete(req).await.ok() {
                self.shared.live.deleted(&req.volumes_dir, &req.volume_id);
            }
        }))
        .await;
        self.remove_canaries();
    }
}

/// The plugin under test with other call options ([`Ctx::variant`]).
pub(crate) struct Variant<'a> {
    ctx: &'a Ctx,
    plugin: Arc<dyn HostVolumePlugin>,
    /// Its calls wait until no other call of the run is in flight, and hold
    /// new ones back until they end.
    alone: bool,
}

/// The run's gate, held for one call (only for its drop: the guards are never
/// read). Every call holds it shared; a call made alone holds it exclusively,
/// so it waits for the calls in flight and new ones wait for it.
enum Gate<'a> {
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'a, ()>),
    Alone(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'a, ()>),
}

impl Gate<'_> {
    async fn hold(shared: &super::Shared, alone: bool) -> Gate<'_> {
        if alone {
            Gate::Alone(shared.gate.write().await)
        } else {
            Gate::Shared(shared.gate.read().await)
        }
    }
}

/// A call of the run under way that is not logged (it still counts as in flight).
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn enter(counter: &'a AtomicUsize) -> Counted<'a> {
        counter.fetch_add(1, Ordering::SeqCst);
        Counted(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<'a> Variant<'a> {
    /// The same, making its calls alone: a re-run that tells a call that
    /// timed out under the run's own load from one that hangs.
    pub fn alone(&self) -> Variant<'a> {
        Variant {
            ctx: self.ctx,
            plugin: self.plugin.clone(),
            alone: true,
        }
    }

    /// Holds the run's gate for one call: shared, or exclusive when alone.
    async fn gate(&self) -> Gate<'_> {
        Gate::hold(&self.ctx.shared, self.alone).await
    }

    /// Fingerprints.
    pub async fn fingerprint(&self, expect: Expect, step: &str) -> PluginCall<Fingerprint> {
        let _gate = self.gate().await;
        let _in_flight = Counted::enter(&self.ctx.shared.in_flight);
        let call = self.plugin.fingerprint().await;
        self.ctx.account(step, expect, &call);
        call
    }

    /// Creates.
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<CreateResponse> {
        self.ctx.shared.live.creating(req);
        let _gate = self.gate().await;
        let _in_flight = Counted::enter(&self.ctx.shared.in_flight);
        let call = self.plugin.create(req).await;
        self.ctx.account(step, expect, &call);
        if let Ok(resp) = &call.result {
            lock(&self.ctx.calls.live)
                .insert(req.volume_id.clone(), (req.clone(), resp.path.clone()));
        }
        let path = call.result.as_ref().ok().map(|r| r.path.as_str());
        self.ctx.shared.live.create_ended(req, path);
        call
    }

    /// Deletes.
    pub async fn delete(&self, req: &DeleteRequest, expect: Expect, step: &str) -> PluginCall<()> {
        let _gate = self.gate().await;
        let _in_flight = Counted::enter(&self.ctx.shared.in_flight);
        let call = self.plugin.delete(req).await;
        self.ctx.account(step, expect, &call);
        if call.ok() {
            lock(&self.ctx.calls.live).remove(&req.volume_id);
            self.ctx
                .shared
                .live
                .deleted(&req.volumes_dir, &req.volume_id);
        } else if call.timed_out() {
            lock(&self.ctx.calls.hung).insert(req.volume_id.clone());
        }
        call
    }
}
