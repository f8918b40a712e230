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
fn overruns_alone(log: &[LoggedCall], op: Operation) -> bool {
    !confirmed_late(&judged_for_time(&calls_of(log, op))).is_empty()
}

/// The overruns a deadline fails on: among calls made alone, those that
/// overran, once the overrun repeats (two calls made alone overran) or
/// cannot be the host's doing (less the time it waited for a CPU, the call
/// still took its whole limit). A single overrun that the host's load
/// explains was made again alone by the timing phase; if that one finished
/// in time, nothing is confirmed.
fn confirmed_late<'a>(judged: &[&'a LoggedCall]) -> Vec<&'a LoggedCall> {
    let late: Vec<&LoggedCall> = judged.iter().copied().filter(|c| overran(c)).collect();
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
/// Nomad's limit counts wall time: nothing is discounted from it.
fn deadline(log: &RunLog, op: Operation) -> CheckResult {
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
    if late.is_empty() {
        // No count: how many calls a run makes depends on what was re-run.
        let max = judged.iter().map(|c| c.duration).max().unwrap_or_default();
        return Ok(Finding::Pass(format!(
            "every {op} call made alone finished within {limit:?}, the slowest in {:.1} ms",
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
        Ok(Finding::Pass(
            "no call left stdout or stderr held open after it exited".into(),
        ))
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

/// `process.repeatable` (must): the same call made again alone gives the
/// same outcome. A call that failed in a check about something else was made
/// again alone; one that then succeeded is a race in the plugin, reported here
/// once (Nomad never retries: a delete that fails by chance leaves a volume
/// stuck for good), with the call, both outcomes and their stderr.
pub fn process_repeatable(log: &RunLog) -> CheckResult {
    if log.repeats.is_empty() {
        return Ok(Finding::Pass(
            "no call failed in one place and succeeded made again alone".into(),
        ));
    }
    for r in &log.repeats {
        for run in r.runs.iter().flatten() {
            log.cite_run(run);
        }
    }
    let mut lines: Vec<String> = log.repeats.iter().map(|r| r.describe()).collect();
    lines.sort();
    Err(Finding::Fail(format!(
        "expected the same call made again alone to give the same outcome (Nomad never retries: a \
         create or delete that fails by chance is a volume lost or stuck); a call failed, then \
         succeeded made again alone, a race in the plugin: {}",
        lines.into_iter().take(3).collect::<Vec<_>>().join("; ")
    )))
}

/// `process.no-orphans` (should): nothing the plugin started outlived it.
/// A process that held a call's stdout or stderr is `process.no-stdio-leak`'s
/// finding (it is necessarily left running too): counted and cited, not
/// reported twice.
pub fn process_no_orphans(log: &RunLog) -> CheckResult {
    log.require_process()?;
    let log = &log.calls;
    let mut orphans = Vec::new();
    let mut held = 0;
    let runs = log
        .iter()
        .filter_map(|c| Some((c, c.run.as_ref()?)))
        .filter(|(_, r)| !r.timed_out());
    for (c, run) in runs {
        for l in run.leftovers() {
            if l.held_stdio {
                held += 1;
                continue;
            }
            let escaped = match l.escaped_group {
                true => " [left the process group]",
                false => "",
            };
            orphans.push(format!("{} ({}): {}{escaped}", c.check, c.op, l.cmdline));
        }
    }
    let cited = match held {
        0 => String::new(),
        n => {
            format!(" ({n} left running while holding stdout or stderr: see process.no-stdio-leak)")
        }
    };
    if orphans.is_empty() {
        let what = match held {
            0 => "nothing left running",
            _ => "nothing else left running",
        };
        Ok(Finding::Pass(format!("{what} after any call{cited}")))
    } else {
        Err(Finding::Fail(format!(
            "expected no process started by the plugin to be alive after it exits; found {} (all killed): {}{cited}",
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

/// Per-operation timing over the run's calls (nearest-rank percentiles) of
/// `time` (the wall time, or the plugin's own share of it).
fn profiles_of(log: &[LoggedCall], time: impl Fn(&LoggedCall) -> Duration) -> Vec<Profile> {
    Operation::ALL
        .into_iter()
        .filter_map(|op| {
            let mut d: Vec<Duration> = calls_of(log, op).iter().map(|c| time(c)).collect();
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

/// Per-operation wall-time profiles over the run's calls.
pub(crate) fn profiles(log: &[LoggedCall]) -> Vec<Profile> {
    profiles_of(log, |c| c.duration)
}

/// How close to its bound a margin verdict is "close": within this share of
/// the bound either way, the host's speed can tip it, so a snapshot does not
/// pin it.
const NEAR_BOUND: f64 = 0.25;

/// `timing.margin` (should): p95 under half the limit, judged on the timing
/// phase's calls, made alone, less the time each waited for a CPU because the
/// host was busy. A p95 within [`NEAR_BOUND`] of half the limit is reported,
/// not pinned in a snapshot.
pub fn timing_margin(log: &RunLog) -> CheckResult {
    let run = log;
    let log = &log.calls;
    // Calls made with nothing else of the run in flight: under the run's own
    // parallel load a p95 measures the machine more than the plugin.
    let solo: Vec<LoggedCall> = log.iter().filter(|c| c.phase.alone()).cloned().collect();
    let judged = if solo.is_empty() { log } else { &solo };
    let all = profiles_of(judged, LoggedCall::own_time);
    if all.is_empty() {
        return Err(Finding::Skip("no plugin call in this run".into()));
    }
    // An operation that overruns its limit alone is its deadline check's
    // finding: cited here, not warned about twice.
    let (over, within): (Vec<&Profile>, Vec<&Profile>) =
        all.iter().partition(|p| overruns_alone(log, p.op));
    let cited = match over.is_empty() {
        true => String::new(),
        false => format!(
            " ({} overruns its limit: see {})",
            over.iter()
                .map(|p| p.op.as_str())
                .collect::<Vec<_>>()
                .join(" and "),
            over.iter()
                .map(|p| format!("{}.deadline", p.op))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let waited: Duration = judged.iter().map(LoggedCall::cpu_wait).sum();
    let near: Vec<String> = within
        .iter()
        .filter(|p| {
            let bound = (p.limit / 2).as_secs_f64();
            (p.p95.as_secs_f64() - bound).abs() <= NEAR_BOUND * bound
        })
        .map(|p| p.op.as_str().to_owned())
        .collect();
    if !near.is_empty() {
        run.unpin(format!(
            "the p95 of {} is within {:.0}% of half its limit",
            near.join(" and "),
            NEAR_BOUND * 100.0
        ));
    }
    let tight: Vec<String> = within
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
    let discounted = format!(
        " (the {:.0} ms the calls waited for a CPU discounted)",
        waited.as_secs_f64() * 1e3
    );
    if tight.is_empty() && over.is_empty() {
        Ok(Finding::Pass(format!(
            "every operation's p95 is under half its limit{discounted}"
        )))
    } else if tight.is_empty() {
        Ok(Finding::Pass(format!(
            "every other operation's p95 is under half its limit{cited}{discounted}"
        )))
    } else {
        Err(Finding::Fail(format!(
            "expected p95 of each operation under half its limit (room for a loaded host); {}{cited}{discounted}",
            tight.join("; ")
        )))
    }
}

/// `timing.profile` (info): the measurements (wall time; how long the calls
/// waited for a CPU is told apart). Measurements of speed: never pinned in a
/// snapshot.
pub fn timing_profile(log: &RunLog) -> CheckResult {
    let all = profiles(&log.calls);
    if all.is_empty() {
        return Err(Finding::Skip("no plugin call in this run".into()));
    }
    log.unpin("measurements of speed");
    Ok(Finding::Info(
        all.iter()
            .map(|p| {
                let waited: Duration = calls_of(&log.calls, p.op)
                    .iter()
                    .map(|c| c.cpu_wait())
                    .sum();
                format!(
                    "{}: n={} p50={:.1}ms p95={:.1}ms max={:.1}ms, {:.1}ms waiting for a CPU in all",
                    p.op,
                    p.count,
                    p.p50.as_secs_f64() * 1e3,
                    p.p95.as_secs_f64() * 1e3,
                    p.max.as_secs_f64() * 1e3,
                    waited.as_secs_f64() * 1e3
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    ))
}
