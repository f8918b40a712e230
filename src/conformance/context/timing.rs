//! The timing phase: after the parallel checks, with no other call of the run
//! in flight, a few calls of each operation the run exercised, one at a time.
//! They are also the confirming re-run, alone, of any operation that overran
//! under the run's own load (every operation that overran was exercised). The
//! deadline and margin checks judge these calls; calls of the parallel phase
//! are evidence only. A fixed number of calls (fewer only when one overruns,
//! which repeats) keeps the report the same from run to run. An overrun alone
//! that the host's load may explain (the call waited for a CPU long enough
//! that, without the wait, it was within its limit) is made once more alone:
//! the deadline fails only on one that repeats.

use std::path::Path;
use std::sync::Arc;

use super::probes::probe_ctx;
use super::{Expect, LoggedCall, Shared};
use crate::contract::{DeleteRequest, Operation};

/// When a call was made: among the other checks' calls, or alone in the timing
/// phase (not the run's [`Phase`](crate::report::Phase) a check runs in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallPhase {
    /// By a check, while other checks ran.
    Parallel,
    /// In the timing phase, alone.
    Timing,
}

impl CallPhase {
    /// Made with no other call of the run in flight.
    pub fn alone(self) -> bool {
        self != CallPhase::Parallel
    }
}

/// How many calls of each operation the timing phase makes.
pub(crate) const TIMING_CALLS: usize = 3;

/// Whether a call ran past its limit (or was killed for it).
pub(crate) fn overran(call: &LoggedCall) -> bool {
    call.duration > call.limit || call.run.as_ref().is_some_and(|r| r.timed_out())
}

/// Whether a call was late by its own doing: it overran its limit, and either
/// it was killed there (how long it would have taken is unknown) having
/// spent most of its limit running, or, less the time it and the harness
/// waited for a CPU, it still took longer than its limit. A call that
/// finished late only because the host kept it waiting is the host's doing:
/// on an idle host it is in time. One killed at its limit after waiting for
/// a CPU for most of it ([`killed_waiting`]) is neither: nothing tells.
pub(crate) fn late(call: &LoggedCall) -> bool {
    let killed = call.run.as_ref().is_some_and(|r| r.timed_out());
    overran(call) && ((killed && !killed_waiting(call)) || call.own_time() > call.limit)
}

/// Whether a call was killed at its limit having waited for a CPU for most
/// of it: how long the plugin would have taken on an idle host is unknown,
/// and the host's load, not the plugin, may have kept it.
pub(crate) fn killed_waiting(call: &LoggedCall) -> bool {
    let killed = call.run.as_ref().is_some_and(|r| r.timed_out());
    killed && call.cpu_wait() * 2 > call.duration
}

/// Runs the timing phase once every parallel check has finished.
pub(crate) async fn run(shared: Arc<Shared>) {
    let log = shared.log.calls();
    let exercised = |op: Operation| log.iter().any(|c| c.op == op);
    let mut ctx = probe_ctx(shared.clone(), shared.probe_owners.timing);
    ctx.calls.phase = CallPhase::Timing;
    let mut hangs = Vec::new();
    for op in Operation::ALL.into_iter().filter(|op| exercised(*op)) {
        for _ in 0..TIMING_CALLS {
            let call = one_call(&ctx, op).await;
            // Killed at the limit: more calls would only wait as long
            // again, whoever kept it (see `killed_waiting`).
            let hung = |c: &LoggedCall| late(c) || killed_waiting(c);
            if !hung(&call) {
                continue;
            }
            // A kill at the limit the host's load may explain (less the time
            // it waited for a CPU it was within its limit) counts only when
            // it repeats: once more, alone.
            if call.own_time() >= call.limit || hung(&one_call(&ctx, op).await) {
                // Confirmed alone: more calls would only wait as long again.
                hangs.push(op);
                break;
            }
        }
    }
    if exercised(Operation::Create) && !hangs.contains(&Operation::Create) {
        provoke_failure(&ctx).await;
    }
    // Its volumes are deleted now, during the run; unless deletes hang: then
    // they are left to the run's teardown, which deletes every live volume at
    // once (here they would cost one more limit).
    if !hangs.contains(&Operation::Delete) {
        ctx.cleanup().await;
    }
}

/// The regular file the provoked create's volumes dir lies under.
const BLOCKER: &str = "not-a-dir";

/// Whether a logged call is the provoked create (its volumes dir lies under
/// [`BLOCKER`]), for the failure checks to tell it from the plugin's own failures.
pub(crate) fn is_provoked(call: &LoggedCall) -> bool {
    let below = format!("/{BLOCKER}/volumes");
    call.op == Operation::Create
        && call.phase == CallPhase::Timing
        && match &call.run {
            Some(run) => run
                .env
                .iter()
                .any(|(k, v)| k == crate::contract::var::VOLUMES_DIR && v.ends_with(&below)),
            // The built-in runs in-process: its error names the path.
            None => call.error.as_deref().is_some_and(|e| e.contains(&below)),
        }
}

/// A create that cannot succeed, so that every plugin's failure path is
/// judged (`failure.clean`, `failure.error-json`): its volumes dir lies under
/// a regular file, so no plugin can make it.
async fn provoke_failure(ctx: &super::Ctx) {
    // A file where a directory should be, made new like every file the
    // harness writes.
    let Ok(blocker) = ctx.dirs.plant(ctx.dirs.dir(), BLOCKER) else {
        return;
    };
    let req = ctx.request_in(&blocker.join("volumes"));
    // Either: expected to fail, but a plugin that ignores DHV_VOLUMES_DIR may
    // not; how it fails is what the failure checks judge.
    let call = ctx
        .calls
        .create(
            &req,
            Expect::Either,
            "create whose volumes dir cannot exist (a failure provoked on purpose)",
        )
        .await;
    // A success whose path lies under the file cannot be true: a failed step
    // the plugin went past. A plugin whose default volume does not exist
    // either is create.path-exists's finding (one cause, one finding).
    if let Ok(resp) = &call.result
        && Path::new(&resp.path).starts_with(&blocker)
        && ctx.prereqs().create_probe().await.path_existed
    {
        ctx.calls.shared.facts.publish(super::Fact::FalseSuccess {
            path: resp.path.clone(),
        });
    }
}

/// One call of `op`, alone; returns its log entry. A delete deletes a volume
/// created for it (that create is logged too), or, when create does not
/// work, one that was never created.
async fn one_call(ctx: &super::Ctx, op: Operation) -> LoggedCall {
    let step = format!("{op} in the timing phase");
    // Either: this phase measures time; whether the calls work is judged by
    // the checks of each operation.
    match op {
        Operation::Fingerprint => {
            ctx.calls.fingerprint(Expect::Either, &step).await;
        }
        Operation::Create => {
            // Its volume is deleted by the clean-up at the end, unlogged: a
            // run that made no delete gets none judged.
            let req = ctx.request();
            ctx.calls.create(&req, Expect::Either, &step).await;
        }
        Operation::Delete => {
            let req = ctx.request();
            let created = match last_create_overran(ctx) {
                true => None,
                false => ctx
                    .calls
                    .create(&req, Expect::Either, &step)
                    .await
                    .into_call()
                    .result
                    .ok(),
            };
            let path = created.map(|r| r.path).unwrap_or_else(|| {
                std::path::Path::new(&req.volumes_dir)
                    .join(&req.volume_id)
                    .to_string_lossy()
                    .into_owned()
            });
            ctx.calls
                .delete_with(
                    &DeleteRequest::for_created(&req, &path),
                    Expect::Either,
                    &step,
                    super::Start::Now,
                )
                .await;
        }
    }
    last_of(ctx, op)
}

/// Whether this phase's creates hang: then deletes are timed on volumes that
/// were never created, rather than waiting for another create.
fn last_create_overran(ctx: &super::Ctx) -> bool {
    ctx.calls
        .shared
        .log
        .calls()
        .iter()
        .rev()
        .find(|c| c.op == Operation::Create && c.phase.alone())
        .is_some_and(overran)
}

fn last_of(ctx: &super::Ctx, op: Operation) -> LoggedCall {
    ctx.calls
        .shared
        .log
        .calls()
        .into_iter()
        .rev()
        .find(|c| c.op == op && c.check == ctx.calls.asker.id && c.phase == ctx.calls.phase)
        .expect("the call was just logged")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A create of the timing phase that ran `ms`, of which it waited
    /// `waited` ms for a CPU, killed at its limit of 100 ms when `killed`.
    fn call(ms: u64, waited: u64, killed: bool) -> LoggedCall {
        let duration = Duration::from_millis(ms);
        let run = crate::plugin::PluginRun {
            executable: "/p/plugin".into(),
            operation: "create".into(),
            env: Vec::new(),
            cwd: None,
            refused: None,
            timeout: Duration::from_millis(100),
            result: Ok(crate::exec::Outcome {
                exit: crate::exec::ExitReason::Signal(9),
                timed_out: killed,
                duration,
                cpu_wait: Some(Duration::from_millis(waited)),
                pid: 1,
                ..crate::exec::Outcome::default()
            }),
            started_at: Instant::now(),
        };
        LoggedCall {
            check: "a-check",
            op: Operation::Create,
            duration,
            limit: Duration::from_millis(100),
            plugin_failed: true,
            run: Some(std::sync::Arc::new(run)),
            residue: None,
            phase: CallPhase::Timing,
            in_flight: 1,
            error: None,
        }
    }

    /// A kill at the limit is the plugin's when it ran most of the limit;
    /// one that waited for a CPU most of it is nobody's known doing; a call
    /// that finished late is the plugin's only past its limit less its wait.
    #[test]
    fn a_kill_at_the_limit_while_waiting_for_a_cpu_is_not_blamed() {
        assert!(late(&call(101, 10, true)));
        assert!(!killed_waiting(&call(101, 10, true)));
        assert!(!late(&call(101, 80, true)));
        assert!(killed_waiting(&call(101, 80, true)));
        assert!(!late(&call(150, 80, false)));
        assert!(late(&call(250, 80, false)));
        assert!(!killed_waiting(&call(150, 80, false)));
    }
}
