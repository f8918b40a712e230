//! The JSON shapes of `run --json`, `volume ... --json` and `plugins --json`: schema
//! types like the report's, so that no command makes up its own JSON. What
//! `run --json` says of its call is the report's record of a call
//! ([`Invocation`], through [`RunOutput::of_call`]).
//!
//! Field names are a public interface for scripts: add fields, never rename them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{Invocation, VersionInfo};

/// `dhv-conform run ... --json`: one plugin call and what Nomad makes of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOutput {
    /// The operation argument.
    pub operation: String,
    /// Whether the built-in `mkdir` plugin ran (in-process: no process fields).
    pub builtin: bool,
    /// The environment the plugin got, as `K=V`, in order.
    pub env: Vec<String>,
    /// The exit code, when the plugin exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the plugin, when one did.
    pub signal: Option<i32>,
    /// Whether the kernel wrote a core dump as that signal ended the plugin.
    #[serde(default)]
    pub core_dumped: bool,
    /// Whether the call hit its time limit.
    pub timed_out: bool,
    /// Whether stdout or stderr stayed open after the plugin exited.
    pub leaked: bool,
    /// Command lines of processes the plugin left behind (killed since).
    pub leftovers: Vec<String>,
    /// Whether stdout was cut at the capture cap.
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the capture cap.
    pub stderr_truncated: bool,
    /// Wall time of the call.
    pub duration_ms: f64,
    /// What the plugin printed on stdout (lossy UTF-8).
    pub stdout: String,
    /// What the plugin printed on stderr (lossy UTF-8).
    pub stderr: String,
    /// The decoded create response, when create succeeded.
    pub response: Option<CreateOutput>,
    /// Nomad's error text, when Nomad would report one.
    pub error: Option<String>,
    /// Why the plugin could not start, in words.
    pub start_failure: Option<String>,
    /// A shell line that repeats the call; `None` for the built-in.
    pub reproduce: Option<String>,
    /// The fingerprinted version (fingerprint only; `null` when none was printed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Option<VersionInfo>>,
    /// How the plugin was found: `builtin`, `id` (looked up in its plugin
    /// dir as Nomad does) or `path` (run by path, without Nomad's lookup).
    #[serde(default)]
    pub run_by: String,
    /// Run by path: what Nomad's lookup of the file's name in its dir says
    /// when it refuses it (`no such plugin: "ID"`, `plugin not executable:
    /// "ID"`); `None` when Nomad would find it.
    #[serde(default)]
    pub lookup_error: Option<String>,
    /// How many bytes the plugin wrote on stdout in all (`stdout` holds at
    /// most the capture cap of them).
    #[serde(default)]
    pub stdout_bytes: u64,
    /// How many bytes the plugin wrote on stderr in all.
    #[serde(default)]
    pub stderr_bytes: u64,
    /// After a leak: how long after the plugin's exit the last holder closed
    /// stdout and stderr; `None` when it still held them at the end of the
    /// follow bound (and was killed).
    #[serde(default)]
    pub closed_after_exit_ms: Option<f64>,
    /// Every point where this run could not reproduce Nomad, in words.
    #[serde(default)]
    pub not_reproduced: Vec<String>,
    /// The volumes dir the plugin was given (`DHV_VOLUMES_DIR`); `None`
    /// when no call ran.
    #[serde(default)]
    pub volumes_dir: Option<String>,
    /// What the volumes dir was, and what `run` did about it (as a Nomad
    /// client: nothing), in words.
    #[serde(default)]
    pub volumes_dir_note: Option<String>,
}

impl RunOutput {
    /// `run --json` of one call of an executable, as far as the report's
    /// record of it ([`Invocation`], its output whole) tells: how it ended,
    /// what it printed, how to repeat it. What Nomad made of it, and what
    /// only `run` knows, `run` adds. The one place the two schemas meet, so
    /// that a field of how a call ended is written from the record once.
    pub fn of_call(call: Invocation) -> RunOutput {
        RunOutput {
            builtin: false,
            exit_code: call.exit_code,
            signal: call.signal,
            core_dumped: call.core_dumped,
            timed_out: call.timed_out,
            leaked: call.leaked,
            stdout_truncated: call.stdout_truncated,
            stderr_truncated: call.stderr_truncated,
            duration_ms: call.duration_ms,
            // A call that did not start says why in `start_failure`, not on
            // a stderr it never had.
            stderr: if call.started() {
                call.stderr
            } else {
                String::new()
            },
            reproduce: Some(call.reproduce),
            operation: call.operation,
            env: call.env,
            leftovers: call.leftovers,
            stdout: call.stdout,
            ..RunOutput::default()
        }
    }
}

/// A decoded create response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOutput {
    /// The volume's host path.
    pub path: String,
    /// The capacity the plugin reported.
    pub bytes: i64,
}

/// One volume of a node, as `volume create|register|list --json` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeOutput {
    /// The volume id.
    pub id: String,
    /// The volume name.
    pub name: String,
    /// The namespace.
    pub namespace: String,
    /// The plugin that created it; `None` for a registered volume.
    pub plugin: Option<String>,
    /// The host path.
    pub path: String,
    /// The capacity the plugin reported.
    pub bytes: i64,
}

/// `volume list --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeListOutput {
    /// Every volume of the node.
    pub volumes: Vec<VolumeOutput>,
}

/// `volume delete --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeDeleteOutput {
    /// The id asked for.
    pub id: String,
    /// `deleted`, `unregistered` or `not_found`.
    pub result: String,
    /// The volume that was deleted or unregistered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<VolumeOutput>,
}

/// One volume's restore, in `volume restore --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreOutput {
    /// The volume id.
    pub id: String,
    /// The volume name.
    pub name: String,
    /// Whether it was restored.
    pub ok: bool,
    /// The plugin that created it; `None` for a registered volume.
    #[serde(default)]
    pub plugin: Option<String>,
    /// Its path, when restored.
    pub path: Option<String>,
    /// Why not, when not.
    pub error: Option<String>,
}

/// `volume restore --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreListOutput {
    /// One entry per persisted volume.
    pub results: Vec<RestoreOutput>,
}

/// `plugins --json`: the node attributes a Nomad client would publish, and the
/// plugins it would leave out with why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginsOutput {
    /// `plugins.host_volume.<id>.version` → canonical version.
    pub attributes: BTreeMap<String, String>,
    /// Plugin id → why it was left out.
    pub errors: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run --json` of a call takes how it ended from the report's record,
    /// but a call that never started says why in `start_failure`, not in a
    /// stderr it never had.
    #[test]
    fn a_call_is_the_reports_and_one_that_did_not_start_has_no_stderr() {
        let ran = Invocation {
            operation: "create".into(),
            signal: Some(9),
            timed_out: true,
            leftovers: vec!["sleep 30".into()],
            stderr_truncated: true,
            stderr: "err".into(),
            reproduce: "env -i p create".into(),
            ..Invocation::default()
        };
        let out = RunOutput::of_call(ran);
        assert_eq!(
            (out.signal, out.timed_out, out.stderr_truncated, out.builtin),
            (Some(9), true, true, false)
        );
        assert_eq!(out.leftovers, ["sleep 30"]);
        assert_eq!(out.stderr, "err");
        assert_eq!(out.reproduce.as_deref(), Some("env -i p create"));
        let unstarted = Invocation {
            stderr: "fork/exec p: exec format error: ...".into(),
            ..Invocation::default()
        };
        assert_eq!(RunOutput::of_call(unstarted).stderr, "");
    }
}
