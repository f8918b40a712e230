//! One plugin call as the report schema has it ([`Invocation`]): the
//! evidence behind a verdict, with the excerpts of its output. Part of the
//! result model (see [`super::model`]): the same rule holds, add fields and
//! never rename or retype them.

use serde::{Deserialize, Serialize};

/// The default cap, in bytes, of a stdout or stderr excerpt (see [`excerpt`]).
pub const DEFAULT_EXCERPT_CAP: usize = 4096;

/// One plugin call made by a check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// The operation argument: `fingerprint`, `create`, `delete`, ...
    pub operation: String,
    /// The whole environment the plugin saw, as `K=V`, in the order it was set.
    pub env: Vec<String>,
    /// The exit code, when the plugin exited rather than being killed.
    pub exit_code: Option<i32>,
    /// The signal that ended the plugin, when one did.
    pub signal: Option<i32>,
    /// Whether the kernel wrote a core dump as that signal ended the plugin
    /// (Nomad's text then ends in ` (core dumped)`); `false` in reports written
    /// before the field existed.
    #[serde(default)]
    pub core_dumped: bool,
    /// When the call started, in milliseconds from the start of the run (the
    /// engine's start, just after `started_at`): with `duration_ms` it places the
    /// call on the run's timeline. `None` in reports written before the field existed.
    #[serde(default)]
    pub started_ms: Option<f64>,
    /// Wall time of the call.
    pub duration_ms: f64,
    /// Whether the call hit its time limit.
    pub timed_out: bool,
    /// When a check killed the call on purpose (the crash checks), after how many
    /// milliseconds; such a call did not time out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed_by_check_ms: Option<u64>,
    /// Whether stdout or stderr stayed open after the plugin exited.
    pub leaked: bool,
    /// Command lines of processes the plugin left behind (all killed since):
    /// the call's leftovers, as every other part of the crate names them
    /// (`orphans` in the JSON schema).
    #[serde(rename = "orphans")]
    pub leftovers: Vec<String>,
    /// Whether stdout was cut at the runner's capture cap.
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the runner's capture cap.
    pub stderr_truncated: bool,
    /// An excerpt of stdout (see [`excerpt`]).
    pub stdout: String,
    /// An excerpt of stderr (see [`excerpt`]).
    pub stderr: String,
    /// A one-line shell command that repeats the call (`env -i DHV_...=... PLUGIN op`).
    pub reproduce: String,
    /// Plugin calls of the run in flight when it started, itself included (1:
    /// made alone); `None` when not counted (and in reports written before the
    /// field existed).
    #[serde(default)]
    pub in_flight: Option<u32>,
    /// Of `duration_ms`, the time the call's processes were runnable but waited for a CPU
    /// because the host was busy (the call's cgroup `cpu.pressure`); absent where it could
    /// not be measured (and in reports written before the field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_ms: Option<f64>,
    /// Where a racing call of a concurrency check was held so that its burst
    /// met at one point (`held at mkdir PATH, let go 2nd of 6 held
    /// together (burst of 6)`); absent for a call not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_at: Option<String>,
    /// How long that call was held before its burst was let go, in
    /// milliseconds (part of `duration_ms`); absent for a call not held, or
    /// one that ended before the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_ms: Option<f64>,
    /// Where a call a check killed on purpose (the crash checks) was killed:
    /// before the change of state it was about to make (`mkdir PATH`,
    /// `renameat2 PATH`, `ioctl`, `execve PROGRAM`: the system call and
    /// what it names), or, where steps cannot be watched, when (`after 12
    /// ms`). Absent for a call not killed on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed_at: Option<String>,
}

/// One stream of a call as a report holds it, as [`Invocation::streams`]
/// gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown<'a> {
    /// `stdout` or `stderr`.
    pub name: &'static str,
    /// Its excerpt (see [`excerpt`]).
    pub text: &'a str,
    /// It was cut at the runner's capture cap.
    pub truncated: bool,
}

impl Invocation {
    /// Its stdout and stderr excerpts, in that order, each with whether it
    /// was cut: what every report form shows of a call's output.
    pub fn streams(&self) -> [Shown<'_>; 2] {
        [
            Shown {
                name: "stdout",
                text: &self.stdout,
                truncated: self.stdout_truncated,
            },
            Shown {
                name: "stderr",
                text: &self.stderr,
                truncated: self.stderr_truncated,
            },
        ]
    }

    /// Whether the call's process started: it then exited or was killed
    /// (a call that could not start has neither, and says why on stderr).
    pub fn started(&self) -> bool {
        self.exit_code.is_some() || self.signal.is_some()
    }

    /// Whether the call exited 0 on its own and left nothing behind.
    pub fn is_clean(&self) -> bool {
        self.exit_code == Some(0)
            && self.signal.is_none()
            && !self.timed_out
            && !self.leaked
            && self.leftovers.is_empty()
    }

    /// How the call ended, in words: `exit 0`, `signal 9, timed out`, ...
    pub fn outcome(&self) -> String {
        let mut parts = Vec::new();
        match (self.exit_code, self.signal) {
            (_, Some(signal)) if self.core_dumped => {
                parts.push(format!("signal {signal} (core dumped)"))
            }
            (_, Some(signal)) => parts.push(format!("signal {signal}")),
            (Some(code), None) => parts.push(format!("exit {code}")),
            (None, None) => parts.push("did not start".to_owned()),
        }
        if self.timed_out {
            parts.push("timed out".to_owned());
        }
        match (self.killed_by_check_ms, &self.killed_at) {
            (Some(ms), Some(at)) if at.starts_with("after ") => {
                parts.push(format!("killed by the check at {ms} ms"))
            }
            (Some(ms), Some(at)) => {
                parts.push(format!("killed by the check at {ms} ms, before {at}"))
            }
            (Some(ms), None) => parts.push(format!("killed by the check at {ms} ms")),
            (None, _) => {}
        }
        if self.leaked {
            parts.push("stdio leaked".to_owned());
        }
        if !self.leftovers.is_empty() {
            parts.push(format!("{} orphan(s)", self.leftovers.len()));
        }
        parts.join(", ")
    }
}

/// A report-sized excerpt of captured output: lossy UTF-8, at most `cap` bytes of text,
/// never splitting a character, and ending in `… [N more bytes]` when cut, where `N`
/// counts the input bytes left out.
///
/// Invalid UTF-8 becomes U+FFFD (as [`String::from_utf8_lossy`] does) and counts against
/// `cap` at its encoded size, so binary output cannot blow the excerpt up threefold.
pub fn excerpt(bytes: &[u8], cap: usize) -> String {
    let mut text = String::with_capacity(cap.min(bytes.len()));
    let mut consumed = 0;
    'chunks: for chunk in bytes.utf8_chunks() {
        for ch in chunk.valid().chars() {
            if text.len() + ch.len_utf8() > cap {
                break 'chunks;
            }
            text.push(ch);
            consumed += ch.len_utf8();
        }
        if !chunk.invalid().is_empty() {
            if text.len() + char::REPLACEMENT_CHARACTER.len_utf8() > cap {
                break;
            }
            text.push(char::REPLACEMENT_CHARACTER);
            consumed += chunk.invalid().len();
        }
    }
    let rest = bytes.len() - consumed;
    if rest > 0 {
        text.push_str(&format!("… [{rest} more bytes]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_stdout_then_stderr_each_with_its_cut() {
        let inv = Invocation {
            stdout: "out".into(),
            stderr: "err".into(),
            stderr_truncated: true,
            ..Invocation::default()
        };
        let [out, err] = inv.streams();
        assert_eq!(
            (out.name, out.text, out.truncated),
            ("stdout", "out", false)
        );
        assert_eq!((err.name, err.text, err.truncated), ("stderr", "err", true));
    }
}
