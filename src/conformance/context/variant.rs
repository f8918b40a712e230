//! The plugin under test with other call options than Nomad's ([`Variant`]):
//! a working dir, extra variables, a kill part way (the crash checks), or
//! calls made alone. Its calls count in the check's ledger, and as the run's
//! calls in flight, but are not logged for the run-wide checks: they are not
//! what Nomad makes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::ledger::Gate;
use super::{Calls, Expect};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::exec::KillMode;
use crate::plugin::{CallOptions, Fingerprint, HostVolumePlugin, PluginCall};

impl Calls {
    /// The same plugin with other call options (a working dir, extra
    /// variables), sharing this check's recorder and ledger. Its calls are
    /// not what Nomad makes, so they are not logged for the run-wide checks.
    pub fn variant(&self, adjust: impl FnOnce(&mut CallOptions)) -> Variant<'_> {
        let mut opts = self.shared.call_options(&self.recorder);
        adjust(&mut opts);
        Variant {
            calls: self,
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
}

/// The plugin under test with other call options ([`Calls::variant`]).
pub(crate) struct Variant<'a> {
    calls: &'a Calls,
    plugin: Arc<dyn HostVolumePlugin>,
    /// Its calls wait until no other call of the run is in flight, and hold
    /// new ones back until they end.
    alone: bool,
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
            calls: self.calls,
            plugin: self.plugin.clone(),
            alone: true,
        }
    }

    /// Lets a call in: through the run's gate (shared, or exclusive when
    /// alone), counted as one of the run's calls in flight.
    async fn admit(&self) -> (Gate<'_>, Counted<'_>) {
        let gate = Gate::hold(&self.calls.shared, self.alone).await;
        (gate, Counted::enter(&self.calls.shared.in_flight))
    }

    /// Fingerprints.
    pub async fn fingerprint(&self, expect: Expect, step: &str) -> PluginCall<Fingerprint> {
        let (_gate, _in_flight) = self.admit().await;
        let call = self.plugin.fingerprint().await;
        self.calls.account(step, expect, &call);
        call
    }

    /// Creates.
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<CreateResponse> {
        self.calls.shared.live.creating(req);
        let (_gate, _in_flight) = self.admit().await;
        let call = self.plugin.create(req).await;
        self.calls.account(step, expect, &call);
        self.calls.create_ended(req, &call);
        call
    }

    /// Deletes.
    pub async fn delete(&self, req: &DeleteRequest, expect: Expect, step: &str) -> PluginCall<()> {
        let (_gate, _in_flight) = self.admit().await;
        let call = self.plugin.delete(req).await;
        self.calls.account(step, expect, &call);
        self.calls.delete_ended(req, &call);
        call
    }

    /// Creates; a create that timed out under the run's load is made again
    /// alone, and that call is returned (the caller judges one that timed
    /// out alone too).
    pub async fn create_unloaded(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<CreateResponse> {
        let first = self.create(req, expect, step).await;
        if !first.timed_out() {
            return first;
        }
        let again = super::unloaded::again(step);
        self.alone().create(req, expect, &again).await
    }

    /// Deletes, as [`create_unloaded`](Self::create_unloaded) creates.
    pub async fn delete_unloaded(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<()> {
        let first = self.delete(req, expect, step).await;
        if !first.timed_out() {
            return first;
        }
        let again = super::unloaded::again(step);
        self.alone().delete(req, expect, &again).await
    }
}
