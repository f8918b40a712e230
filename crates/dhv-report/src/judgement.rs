//! The words a report judges in: how much a check matters ([`Level`]), what
//! it needs of the host and when it runs ([`Needs`], [`Phase`]), how it ended
//! ([`Status`]), and the run's [`Verdict`]. Part of the result model (and
//! so of the JSON schema): see [`model`](super::model).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How much a check matters (docs/checks.md, "Levels").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Required by the spec, or Nomad breaks or loses data without it.
    Must,
    /// Strong practice: a failure is a warning, and a failure under `--strict`.
    Should,
    /// A measurement that never fails.
    Info,
}

impl Level {
    /// The lowercase name used in every report form (`must`, `should`, `info`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "must",
            Level::Should => "should",
            Level::Info => "info",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a check's question needs of the host while it runs: the run's plan
/// (docs/report-schema.md, `needs` and `phase`). A check declares it; the engine schedules by
/// it, so a neighbour never decides a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Needs {
    /// Nothing of the host: it runs beside any other check.
    Any,
    /// Concurrency on purpose: it races its own calls (held at their changes
    /// of state and let go together), beside any other check.
    Concurrent,
    /// A storage room of its own: it may fill the volumes dir's filesystem,
    /// so it runs where no neighbour shares that room (after the parallel
    /// checks, one at a time).
    OwnStorage,
    /// Nothing else of the run in flight: what it measures would move with
    /// the host's load. Runs after the parallel checks, one at a time. (No
    /// check of today's catalogue needs it: the crash checks' kill points are
    /// the plugin's own steps, and the deadlines are judged on calls made
    /// alone in the timing phase.)
    Alone,
    /// The run's end: every other check finished, the volumes still alive
    /// deleted, what plugins left mounted or attached below the run's temp
    /// dir let go of, and a trial removal of every check's dir made. Its
    /// question is what the whole run left, so it runs last, alone.
    RunEnd,
}

impl Needs {
    /// The kebab-case name used in every report form.
    pub fn as_str(self) -> &'static str {
        match self {
            Needs::Any => "any",
            Needs::Concurrent => "concurrent",
            Needs::OwnStorage => "own-storage",
            Needs::Alone => "alone",
            Needs::RunEnd => "run-end",
        }
    }
}

/// When in a run a check runs (the run's plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// With every other parallel check.
    Parallel,
    /// After the parallel checks, one at a time, nothing else in flight.
    Exclusive,
    /// After every other check: a judgement over all the run's calls.
    RunWide,
    /// Last of all, after the run's end was cleared (see [`Needs::RunEnd`]):
    /// what the whole run left.
    Closing,
}

impl Phase {
    /// The kebab-case name used in every report form.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Parallel => "parallel",
            Phase::Exclusive => "exclusive",
            Phase::RunWide => "run-wide",
            Phase::Closing => "closing",
        }
    }
}

/// The outcome of one check (docs/checks.md, "Statuses").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The rule held.
    Pass,
    /// A must-level rule did not hold.
    Fail,
    /// A should-level rule did not hold.
    Warn,
    /// The check did not run; the message says why (skips are never silent).
    Skip,
    /// A measurement; the message holds it.
    Info,
}

impl Status {
    /// The lowercase name used in every report form (`pass`, `fail`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Warn => "warn",
            Status::Skip => "skip",
            Status::Info => "info",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No check failed (and, under `--strict`, none warned).
    Conformant,
    /// A must failed, or a should failed under `--strict`.
    NonConformant,
    /// The run cannot vouch for one plugin: its file changed mid-run
    /// ([`Report::plugin_changed`](super::model::Report::plugin_changed)), so its calls may have run different
    /// programs. Exit 4.
    Inconclusive,
}

impl Verdict {
    /// The name used in every report form (`conformant`, `non-conformant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Conformant => "conformant",
            Verdict::NonConformant => "non-conformant",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// The process exit code for this verdict (README, "Exit codes").
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Conformant => 0,
            Verdict::NonConformant => 1,
            Verdict::Inconclusive => 4,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
