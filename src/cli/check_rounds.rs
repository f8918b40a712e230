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
            // A check a round adds only when it fails (process.agent-untouched
            // under a filter that left it out) is kept from the round it
            // failed in.
            for (id, (k, first)) in &self.failed {
                if !outcome.report.checks.iter().any(|c| &c.id == id) {
                    let mut check = first.clone();
                    check.message = format!("{}\nfailed {k}/{n} rounds", check.message);
                    outcome.report.checks.push(check);
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

    /// A round's outcome holding `checks`.
    fn round(checks: Vec<CheckResult>) -> SuiteOutcome {
        let report = crate::report::Report::new(
            "nomad-1.10",
            crate::report::PluginInfo::default(),
            crate::report::RunOptions::default(),
            checks,
            Vec::new(),
        );
        SuiteOutcome {
            report,
            conclusion: libtest_mimic::Conclusion {
                num_filtered_out: 0,
                num_passed: 0,
                num_failed: 0,
                num_ignored: 0,
                num_measured: 0,
            },
            harness_failed: false,
            plugin_calls: 0,
            plugin_busy: std::time::Duration::ZERO,
            teardown: crate::conformance::Teardown::default(),
            interrupted: None,
        }
    }

    fn check(id: &str, status: Status) -> CheckResult {
        CheckResult {
            id: id.to_owned(),
            group: "process".to_owned(),
            level: crate::report::Level::Must,
            status,
            message: "m".to_owned(),
            duration_ms: 0,
            invocations: Vec::new(),
            unpinned: None,
            needs: None,
            phase: None,
        }
    }

    /// A check only a failing round reports (process.agent-untouched, added
    /// when the plugin touched the harness under a filter that left it out)
    /// is in the tally's report even when the last round has none.
    #[test]
    fn a_check_only_a_failing_round_reports_is_kept() {
        let mut tally = Tally::default();
        let passed = check("create.succeeds", Status::Pass);
        let untouched = check("process.agent-untouched", Status::Fail);
        assert!(tally.add(round(vec![passed.clone(), untouched])));
        assert!(!tally.add(round(vec![passed])));
        let outcome = tally.finish(false).expect("two rounds");
        let kept = outcome
            .report
            .checks
            .iter()
            .find(|c| c.id == "process.agent-untouched")
            .expect("kept");
        assert_eq!(kept.message, "m\nfailed 1/2 rounds");
        assert_eq!(outcome.report.exit_code(), 1);
    }
}
