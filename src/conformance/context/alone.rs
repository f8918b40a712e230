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

use super::attempt::{By, End, Failed, Made, Nth, When};
use super::route::{Caller, Start};
use super::{Expect, Finding, Steps};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::plugin::Fingerprint;

/// Whether a call of `caller` that gave `made`, and ended as `end`, is
/// re-run alone when a check that compares or diagnoses looks at it (the
/// policy: [`Failed::again`], [`When::Judged`]): the re-run's words, shown
/// after the words `step` of the call, and which attempt it is.
pub(super) fn rerun_alone<T>(
    made: &Made<T>,
    caller: Caller,
    end: End,
    step: &str,
) -> Option<(String, Nth)> {
    let failed = Failed::new(By::Route(caller), made.attempt().nth, end);
    let why = failed.again(When::Judged)?;
    Some((why.shown(step), Nth::Again(why, made.attempt().id)))
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
    ) -> Result<Made<CreateResponse>, Finding> {
        let first = self.calls.create(req, expect, step).await;
        self.settle_timeout(step, first, |again, nth| async move {
            let nomads = self.calls.nomads();
            nomads.create(req, expect, &again, Start::Alone, nth).await
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
    ) -> Result<Made<()>, Finding> {
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
        self.settle_timeout(step, first, |again, nth| async move {
            let nomads = self.calls.nomads();
            nomads.delete(req, expect, &again, Start::Alone, nth).await
        })
        .await
    }

    /// Fingerprints; a fingerprint that overran its limit is made again
    /// alone, and that one is the answer (it has no side effect to undo).
    /// One that overruns alone too is returned as it is: the deadline check
    /// reports it, and a check that needs an answer skips for it.
    pub async fn fingerprint_unloaded(self, expect: Expect, step: &str) -> Made<Fingerprint> {
        let first = self.calls.fingerprint(expect, step).await;
        let limit = self.calls.shared.settings.timeouts().fingerprint;
        let end = match first.duration > limit {
            true => End::Overran,
            false => End::of(&first),
        };
        let Some((again, nth)) = rerun_alone(&first, Caller::Nomad, end, step) else {
            return first;
        };
        self.calls.ledger.excuse(first.attempt().first());
        let nomads = self.calls.nomads();
        nomads.fingerprint(expect, &again, Start::Alone, nth).await
    }

    /// `first`, when it did not time out; else the re-run alone that `rerun`
    /// makes (given its words and which attempt it is). The calls that timed
    /// out are evidence in the run's log, not unmet expectations of the check.
    async fn settle_timeout<T, F, Fut>(
        self,
        step: &str,
        first: Made<T>,
        rerun: F,
    ) -> Result<Settled<T>, Finding>
    where
        F: FnOnce(String, Nth) -> Fut,
        Fut: Future<Output = Made<T>>,
    {
        let Some((again, nth)) = rerun_alone(&first, Caller::Nomad, End::of(&first), step) else {
            return Ok(Settled::Ended(first));
        };
        let prereqs = self.calls.prereqs();
        if let Some(needs) = prereqs.failed_prerequisite(first.operation).await {
            return Err(Finding::Skip(needs));
        }
        self.calls.ledger.excuse(first.attempt().first());
        let call = rerun(again, nth).await;
        if call.timed_out() {
            self.calls.ledger.excuse(call.attempt().first());
            return Ok(Settled::Hung(call));
        }
        Ok(Settled::Ended(call))
    }
}

/// How a call that may overrun its limit under the run's load ended.
pub(crate) enum Settled<T> {
    /// Within its limit, at once or re-run alone.
    Ended(Made<T>),
    /// Over its limit, and again alone: the plugin's doing, not the load's.
    Hung(Made<T>),
}

impl<T> Settled<T> {
    /// The call that ended; one that hung alone too makes the check
    /// inconclusive (a skip), where hanging is not its subject.
    pub fn ended(self, step: &str) -> Result<Made<T>, Finding> {
        match self {
            Settled::Ended(call) => Ok(call),
            Settled::Hung(_) => Err(Finding::Skip(format!(
                "inconclusive: {step} timed out alone too"
            ))),
        }
    }
}
