//! The one process runner: the only place in the crate that spawns or signals
//! processes.
//!
//! A plugin is untrusted code. Every call made through [`Invocation::run`]:
//! - starts with a cleared environment plus exactly the given variables, in order,
//!   stdin `/dev/null`, in a process group of its own;
//! - captures stdout and stderr up to a cap while draining the rest, so a flood
//!   neither blocks the plugin nor grows our memory;
//! - on timeout, signals the group (SIGTERM, a short grace, then SIGKILL), or, in
//!   [`KillMode::NomadLeader`], sends SIGKILL to the leader only, as Nomad does;
//! - after the leader exits, waits a bounded *wait-delay* for the pipes to close: a
//!   descendant still holding them is a leak (Nomad would hang on it);
//! - then finds every process the plugin left behind (including ones that left its
//!   group or session, through the child subreaper), records them, kills and reaps
//!   them. Nothing the runner starts outlives the call, even when the call's future
//!   is dropped part way.

mod unix;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

pub use crate::contract::ExitReason;
pub use unix::{Leftover, kill_all, stopped};

/// Default cap on captured stdout and on captured stderr: 1 MiB each.
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;
/// Default wait for the pipes to close after the plugin exits.
pub const DEFAULT_WAIT_DELAY: Duration = Duration::from_millis(100);
/// Default time between SIGTERM and SIGKILL on timeout.
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_millis(500);

/// How a timed-out call is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KillMode {
    /// SIGTERM to the whole process group, then SIGKILL after the grace period.
    #[default]
    Group,
    /// SIGKILL to the leader only, exactly as Nomad does; descendants holding the
    /// pipes then show up as a leak. They are still cleaned up afterwards.
    NomadLeader,
    /// SIGKILL to the whole group at once, no grace: a crash (power cut, OOM
    /// kill) at that instant. Used by the crash-consistency checks.
    GroupKill,
}

/// One process to run. Build it, then [`run`](Invocation::run) it.
#[derive(Debug, Clone)]
pub struct Invocation {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    timeout: Option<Duration>,
    kill_mode: KillMode,
    output_cap: usize,
    wait_delay: Duration,
    term_grace: Duration,
}

/// What happened to one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// How the leader ended: exit code, or the signal that killed it.
    pub exit: ExitReason,
    /// Captured stdout, at most the cap.
    pub stdout: Vec<u8>,
    /// Captured stderr, at most the cap.
    pub stderr: Vec<u8>,
    /// stdout was longer than the cap; the rest was drained and dropped.
    pub stdout_truncated: bool,
    /// stderr was longer than the cap.
    pub stderr_truncated: bool,
    /// The call ran out of time and was killed.
    pub timed_out: bool,
    /// stdout or stderr was still held open by a descendant after the leader exited.
    pub leaked: bool,
    /// Processes still alive after the leader exited; all were killed.
    pub leftovers: Vec<Leftover>,
    /// From spawn to the leader's exit.
    pub duration: Duration,
    /// The leader's process id.
    pub pid: u32,
}

/// The process could not be started at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {}: {source}", program.display())]
pub struct SpawnError {
    /// What we tried to run.
    pub program: PathBuf,
    /// The operating system's reason (ENOENT, EACCES, ENOEXEC, ...).
    #[source]
    pub source: std::io::Error,
}

impl Invocation {
    /// A call of `program` with no arguments, an empty environment and no timeout.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Invocation {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            timeout: None,
            kill_mode: KillMode::Group,
            output_cap: DEFAULT_OUTPUT_CAP,
            wait_delay: DEFAULT_WAIT_DELAY,
            term_grace: DEFAULT_TERM_GRACE,
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets the whole environment, in order. Nothing else is inherited.
    pub fn env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// Runs in `dir` instead of our own working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Kills the call after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How to kill on timeout.
    pub fn kill_mode(mut self, mode: KillMode) -> Self {
        self.kill_mode = mode;
        self
    }

    /// Caps captured stdout and stderr at `bytes` each.
    pub fn output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes;
        self
    }

    /// How long to wait for the pipes to close after the leader exits.
    pub fn wait_delay(mut self, delay: Duration) -> Self {
        self.wait_delay = delay;
        self
    }

    /// Time between SIGTERM and SIGKILL on timeout.
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.term_grace = grace;
        self
    }

    /// The program this call runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The environment this call runs with.
    pub fn env_vars(&self) -> &[(String, String)] {
        &self.env
    }

    /// Runs the call to completion (see the module docs for every step).
    pub async fn run(&self) -> Result<Outcome, SpawnError> {
        unix::ensure_subreaper();
        let env = unix::env_block(&self.env).map_err(|source| SpawnError {
            program: self.program.clone(),
            source,
        })?;

        let (spawned, start) = {
            let mut lock = unix::spawn_lock();
            let start = Instant::now();
            let spawned = unix::spawn(&self.program, &self.args, &env, self.cwd.as_deref())
                .map_err(|source| SpawnError {
                    program: self.program.clone(),
                    source,
                })?;
            unix::register(&mut lock, spawned.pid, unix::EnvBlock::clone(&env));
            (spawned, start)
        };
        let pid = spawned.pid;
        let mut guard = CallGuard {
            pgid: pid,
            env: unix::EnvBlock::clone(&env),
            done: false,
            leader_reaped: false,
        };
        let inodes: Vec<u64> = {
            use std::os::fd::AsFd;
            [
                unix::pipe_inode(spawned.stdout.as_fd()),
                unix::pipe_inode(spawned.stderr.as_fd()),
            ]
            .into_iter()
            .flatten()
            .collect()
        };
        let harness_error = |source: std::io::Error| SpawnError {
            program: self.program.clone(),
            source,
        };
        let exit_fd = unix::pidfd(pid).map_err(harness_error)?;
        // SAFETY: the AsyncFd owns the OwnedFd, so the descriptor stays open and
        // the same for the AsyncFd's whole life.
        let exit_fd =
            unsafe { AsyncFd::register_with_interest(exit_fd, tokio::io::Interest::READABLE) }
                .map_err(|e| harness_error(e.into()))?;
        // Both pipes are read right here, in the same loop that waits for the
        // exit and the timers: no task per pipe, no hand-off between threads.
        let mut out = Capture::new(spawned.stdout, self.output_cap).map_err(harness_error)?;
        let mut err = Capture::new(spawned.stderr, self.output_cap).map_err(harness_error)?;

        // Phase 1: until the leader exits (or is killed for overrunning).
        let exited = unix::wait_exit(pid, &exit_fd);
        tokio::pin!(exited);
        let deadline = self
            .timeout
            .map(|t| tokio::time::Instant::from_std(start + t));
        let overrun = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now));
        tokio::pin!(overrun);
        let kill = tokio::time::sleep(self.term_grace);
        tokio::pin!(kill);
        let mut timed_out = false;
        let mut kill_pending = false;
        let status = loop {
            tokio::select! {
                status = &mut exited => break status,
                ready = out.pipe.readable(), if !out.eof => out.read_ready(ready),
                ready = err.pipe.readable(), if !err.eof => err.read_ready(ready),
                _ = &mut overrun, if deadline.is_some() && !timed_out => {
                    timed_out = true;
                    match self.kill_mode {
                        KillMode::Group => {
                            unix::signal_group(pid, Signal::SIGTERM);
                            kill.as_mut().reset(tokio::time::Instant::now() + self.term_grace);
                            kill_pending = true;
                        }
                        KillMode::NomadLeader => unix::signal_one(pid, Signal::SIGKILL),
                        KillMode::GroupKill => unix::signal_group(pid, Signal::SIGKILL),
                    }
                }
                _ = &mut kill, if kill_pending => {
                    unix::signal_group(pid, Signal::SIGKILL);
                    kill_pending = false;
                }
            }
        };
        let duration = start.elapsed();
        guard.leader_reaped = true;
        let exit = match status {
            (false, code) => ExitReason::Code(code),
            (true, sig) => ExitReason::Signal(sig),
        };

        // Phase 2: the wait-delay. Both pipes at EOF means nobody holds them;
        // usually they already are, and no timer is armed at all.
        drain_until(&mut out, &mut err, self.wait_delay).await;
        let open_after_delay = !(out.eof && err.eof);

        // Phase 3: find, record, kill and reap whatever is left.
        let leftovers = unix::sweep(pid, &env, &inodes).await;
        guard.done = true;
        unix::unregister(pid);
        // With the holders dead the pipes close; a holder we could not attribute
        // must not hang us, so this wait is bounded too.
        drain_until(&mut out, &mut err, Duration::from_secs(1)).await;
        // A leak is a pipe held past the wait-delay by someone: a leftover seen
        // holding it, or a holder we could not find (the pipe never closed). A
        // pipe that was merely read late on a loaded machine is not one.
        let leaked =
            open_after_delay && (leftovers.iter().any(|l| l.held_stdio) || !(out.eof && err.eof));

        Ok(Outcome {
            exit,
            stdout: out.kept,
            stderr: err.kept,
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            timed_out,
            leaked,
            leftovers,
            duration,
            pid: pid as u32,
        })
    }
}

/// Kills everything a call started if its future is dropped before the end.
struct CallGuard {
    pgid: i32,
    env: unix::EnvBlock,
    done: bool,
    /// Once reaped, the leader's pid may be re-used: never wait on it again.
    leader_reaped: bool,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.done {
            unix::sweep_detached(
                self.pgid,
                unix::EnvBlock::clone(&self.env),
                self.leader_reaped,
            );
        }
    }
}

/// One output stream of a call: its pipe, the bytes kept, up to the cap, and
/// whether more came after it.
struct Capture {
    pipe: pipe::Receiver,
    kept: Vec<u8>,
    cap: usize,
    truncated: bool,
    /// The stream is at EOF (or failed, which ends it too).
    eof: bool,
    /// Where output past the cap is read and dropped; only a flood allocates it.
    discard: Vec<u8>,
}

/// Output up to the cap is read in pieces of this size.
const READ_CHUNK: usize = 8192;
/// The buffer that output past the cap is drained through.
const DISCARD_BUF: usize = 64 * 1024;
/// Reads per readiness event, so that a flood on one pipe cannot starve the
/// other pipe, the exit or the timers.
const READS_PER_WAKE: usize = 16;

impl Capture {
    fn new(pipe: std::os::fd::OwnedFd, cap: usize) -> std::io::Result<Capture> {
        Ok(Capture {
            pipe: pipe::Receiver::from_owned_fd(pipe)?,
            kept: Vec::new(),
            cap,
            truncated: false,
            eof: false,
            discard: Vec::new(),
        })
    }

    /// Reads what the pipe has ready now, without waiting; `ready` is the
    /// readiness the caller waited for. Synchronous, so a `select!` that drops
    /// the readiness future can never lose bytes.
    fn read_ready(&mut self, ready: std::io::Result<()>) {
        if ready.is_err() {
            self.eof = true;
            return;
        }
        let mut chunk = [0u8; READ_CHUNK];
        for _ in 0..READS_PER_WAKE {
            let room = self.cap.saturating_sub(self.kept.len());
            let read = if room == 0 {
                if self.discard.is_empty() {
                    self.discard = vec![0; DISCARD_BUF];
                }
                let read = self.pipe.try_read(&mut self.discard);
                self.truncated |= matches!(read, Ok(n) if n > 0);
                read
            } else {
                // Through the stack: most plugins print a line or nothing, and
                // then an empty stream allocates nothing and a line allocates
                // just its own length.
                let read = self.pipe.try_read(&mut chunk[..room.min(READ_CHUNK)]);
                if let Ok(n) = read {
                    self.kept.extend_from_slice(&chunk[..n]);
                }
                read
            };
            match read {
                Ok(0) => {
                    self.eof = true;
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.eof = true;
                    return;
                }
            }
        }
    }
}

/// Reads both pipes until both are at EOF or `limit` has passed.
async fn drain_until(out: &mut Capture, err: &mut Capture, limit: Duration) {
    if out.eof && err.eof {
        return;
    }
    let limit = tokio::time::sleep(limit);
    tokio::pin!(limit);
    while !(out.eof && err.eof) {
        tokio::select! {
            ready = out.pipe.readable(), if !out.eof => out.read_ready(ready),
            ready = err.pipe.readable(), if !err.eof => err.read_ready(ready),
            _ = &mut limit => return,
        }
    }
}
