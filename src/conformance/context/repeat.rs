//! A failed call is attributed to its cause, never to a bystander. A call
//! that fails inside a check whose subject is another operation (a clean-up
//! delete in an input check, say) is made again alone, with the same
//! request. If it succeeds alone, the failure was a race in the plugin: it is
//! recorded once for `process.repeatable` (Nomad itself never retries a failed
//! call: a delete that fails by chance fails the user's request), and the bystander does not
//! fail for it. If it fails alone too, the failure stands, and says so.

use crate::contract::Operation;
use crate::plugin::PluginRun;

use super::ledger::Redo;
use super::route::Start;
use super::{Calls, Expect, Shared};

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

/// The operation a check is about, when it is one: a failed call of another
/// operation there is a bystander's.
fn subject(check: &str) -> Option<Operation> {
    let (group, name) = check.split_once('.')?;
    match group {
        "fingerprint" => Some(Operation::Fingerprint),
        "create" | "input" | "failure" => Some(Operation::Create),
        "delete" => Some(Operation::Delete),
        "concurrency" | "lifecycle" if name.contains("delete") => Some(Operation::Delete),
        "concurrency" | "lifecycle" => Some(Operation::Create),
        // The process checks compare calls themselves.
        _ => None,
    }
}

/// The step name of a call made again alone.
pub(super) fn again_alone(step: &str) -> String {
    format!("{step}, made again alone")
}

impl Shared {
    /// Every race found so far.
    pub fn repeats(&self) -> Vec<Repeat> {
        crate::lock(&self.repeats).clone()
    }
}

/// Whether a failed call of `op` made in `check` is a bystander's: the check
/// is about another operation.
fn is_bystander(check: &str, op: Operation) -> bool {
    subject(check).is_some_and(|s| s != op)
}

impl Calls {
    /// Whether the failed call of `step` is a bystander's race: made again
    /// alone, it succeeded. Calls made again alone are not made again once
    /// more. Its value is the call's made again alone.
    pub(super) async fn raced(
        &self,
        step: &str,
        op: Operation,
    ) -> Option<Box<dyn std::any::Any + Send>> {
        if !is_bystander(self.check, op) || step.ends_with(&again_alone("")) {
            return None;
        }
        let (redo, error, run) = self.ledger.failed(step)?;
        self.repeat_alone(step, &redo, &error, run).await
    }

    /// Makes the failed call of `step` again, alone, by Nomad's route (only
    /// its calls are kept to be made again). Its value when it
    /// succeeded alone (a race, recorded, and the failure taken back): the
    /// create's response or the delete's `()`; `None` when it failed alone too.
    async fn repeat_alone(
        &self,
        step: &str,
        redo: &Redo,
        error: &str,
        run: Option<PluginRun>,
    ) -> Option<Box<dyn std::any::Any + Send>> {
        let again = again_alone(step);
        let (op, second, value): (_, _, Option<Box<dyn std::any::Any + Send>>) = match redo {
            Redo::Create(req) => {
                let call = self
                    .nomads()
                    .create(req, Expect::Either, &again, Start::Alone)
                    .await;
                let value = call.result.as_ref().ok().map(|r| Box::new(r.clone()) as _);
                (Operation::Create, call.run.clone(), value)
            }
            Redo::Delete(req) => {
                let call = self
                    .nomads()
                    .delete(req, Expect::Either, &again, Start::Alone)
                    .await;
                let value = call.ok().then(|| Box::new(()) as _);
                (Operation::Delete, call.run.clone(), value)
            }
        };
        if value.is_some() {
            self.ledger.excuse(step);
            crate::lock(&self.shared.repeats).push(Repeat {
                check: self.check,
                step: step.to_owned(),
                op,
                error: error.to_owned(),
                runs: [run, second],
            });
        }
        value
    }
}
