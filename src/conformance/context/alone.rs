//! Calls whose outcome a check compares or diagnoses must not have timed out
//! only because the run's own checks kept the machine busy. A call that timed
//! out is made again alone (no other call of the run in flight), and the
//! re-run is what the check judges; when it times out alone too, the check
//! cannot tell a cause and says so: a skip, "inconclusive: … timed out alone
//! too", never a diagnosis drawn from a call that never finished.
//!
//! Not for the checks whose subject is the load itself (the concurrency
//! checks): a call that hangs only when others run is their finding.

use std::future::Future;

use super::route::Start;
use super::{Expect, Finding, Steps};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::plugin::{Fingerprint, PluginCall};

/// The step name of a re-run alone.
pub(super) fn again(step: &str) -> String {
    format!("{step}, re-run alone after a timeout")
}

impl Steps<'_> {
    /// Creates; a create that timed out is re-run alone (see the module).
    /// `Err(skip)` when it times out alone too, or when its prerequisite did
    /// not pass (that check reports the cause).
    pub async fn create_unloaded(
        self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> Result<PluginCall<CreateResponse>, Finding> {
        let first = self.calls.create(req, expect, step).await;
        self.settle_timeout(step, first, |again| async move {
            let nomads = self.calls.nomads();
            nomads.create(req, expect, &again, Start::Alone).await
        })
        .await?
        .ended(step)
    }

    /// Deletes; a delete that timed out is re-run alone, as for
    /// [`create_unloaded`](Self::create_unloaded).
    pub async fn delete_unloaded(
        self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
    ) -> Result<PluginCall<()>, Finding> {
        self.delete_settled(req, expect, step).await?.ended(step)
    }

    /// Deletes, as [`delete_unloaded`](Self::delete_unloaded), for a check
    /// whose subject is whether the delete ends at all: one that overran its
    /// limit alone too is [`Settled::Hung`], not an inconclusive skip.
    pub async fn delete_settled(
        self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
    ) -> Result<Settled<()>, Finding> {
        let first = self.calls.delete_with(req, expect, step, Start::Now).await;
        self.settle_timeout(step, first, |again| async move {
            let nomads = self.calls.nomads();
            nomads.delete(req, expect, &again, Start::Alone).await
        })
        .await
    }

    /// Fingerprints; a fingerprint that overran its limit is made again
    /// alone, and that one is the answer (it has no side effect to undo).
    /// One that overruns alone too is returned as it is: the deadline check
    /// reports it, and a check that needs an answer skips for it.
    pub async fn fingerprint_unloaded(self, expect: Expect, step: &str) -> PluginCall<Fingerprint> {
        let first = self.calls.fingerprint(expect, step).await;
        let limit = self.calls.shared.settings.timeouts().fingerprint;
        if !(first.timed_out() || first.duration > limit) {
            return first;
        }
        self.calls.ledger.excuse(step);
        let nomads = self.calls.nomads();
        nomads.fingerprint(expect, &again(step), Start::Alone).await
    }

    /// `first`, when it did not time out; else the re-run alone that `rerun`
    /// makes (given its step name). The calls that timed out are evidence in
    /// the run's log, not unmet expectations of the check.
    async fn settle_timeout<T, F, Fut>(
        self,
        step: &str,
        first: PluginCall<T>,
        rerun: F,
    ) -> Result<Settled<T>, Finding>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = PluginCall<T>>,
    {
        if !first.timed_out() {
            return Ok(Settled::Ended(first));
        }
        let prereqs = self.calls.prereqs();
        if let Some(needs) = prereqs.failed_prerequisite(first.operation).await {
            return Err(Finding::Skip(needs));
        }
        self.calls.ledger.excuse(step);
        let again = again(step);
        let call = rerun(again.clone()).await;
        if call.timed_out() {
            self.calls.ledger.excuse(&again);
            return Ok(Settled::Hung(call));
        }
        Ok(Settled::Ended(call))
    }
}

/// How a call that may overrun its limit under the run's load ended.
pub(crate) enum Settled<T> {
    /// Within its limit, at once or re-run alone.
    Ended(PluginCall<T>),
    /// Over its limit, and again alone: the plugin's doing, not the load's.
    Hung(PluginCall<T>),
}

impl<T> Settled<T> {
    /// The call that ended; one that hung alone too makes the check
    /// inconclusive (a skip), where hanging is not its subject.
    pub fn ended(self, step: &str) -> Result<PluginCall<T>, Finding> {
        match self {
            Settled::Ended(call) => Ok(call),
            Settled::Hung(_) => Err(Finding::Skip(format!(
                "inconclusive: {step} timed out alone too"
            ))),
        }
    }
}
