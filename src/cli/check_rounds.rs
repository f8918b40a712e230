//! `check --repeat N` and `--until-fail`: the selected checks run again and
//! again, each round a fresh suite (its own temp dir, sandboxes and volumes),
//! for authors hunting a flake. The report is one report: a check that failed
//! (or warned) in any round keeps the result of the first round it did, with
//! `failed k/N rounds` added to its message; every other check keeps its last
//! round's result.

use std::collections::BTreeMap;

use crate::conformance::SuiteOutcome;
use crate::report::{CheckResult, Status, Summary};

/// How many rounds to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rounds {
    /// At most this many rounds (`None`: until a check fails).
    pub limit: Option<u32>,
    /// Stop after the first round in which a check failed or warned.
    pub until_fail: bool,
}

impl Rounds {
    /// One round: the default.
    pub const ONCE: Rounds = Rounds {
        limit: Some(1),
        until_fail: false,
    };

    /// Whether another round is due after `done` rounds, the last of which
    /// `found` a failure or warning.
    pub fn another(&self, done: u32, found: bool) -> bool {
        !(self.until_fail && found) && self.limit.is_none_or(|n| done < n)
    }
}

/// The rounds' outcomes folded into one.
#[derive(Default)]
pub struct Tally {
    rounds: u32,
    /// Per check: how many rounds it failed or warned in, and the first such result.
    failed: BTreeMap<String, (u32, CheckResult)>,
    last: Option<SuiteOutcome>,
}

impl Tally {
    /// Adds a round; whether a check failed or warned in it.
    pub fn add(&mut self, outcome: SuiteOutcome) -> bool {
        self.rounds += 1;
        let mut found = false;
        for check in &outcome.report.checks {
            if matches!(check.status, Status::Fail | Status::Warn) {
                found = true;
                let entry = self
                    .failed
                    .entry(check.id.clone())
                    .or_insert_with(|| (0, check.clone()));
                entry.0 += 1;
            }
        }
        self.last = Some(outcome);
        found
    }

    /// The last round's outcome, with every check that failed in any round
    /// taken from the first round it failed in ("failed k/N rounds"), and
    /// the summary recounted.
    pub fn finish(self, strict: bool) -> Option<SuiteOutcome> {
        let mut outcome = self.last?;
        if self.rounds > 1 {
            let n = self.rounds;
            for check in &mut outcome.report.checks {
                if let Some((k, first)) = self.failed.get(&check.id) {
                    *check = first.clone();
                    check.message = format!("{}\nfailed {k}/{n} rounds", check.message);
                }
            }
            outcome.report.summary = Summary::from_checks(&outcome.report.checks, strict);
        }
        Some(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_stop_at_the_limit_or_at_the_first_failure() {
        assert!(!Rounds::ONCE.another(1, false));
        let three = Rounds {
            limit: Some(3),
            until_fail: false,
        };
        assert!(three.another(2, true));
        assert!(!three.another(3, false));
        let hunt = Rounds {
            limit: None,
            until_fail: true,
        };
        assert!(hunt.another(1000, false));
        assert!(!hunt.another(7, true));
    }
}
