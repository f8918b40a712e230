//! The run's call log: every plugin call of the run as the run-wide checks
//! see it ([`LoggedCall`], [`CallLog`]), and the view one run-wide check
//! judges ([`RunLog`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{CallPhase, Finding};
use crate::contract::Operation;
use crate::lock;
use crate::plugin::PluginRun;

/// Every plugin call of the run, for the checks evaluated over the whole run.
#[derive(Debug, Clone)]
pub(crate) struct LoggedCall {
    pub check: &'static str,
    pub op: Operation,
    pub duration: Duration,
    pub limit: Duration,
    /// The plugin itself reported failure (non-zero exit, signal, could not
    /// start), as opposed to Nomad rejecting the output of a successful run.
    pub plugin_failed: bool,
    /// The raw call, for external plugins; shared, so that the run-wide
    /// checks can each take the whole log without copying every call's output.
    pub run: Option<Arc<PluginRun>>,
    /// For a failed create made while nothing else ran in its volumes dir:
    /// what it left there.
    pub residue: Option<Vec<String>>,
    /// When it was made: by a check in parallel with others, or alone.
    pub phase: CallPhase,
    /// Plugin calls of the run in flight when it started, itself included.
    pub in_flight: usize,
    /// What Nomad would show for it when it failed (its error text); `None`
    /// when it succeeded, or for a call the manager made on our behalf.
    pub error: Option<String>,
}

impl LoggedCall {
    /// The time its processes waited for a CPU because the host was busy
    /// (zero where it could not be measured).
    pub fn cpu_wait(&self) -> Duration {
        self.run
            .as_ref()
            .and_then(|r| r.result.as_ref().ok())
            .and_then(|o| o.cpu_wait)
            .unwrap_or_default()
            .min(self.duration)
    }

    /// Its duration less [`cpu_wait`](Self::cpu_wait): the plugin's own
    /// share, what a timing *margin* rests on (never a deadline: Nomad's
    /// limit counts the wall time).
    pub fn own_time(&self) -> Duration {
        self.duration.saturating_sub(self.cpu_wait())
    }
}

/// The run's call log: what the run-wide checks judge, and all they see.
#[derive(Debug, Default)]
pub(crate) struct CallLog(Mutex<Vec<LoggedCall>>);

impl CallLog {
    /// Every call logged so far.
    pub fn calls(&self) -> Vec<LoggedCall> {
        lock(&self.0).clone()
    }

    /// When each call of a plugin process logged so far started, with how
    /// many other calls were in flight then (calls that ran alone left
    /// out): read in place, at every check's end, without copying the log.
    pub fn in_flight_by_start(&self) -> std::collections::HashMap<std::time::Instant, usize> {
        lock(&self.0)
            .iter()
            .filter(|c| c.in_flight > 0)
            .filter_map(|c| Some((c.run.as_ref()?.started_at, c.in_flight)))
            .collect()
    }

    pub(super) fn push(&self, call: LoggedCall) {
        lock(&self.0).push(call);
    }
}

/// What a run-wide check judges: every call of the run, and whether they
/// were calls of an in-process plugin (no process to judge).
#[derive(Debug)]
pub(crate) struct RunLog {
    /// Every call of the run, in the order logged.
    pub calls: Vec<LoggedCall>,
    /// The calls made on a host that refused a step
    /// ([`Shared::refused_log`](super::Shared::refused_log)): for the checks
    /// that judge answers only.
    pub refused: Vec<LoggedCall>,
    /// The plugin runs in-process (the built-in).
    pub in_process: bool,
    /// Calls that failed in a bystander check and succeeded made again alone.
    pub repeats: Vec<super::Repeat>,
    /// What checks established that a run-wide check's rule owns.
    pub facts: Vec<super::Fact>,
    /// Calls a verdict cites as its evidence.
    cited: Mutex<Vec<PluginRun>>,
    /// Why the verdict is not pinned in a snapshot, if it is not.
    unpinned: Mutex<Option<String>>,
}

impl RunLog {
    /// The log a run-wide check judges.
    pub fn new(calls: Vec<LoggedCall>, in_process: bool, shared: &super::Shared) -> RunLog {
        RunLog {
            calls,
            refused: shared.refused_log.calls(),
            in_process,
            repeats: shared.repeats(),
            facts: shared.facts.all(),
            cited: Mutex::new(Vec::new()),
            unpinned: Mutex::new(None),
        }
    }

    /// Shows a call as evidence of the verdict.
    pub fn cite(&self, call: &LoggedCall) {
        if let Some(run) = &call.run {
            lock(&self.cited).push(PluginRun::clone(run));
        }
    }

    /// Marks the verdict as one a snapshot does not pin (a measurement, or
    /// a timing verdict close to its bound): reported, not compared.
    pub fn unpin(&self, why: impl Into<String>) {
        *lock(&self.unpinned) = Some(why.into());
    }

    /// Why the verdict is not pinned, if it is not.
    pub fn unpinned(&self) -> Option<String> {
        lock(&self.unpinned).clone()
    }

    /// Shows a raw call as evidence of the verdict.
    pub fn cite_run(&self, run: &PluginRun) {
        lock(&self.cited).push(run.clone());
    }

    /// The calls cited.
    pub fn evidence(&self) -> Vec<PluginRun> {
        lock(&self.cited).clone()
    }

    /// `Err(skip)` when there are no processes to judge.
    pub fn require_process(&self) -> Result<(), Finding> {
        if self.in_process {
            Err(Finding::Skip("built-in plugin".into()))
        } else {
            Ok(())
        }
    }

    /// The calls of `op`.
    pub fn of(&self, op: Operation) -> Vec<&LoggedCall> {
        self.calls.iter().filter(|c| c.op == op).collect()
    }
}

/// Text of a plugin's output for a message: trimmed, capped, control characters
/// escaped, `(empty)` when there is none.
pub(crate) fn shown(bytes: &[u8]) -> String {
    const CAP: usize = 300;
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return "(empty)".into();
    }
    let mut out: String = text
        .chars()
        .take(CAP)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if text.chars().count() > CAP {
        out.push('…');
    }
    format!("\"{out}\"")
}
