//! The deadline judgement the three `<op>.deadline` checks share (each
//! defined in its group's file), and what the other time checks ask of it.

use super::FindingResult;
use crate::conformance::context::{Finding, LoggedCall, RunLog, killed_waiting, late, overran};
use crate::contract::Operation;

pub(super) fn calls_of(log: &[LoggedCall], op: Operation) -> Vec<&LoggedCall> {
    log.iter().filter(|c| c.op == op).collect()
}

/// The calls whose durations the time checks judge: those made alone, or,
/// in a run cut short before its timing phase, all of them.
fn judged_for_time<'a>(calls: &[&'a LoggedCall]) -> Vec<&'a LoggedCall> {
    let alone: Vec<&LoggedCall> = calls.iter().copied().filter(|c| c.phase.alone()).collect();
    if alone.is_empty() {
        calls.to_vec()
    } else {
        alone
    }
}

/// Whether `op` overran its limit when made alone: its deadline check's
/// finding, which the other checks cite rather than repeat.
pub(super) fn overruns_alone(log: &[LoggedCall], op: Operation) -> bool {
    !confirmed_late(&judged_for_time(&calls_of(log, op))).is_empty()
}

/// The overruns a deadline fails on: among calls made alone, those late by
/// their own doing ([`late`]: killed at the limit, or over it less the time
/// they waited for a CPU), once that repeats (two calls made alone) or
/// cannot be the host's doing (less the time it waited for a CPU, the call
/// still took its whole limit). A single kill that the host's load
/// explains was made again alone by the timing phase; if that one finished
/// in time, nothing is confirmed.
fn confirmed_late<'a>(judged: &[&'a LoggedCall]) -> Vec<&'a LoggedCall> {
    let late: Vec<&LoggedCall> = judged.iter().copied().filter(|c| late(c)).collect();
    let repeats = late.len() >= 2;
    let own = late.iter().any(|c| c.own_time() >= c.limit);
    if repeats || own { late } else { Vec::new() }
}

/// The run's load conditions, for a finding that rests on time.
fn conditions(late: &[&LoggedCall]) -> String {
    let cores = crate::conformance::evidence::cores();
    let load = crate::conformance::evidence::load_average()
        .map_or("unknown".to_owned(), |l| format!("{:.2}", l[0]));
    let waited = late.iter().map(|c| c.cpu_wait()).max().unwrap_or_default();
    format!(
        "host: {cores} cores, load average {load}; the slowest waited {:.0} ms for a CPU",
        waited.as_secs_f64() * 1e3
    )
}

/// `<op>.deadline` (must): every call of `op` made alone finished within its
/// limit. Calls of the parallel phase that overran are shown as evidence; an
/// overrun counts only when it repeats made alone (see [`confirmed_late`]).
/// Nomad's limit counts wall time, but a call the host kept waiting for a
/// CPU past it is the host's doing, not the plugin's: the verdict is the
/// same on an idle host and on a loaded one.
pub(super) fn judge(log: &RunLog, op: Operation) -> FindingResult {
    let calls = log.of(op);
    if calls.is_empty() {
        return Err(Finding::Skip(format!("no {op} call in this run")));
    }
    let limit = calls[0].limit;
    let judged = judged_for_time(&calls);
    for c in calls.iter().filter(|c| overran(c)) {
        log.cite(c);
    }
    let late = confirmed_late(&judged);
    let waiting: Vec<&LoggedCall> = judged
        .iter()
        .copied()
        .filter(|c| killed_waiting(c))
        .collect();
    if late.is_empty() && !waiting.is_empty() {
        // Killed at the limit, made alone, while the host kept it waiting
        // for a CPU most of the time: neither a pass nor the plugin's fault.
        let waited = waiting
            .iter()
            .map(|c| c.cpu_wait())
            .max()
            .unwrap_or_default();
        return Err(Finding::Skip(format!(
            "inconclusive: made alone, a {op} call was killed at its limit ({limit:?}) after \
             waiting {:.0} ms for a CPU: the host's load, not the plugin, may have kept it ({})",
            waited.as_secs_f64() * 1e3,
            conditions(&waiting)
        )));
    }
    if late.is_empty() {
        // No count: how many calls a run makes depends on what was re-run.
        let max = judged
            .iter()
            .map(|c| c.own_time())
            .max()
            .unwrap_or_default();
        return Ok(Finding::Pass(format!(
            "every {op} call made alone finished within {limit:?}, the slowest in {:.1} ms \
             (less the time it waited for a CPU)",
            max.as_secs_f64() * 1e3,
        )));
    }
    let slowest = late.iter().map(|c| c.duration).max().unwrap_or_default();
    Err(Finding::Fail(format!(
        "expected every {op} call to finish within {limit:?} (Nomad's limit); made alone, with \
         nothing else of the run in flight, it took {:.0} ms{}\n({})",
        slowest.as_secs_f64() * 1e3,
        if late
            .iter()
            .any(|c| c.run.as_ref().is_some_and(|r| r.timed_out()))
        {
            " and was killed"
        } else {
            ""
        },
        conditions(&late)
    )))
}
