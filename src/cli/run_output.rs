//! How `run` shows what happened: the human report and the `--json` object,
//! both from the one [`OneRun`] a run makes.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use super::run_lookup::{self, RunBy};
use crate::conformance::call_report;
use crate::exec::Outcome as ProcessOutcome;
use crate::plugin::{PluginRun, env_lines};
use crate::report::{CreateOutput, RunOutput, VersionInfo, printable_line};

/// What one `run` produced, whichever kind of plugin ran.
#[derive(Default)]
pub(super) struct OneRun {
    pub(super) operation: String,
    pub(super) env: Vec<(String, String)>,
    pub(super) run: Option<PluginRun>,
    pub(super) response: Option<CreateOutput>,
    pub(super) version: Option<VersionInfo>,
    pub(super) error: Option<String>,
    pub(super) explanation: Option<String>,
    pub(super) builtin_duration: Option<Duration>,
    pub(super) run_by: Option<RunBy>,
    pub(super) follow: Duration,
    /// The volumes dir the plugin got, and what `run` did about it.
    pub(super) volumes_dir: Option<(PathBuf, String)>,
    /// Deliberate differences of the built-in that touched this call.
    pub(super) builtin_notes: Vec<String>,
}

pub(super) fn to_json(r: &OneRun) -> RunOutput {
    let outcome = r.run.as_ref().and_then(|run| run.result.as_ref().ok());
    // How the call ended and what it printed (whole): its record, as the
    // report has it.
    let call = match &r.run {
        Some(run) => RunOutput::of_call(call_report(run, usize::MAX)),
        None => RunOutput {
            builtin: true,
            duration_ms: r.builtin_duration.unwrap_or_default().as_secs_f64() * 1000.0,
            ..RunOutput::default()
        },
    };
    RunOutput {
        operation: r.operation.clone(),
        env: env_lines(&r.env),
        response: r.response.clone(),
        error: r.error.clone(),
        start_failure: r.explanation.clone(),
        version: (r.operation == "fingerprint").then(|| r.version.clone()),
        run_by: r.run_by.as_ref().map_or("", RunBy::word).to_string(),
        lookup_error: r
            .run_by
            .as_ref()
            .and_then(RunBy::lookup_error)
            .map(str::to_string),
        stdout_bytes: outcome.map_or(0, |o| o.stdout_len),
        stderr_bytes: outcome.map_or(0, |o| o.stderr_len),
        closed_after_exit_ms: outcome
            .filter(|o| o.leaked)
            .and_then(|o| o.closed_after_exit)
            .map(|d| d.as_secs_f64() * 1000.0),
        not_reproduced: r.not_reproduced(),
        volumes_dir: r
            .volumes_dir
            .as_ref()
            .map(|(d, _)| d.to_string_lossy().into_owned()),
        volumes_dir_note: r.volumes_dir.as_ref().map(|(_, n)| n.clone()),
        ..call
    }
}

impl OneRun {
    pub(super) fn not_reproduced(&self) -> Vec<String> {
        let mut notes = match &self.run_by {
            Some(by) => run_lookup::not_reproduced(by, self.run.as_ref(), self.follow),
            None => Vec::new(),
        };
        notes.extend(self.builtin_notes.iter().cloned());
        notes
    }
}

/// The human report: what the plugin got, what it did, and what Nomad makes of it.
pub(super) fn to_human(r: &OneRun, plugin: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "plugin:    {plugin}");
    let _ = writeln!(out, "operation: {}", r.operation);
    if let Some((dir, note)) = &r.volumes_dir {
        let _ = writeln!(
            out,
            "volumes:   {} ({note})",
            printable_line(&dir.to_string_lossy())
        );
    }
    if !r.env.is_empty() {
        let _ = writeln!(out, "env (exactly what the plugin gets, in order):");
        for (k, v) in &r.env {
            let _ = writeln!(out, "  {k}={}", printable_line(v));
        }
    }
    match &r.run {
        Some(run) => {
            match &run.result {
                Ok(o) => process_lines(&mut out, o),
                Err(start) => {
                    let _ = writeln!(out, "start:     failed: {}", start.go_error);
                    let _ = writeln!(out, "why:       {}", start.explanation);
                }
            }
            let _ = writeln!(out, "reproduce: {}", run.reproduce());
        }
        None if r.run_by == Some(RunBy::Builtin) || r.builtin_duration.is_some() => {
            let _ = writeln!(out, "built-in plugin: runs inside Nomad, no process");
        }
        None => {
            let _ = writeln!(
                out,
                "lookup:    Nomad's lookup refuses the plugin: nothing runs"
            );
        }
    }
    outcome_lines(&mut out, r);
    for note in r.not_reproduced() {
        let _ = writeln!(out, "not reproduced: {note}");
    }
    out
}

/// How the plugin's process ended, what it left behind, and what it printed.
fn process_lines(out: &mut String, o: &ProcessOutcome) {
    let timed_out = if o.timed_out {
        " (timed out and killed)"
    } else {
        ""
    };
    let _ = writeln!(out, "exit:      {}{timed_out}", o.exit.go_string());
    let _ = writeln!(
        out,
        "duration:  {:.1} ms",
        o.duration.as_secs_f64() * 1000.0
    );
    if o.leaked {
        let _ = writeln!(
            out,
            "LEAK:      {}",
            run_lookup::leak_line(o.closed_after_exit)
        );
    }
    for l in &o.leftovers {
        let _ = writeln!(
            out,
            "left behind (killed): pid {} {}",
            l.pid,
            printable_line(&l.cmdline)
        );
    }
    for s in o.streams() {
        let truncated = if s.truncated {
            format!(
                " (truncated: the first {} of {} bytes)",
                s.bytes.len(),
                s.len
            )
        } else {
            String::new()
        };
        let _ = writeln!(out, "{}{truncated}:", s.name);
        let _ = writeln!(out, "{}", indent(&String::from_utf8_lossy(s.bytes)));
    }
}

/// What Nomad makes of the call: the version or response it decoded, and its verdict.
fn outcome_lines(out: &mut String, r: &OneRun) {
    if let Some(v) = &r.version {
        let _ = writeln!(
            out,
            "version:   {:?} → {} ({})",
            v.raw,
            v.canonical.as_deref().unwrap_or("rejected by Nomad"),
            if v.semver {
                "SemVer"
            } else {
                "not strict SemVer"
            }
        );
    }
    if let Some(resp) = &r.response {
        let json = serde_json::to_string(resp).unwrap_or_default();
        let _ = writeln!(out, "response:  {json}");
    }
    let verdict = r.error.as_deref().unwrap_or("success");
    let _ = writeln!(out, "Nomad says: {}", printable_line(verdict));
}

fn indent(s: &str) -> String {
    if s.is_empty() {
        return "  (empty)".into();
    }
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
