//! The run's facts: what one check established that another check's rule
//! owns, published once as a typed value ([`Fact`]) and judged once by its
//! owner, a run-wide check that reads them from its [`RunLog`](super::RunLog);
//! or what an owner found, published before it ends, for the checks that
//! cite it and wait for its end ([`Fact::FailedAtOnce`], see
//! [`cause`](super::cause)). The variant is the contract between the two:
//! no check is named by a string, and no verdict is changed after the check
//! that gave it ended.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::contract::Operation;

/// One fact a check met and another check's rule owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fact {
    /// A create made by a check about something else (a hostile name, a
    /// capacity) failed and left files in its volumes dir or processes
    /// behind: `failure.clean`'s finding.
    FailedCreateLeft {
        /// The check that made it.
        check: &'static str,
        /// Its step in that check.
        step: String,
        /// Nomad's error text for it.
        error: String,
        /// What it left in its volumes dir.
        files: Vec<String>,
        /// The command lines of the processes it left running.
        processes: Vec<String>,
        /// The loop devices it left attached to files of its check's.
        loops: Vec<String>,
    },
    /// The create provoked to fail (its volumes dir lies under a regular
    /// file) exited 0 with a path that cannot exist: a failed step the
    /// plugin went past, `failure.clean`'s finding.
    FalseSuccess {
        /// The path it answered.
        path: String,
    },
    /// Calls of `op` made at once failed, where made one at a time they
    /// work: the finding of the check whose question is exactly those calls
    /// at once (`concurrency.create` for creates). Every other check whose
    /// calls failed with an error of one of these shapes met the same cause
    /// and cites that finding instead of reporting it again.
    FailedAtOnce {
        /// The operation.
        op: Operation,
        /// The shapes of their errors (see `context::cause::error_shape`).
        shapes: BTreeSet<String>,
        /// One of those errors, as Nomad gave it.
        example: String,
    },
    /// Once every other check had finished, the harness deleted the volumes
    /// still alive, unmounted what was mounted below the run's temp dir,
    /// detached the loop devices backed by its files and tried to remove
    /// every check's dir: what it could not remove. `delete.no-residue`'s
    /// finding, which runs after it (it needs the run's end).
    RunEndLeft {
        /// The run's temp dir.
        temp_dir: std::path::PathBuf,
        /// What is still there, each with why.
        left: Vec<String>,
        /// Of `left`, what is there only because a process that is not the
        /// plugin's holds it (a loop device another run or program holds).
        held_elsewhere: Vec<String>,
    },
    /// The plugin touched the process that runs it (moved the harness into
    /// a cgroup of the run's, froze the run's cgroup, left a tracer on it),
    /// by the call `by` when it can be told, else first seen while `during`
    /// ran: the harness undid it, and the checks not yet started are
    /// skipped. `process.agent-untouched`'s finding.
    Interfered {
        /// What it did and what the harness did about it, as the supervisor
        /// says it.
        what: String,
        /// The call that did it (`a create call of create.succeeds`), when
        /// it can be told (its own cgroup held the harness, or the tracer).
        by: Option<String>,
        /// The checks running when it was first seen (one of them made the
        /// call that did it, unless it was the run's end), by id; empty
        /// when none was.
        during: Vec<&'static str>,
    },
    /// The plugin put a mount over one of the harness's own dirs (the run's
    /// temp dir, a check's dir, a volumes dir): the harness detached it at
    /// once, before any further call, so the checks go on with the plugin
    /// alone. `process.agent-untouched`'s finding.
    MountedOver {
        /// The mount (source → target) and what the harness did, as the
        /// guard says it.
        what: String,
    },
    /// An update (create again of an existing volume with a new capacity)
    /// removed or re-made the volume, losing what it held: `create.update`'s
    /// finding, which the histories cite when they meet it again.
    UpdateLostData {
        /// The update, in words (`an update (same id, capacity min doubled)`).
        what: String,
    },
}

impl Fact {
    /// The fact in words, as its owner reports it.
    pub fn describe(&self) -> String {
        match self {
            Fact::FailedCreateLeft {
                check,
                step,
                error,
                files,
                processes,
                loops,
            } => {
                let mut left = String::new();
                if !files.is_empty() {
                    left.push_str(&format!(" files: {}", files.join(", ")));
                }
                if !processes.is_empty() {
                    left.push_str(&format!(" processes: {}", processes.join(", ")));
                }
                if !loops.is_empty() {
                    left.push_str(&format!(" loop devices attached: {}", loops.join(", ")));
                }
                format!("{check} ({step}): failed ({error}) and left{left}")
            }
            Fact::FailedAtOnce { op, example, .. } => {
                format!("{op}s made at once failed ({example})")
            }
            Fact::FalseSuccess { path } => format!(
                "the create provoked to fail (its volumes dir lies under a regular file) exited 0 \
                 with path {path:?}, which cannot exist: a failed step the plugin went past"
            ),
            Fact::RunEndLeft { temp_dir, left, .. } => {
                let mut shown = left.clone();
                let more = shown.len().saturating_sub(5);
                shown.truncate(5);
                if more > 0 {
                    shown.push(format!("{more} more (all in the report's sandbox.kept)"));
                }
                format!(
                    "after the run, the harness could not remove from its temp dir {}: {}",
                    temp_dir.display(),
                    shown.join("; ")
                )
            }
            Fact::UpdateLostData { what } => format!("{what} lost the volume's data"),
            Fact::MountedOver { what } => what.clone(),
            Fact::Interfered {
                what, by: Some(by), ..
            } => format!("{what} (by {by})"),
            Fact::Interfered {
                what,
                by: None,
                during,
            } => match during.as_slice() {
                [] => format!("{what} (first seen at the run's end)"),
                [one] => format!("{what} (first seen while {one} ran)"),
                few @ ([_, _] | [_, _, _]) => {
                    format!("{what} (first seen while one of {} ran)", few.join(", "))
                }
                // Naming them all would name no one.
                many => format!(
                    "{what} (first seen while {} checks ran at once)",
                    many.len()
                ),
            },
        }
    }
}

/// Every fact of the run, in the order published.
#[derive(Debug, Default)]
pub(crate) struct Facts(Mutex<Vec<Fact>>);

impl Facts {
    /// Publishes a fact for its owner; the same fact twice is kept once.
    pub fn publish(&self, fact: Fact) {
        let mut facts = crate::lock(&self.0);
        if !facts.contains(&fact) {
            facts.push(fact);
        }
    }

    /// Every fact published so far.
    pub fn all(&self) -> Vec<Fact> {
        crate::lock(&self.0).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the plugin did to the harness is said with the checks it was
    /// seen during while they are few enough to point at one.
    #[test]
    fn an_interference_names_the_checks_it_was_seen_during_when_few() {
        let said = |during: &[&'static str]| {
            Fact::Interfered {
                what: "it froze X".into(),
                by: None,
                during: during.to_vec(),
            }
            .describe()
        };
        let by = Fact::Interfered {
            what: "it moved the harness into cgroup /r/c3".into(),
            by: Some("a create call of create.succeeds".into()),
            during: vec!["a.b", "c.d"],
        };
        assert_eq!(
            by.describe(),
            "it moved the harness into cgroup /r/c3 (by a create call of create.succeeds)"
        );
        let cases: [(&[&str], &str); 4] = [
            (&[], "it froze X (first seen at the run's end)"),
            (&["a.b"], "it froze X (first seen while a.b ran)"),
            (
                &["a.b", "c.d", "e.f"],
                "it froze X (first seen while one of a.b, c.d, e.f ran)",
            ),
            (
                &["a.b", "c.d", "e.f", "g.h"],
                "it froze X (first seen while 4 checks ran at once)",
            ),
        ];
        for (during, want) in cases {
            assert_eq!(said(during), want, "{during:?}");
        }
    }

    #[test]
    fn a_fact_is_kept_once_and_said_with_what_was_left() {
        let facts = Facts::default();
        let left = Fact::FailedCreateLeft {
            check: "input.some-check",
            step: "name \"a b\"".into(),
            error: "exit status 1".into(),
            files: vec!["a".into()],
            processes: Vec::new(),
            loops: Vec::new(),
        };
        facts.publish(left.clone());
        facts.publish(left.clone());
        facts.publish(Fact::FalseSuccess { path: "/x".into() });
        assert_eq!(facts.all().len(), 2);
        assert_eq!(
            left.describe(),
            "input.some-check (name \"a b\"): failed (exit status 1) and left files: a"
        );
        let with_loop = Fact::FailedCreateLeft {
            check: "input.some-check",
            step: "name \"a b\"".into(),
            error: "exit status 1".into(),
            files: vec!["a".into()],
            processes: Vec::new(),
            loops: vec!["/dev/loop7".into()],
        };
        assert_eq!(
            with_loop.describe(),
            "input.some-check (name \"a b\"): failed (exit status 1) and left files: a loop \
             devices attached: /dev/loop7"
        );
    }
}
