//! The checks judged over every plugin call of the run, once the other checks
//! are done: deadlines, clean failures, error JSON, leaks, orphans, timing.

use std::time::Duration;

use super::CheckResult;
use crate::conformance::context::{Finding, LoggedCall, RunLog, overran};
use crate::contract::Operation;

fn calls_of(log: &[LoggedCall], op: Operation) -> Vec<&LoggedCall> {
    log.iter().filter(|c| c.op == op).collect()
}

/// `fingerprint.deadline` (must): every fingerprint finished within 1 s.
pub fn fingerprint_deadline(log: &RunLog) -> CheckResult {
    deadline(log, Operation::Fingerprint)
}

/// `create.deadline` (must): every create finished within 60 s.
pub fn create_deadline(log: &RunLog) -> CheckResult {
    deadline(log, Operation::Create)
}

/// `delete.deadline` (must): every delete finished within 60 s.
pub fn delete_deadline(log: &RunLog) -> CheckResult {
    deadline(log, Operation::Delete)
}

/// `<op>.deadline` (must): every call of `op` made alone finished within its
/// limit. Calls of the parallel phase that overran are shown as evidence; an
/// overrun counts only when a call made alone confirms it.
fn deadline(log: &RunLog, op: Operation) -> CheckResult {
    let calls = log.of(op);
    if calls.is_empty() {
        return Err(Finding::Skip(format!("no {op} call in this run")));
    }
    let limit = calls[0].limit;
    let alone: Vec<&&LoggedCall> = calls.iter().filter(|c| c.phase.alone()).collect();
    // A run cut short before its timing phase has only the parallel calls.
    let judged: Vec<&&LoggedCall> = if alone.is_empty() {
        calls.iter().collect()
    } else {
        alone
    };
    for c in calls.iter().filter(|c| !c.phase.alone() && overran(c)) {
        log.cite(c);
    }
    let late: Vec<&&&LoggedCall> = judged.iter().filter(|c| overran(c)).collect();
    if late.is_empty() {
        let max = judged.iter().map(|c| c.duration).max().unwrap_or_default();
        return Ok(Finding::Pass(format!(
            "{} calls made alone, slowest {:.1} ms (limit {limit:?}); {} calls in all",
            judged.len(),
            max.as_secs_f64() * 1e3,
            calls.len()
        )));
    }
    for c in &late {
        log.cite(c);
    }
    let slowest = late.iter().map(|c| c.duration).max().unwrap_or_default();
    Err(Finding::Fail(format!(
        "expected every {op} call to finish within {limit:?} (Nomad's limit); made alone, with \
         nothing else of the run in flight, it took {:.0} ms{}",
        slowest.as_secs_f64() * 1e3,
        if late
            .iter()
            .any(|c| c.run.as_ref().is_some_and(|r| r.timed_out()))
        {
            " and was killed"
        } else {
            ""
        }
    )))
}

/// `failure.clean` (must): a failed create left nothing behind.
pub fn failure_clean(log: &RunLog) -> CheckResult {
    super::failure::clean(log)
}

/// `failure.error-json` (should): failing creates and deletes explain themselves
/// as `{"error": "..."}` (or print nothing).
pub fn failure_error_json(log: &RunLog) -> CheckResult {
    super::failure::error_json(log)
}

/// `process.no-stdio-leak` (must): nobody held stdout/stderr after exit.
pub fn process_no_stdio_leak(log: &RunLog) -> CheckResult {
    log.require_process()?;
    let log = &log.calls;
    let leaks: Vec<String> = log
        .iter()
        .filter_map(|c| {
            let o = c.run.as_ref()?.result.as_ref().ok()?;
            // A call killed for overrunning is the deadline checks' finding.
            (o.leaked && !o.timed_out).then(|| {
                let holders: Vec<&str> = o
                    .leftovers
                    .iter()
                    .filter(|l| l.held_stdio)
                    .map(|l| l.cmdline.as_str())
                    .collect();
                format!("{} ({}): held by [{}]", c.check, c.op, holders.join(", "))
            })
        })
        .collect();
    if leaks.is_empty() {
        Ok(Finding::Pass(format!(
            "{} calls, no pipe held open after exit",
            log.len()
        )))
    } else {
        Err(Finding::Fail(format!(
            "expected no process started by the plugin to keep stdout/stderr open after it exits (Nomad \
             waits for the pipes: the agent hangs); {} calls leaked: {}. Redirect background work: \
             `cmd >/dev/null 2>&1 &`, or better, don't leave it running",
            leaks.len(),
            leaks.into_iter().take(5).collect::<Vec<_>>().join("; ")
        )))
    }
}

/// `process.no-orphans` (should): nothing the plugin started outlived it.
pub fn process_no_orphans(log: &RunLog) -> CheckResult {
    log.require_process()?;
    let log = &log.calls;
    let orphans: Vec<String> = log
        .iter()
        .flat_map(|c| {
            c.run
                .iter()
                .filter(|r| !r.timed_out())
                .flat_map(|r| r.leftovers().iter())
                .map(move |l| {
                    format!(
                        "{} ({}): {}{}",
                        c.check,
                        c.op,
                        l.cmdline,
                        if l.escaped_group {
                            " [left the process group]"
                        } else {
                            ""
                        }
                    )
                })
        })
        .collect();
    if orphans.is_empty() {
        Ok(Finding::Pass(format!(
            "{} calls, nothing left running",
            log.len()
        )))
    } else {
        Err(Finding::Fail(format!(
            "expected no process started by the plugin to be alive after it exits; found {} (all killed): {}",
            orphans.len(),
            orphans.into_iter().take(5).collect::<Vec<_>>().join("; ")
        )))
    }
}

/// Duration percentiles of one operation.
pub(crate) struct Profile {
    pub op: Operation,
    pub count: usize,
    pub p50: Duration,
    pub p95: Duration,
    pub max: Duration,
    pub limit: Duration,
}

/// Per-operation timing over the run's calls (nearest-rank percentiles).
pub(crate) fn profiles(log: &[LoggedCall]) -> Vec<Profile> {
    Operation::ALL
        .into_iter()
        .filter_map(|op| {
            let mut d: Vec<Duration> = calls_of(log, op).iter().map(|c| c.duration).collect();
            let limit = calls_of(log, op).first()?.limit;
            d.sort();
            let rank = |p: f64| d[((p * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1];
            Some(Profile {
                op,
                count: d.len(),
                p50: rank(0.5),
                p95: rank(0.95),
                max: *d.last()?,
                limit,
            })
        })
        .collect()
}

/// `timing.margin` (should): p95 under half the limit, judged on the timing
/// phase's calls, made alone.
pub fn timing_margin(log: &RunLog) -> CheckResult {
    let log = &log.calls;
    // Calls made with nothing else of the run in flight: under the run's own
    // parallel load a p95 measures the machine more than the plugin.
    let solo: Vec<LoggedCall> = log.iter().filter(|c| c.phase.alone()).cloned().collect();
    let all = profiles(if solo.is_empty() { log } else { &solo });
    if all.is_empty() {
        return Err(Finding::Skip("no plugin call in this run".into()));
    }
    let tight: Vec<String> = all
        .iter()
        .filter(|p| p.p95 > p.limit / 2)
        .map(|p| {
            format!(
                "{}: p95 {:.0} ms, limit {:?}",
                p.op,
                p.p95.as_secs_f64() * 1e3,
                p.limit
            )
        })
        .collect();
    if tight.is_empty() {
        Ok(Finding::Pass(
            "every operation's p95 is under half its limit".into(),
        ))
    } else {
        Err(Finding::Fail(format!(
            "expected p95 of each operation under half its limit (room for a loaded host); {}",
            tight.join("; ")
        )))
    }
}

/// `timing.profile` (info): the measurements.
pub fn timing_profile(log: &RunLog) -> CheckResult {
    let all = profiles(&log.calls);
    if all.is_empty() {
        return Err(Finding::Skip("no plugin call in this run".into()));
    }
    Ok(Finding::Info(
        all.iter()
            .map(|p| {
                format!(
                    "{}: n={} p50={:.1}ms p95={:.1}ms max={:.1}ms",
                    p.op,
                    p.count,
                    p.p50.as_secs_f64() * 1e3,
                    p.p95.as_secs_f64() * 1e3,
                    p.max.as_secs_f64() * 1e3
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    ))
}
