//! What a check is: its [`CheckSpec`], the one definition every part of the
//! harness reads (the catalogue, `--list`, `explain`, docs/checks.md, the
//! engine's plan). Each check's constant stands beside its function in its
//! group's file; the catalogue only orders the groups.

use super::CheckFn;
use crate::conformance::context::Asker;
use crate::contract::Operation;
use crate::report::{Level, Needs, Phase};

/// One check: its id, level and rule, the prose `dhv-conform explain` prints,
/// and the function that implements it.
#[derive(Debug, Clone, Copy)]
pub struct CheckSpec {
    /// The stable id, `group.name`.
    pub id: &'static str,
    /// must / should / info.
    pub level: Level,
    /// The rule, in one sentence.
    pub rule: &'static str,
    /// What goes wrong in Nomad (or for its users) when the rule does not hold.
    pub why: &'static str,
    /// What the plugin should do instead.
    pub fix: &'static str,
    /// Why this check's message, when it fails or warns, can differ between two
    /// runs of one plugin (it names which of racing calls lost, say), or `None`
    /// when the same plugin always gets the same words. A snapshot pins such a
    /// finding by its status only: its message there is `[VARIES: <why>]`.
    pub varies: Option<&'static str>,
    /// Sample plugins (in `sample-plugins/`) whose `# expect:` header names this
    /// check: the fault, shown in a few lines of sh. A test holds the two to
    /// each other (the binary carries the list; the headers are in the repo).
    pub samples: &'static [&'static str],
    /// What its question needs of the host while it runs: the engine plans
    /// the run by it (see [`CheckSpec::phase`]).
    pub needs: Needs,
    /// The operation its question is about, when it is one: a call of
    /// another operation that fails there is a bystander's, and a call of
    /// this one that fails beside other calls is made again alone before the
    /// check judges it (see `context::repeat`). `None` for the checks that
    /// compare calls themselves (`process.*`, `volume.*`, `timing.*`).
    pub subject: Option<Operation>,
    /// What runs it.
    pub(crate) run: CheckFn,
}

impl PartialEq for CheckSpec {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for CheckSpec {}

impl CheckSpec {
    /// Who a check's calls are made for, as the run's context knows it.
    pub(crate) const fn asker(&self) -> Asker {
        Asker {
            id: self.id,
            subject: self.subject,
            // The concurrency checks' question is the company itself: what
            // fails there in company is theirs to judge, never made again.
            repeats: !in_group(self.id, "concurrency"),
        }
    }

    /// The group: the part of the id before the dot.
    pub fn group(&self) -> &'static str {
        self.id.split('.').next().unwrap_or(self.id)
    }

    /// Whether it is judged over every call of the run, after the other checks.
    pub fn is_run_wide(&self) -> bool {
        matches!(self.run, CheckFn::RunWide(..))
    }

    /// When in a run it runs: about what the whole run left, last of all;
    /// judged over the whole run after the others; alone or in a storage room
    /// of its own after the parallel checks, one at a time; else with the
    /// others.
    pub fn phase(&self) -> Phase {
        match (self.is_run_wide(), self.needs) {
            (_, Needs::RunEnd) => Phase::Closing,
            (true, _) => Phase::RunWide,
            (false, Needs::Alone | Needs::OwnStorage) => Phase::Exclusive,
            (false, Needs::Any | Needs::Concurrent) => Phase::Parallel,
        }
    }
}

/// Whether the check `id` is of `group` (the part of its id before the
/// dot), in a constant: the probes' owners are constants.
const fn in_group(id: &str, group: &str) -> bool {
    let (id, group) = (id.as_bytes(), group.as_bytes());
    if id.len() <= group.len() || id[group.len()] != b'.' {
        return false;
    }
    let mut i = 0;
    while i < group.len() {
        if id[i] != group[i] {
            return false;
        }
        i += 1;
    }
    true
}
