//! What a report shows behind each verdict: the plugin's identity and version,
//! and the raw calls (env, exit, output excerpts, the command that reproduces it).

use std::collections::HashMap;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::context::Shared;
use crate::plugin::PluginSource;
use crate::plugin::{PluginRun, Timeouts};
use crate::report::{self, Invocation, PluginInfo, Status};

/// How many calls a check's report keeps (the failing ones first).
const MAX_INVOCATIONS: usize = 20;

/// The report's description of the plugin under test.
pub(crate) fn plugin_info(shared: &Shared) -> PluginInfo {
    let version = shared.probes.fingerprint_result().and_then(|call| {
        // A version Nomad rejects is still reported, raw, with no canonical form.
        let info = match &call.result {
            Ok(fp) => fp.version.clone(),
            Err(_) => {
                let stdout = call.run.as_ref()?.stdout();
                let raw = crate::contract::decode_fingerprint(stdout).ok()?.version?;
                crate::version::VersionInfo::from_raw(&raw)
            }
        };
        Some(report::VersionInfo {
            raw: info.raw,
            canonical: info.canonical,
            semver: info.semver,
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
            sha256: crate::plugin::read_regular(path).map(|bytes| hex(&Sha256::digest(&bytes))),
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The calls behind a verdict, failing ones first when the check did not pass;
/// `in_flight` tells how many calls of the run were in flight when each started.
/// `limits` are the run's own time limits: a call that ran under a shorter one
/// was killed on purpose (the crash checks), not timed out.
pub(crate) fn invocations(
    runs: &[PluginRun],
    status: Status,
    in_flight: &HashMap<Instant, usize>,
    limits: &Timeouts,
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
                ..invocation(run)
            };
            if inv.timed_out && run.timeout < limits.for_operation(&run.operation) {
                inv.timed_out = false;
                inv.killed_by_check_ms = Some(run.timeout.as_millis() as u64);
            }
            inv
        })
        .collect()
}

/// One raw call as the report schema has it.
pub(crate) fn invocation(run: &PluginRun) -> Invocation {
    let outcome = run.result.as_ref().ok();
    let (exit_code, signal) = match outcome.map(|o| o.exit) {
        Some(crate::contract::ExitReason::Code(c)) => (Some(c), None),
        Some(crate::contract::ExitReason::Signal(s)) => (None, Some(s)),
        None => (None, None),
    };
    Invocation {
        operation: run.operation.clone(),
        env: run.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        exit_code,
        signal,
        duration_ms: run.duration().as_secs_f64() * 1e3,
        timed_out: run.timed_out(),
        killed_by_check_ms: None,
        leaked: outcome.is_some_and(|o| o.leaked),
        orphans: run.leftovers().iter().map(|l| l.cmdline.clone()).collect(),
        stdout_truncated: outcome.is_some_and(|o| o.stdout_truncated),
        stderr_truncated: outcome.is_some_and(|o| o.stderr_truncated),
        stdout: report::excerpt(run.stdout(), report::DEFAULT_EXCERPT_CAP),
        stderr: match &run.result {
            Ok(o) => report::excerpt(&o.stderr, report::DEFAULT_EXCERPT_CAP),
            Err(start) => format!("{}: {}", start.go_error, start.explanation),
        },
        reproduce: run.reproduce(),
        in_flight: None,
        cpu_wait_ms: outcome
            .and_then(|o| o.cpu_wait)
            .map(|w| w.as_secs_f64() * 1e3),
    }
}
