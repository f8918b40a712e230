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
