//! The only process-wide state of the runner: the child subreaper flag and the
//! set of children this process spawned as call leaders.
//!
//! Both are facts about the *process*, not about a run, which is why they live
//! here and nowhere else: whatever [`Supervisor`](crate::exec::Supervisor) started a
//! call, its leader is a child of this process, and an orphan re-parented to us
//! is a child of this process too. Telling the two apart (and never reaping a
//! leader some call is about to wait for) needs the one set of every leader,
//! shared by all supervisors. Everything else (live calls, cancellation) belongs
//! to a supervisor.
//!
//! Why a subreaper: a plugin that runs `setsid daemon &` and exits leaves a
//! process that is in neither its process group nor its session. Without help it
//! would be re-parented to init and be invisible to us. With
//! `PR_SET_CHILD_SUBREAPER` set on this process, such orphans are re-parented to
//! *us*, so they can be found (as our children that we did not spawn), recorded,
//! killed and reaped.

use std::fs;
use std::sync::{Mutex, MutexGuard, Once, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::procfs::{EnvBlock, parse_pids, reread, reread_small, stat_fields};

/// Makes this process a child subreaper, once. Failure is not fatal: escaped
/// daemons are then re-parented to init and only group members are found.
pub(crate) fn ensure_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    });
}

/// A call whose leader this process spawned and has not finished with,
/// whichever supervisor owns it.
#[derive(Debug, Clone)]
pub(crate) struct LiveCall {
    /// Its leader, also its process group id.
    pub leader: i32,
    /// When it started, in clock ticks since boot.
    pub started: u64,
    /// The environment it was started with: what it starts inherits it,
    /// unless it changes it.
    pub env: EnvBlock,
}

/// The live calls (see [`LiveCall`]).
static LEADERS: Mutex<Vec<LiveCall>> = Mutex::new(Vec::new());

/// Spawns in flight hold it for reading, from before their leader is born
/// until it is in [`LEADERS`]; whoever must not meet a leader that is born
/// but not recorded yet (a reap, the count of orphans) holds it for writing.
/// So spawns never wait for each other (a spawn waits on its child's
/// `execve`), and only that rare writer waits for the spawns in flight.
static SPAWNING: RwLock<()> = RwLock::new(());

/// A spawn in flight (see [`SPAWNING`]): taken before the leader is born,
/// given up by [`SpawnInFlight::recorded`] once it is in the set of leaders.
pub(crate) struct SpawnInFlight(RwLockReadGuard<'static, ()>);

impl SpawnInFlight {
    /// Records the freshly spawned leader `pid`, whose call started at
    /// `started` with the environment `env`, and ends the spawn.
    pub fn recorded(self, pid: i32, started: u64, env: EnvBlock) {
        crate::sync::lock(&LEADERS).push(LiveCall {
            leader: pid,
            started,
            env,
        });
        drop(self.0);
    }
}

/// Marks a spawn in flight until its leader is recorded (or it failed).
pub(crate) fn spawn_in_flight() -> SpawnInFlight {
    SpawnInFlight(crate::sync::read(&SPAWNING))
}

/// Waits for the spawns in flight to record their leaders, and holds new
/// ones off until dropped: while held, every child of ours that is some
/// call's leader is in the set of leaders.
pub(crate) fn settled() -> RwLockWriteGuard<'static, ()> {
    crate::sync::write(&SPAWNING)
}

/// The set of live leaders, locked.
pub(crate) struct Leaders(MutexGuard<'static, Vec<LiveCall>>);

impl Leaders {
    /// Whether `pid` is a live leader.
    pub fn contains(&self, pid: i32) -> bool {
        self.0.iter().any(|c| c.leader == pid)
    }
}

/// Locks the set of live leaders. To tell a child of ours that is no leader
/// from one whose spawn has not recorded it yet, hold [`settled`] first.
pub(crate) fn leaders() -> Leaders {
    Leaders(crate::sync::lock(&LEADERS))
}

/// The live calls now.
pub(crate) fn live_calls() -> Vec<LiveCall> {
    leaders().0.clone()
}

/// Forgets a leader once its call is over.
pub(crate) fn forget_leader(pid: i32) {
    leaders().0.retain(|c| c.leader != pid);
}

/// Our children that no live call owns as a leader: orphans re-parented to us.
///
/// A child just born to a spawn that has not recorded it yet looks like one:
/// when the first look finds any, it looks again with no spawn in flight
/// ([`settled`]), which is rare (something was left, or a spawn was under
/// way at that moment) and waits for at most those spawns.
///
/// Runs once per call, so it must not cost one procfs read per thread (`check`
/// has 20 and more). Linux (since 3.19; the runner needs 5.3 for pidfd anyway)
/// gives an orphan to the *first live thread* of the subreaper, which is the
/// main thread for as long as it runs, whichever thread spawned the orphan's
/// ancestor. Only when the main thread has ended on its own (`pthread_exit`,
/// leaving a zombie thread) can orphans land elsewhere; then every thread is read.
pub(crate) fn unexpected_children() -> Vec<i32> {
    let first = children_not_leading();
    if first.is_empty() {
        return first;
    }
    let _settled = settled();
    children_not_leading()
}

/// Our children, less the recorded leaders.
fn children_not_leading() -> Vec<i32> {
    let mut pids = Vec::new();
    match main_task() {
        Some(main) if main.running() => {
            if let Ok(text) = reread(&main.children) {
                parse_pids(&text, &mut pids);
            }
        }
        _ => {
            if let Ok(tasks) = fs::read_dir("/proc/self/task") {
                for task in tasks.flatten() {
                    if let Ok(text) = fs::read(task.path().join("children")) {
                        parse_pids(&text, &mut pids);
                    }
                }
            }
        }
    }
    let leaders = leaders();
    pids.retain(|&p| !leaders.contains(p));
    pids
}

/// The signals this process ignores (bit `n - 1` for signal `n`): a plugin
/// must not inherit them (an ignored signal stays ignored across `execve`;
/// a caught one the clone itself resets, see `clone_spawn`). Read at every
/// spawn, from the main thread's files, whose dispositions every thread
/// shares:
///
/// - signals 1 to 31 from `stat`'s `sigignore` field: one `pread` of a
///   third of the cost of `status`, the only file with all 64 (the kernel
///   sums the memory counters of every CPU to write `status`);
/// - signals 32 to 64 from `status`, once: a process that ignores none of
///   them when it first spawns (the binary never ignores one, nor does this
///   crate) is taken to ignore none later; one that does reads `status` at
///   every spawn. A real-time signal that a program embedding the crate
///   ignores only after its first call is passed on to plugins, as
///   `std::process::Command` passes on every ignored signal.
///
/// `None` where they cannot be read, or the main thread has ended (its
/// masks then read zero).
pub(crate) fn ignored_signals() -> Option<u64> {
    let main = main_task().filter(|m| m.pid == std::process::id())?;
    let low = reread_small(&main.stat, |text| {
        let mut fields = stat_fields(text)?;
        // The 3rd field, the state; `sigignore` is the 33rd.
        if fields.next()?.starts_with(['Z', 'X']) {
            return None;
        }
        fields.nth(33 - 4)?.parse::<u64>().ok()
    })
    .ok()??;
    Some(low | realtime_ignored(main)?)
}

/// Signals 32 to 64 (bits 31 to 63).
const REALTIME: u64 = !0x7fff_ffff;

/// The real-time signals of [`ignored_signals`].
fn realtime_ignored(main: &MainTask) -> Option<u64> {
    static AT_FIRST: OnceLock<Option<u64>> = OnceLock::new();
    match (*AT_FIRST.get_or_init(|| status_ignored(main)))? & REALTIME {
        0 => Some(0),
        _ => Some(status_ignored(main)? & REALTIME),
    }
}

/// `SigIgn` of the main thread's `status`: all 64 signals.
fn status_ignored(main: &MainTask) -> Option<u64> {
    reread_small(&main.status, |text| {
        let text = std::str::from_utf8(text).ok()?;
        // Found by their line starts: one search each, not a split into lines.
        let field = |name: &str| {
            let from = text.find(name)? + name.len();
            let rest = &text[from..];
            Some(rest[..rest.find('\n')?].trim())
        };
        if field("\nState:")?.starts_with(['Z', 'X']) {
            return None;
        }
        u64::from_str_radix(field("\nSigIgn:")?, 16).ok()
    })
    .ok()?
}

/// The main thread's `children`, `stat` and `status` files, opened once: they
/// belong to the process; the sweep reads the first two after every call, a
/// spawn the second.
struct MainTask {
    /// Whose files they are: a forked child must not read its parent's.
    pid: u32,
    children: fs::File,
    stat: fs::File,
    /// Read for the ignored real-time signals (see [`ignored_signals`]).
    status: fs::File,
    /// Becomes readable when the main thread ends (see [`ThreadExit`]);
    /// `None` on kernels without thread pidfds, where `stat` tells.
    exit: Option<ThreadExit>,
}

impl MainTask {
    /// Whether the main thread is alive (not a zombie left by `pthread_exit`).
    /// Unknown counts as not running, so the caller falls back to reading every
    /// thread.
    fn running(&self) -> bool {
        if self.pid != std::process::id() {
            return false;
        }
        if let Some(ended) = self.exit.as_ref().and_then(ThreadExit::ended) {
            return !ended;
        }
        reread_small(&self.stat, |text| {
            let state = stat_fields(text).and_then(|mut f| f.next());
            state.is_some_and(|s| !s.starts_with(['Z', 'X']))
        })
        .unwrap_or(false)
    }
}

fn main_task() -> Option<&'static MainTask> {
    static MAIN: OnceLock<Option<MainTask>> = OnceLock::new();
    MAIN.get_or_init(|| {
        let pid = std::process::id();
        let dir = format!("/proc/{pid}/task/{pid}");
        Some(MainTask {
            pid,
            children: fs::File::open(format!("{dir}/children")).ok()?,
            stat: fs::File::open(format!("{dir}/stat")).ok()?,
            status: fs::File::open(format!("{dir}/status")).ok()?,
            exit: ThreadExit::watch(pid),
        })
    })
    .as_ref()
}

/// A pidfd of one thread (`PIDFD_THREAD`, Linux 6.9), readable once that
/// thread has ended: whether the main thread still runs is one `poll` that
/// never waits, a fifth of the cost of reading its `stat`.
struct ThreadExit(std::os::fd::OwnedFd);

/// `pidfd_open`'s flag for a pidfd of the thread rather than of the process.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

impl ThreadExit {
    /// Watches thread `tid` of this process; `None` where the kernel has no
    /// thread pidfds (or the thread is gone).
    fn watch(tid: u32) -> Option<ThreadExit> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
        // SAFETY: the syscall returned a fresh descriptor that we now own.
        (fd >= 0).then(|| ThreadExit(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Whether the thread has ended, waiting at most `wait_ms`
    /// (0: not at all); `None` when the poll itself failed.
    fn ended_within(&self, wait_ms: libc::c_int) -> Option<bool> {
        use std::os::fd::AsRawFd;
        let mut fds = [libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one valid pollfd, and its count.
        match unsafe { libc::poll(fds.as_mut_ptr(), 1, wait_ms) } {
            0 => Some(false),
            1 => Some(fds[0].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0),
            _ => None,
        }
    }

    /// Whether the thread has ended, now.
    fn ended(&self) -> Option<bool> {
        self.ended_within(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The main thread's watch says it runs, and a watch of a thread that
    /// ends says so once it has: what `unexpected_children` relies on to
    /// read one thread's `children` rather than every thread's.
    #[test]
    fn a_thread_watch_sees_the_thread_end() {
        let main = main_task().expect("the main thread's files");
        assert!(main.running(), "the test process's main thread runs");
        let Some(watch) = ThreadExit::watch(std::process::id()) else {
            // As the integration tests' skip: visible, and a failure where
            // the environment promises that everything can run.
            let why = "this kernel has no thread pidfds (Linux 6.9); stat is read instead";
            if std::env::var_os("DHV_REQUIRE_PRIVILEGED").is_some_and(|v| !v.is_empty()) {
                panic!("a_thread_watch_sees_the_thread_end cannot run here ({why})");
            }
            println!("SKIPPED a_thread_watch_sees_the_thread_end: {why}");
            return;
        };
        assert_eq!(watch.ended(), Some(false));

        let (tell, told) = std::sync::mpsc::channel();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tell.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = finished.recv();
        });
        let tid = told.recv().unwrap();
        let watch = ThreadExit::watch(tid).expect("a watch of a live thread");
        assert_eq!(watch.ended(), Some(false), "the thread still runs");
        drop(finish);
        thread.join().unwrap();
        // The join returns as the thread leaves user space; its end in the
        // kernel follows: waited for, with a bound.
        assert_eq!(watch.ended_within(10_000), Some(true), "the thread ended");
    }
}
