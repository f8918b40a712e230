//! The one process runner: the only place in the crate that spawns or signals
//! processes.
//!
//! A plugin is untrusted code. Every call made through [`Call::run`]:
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
//!
//! Every call runs under a [`Supervisor`], the handle that owns a run's live
//! calls and can cancel them all at once.
//!
//! The one other process the crate starts is a developer's tool, trusted and
//! run plainly (`tool.rs`: `go build` for `dhv-conform new`).
//!
//! The OS seam: what is in this dir is portable POSIX (`call.rs`, one call's
//! lifecycle; `capture.rs`, the pipes; `supervisor.rs`; `signal.rs`;
//! `wait_status.rs`; `tool.rs`); everything Linux-only (`clone3` into a cgroup, cgroup
//! v2, `/proc`, pidfds, the child subreaper, the sweeps built on them) is in
//! `linux/`, mounted as the module `os` and reached only through its facade
//! (`linux/mod.rs`, whose docs list what another OS would have to provide;
//! its parts are private to it). There is no other port: a build for another
//! target stops with a `compile_error!` naming that facade.

mod call;
mod capture;
mod helper_thread;
/// The OS side of the runner: Linux's, the only one (see its docs).
#[cfg(target_os = "linux")]
#[path = "linux/mod.rs"]
mod os;
mod rendezvous;
mod signal;
mod supervisor;
mod tool;
mod wait_status;

#[cfg(not(target_os = "linux"))]
compile_error!(
    "dhv-conform runs plugins on Linux only: another OS must provide the facade of \
     src/exec/linux/mod.rs (start_leader, pidfd, wait_exit, try_reap, Tracked, sweep, \
     sweep_detached, ...) as a module of its own"
);

pub use os::{CallLimits, NO_CGROUP_VAR, remove_dead_run_cgroups, set_call_limits};

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub use dhv_contract::ExitReason;
pub use os::Holder;
pub use os::Leftover;
pub use os::can_refuse;
pub use os::{
    DeviceHolder, HeldDevice, HolderKind, device_holders, holders, kill_holders, wait_let_go,
};
pub use rendezvous::{
    AtChanges, Change, DEFAULT_HOLD_BOUND, HoldPoint, MAX_CHANGES, QUIET, Rendezvous,
    STARTS_A_PROCESS, ordinal,
};
pub use supervisor::Supervisor;
pub use tool::run_tool;

/// Default cap on captured stdout and on captured stderr: 1 MiB each.
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;
/// Default wait for the pipes to close after the plugin exits.
pub const DEFAULT_WAIT_DELAY: Duration = Duration::from_millis(100);
/// Default time between SIGTERM and SIGKILL on timeout.
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_millis(500);

/// The most bytes the kernel passes in one argument or variable, its
/// terminating NUL included (`MAX_ARG_STRLEN`, 32 pages of 4 KiB).
pub const MAX_ARG_STRLEN: usize = 32 * 4096;
/// When process `pid` started (clock ticks since boot), or `None` when it is
/// gone (a zombie counts as gone): with the pid, this tells a process from a
/// later one that reuses its pid.
pub fn process_start_time(pid: i32) -> Option<u64> {
    os::process_start_time(pid)
}

/// Why `env` cannot be handed to a program at all (the kernel would refuse
/// the exec with `E2BIG`), in words; `None` when it can. Lets a caller refuse
/// such input up front, naming the variable, instead of failing a call.
pub fn env_too_large(env: &[(String, String)]) -> Option<String> {
    if let Some((k, v)) = env
        .iter()
        .find(|(k, v)| k.len() + v.len() + 2 > MAX_ARG_STRLEN)
    {
        return Some(format!(
            "{k} is {} bytes; the kernel passes at most {} bytes in one variable (E2BIG)",
            v.len(),
            MAX_ARG_STRLEN - k.len() - 2
        ));
    }
    // The whole block: strings and their pointers, within a quarter of the
    // stack limit (ARG_MAX), as execve counts them.
    let total: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2 + 8).sum();
    // SAFETY: sysconf has no preconditions.
    let limit = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
    (limit > 0 && total > limit as usize).then(|| {
        format!("the environment is {total} bytes; the kernel passes at most {limit} (E2BIG)")
    })
}

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

/// One process to run: the one description of a call, from the plugin call
/// that decides it to the transport that runs it. Build it with
/// [`Call::new`] and its setters, then [`run`](Call::run) it; its fields are
/// open so that another way of running it (a container, a remote node) can
/// read what to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Call {
    /// The file that runs.
    pub program: PathBuf,
    /// `argv[0]`, when not the program's path ([`Call::arg0`]).
    pub arg0: Option<PathBuf>,
    /// The rest of argv.
    pub args: Vec<OsString>,
    /// The whole environment, in order: nothing is inherited.
    pub env: Vec<(String, String)>,
    /// The working directory; `None`: ours.
    pub cwd: Option<PathBuf>,
    /// The time limit; `None`: none.
    pub timeout: Option<Duration>,
    /// How a call past its limit is stopped.
    pub kill_mode: KillMode,
    /// How much of stderr (and of stdout, unless `stdout_cap`) is kept.
    pub output_cap: usize,
    /// How much of stdout is kept, when not the output cap.
    pub stdout_cap: Option<usize>,
    /// How long the pipes may stay open after the leader exits.
    pub wait_delay: Duration,
    /// How long a pipe still held after the wait-delay is read on ([`Call::follow`]).
    pub follow: Duration,
    /// Time between SIGTERM and SIGKILL on timeout.
    pub term_grace: Duration,
    /// Whose live call it is; `None`: a supervisor of its own.
    pub supervisor: Option<Supervisor>,
    /// System calls its processes are refused ([`Call::refuse`]).
    pub refuse: Option<Refusal>,
    /// What is done at its changes of state ([`Call::at_changes`]).
    pub at_changes: Option<AtChanges>,
}

/// A family of system calls a call's processes can be refused (they fail
/// with `EPERM`), so a check can see what a plugin does when a step fails
/// as it does on some hosts ([`Call::refuse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// `mount(2)` and the new mount API: a host that does not give the agent
    /// `CAP_SYS_ADMIN` (a Nomad client in an unprivileged container).
    Mounts,
    /// `chmod(2)` and its kin: a filesystem that keeps no modes (vfat, some
    /// FUSE and NFS exports).
    ModeChanges,
    /// Removing anything but a directory (`unlink(2)`, `unlinkat(2)`
    /// without `AT_REMOVEDIR`): a file marked immutable.
    FileRemovals,
    /// Removing a directory (`rmdir(2)`, `unlinkat(2)` with
    /// `AT_REMOVEDIR`): a directory marked immutable.
    DirRemovals,
}

impl Refusal {
    /// Every refusal.
    pub const ALL: [Refusal; 4] = [
        Refusal::Mounts,
        Refusal::ModeChanges,
        Refusal::FileRemovals,
        Refusal::DirRemovals,
    ];

    /// What the refused calls are, in a report's words.
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::Mounts => "every mount",
            Refusal::ModeChanges => "every mode change (chmod)",
            Refusal::FileRemovals => "every removal of a file",
            Refusal::DirRemovals => "every removal of a directory",
        }
    }
}

/// What happened to one call. Its default is a call that exited 0 at once,
/// printing nothing.
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// How many bytes stdout carried in all, kept or not.
    pub stdout_len: u64,
    /// How many bytes stderr carried in all, kept or not.
    pub stderr_len: u64,
    /// How long after the leader's exit both pipes were closed, when they
    /// were before the holders were killed; `None` when a descendant still
    /// held one at the end of the wait-delay (and of any
    /// [`follow`](Call::follow)), and was killed.
    pub closed_after_exit: Option<Duration>,
    /// The call ran out of time and was killed.
    pub timed_out: bool,
    /// stdout or stderr was still held open by a descendant after the leader exited.
    pub leaked: bool,
    /// Processes still alive after the leader exited; all were killed.
    pub leftovers: Vec<Leftover>,
    /// From spawn to the leader's exit.
    pub duration: Duration,
    /// Of that, the time the call's processes were runnable but waited for a
    /// CPU because the host was busy (its cgroup's `cpu.pressure`), and the
    /// time the thread that saw the call end waited for one as well; `None`
    /// where the call had no cgroup or the kernel no pressure information.
    pub cpu_wait: Option<Duration>,
    /// The limits of the call's cgroup it reached (`pids.max`, `memory.max`,
    /// see [`CallLimits`]), in words: the plugin's doing, a finding about it.
    /// `None` when it reached none, or had no cgroup with those controllers.
    pub limits_reached: Option<String>,
    /// What its plugin was seen doing to capture the harness, the process
    /// that runs it (moved it into the call's cgroup, left a tracer on it):
    /// the harness undid it. `None` when nothing was seen, or nothing could
    /// be told to be this call's doing (a freeze of the cgroup all calls
    /// share is said only to the supervisor, see
    /// [`Supervisor::interrupted`]).
    pub touched_harness: Option<String>,
    /// The leader's process id.
    pub pid: u32,
    /// Where the call was held for its burst ([`Call::hold`]): `None` when
    /// it was not given a rendezvous, could not be held here, or made no
    /// change of state before the burst was let go.
    pub held: Option<HoldPoint>,
    /// Its changes of state in order, when they were recorded
    /// ([`AtChanges::Record`], [`AtChanges::KillAt`]; the names it made
    /// elsewhere with [`AtChanges::RecordOutside`], in the dir with
    /// [`AtChanges::RecordMade`]), at most [`MAX_CHANGES`].
    pub changes: Vec<Change>,
    /// It was killed at its last change ([`AtChanges::KillAt`]), before that
    /// change ran.
    pub killed_at_change: bool,
}

/// One captured stream of a call, as [`Outcome::streams`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured<'a> {
    /// `stdout` or `stderr`.
    pub name: &'static str,
    /// What was kept of it, at most the cap.
    pub bytes: &'a [u8],
    /// It was longer than the cap.
    pub truncated: bool,
    /// How many bytes it carried in all, kept or not.
    pub len: u64,
}

impl Outcome {
    /// Its stdout and stderr, in that order: what a reader shows of a
    /// call's output, and whether it was cut, without naming each field.
    pub fn streams(&self) -> [Captured<'_>; 2] {
        [
            Captured {
                name: "stdout",
                bytes: &self.stdout,
                truncated: self.stdout_truncated,
                len: self.stdout_len,
            },
            Captured {
                name: "stderr",
                bytes: &self.stderr,
                truncated: self.stderr_truncated,
                len: self.stderr_len,
            },
        ]
    }
}

/// The CPU this process and the plugin calls it ran have used so far, and
/// the time those calls waited for a CPU ([`cpu_use`]). Two readings'
/// difference tells whether the machine had room for more calls between
/// them.
#[derive(Debug, Clone, Copy)]
pub struct CpuUse {
    /// CPU time used: this process's threads, and the calls' processes.
    pub used: Duration,
    /// Time the calls' processes were runnable but waited for a CPU; `None`
    /// where the calls have no cgroup or the kernel no pressure information.
    pub waited: Option<Duration>,
}

impl CpuUse {
    /// What was used and waited between `earlier` and this reading.
    pub fn since(&self, earlier: &CpuUse) -> CpuUse {
        CpuUse {
            used: self.used.saturating_sub(earlier.used),
            waited: match (self.waited, earlier.waited) {
                (Some(now), Some(then)) => Some(now.saturating_sub(then)),
                _ => None,
            },
        }
    }
}

/// The CPU this process and its plugin calls have used so far (see
/// [`CpuUse`]).
pub fn cpu_use() -> CpuUse {
    os::cpu_use()
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

impl SpawnError {
    /// Whether the kernel refused the arguments or environment as too large
    /// (`E2BIG`): the input's fault, not the program's.
    pub fn is_too_large(&self) -> bool {
        self.source.raw_os_error() == Some(libc::E2BIG)
    }
}

impl Call {
    /// A call of `program` with no arguments, an empty environment and no timeout.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Call {
            program: program.into(),
            arg0: None,
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            timeout: None,
            kill_mode: KillMode::Group,
            output_cap: DEFAULT_OUTPUT_CAP,
            stdout_cap: None,
            wait_delay: DEFAULT_WAIT_DELAY,
            follow: Duration::ZERO,
            term_grace: DEFAULT_TERM_GRACE,
            supervisor: None,
            refuse: None,
            at_changes: None,
        }
    }

    /// Runs under `supervisor`: the call is one of its live calls, killed by
    /// its [`cancel`](Supervisor::cancel), and fails to start with `ECANCELED`
    /// once it is cancelled. Without one, the call has a supervisor of its own.
    pub fn supervised_by(mut self, supervisor: &Supervisor) -> Self {
        self.supervisor = Some(supervisor.clone());
        self
    }

    /// Passes `arg0` as `argv[0]` instead of the program's path: the file that
    /// runs is the program, what it is told it was started as is `arg0`.
    pub fn arg0(mut self, arg0: impl Into<PathBuf>) -> Self {
        self.arg0 = Some(arg0.into());
        self
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

    /// Caps captured stdout at `bytes` instead of the output cap (stderr
    /// keeps the output cap): for output that is decoded, not only shown.
    pub fn stdout_cap(mut self, bytes: usize) -> Self {
        self.stdout_cap = Some(bytes);
        self
    }

    /// How long to wait for the pipes to close after the leader exits.
    pub fn wait_delay(mut self, delay: Duration) -> Self {
        self.wait_delay = delay;
        self
    }

    /// When a descendant still holds a pipe at the end of the wait-delay
    /// (a leak, recorded as such), keeps reading for up to `more` before
    /// killing it, as Nomad, which waits for EOF, would read what it writes
    /// meanwhile. Default: zero, the holder is killed at once.
    pub fn follow(mut self, more: Duration) -> Self {
        self.follow = more;
        self
    }

    /// Time between SIGTERM and SIGKILL on timeout.
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.term_grace = grace;
        self
    }

    /// Refuses the call's processes a family of system calls (see
    /// [`Refusal`]): they fail with `EPERM`. For fault injection: what a
    /// plugin does when a step fails. Root or not, with or without a cgroup
    /// per call, where [`can_refuse`] (x86-64, `clone3`); elsewhere the call
    /// fails to start, with [`std::io::ErrorKind::Unsupported`].
    pub fn refuse(mut self, refusal: Option<Refusal>) -> Self {
        self.refuse = refusal;
        self
    }

    /// Makes the call one of the burst `rendezvous`: it is held at its first
    /// change of state until the burst is let go (see [`Rendezvous`]). Where
    /// calls cannot be held ([`Rendezvous::available`]), it runs unheld.
    pub fn hold(self, rendezvous: Option<Rendezvous>) -> Self {
        self.at_changes(rendezvous.map(AtChanges::Hold))
    }

    /// Watches the call's changes of state as `watch` says: held for a
    /// burst, recorded, or a crash at one of them (see [`AtChanges`]). Where
    /// they cannot be watched ([`Rendezvous::available`]), the call runs
    /// as it would without, and its outcome says nothing of its changes.
    pub fn at_changes(mut self, watch: Option<AtChanges>) -> Self {
        self.at_changes = watch;
        self
    }

    /// Refuses the call's processes every way of mounting a filesystem
    /// ([`Refusal::Mounts`]), or not.
    pub fn refuse_mounts(self, refuse: bool) -> Self {
        self.refuse(refuse.then_some(Refusal::Mounts))
    }
}
