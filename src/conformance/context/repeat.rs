//! A failed call is attributed to its cause, once. Two kinds of call that
//! failed are made again alone (nothing else of the run in flight), with
//! the same request:
//! - a call that failed while another call of the run was under way, at
//!   once, before the check sees it ([`Route`](super::route::Route)): one
//!   expected to succeed, or a create that may be refused (a refusal made
//!   alone too stands); never a call expected to fail, a call of a raced
//!   burst, a call on a host that refuses a step on purpose, a delete of a
//!   volume the check did not make, or any call of a concurrency check
//!   (their question is the company itself: [`Asker::repeats`](super::Asker::repeats));
//!   the manager's creates likewise ([`Managed::create`](super::Managed::create));
//! - a call that fails inside a check whose subject is another operation (a
//!   clean-up delete in an input check, say): a bystander's, when the check
//!   needs it or is settled, even if it failed alone.
//!
//! If it succeeds alone, the failure was a race in the plugin: it is
//! recorded once for `process.repeatable` (Nomad itself never retries a failed
//! call: a create that fails by chance fails the user's request), the check
//! goes on from the call made alone and its message cites that finding. A
//! call that was alone already, or that fails alone too, stands. Each race
//! keeps the shape of its error ([`error_shape`](super::cause::error_shape)):
//! a create that failed as `concurrency.create`'s creates at once did is
//! that check's finding, which `process.repeatable` cites.

use crate::contract::{CreateResponse, Operation};
use crate::plugin::{BoxFuture, PluginRun};

use super::attempt::{Again, By, CallId, Failed, Made, Nth, When};
use super::ledger::Redo;
use super::route::Start;
use super::{Calls, Expect, Finding, Shared};

/// What a create or a delete gives back, typed by its operation: the value a
/// failed call of it made again alone gives back (see [`Calls::raced`]).
pub(crate) trait Answer: Sized + Send {
    /// Makes again alone, by Nomad's route of `calls`, as the attempt `nth`
    /// shown as `step`, the failed call whose kept request is `redo`; `None`
    /// when `redo` is not of this operation (a create's attempt keeps a
    /// create's request, so the attempt of a [`Made<Self>`] never is).
    fn make_again<'a>(
        calls: &'a Calls,
        redo: &'a Redo,
        step: &'a str,
        nth: Nth,
    ) -> Option<BoxFuture<'a, Made<Self>>>;
}

impl Answer for CreateResponse {
    fn make_again<'a>(
        calls: &'a Calls,
        redo: &'a Redo,
        step: &'a str,
        nth: Nth,
    ) -> Option<BoxFuture<'a, Made<Self>>> {
        match redo {
            Redo::Create(req) => Some(Box::pin(async move {
                calls
                    .nomads()
                    .create(req, Expect::Either, step, Start::Alone, nth)
                    .await
            })),
            Redo::Delete(_) => None,
        }
    }
}

impl Answer for () {
    fn make_again<'a>(
        calls: &'a Calls,
        redo: &'a Redo,
        step: &'a str,
        nth: Nth,
    ) -> Option<BoxFuture<'a, Made<Self>>> {
        match redo {
            Redo::Delete(req) => Some(Box::pin(async move {
                calls
                    .nomads()
                    .delete(req, Expect::Either, step, Start::Alone, nth)
                    .await
            })),
            Redo::Create(_) => None,
        }
    }
}

/// A call that failed where it was made and succeeded made again alone.
#[derive(Debug, Clone)]
pub(crate) struct Repeat {
    /// The check it was made in.
    pub check: &'static str,
    /// Its step there.
    pub step: String,
    pub op: Operation,
    /// Nomad's error text for the failed call.
    pub error: String,
    /// Its shape, by which it is told from other causes (see
    /// [`error_shape`](super::cause::error_shape)).
    pub shape: String,
    /// The failed call and the one made again alone, as run.
    pub runs: [Option<PluginRun>; 2],
}

impl Repeat {
    /// One line: the call, both outcomes and their stderr.
    pub fn describe(&self) -> String {
        let stderr = |run: &Option<PluginRun>| {
            run.as_ref()
                .and_then(|r| r.result.as_ref().ok())
                .map(|o| super::log::shown(&o.stderr))
                .unwrap_or_else(|| "(none)".into())
        };
        format!(
            "{} ({}): {} failed ({}; stderr: {}), then made again alone it succeeded (stderr: {})",
            self.check,
            self.step,
            self.op,
            self.error,
            stderr(&self.runs[0]),
            stderr(&self.runs[1])
        )
    }
}

impl Shared {
    /// Every race found so far.
    pub fn repeats(&self) -> Vec<Repeat> {
        crate::lock(&self.repeats).clone()
    }
}

/// A finding's message with `more` after it; a skip's reason stays as it is.
fn with_note(finding: Finding, more: &str) -> Finding {
    match finding {
        Finding::Pass(m) => Finding::Pass(format!("{m}{more}")),
        Finding::Fail(m) => Finding::Fail(format!("{m}{more}")),
        Finding::Warn(m) => Finding::Warn(format!("{m}{more}")),
        Finding::Info(m) => Finding::Info(format!("{m}{more}")),
        skip @ Finding::Skip(_) => skip,
    }
}

impl Calls {
    /// Whether the failed call `id` is a bystander's race (the policy:
    /// [`Failed::again`], asked `when`): made again alone, by Nomad's route
    /// (only its calls' requests are kept), it succeeded. Its value is the
    /// answer of the call made again alone; the race is recorded, and the
    /// failure taken back. `None` when the policy does not make it again, or
    /// it failed alone too.
    pub(super) async fn raced<T: Answer>(&self, id: CallId, when: When) -> Option<T> {
        let entry = self.ledger.entry(id)?;
        let (op, routed) = (entry.op?, entry.routed?);
        let failed = Failed {
            bystander: self.asker.subject.is_some_and(|s| s != op),
            repeated: entry.repeated,
            ..Failed::new(By::Route(routed.caller), routed.attempt.nth, routed.end)
        };
        failed.again(when)?;
        let (redo, error, run) = self.ledger.failed(id)?;
        let again = Again::Alone.shown(&entry.step);
        let nth = Nth::Again(Again::Alone, id);
        let remade = T::make_again(self, &redo, &again, nth)?;
        self.ledger.repeated(id);
        let call = remade.await.into_call();
        let Ok(value) = call.result else {
            return None;
        };
        self.ledger.excuse(id);
        self.record(&entry.step, op, &error, [run, call.run]);
        Some(value)
    }

    /// Whether the failed call `id`, unmet when the check is settled, is a
    /// bystander's race (see [`raced`](Self::raced)).
    pub(super) async fn raced_when_settled(&self, id: CallId, op: Operation) -> bool {
        match op {
            Operation::Create => self
                .raced::<CreateResponse>(id, When::Settled)
                .await
                .is_some(),
            Operation::Delete => self.raced::<()>(id, When::Settled).await.is_some(),
            _ => false,
        }
    }

    /// A subject's call of `step` that failed beside other calls (`first`)
    /// and the same call made again alone (`second`): the one the check
    /// goes on from. Alone it succeeded: a race, recorded, `first` taken
    /// back. Alone it failed too: `first` stands, as made, for both.
    pub(super) fn settle_repeat<T>(&self, step: &str, first: Made<T>, second: Made<T>) -> Made<T> {
        let first_id = first.attempt().id;
        self.ledger.repeated(first_id);
        if second.result.is_ok() {
            self.ledger.excuse(first_id);
            let error = first
                .result
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            let op = first.operation;
            self.record(
                step,
                op,
                &error,
                [first.into_call().run, second.run.clone()],
            );
            second
        } else {
            self.ledger.excuse(second.attempt().id);
            first
        }
    }

    /// Records a race for `process.repeatable`, once.
    pub(super) fn record(
        &self,
        step: &str,
        op: Operation,
        error: &str,
        runs: [Option<PluginRun>; 2],
    ) {
        crate::lock(&self.shared.repeats).push(Repeat {
            check: self.asker.id,
            step: step.to_owned(),
            op,
            error: error.to_owned(),
            shape: super::cause::error_shape(error, self.shared.settings.template.name.as_deref()),
            runs,
        });
    }

    /// The finding with a citation of `process.repeatable` for each call of
    /// this check (its probes' included) that failed and succeeded made
    /// again alone: the check judged the call made alone, and says so.
    pub(super) fn cite_repeats(&self, finding: Finding) -> Finding {
        let steps: Vec<String> = self
            .shared
            .repeats()
            .into_iter()
            .filter(|r| r.check == self.asker.id)
            .map(|r| format!("{} ({})", r.step, r.op))
            .collect();
        if steps.is_empty() {
            return finding;
        }
        with_note(
            finding,
            &format!(
                " (judged on the call made again alone: {} failed, then succeeded alone; see \
                 process.repeatable)",
                steps.join(", ")
            ),
        )
    }
}
