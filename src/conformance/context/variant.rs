//! The plugin under test with other call options than Nomad's ([`Variant`]):
//! a working dir, extra variables, a kill part way (the crash checks), or
//! calls made alone. Its calls take the same path as Nomad's
//! ([`route`](super::route)): they count in the check's ledger, and as calls
//! in flight in the check and the run, but are not logged for the run-wide
//! checks (they are not what Nomad makes; those made on a host that refuses
//! a step are logged apart, for the checks that judge answers), nor made
//! again alone when one fails in a bystander check.

use std::sync::Arc;
use std::time::Duration;

use super::alone::rerun_alone;
use super::attempt::{End, Made, Nth};
use super::route::{Caller, Route, Start};
use super::{Calls, Expect};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::exec::KillMode;
use crate::plugin::{CallOptions, Fingerprint, HostVolumePlugin};

/// The plugin under test with other call options ([`Ctx::variant`](super::Ctx::variant)).
pub(crate) struct Variant<'a> {
    calls: &'a Calls,
    plugin: Arc<dyn HostVolumePlugin>,
    /// When its calls start: [`Start::Now`], or [`Start::Alone`] (they wait
    /// until no other call of the run is in flight, and hold new ones back
    /// until they end).
    start: Start<'static>,
    /// Whose calls it makes: a variant's, or Nomad's on a host that
    /// refuses a step (see [`Caller`]).
    caller: Caller,
}

impl<'a> Variant<'a> {
    /// The same plugin as `calls`' with other call options (a working dir,
    /// extra variables), sharing that check's recorder and ledger.
    pub(super) fn new(calls: &'a Calls, adjust: impl FnOnce(&mut CallOptions)) -> Variant<'a> {
        let mut opts = calls.shared.call_options(&calls.recorder, &calls.owner);
        adjust(&mut opts);
        Variant {
            calls,
            plugin: calls.shared.settings.target.open(&opts),
            start: Start::Now,
            caller: match (&opts.refuse, &opts.kill_mode, &opts.at_changes) {
                (Some(_), _, _) => Caller::RefusingHost,
                (None, Some(_), _) | (None, _, Some(crate::exec::AtChanges::KillAt(..))) => {
                    Caller::Crasher
                }
                _ => Caller::Variant,
            },
        }
    }

    /// Nomad's calls, as Nomad makes them, each watched as `watch` says:
    /// the plugin sees nothing of it but a pause at each watched system
    /// call, so they stay Nomad's (logged for the run-wide checks, made
    /// again alone when one fails in a bystander).
    pub(super) fn watched(calls: &'a Calls, watch: crate::exec::AtChanges) -> Variant<'a> {
        let mut opts = calls.shared.call_options(&calls.recorder, &calls.owner);
        opts.at_changes = Some(watch);
        Variant {
            calls,
            plugin: calls.shared.settings.target.open(&opts),
            start: Start::Now,
            caller: Caller::Nomad,
        }
    }

    /// The same plugin killed (SIGKILL to its whole group) `after` a create
    /// or delete starts: the crash checks' calls. Killed on purpose, so make
    /// its calls expecting either outcome.
    pub(super) fn crasher(calls: &'a Calls, after: Duration) -> Variant<'a> {
        Variant::new(calls, |o| {
            o.kill_mode = Some(KillMode::GroupKill);
            o.timeouts.create = after;
            o.timeouts.delete = after;
        })
    }

    /// The same, making its calls alone: a re-run that tells a call that
    /// timed out under the run's own load from one that hangs.
    pub fn alone(&self) -> Variant<'a> {
        Variant {
            calls: self.calls,
            plugin: self.plugin.clone(),
            start: Start::Alone,
            caller: self.caller,
        }
    }

    /// The path its calls take (the one every call takes), through this
    /// handle, not logged.
    fn route(&self) -> Route<'_> {
        Route {
            calls: self.calls,
            plugin: &*self.plugin,
            caller: self.caller,
        }
    }

    /// Fingerprints.
    pub async fn fingerprint(&self, expect: Expect, step: &str) -> Made<Fingerprint> {
        let route = self.route();
        route
            .fingerprint(expect, step, self.start, Nth::First)
            .await
    }

    /// Creates.
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> Made<CreateResponse> {
        let route = self.route();
        route
            .create(req, expect, step, self.start, Nth::First)
            .await
    }

    /// Deletes.
    pub async fn delete(&self, req: &DeleteRequest, expect: Expect, step: &str) -> Made<()> {
        let route = self.route();
        route
            .delete(req, expect, step, self.start, Nth::First)
            .await
    }

    /// Creates; a create that timed out under the run's load is made again
    /// alone, and that call is returned (the caller judges one that timed
    /// out alone too).
    pub async fn create_unloaded(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> Made<CreateResponse> {
        let first = self.create(req, expect, step).await;
        let Some((again, nth)) = rerun_alone(&first, self.caller, End::of(&first), step) else {
            return first;
        };
        // The load's doing until the re-run says otherwise: the re-run's
        // expectation is the one accounted.
        self.calls.ledger.excuse(first.attempt().first());
        let route = self.route();
        route.create(req, expect, &again, Start::Alone, nth).await
    }

    /// Deletes, as [`create_unloaded`](Self::create_unloaded) creates.
    pub async fn delete_unloaded(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
    ) -> Made<()> {
        let first = self.delete(req, expect, step).await;
        let Some((again, nth)) = rerun_alone(&first, self.caller, End::of(&first), step) else {
            return first;
        };
        self.calls.ledger.excuse(first.attempt().first());
        let route = self.route();
        route.delete(req, expect, &again, Start::Alone, nth).await
    }
}
