//! The record of a plugin executable's calls: one call and everything seen
//! of it ([`PluginRun`]), and the log of a plugin's calls ([`Recorder`]).
//! A `PluginRun` is the one record of a call: the manager's errors, the
//! checks' judgements and every report of a call (a check's evidence, `run
//! --json`) read it, and nothing copies it into a second record first.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::external::DECODE_LIMIT;
use crate::contract::ExitReason;
use dhv_host::exec::{Leftover, Outcome, Refusal};

/// Every raw call an [`ExternalPlugin`](super::ExternalPlugin) makes, in order. Clones share the log.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<PluginRun>>>);

impl Recorder {
    /// An empty log.
    pub fn new() -> Self {
        Recorder::default()
    }

    pub(super) fn push(&self, run: &PluginRun) {
        dhv_host::sync::lock(&self.0).push(run.clone());
    }

    /// A copy of every call recorded so far.
    pub fn runs(&self) -> Vec<PluginRun> {
        dhv_host::sync::lock(&self.0).clone()
    }

    /// Every call recorded so far, moved out: the log is empty after.
    pub fn take(&self) -> Vec<PluginRun> {
        std::mem::take(&mut *dhv_host::sync::lock(&self.0))
    }

    /// How many calls were recorded so far.
    pub fn len(&self) -> usize {
        dhv_host::sync::lock(&self.0).len()
    }

    /// Whether no call was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One raw call of a plugin executable and everything observed about it.
#[derive(Debug, Clone)]
pub struct PluginRun {
    /// The executable.
    pub executable: PathBuf,
    /// The operation argument (`create`, …, or anything a check sends).
    pub operation: String,
    /// The environment, in order.
    pub env: Vec<(String, String)>,
    /// The working directory, when not inherited.
    pub cwd: Option<PathBuf>,
    /// System calls its processes were refused (fault injection).
    pub refused: Option<Refusal>,
    /// The time limit it ran under.
    pub timeout: Duration,
    /// What happened, or why it could not start.
    pub result: Result<Outcome, StartFailure>,
    /// When it started.
    pub started_at: Instant,
}

/// A call that never started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// The errno from `execve`.
    pub errno: Option<i32>,
    /// Go's text for it, as Nomad shows it: `fork/exec PATH: exec format error`.
    pub go_error: String,
    /// What is wrong, in words.
    pub explanation: String,
}

impl PluginRun {
    /// Whether Nomad would call this a success (started, exit 0), and it
    /// stayed within its call cgroup's limits: a call that reached one (a
    /// fork refused at `pids.max`, an OOM kill at `memory.max`) failed, by
    /// the plugin's doing, whatever its exit.
    pub fn succeeded(&self) -> bool {
        matches!(&self.result, Ok(o) if o.exit.success() && !o.timed_out && o.limits_reached.is_none())
    }

    /// The call cgroup's limits it reached, in words (see
    /// [`CallLimits`](dhv_host::exec::CallLimits)).
    pub fn limits_reached(&self) -> Option<&str> {
        self.result.as_ref().ok()?.limits_reached.as_deref()
    }

    /// The captured stdout (empty when it never started).
    pub fn stdout(&self) -> &[u8] {
        self.result
            .as_ref()
            .map(|o| o.stdout.as_slice())
            .unwrap_or(&[])
    }

    /// The captured stderr (empty when it never started).
    pub fn stderr(&self) -> &[u8] {
        self.result
            .as_ref()
            .map(|o| o.stderr.as_slice())
            .unwrap_or(&[])
    }

    /// When stdout was longer than [`DECODE_LIMIT`], so that Nomad's verdict
    /// on it could not be reproduced: how long it was.
    pub fn stdout_too_large(&self) -> Option<u64> {
        match &self.result {
            Ok(o) if o.stdout_len > DECODE_LIMIT as u64 => Some(o.stdout_len),
            _ => None,
        }
    }

    /// Whether the kept stdout is all the plugin printed (nothing cut).
    pub fn stdout_complete(&self) -> bool {
        match &self.result {
            Ok(o) => o.stdout_len == o.stdout.len() as u64,
            Err(_) => true,
        }
    }

    /// How long it ran (zero when it never started).
    pub fn duration(&self) -> Duration {
        self.result.as_ref().map(|o| o.duration).unwrap_or_default()
    }

    /// How its process ended (`None` when it never started).
    pub fn exit(&self) -> Option<ExitReason> {
        self.result.as_ref().ok().map(|o| o.exit)
    }

    /// Whether it was killed for overrunning its limit.
    pub fn timed_out(&self) -> bool {
        matches!(&self.result, Ok(o) if o.timed_out)
    }

    /// Processes it left behind (all killed since).
    pub fn leftovers(&self) -> &[Leftover] {
        self.result
            .as_ref()
            .map(|o| o.leftovers.as_slice())
            .unwrap_or(&[])
    }

    /// Go's rendering of how the call ended: `exit status 1`, `signal: killed`,
    /// or the `fork/exec` error; followed by the limits it reached, if any
    /// (which Nomad does not set: there is no Nomad text to keep).
    pub fn exit_error(&self) -> String {
        let ended = match &self.result {
            Ok(o) if o.timed_out => ExitReason::Signal(libc::SIGKILL).go_string(),
            Ok(o) => o.exit.go_string(),
            Err(e) => e.go_error.clone(),
        };
        match self.limits_reached() {
            Some(limits) => format!("{ended} ({limits})"),
            None => ended,
        }
    }

    /// A one-line shell command that repeats this call by hand.
    pub fn reproduce(&self) -> String {
        let mut cmd = String::new();
        if let Some(dir) = &self.cwd {
            cmd.push_str(&format!("cd {} && ", shell_quote(&dir.to_string_lossy())));
        }
        cmd.push_str("env -i");
        for (k, v) in &self.env {
            cmd.push(' ');
            cmd.push_str(&shell_quote(&format!("{k}={v}")));
        }
        cmd.push(' ');
        cmd.push_str(&shell_quote(&self.executable.to_string_lossy()));
        cmd.push(' ');
        cmd.push_str(&shell_quote(&self.operation));
        cmd.push_str(" </dev/null");
        if let Some(refusal) = self.refused {
            cmd.push_str(&format!(
                " # it ran refused {} (EPERM), which this command does not repeat",
                refusal.describe()
            ));
        }
        cmd
    }
}

/// An environment as reports show it: one `NAME=value` a variable, in order.
pub fn env_lines(env: &[(String, String)]) -> Vec<String> {
    env.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Quotes for POSIX sh: bare when safe, else single quotes.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%".contains(&b));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(limits_reached: Option<&str>) -> PluginRun {
        PluginRun {
            executable: PathBuf::from("/p/plugin"),
            operation: "create".into(),
            env: Vec::new(),
            cwd: None,
            refused: None,
            timeout: Duration::from_secs(60),
            result: Ok(Outcome {
                stdout: b"{}".to_vec(),
                stdout_len: 2,
                closed_after_exit: Some(Duration::ZERO),
                duration: Duration::from_millis(5),
                limits_reached: limits_reached.map(str::to_owned),
                pid: 1,
                ..Outcome::default()
            }),
            started_at: Instant::now(),
        }
    }

    /// A call that reached a limit of its cgroup failed, by the plugin's
    /// doing, whatever its exit, and its error says which limit.
    #[test]
    fn a_call_that_reached_a_limit_failed_and_says_which() {
        assert!(run(None).succeeded());
        assert_eq!(run(None).exit_error(), "exit status 0");
        let hit = run(Some(
            "the call reached its limit of 32 processes (pids.max)",
        ));
        assert!(!hit.succeeded());
        assert_eq!(
            hit.exit_error(),
            "exit status 0 (the call reached its limit of 32 processes (pids.max))"
        );
    }
}
