//! How `run` finds the plugin (by id from a plugin dir, as Nomad does, or by
//! path), and every point where a run could not reproduce what Nomad would
//! conclude, said in words.

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

/// The plugin `arg` names: `mkdir`; with a plugin dir, an id looked up in it
/// exactly as Nomad does (`../x`, an absolute id or a symlink leading out is
/// `no such plugin`; a refusal is Nomad's verdict, returned as the error);
/// else a path.
pub(super) fn find(
    arg: &str,
    plugin_dir: Option<&Path>,
) -> Result<(PluginSource, RunBy), (PluginError, RunBy)> {
    let source = PluginSource::parse(arg);
    if source.is_builtin() {
        return Ok((source, RunBy::Builtin));
    }
    match plugin_dir {
        Some(dir) => PluginSource::lookup(Some(dir), arg)
            .map(|found| (found, RunBy::Id))
            .map_err(|e| (e, RunBy::Id)),
        _ => {
            let path = std::path::absolute(arg).unwrap_or_else(|_| arg.into());
            let lookup_error = match (path.parent(), path.file_name()) {
                (Some(dir), Some(id)) => ExternalPlugin::lookup(dir, &id.to_string_lossy()).err(),
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

/// A plugin dir named for a lookup that is not a directory is bad input.
pub(super) fn check_plugin_dir(arg: &str, plugin_dir: Option<&Path>) -> Result<(), CliError> {
    match plugin_dir {
        Some(dir) if arg != "mkdir" && !dir.is_dir() => Err(CliError::usage(format!(
            "--plugin-dir {} is not a directory (plugin {arg:?} is looked up in it by id)",
            dir.display()
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
    let mut notes = Vec::new();
    if let RunBy::Path { lookup_error } = run_by {
        notes.push(match lookup_error {
            Some(e) => format!(
                "run by path, not by id from a plugin dir as Nomad runs a plugin: \
                 Nomad's lookup of it in its own dir refuses it ({e})"
            ),
            None => "run by path, not by id from a plugin dir as Nomad runs a plugin \
                     (Nomad's lookup of it in its own dir finds it)"
                .to_string(),
        });
    }
    let Some(outcome) = run.and_then(|r| r.result.as_ref().ok()) else {
        return notes;
    };
    if let Some(len) = run.and_then(PluginRun::stdout_too_large) {
        notes.push(format!(
            "stdout was {len} bytes, more than the {DECODE_LIMIT} bytes dhv-conform decodes: \
             Nomad reads all of it, and what it would conclude from it is not known"
        ));
    }
    if outcome.leaked && outcome.closed_after_exit.is_none() {
        notes.push(format!(
            "a process still held stdout or stderr {:.1} s after the plugin exited and was killed then: \
             Nomad waits for EOF, so it would still be waiting for that process; \
             the verdict is on what Nomad had read by then",
            follow.as_secs_f64()
        ));
    }
    notes
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
