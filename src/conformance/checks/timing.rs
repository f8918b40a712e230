//! `timing.*`: how long each operation takes over the run, judged on the calls
//! made alone, against Nomad's limits.

use std::time::Duration;

use super::deadline::{calls_of, overruns_alone};
use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Finding, LoggedCall, RunLog};
use crate::contract::Operation;

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

/// The `timing.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[MARGIN, PROFILE];

pub(crate) const MARGIN: CheckSpec = CheckSpec {
    id: "timing.margin",
    level: Level::Should,
    rule: "p95 of each operation's duration, over calls made alone and less the time they waited for a CPU because the host was busy, is under half its limit (an operation that overruns its limit alone is its deadline check's finding); a p95 within 25% of that bound is reported, not pinned in a snapshot",
    why: "A plugin that needs more than half its limit on a quiet machine will overrun it on a busy node.",
    fix: "Keep fingerprint well under 0.5 s and create/delete under 30 s; move slow work out of the call.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: None,
    run: run_wide!(margin),
};

/// Each p95 under half the limit, judged on the timing phase's calls, made
/// alone, less the time each waited for a CPU because the host was busy. A p95
/// within [`NEAR_BOUND`] of half the limit is reported, not pinned in a
/// snapshot.
fn margin(log: &RunLog) -> FindingResult {
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
    let cited = deadline_citation(&over);
    let waited: Duration = judged.iter().map(LoggedCall::cpu_wait).sum();
    unpin_near_bound(run, &within);
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

/// " (create overruns its limit: see create.deadline)" for the operations
/// `over` their limit alone, or nothing.
fn deadline_citation(over: &[&Profile]) -> String {
    match over.is_empty() {
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
    }
}

/// Unpins the verdict when a p95 of `within` lies within [`NEAR_BOUND`] of
/// half its limit: the host's speed can tip it.
fn unpin_near_bound(run: &RunLog, within: &[&Profile]) {
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
}

pub(crate) const PROFILE: CheckSpec = CheckSpec {
    id: "timing.profile",
    level: Level::Info,
    rule: "count, p50, p95 and max duration of each operation over the run",
    why: "A measurement for the plugin author, never a failure: how long each operation takes (count, p50, p95, max).",
    fix: "Nothing to fix; compare the figures with Nomad's limits (1 s fingerprint, 60 s create and delete).",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: None,
    run: run_wide!(profile),
};

/// The measurements (wall time; how long the calls waited for a CPU is told
/// apart). Measurements of speed: never pinned in a snapshot.
fn profile(log: &RunLog) -> FindingResult {
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
