//! How `run` finds the plugin (by id from a plugin dir, as Nomad does, or by
//! path), and every point where a run could not reproduce what Nomad would
//! conclude, said in words.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::CliError;
use crate::plugin::external::DECODE_LIMIT;
use crate::plugin::{ExternalPlugin, PluginError, PluginRun, PluginSource};

/// How the plugin of a run was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RunBy {
    /// The built-in `mkdir`.
    Builtin,
    /// By id in a plugin dir, with Nomad's lookup.
    Id,
    /// By path, without Nomad's lookup; what that lookup of the file's name in
    /// its dir would refuse it with, if anything.
    Path { lookup_error: Option<String> },
}

impl RunBy {
    /// The word `run --json` shows.
    pub(super) fn word(&self) -> &'static str {
        match self {
            RunBy::Builtin => "builtin",
            RunBy::Id => "id",
            RunBy::Path { .. } => "path",
        }
    }

    /// Nomad's refusal of a plugin run by path, if it would refuse it.
    pub(super) fn lookup_error(&self) -> Option<&str> {
        match self {
            RunBy::Path { lookup_error } => lookup_error.as_deref(),
            _ => None,
        }
    }
}

/// What a lookup found, or Nomad's refusal of it.
pub(super) type Found = Result<(PluginSource, RunBy), (PluginError, RunBy)>;

/// The plugin `arg` names: `mkdir`; with a plugin dir, an id looked up in it
/// exactly as Nomad does (`../x`, an absolute id or a symlink leading out is
/// `no such plugin`; a refusal is Nomad's verdict, returned as the error),
/// or a path naming a file in that dir, which runs as that file's id; else a
/// path.
pub(super) fn find(arg: &OsStr, plugin_dir: Option<&Path>) -> Found {
    let source = PluginSource::parse(arg);
    if source.is_builtin() {
        return Ok((source, RunBy::Builtin));
    }
    match plugin_dir {
        Some(dir) => {
            let id = id_in_dir(arg, dir).unwrap_or_else(|| arg.to_os_string());
            PluginSource::lookup(Some(dir), &id)
                .map(|found| (found, RunBy::Id))
                .map_err(|e| (e, RunBy::Id))
        }
        _ => {
            let path = std::path::absolute(arg).unwrap_or_else(|_| arg.into());
            let lookup_error = match (path.parent(), path.file_name()) {
                (Some(dir), Some(id)) => ExternalPlugin::lookup(dir, id).err(),
                _ => None,
            };
            Ok((
                source,
                RunBy::Path {
                    lookup_error: lookup_error.map(|e| e.to_string()),
                },
            ))
        }
    }
}

/// The id of the file `arg` names when it is a path (it has a `/`) to an
/// entry directly in `dir`: `./my-plugin` run from the plugin dir, or
/// `DIR/my-plugin`.
fn id_in_dir(arg: &OsStr, dir: &Path) -> Option<OsString> {
    if !arg.as_bytes().contains(&b'/') {
        return None;
    }
    let path = std::path::absolute(arg).ok()?;
    let name = path.file_name()?;
    let parent = path.parent()?.canonicalize().ok()?;
    (parent == dir.canonicalize().ok()?).then(|| name.to_os_string())
}

/// One line on what `--plugin-dir` means, for a plugin named by a path that
/// is no file of that dir and that Nomad's lookup, of it as an id, refused
/// (the verdict).
pub(super) fn plugin_dir_hint(arg: &OsStr, plugin_dir: Option<&Path>) -> Option<String> {
    let dir = plugin_dir?;
    if arg == "mkdir" || !arg.as_bytes().contains(&b'/') || id_in_dir(arg, dir).is_some() {
        return None;
    }
    Some(format!(
        "with --plugin-dir, PLUGIN is a plugin id looked up in {} as Nomad looks up a volume's \
         plugin_id, and Nomad finds no plugin {} there: give the file's name, or drop \
         --plugin-dir to run a file by its path",
        dir.display(),
        crate::contract::go_quote_bytes(arg.as_bytes())
    ))
}

/// A plugin dir named for a lookup that is not a directory is bad input.
pub(super) fn check_plugin_dir(arg: &OsStr, plugin_dir: Option<&Path>) -> Result<(), CliError> {
    match plugin_dir {
        Some(dir) if arg != "mkdir" && !dir.is_dir() => Err(CliError::usage(format!(
            "--plugin-dir {} is not a directory (plugin {} is looked up in it by id)",
            dir.display(),
            crate::contract::go_quote_bytes(arg.as_bytes())
        ))),
        _ => Ok(()),
    }
}

/// Every point where the run could not reproduce Nomad's conclusion.
pub(super) fn not_reproduced(
    run_by: &RunBy,
    run: Option<&PluginRun>,
    follow: Duration,
) -> Vec<String> {
    let mut notes: Vec<String> = by_path_note(run_by).into_iter().collect();
    let Some(outcome) = run.and_then(|r| r.result.as_ref().ok()) else {
        return notes;
    };
    notes.push(
        "the plugin ran in a process group of its own, and in a cgroup of its own where the host \
         has cgroup v2 (so that nothing it starts outlives the call); under Nomad it shares the \
         agent's process group, session and cgroup"
            .to_string(),
    );
    notes.extend(leftovers_note(outcome));
    notes.extend(truncated_notes(outcome));
    if let Some(len) = run.and_then(PluginRun::stdout_too_large) {
        notes.push(format!(
            "stdout was {len} bytes, more than the {DECODE_LIMIT} bytes dhv-conform decodes: \
             Nomad reads all of it, and what it would conclude from it is not known"
        ));
    }
    notes.extend(held_pipes_note(outcome, follow));
    notes
}

/// A plugin run by path skips Nomad's lookup by id: what that lookup would
/// have made of it.
fn by_path_note(run_by: &RunBy) -> Option<String> {
    let RunBy::Path { lookup_error } = run_by else {
        return None;
    };
    Some(match lookup_error {
        Some(e) => format!(
            "run by path, not by id from a plugin dir as Nomad runs a plugin: \
             Nomad's lookup of it in its own dir refuses it ({e})"
        ),
        None => "run by path, not by id from a plugin dir as Nomad runs a plugin \
                 (Nomad's lookup of it in its own dir finds it)"
            .to_string(),
    })
}

/// The processes the plugin started that were killed after the call, which
/// Nomad leaves running.
fn leftovers_note(outcome: &crate::exec::Outcome) -> Option<String> {
    if outcome.leftovers.is_empty() {
        return None;
    }
    let pids: Vec<String> = outcome
        .leftovers
        .iter()
        .map(|l| l.pid.to_string())
        .collect();
    let (what, were) = match pids.len() {
        1 => ("1 process".to_string(), "was"),
        n => (format!("{n} processes"), "were"),
    };
    Some(format!(
        "{what} the plugin started (pid {}) {were} still running after the call and \
         killed then: Nomad 2.0.5 leaves them running",
        pids.join(", ")
    ))
}

/// Each stream cut at the output cap, which Nomad logs whole.
fn truncated_notes(outcome: &crate::exec::Outcome) -> Vec<String> {
    outcome
        .streams()
        .iter()
        .filter(|s| s.truncated)
        .map(|s| {
            format!(
                "{} was {} bytes: what is shown is its first {} (the output cap); \
                 Nomad logs all of it",
                s.name,
                s.len,
                crate::exec::DEFAULT_OUTPUT_CAP
            )
        })
        .collect()
}

/// A pipe still held when `follow` ran out: Nomad would still be waiting.
fn held_pipes_note(outcome: &crate::exec::Outcome, follow: Duration) -> Option<String> {
    (outcome.leaked && outcome.closed_after_exit.is_none()).then(|| {
        format!(
            "a process still held stdout or stderr {:.1} s after the plugin exited and was killed then: \
             Nomad waits for EOF, so it would still be waiting for that process; \
             the verdict is on what Nomad had read by then",
            follow.as_secs_f64()
        )
    })
}

/// The leak line of the human report: who held the pipes, and what Nomad,
/// which waits for EOF, does about it.
pub(super) fn leak_line(closed_after_exit: Option<Duration>) -> String {
    match closed_after_exit {
        Some(after) => format!(
            "a process kept stdout/stderr open after the plugin exited, and closed them {:.1} ms after the exit: \
             Nomad waits for that, and decodes everything written until then (as judged here)",
            after.as_secs_f64() * 1000.0
        ),
        None => "a process kept stdout/stderr open after the plugin exited: Nomad would hang on it"
            .into(),
    }
}
