//! What a report shows behind each verdict: the plugin's identity and version,
//! and the raw calls (env, exit, output excerpts, the command that reproduces it).
//! [`call_report`] is the one place a call's record ([`PluginRun`]) becomes
//! the report's call ([`Invocation`]), for a check's evidence and for `run
//! --json` alike.

use std::collections::HashMap;
use std::time::Instant;

use super::context::Shared;
use crate::plugin::PluginSource;
use crate::plugin::{PluginRun, Timeouts, env_lines};
use crate::report::{self, Invocation, PluginInfo, Status};

/// How many calls a check's report keeps (the failing ones first).
const MAX_INVOCATIONS: usize = 20;

/// The report's description of the plugin under test.
pub(crate) fn plugin_info(shared: &Shared) -> PluginInfo {
    let version = shared.probes.fingerprint_result().and_then(|call| {
        // A version Nomad rejects is still reported, raw, with no canonical form.
        Some(match &call.result {
            Ok(fp) => fp.version.clone(),
            Err(_) => {
                let stdout = call.run.as_ref()?.stdout();
                let raw = crate::plugin::shown_version(stdout)?;
                crate::version::VersionInfo::from_raw(&raw)
            }
        })
    });
    match &shared.settings.target {
        PluginSource::Builtin => PluginInfo {
            path: "mkdir".into(),
            builtin: true,
            sha256: None,
            version,
        },
        PluginSource::Executable(path)
        | PluginSource::Found {
            executable: path, ..
        } => PluginInfo {
            path: path.display().to_string(),
            builtin: false,
            // What the run pinned at its start: the plugin its calls ran
            // (a change mid-run is the report's `plugin_changed`).
            sha256: match &shared.pin {
                Some(pin) => pin.sha256().map(str::to_owned),
                None => crate::plugin::sha256_of(path),
            },
            version,
        },
    }
}

/// The machine's cores and the load average now, for the report.
pub(crate) fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// The CPUs available to this process.
pub(crate) fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// The calls behind a verdict, failing ones first when the check did not pass;
/// `in_flight` tells how many calls of the run were in flight when each started.
/// `limits` are the run's own time limits: a call that ran under a shorter one
/// was killed on purpose (the crash checks), not timed out. `run_start` is the
/// instant the calls' start offsets count from.
pub(crate) fn invocations(
    runs: &[PluginRun],
    status: Status,
    in_flight: &HashMap<Instant, usize>,
    limits: &Timeouts,
    run_start: Instant,
) -> Vec<Invocation> {
    let mut order: Vec<&PluginRun> = runs.iter().collect();
    if matches!(status, Status::Fail | Status::Warn) {
        order.sort_by_key(|r| r.succeeded() && r.leftovers().is_empty());
    }
    order
        .into_iter()
        .take(MAX_INVOCATIONS)
        .map(|run| {
            let mut inv = Invocation {
                in_flight: in_flight
                    .get(&run.started_at)
                    .map(|&n| u32::try_from(n).unwrap_or(u32::MAX)),
                started_ms: Some(
                    run.started_at
                        .saturating_duration_since(run_start)
                        .as_secs_f64()
                        * 1e3,
                ),
                ..invocation(run)
            };
            if inv.timed_out && run.timeout < limits.for_operation(&run.operation) {
                inv.timed_out = false;
                let ms = run.timeout.as_millis() as u64;
                inv.killed_by_check_ms = Some(ms);
                inv.killed_at = Some(format!("after {ms} ms"));
            }
            inv
        })
        .collect()
}

/// One raw call as the report schema has it, its output cut to excerpts.
pub(crate) fn invocation(run: &PluginRun) -> Invocation {
    call_report(run, report::DEFAULT_EXCERPT_CAP)
}

/// One raw call as the report schema has it, with at most `cap` bytes of
/// each stream's text: the one place a call's record becomes a report's
/// call, for a check's evidence and for `run --json` alike (see
/// [`RunOutput::of_call`](crate::report::RunOutput::of_call)).
pub(crate) fn call_report(run: &PluginRun, cap: usize) -> Invocation {
    let outcome = run.result.as_ref().ok();
    let exit = run.exit();
    Invocation {
        operation: run.operation.clone(),
        env: env_lines(&run.env),
        exit_code: exit.and_then(|e| e.code()),
        signal: exit.and_then(|e| e.signal()),
        core_dumped: exit.is_some_and(|e| e.core_dumped()),
        started_ms: None,
        duration_ms: run.duration().as_secs_f64() * 1e3,
        timed_out: run.timed_out(),
        // A crash point at one of its steps (lifecycle.crash-*): killed on
        // purpose, when it got there.
        killed_by_check_ms: outcome
            .filter(|o| o.killed_at_change)
            .map(|o| o.duration.as_millis() as u64),
        leaked: outcome.is_some_and(|o| o.leaked),
        leftovers: run.leftovers().iter().map(|l| l.cmdline.clone()).collect(),
        stdout_truncated: outcome.is_some_and(|o| o.stdout_truncated),
        stderr_truncated: outcome.is_some_and(|o| o.stderr_truncated),
        stdout: report::excerpt(run.stdout(), cap),
        stderr: match &run.result {
            Ok(o) => report::excerpt(&o.stderr, cap),
            Err(start) => format!("{}: {}", start.go_error, start.explanation),
        },
        reproduce: run.reproduce(),
        in_flight: None,
        cpu_wait_ms: outcome
            .and_then(|o| o.cpu_wait)
            .map(|w| w.as_secs_f64() * 1e3),
        held_at: outcome.and_then(|o| o.held.as_ref()).map(|h| h.describe()),
        held_ms: outcome
            .and_then(|o| o.held.as_ref()?.waited)
            .map(|w| w.as_secs_f64() * 1e3),
        killed_at: outcome
            .filter(|o| o.killed_at_change)
            .and_then(|o| o.changes.last())
            .map(|c| c.describe()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The report's excerpt is cut; `run --json`'s whole text is what
    /// lossy UTF-8 makes of every byte, invalid ones included.
    #[test]
    fn a_call_is_cut_for_the_report_and_whole_for_run_json() {
        let mut stdout = vec![b'a'; 5000];
        stdout.extend_from_slice(b"\xff\xfe tail");
        let run = PluginRun {
            executable: "/p/plugin".into(),
            operation: "create".into(),
            env: Vec::new(),
            cwd: None,
            refused: None,
            timeout: Duration::from_secs(60),
            result: Ok(crate::exec::Outcome {
                exit: crate::exec::ExitReason::CoreDumped(6),
                stdout: stdout.clone(),
                stdout_len: stdout.len() as u64,
                ..crate::exec::Outcome::default()
            }),
            started_at: Instant::now(),
        };
        let whole = call_report(&run, usize::MAX);
        assert_eq!(whole.stdout, String::from_utf8_lossy(&stdout));
        assert_eq!(
            (whole.exit_code, whole.signal, whole.core_dumped),
            (None, Some(6), true)
        );
        let cut = invocation(&run);
        assert!(cut.stdout.ends_with(" more bytes]"), "{}", cut.stdout);
        assert_eq!(cut.stderr, whole.stderr);
    }
}
