//! A cgroup (v2) per call, where the machine gives us one: the one record of
//! a plugin's descendants that they cannot shed without privileges. A daemon
//! can leave the plugin's process group and session, wipe its environment and
//! be re-parented twice; it stays in the cgroup its ancestor was started in,
//! or in a cgroup below it. (A root plugin can move out of it altogether: the
//! subreaper still sees such a daemon, see `sweep.rs`.)
//!
//! The leader is born in the call's cgroup (see `clone_spawn.rs`), so every
//! process it starts is born inside too. Call cgroups live in one cgroup of
//! the run's (see `cgroup_tree.rs`) and are reused: once a call's sweep has
//! emptied its cgroup (`cgroup.events` says unpopulated, no child cgroup is
//! left) it goes back to a pool, so that a call costs neither a `mkdir` nor
//! an `rmdir` of a cgroup (the latter waits on the kernel); the pool's
//! thread checks and prepares it there, off the calls' path
//! (`cgroup_pool.rs`). The run's cgroup
//! and everything in it are removed when the process exits; a run that is
//! killed leaves them to the next run, which removes those of dead runs.
//! Without a writable cgroup2 hierarchy (containers, old kernels, no
//! privileges) the runner falls back to the subreaper alone. Where the
//! cgroup2 hierarchy offers no `pids` or `memory` controller (a hybrid host),
//! the call's limits are set in the v1 hierarchies instead (`cgroup_v1.rs`).
//!
//! This file holds the call cgroups themselves (made, taken, read, killed
//! and handed back); the pool is `cgroup_pool.rs`, the run's cgroup
//! `cgroup_run.rs`, the limits and their counts `cgroup_limits.rs`, and what
//! a plugin does to capture the harness `cgroup_capture.rs`.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::cgroup_capture::{Interruptions, call_number, set_owner};
use super::cgroup_limits::{CallLimits, LimitCounts, call_limits, event_count};
use super::cgroup_pool as pool;
use super::cgroup_run::{parse_pressure_total, run};
use super::cgroup_tree as tree;
use super::cgroup_v1::{self as v1, Controller};

use crate::sync::lock;

/// Set once the kernel refused [`CallCgroup`]s (see [`CallCgroup::refused`]).
static REFUSED: AtomicBool = AtomicBool::new(false);
/// Set once a leader could not move itself into its v1 dirs (see
/// [`CallCgroup::v1_refused`]).
static V1_REFUSED: AtomicBool = AtomicBool::new(false);

/// One call cgroup, open: its directory (for `CLONE_INTO_CGROUP`), its
/// `cgroup.events` and its `cpu.pressure` (kept open: a `pread` regenerates
/// it).
#[derive(Debug)]
pub(super) struct Slot {
    n: u64,
    dir: PathBuf,
    fd: OwnedFd,
    events: fs::File,
    pressure: Option<fs::File>,
    /// Its `cgroup.procs`, held open and never read: a birth into the
    /// cgroup checks that we may write that file, and the kernel makes its
    /// inode anew for every check (and evicts it after) unless someone
    /// holds it, as for our own cgroup's (see [`Run`](super::cgroup_run::Run)).
    _procs: Option<fs::File>,
    /// `cpu.pressure`'s total as the last call read it, once that call's
    /// sweep found the cgroup empty: an empty cgroup accrues no stall, so
    /// the next call starts from it without reading the file again (one
    /// read a call, not two). What a process that left on its own between
    /// that read and the sweep's look waited for a CPU in that moment is
    /// counted to the next call: microseconds, never a verdict.
    pub(super) pressure_baseline: Option<std::time::Duration>,
    /// Its limit counts as read while it was empty (see `cgroup_pool`): an
    /// empty cgroup reaches no limit, so the next call starts from them.
    pub(super) counts: Option<LimitCounts>,
    /// The limits written to it, and its `pids.events` and `memory.events`
    /// (held open, as `cgroup.events` is) where those controllers are on.
    limits: Option<CallLimits>,
    pids_events: Option<fs::File>,
    memory_events: Option<fs::File>,
    /// Its dirs in the v1 hierarchies of the run (see `cgroup_v1`).
    v1: v1::CallDirs,
}

impl Slot {
    pub(super) fn new() -> Option<Slot> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = run()?.dir.join(format!("c{n}"));
        fs::create_dir(&dir).ok()?;
        let open = || -> std::io::Result<(OwnedFd, fs::File)> {
            use std::os::unix::fs::OpenOptionsExt;
            let fd = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY)
                .open(&dir)?;
            Ok((fd.into(), fs::File::open(dir.join("cgroup.events"))?))
        };
        match open() {
            Ok((fd, events)) => {
                let pressure = fs::File::open(dir.join("cpu.pressure")).ok();
                let _procs = fs::File::open(dir.join("cgroup.procs")).ok();
                let run = run()?;
                let pids_events = run
                    .pids
                    .then(|| fs::File::open(dir.join("pids.events")).ok())
                    .flatten();
                let memory_events = run
                    .memory
                    .then(|| fs::File::open(dir.join("memory.events")).ok())
                    .flatten();
                let v1 = match V1_REFUSED.load(Ordering::Relaxed) {
                    false => v1::CallDirs::make(&run.v1, n),
                    true => v1::CallDirs::default(),
                };
                Some(Slot {
                    n,
                    dir,
                    fd,
                    events,
                    pressure,
                    _procs,
                    pressure_baseline: None,
                    counts: None,
                    limits: None,
                    pids_events,
                    memory_events,
                    v1,
                })
            }
            Err(_) => {
                let _ = fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Nothing in it or below it, no child cgroup, not frozen: as new.
    pub(super) fn is_clean(&self) -> bool {
        self.events() == Events::Empty && self.childless() && self.v1.is_clean()
    }

    /// Removes it, and its v1 dirs, with anything still in them (killed).
    pub(super) fn remove(self) {
        tree::remove_tree(&self.dir);
        self.v1.remove();
    }

    /// What `cgroup.events` says now (one `pread`).
    pub(super) fn events(&self) -> Events {
        use super::procfs::holds;
        super::procfs::reread_small(&self.events, |text| {
            if !holds(text, b"populated 0") {
                Events::Populated
            } else if holds(text, b"frozen 0") {
                Events::Empty
            } else {
                Events::EmptyFrozen
            }
        })
        // Unreadable counts as populated.
        .unwrap_or(Events::Populated)
    }

    /// No child cgroup: a cgroup directory's link count is 2 plus its child
    /// cgroups.
    fn childless(&self) -> bool {
        nix::sys::stat::fstat(&self.fd).is_ok_and(|m| m.st_nlink == 2)
    }

    /// Writes `limits` to its `pids.max` and `memory.max` unless they are
    /// there already (a pooled cgroup keeps them).
    pub(super) fn limit(&mut self, limits: CallLimits) {
        if self.limits == Some(limits) {
            return;
        }
        if self.pids_events.is_some() {
            let _ = fs::write(self.dir.join("pids.max"), limits.pids_max.to_string());
        }
        if self.memory_events.is_some() {
            let _ = fs::write(self.dir.join("memory.max"), limits.memory_max.to_string());
        }
        self.v1.limit(limits);
        self.limits = Some(limits);
    }

    /// How often the call cgroup has refused a fork at `pids.max`, and how
    /// often the OOM killer acted in it (counts since it was made).
    pub(super) fn limit_counts(&self) -> LimitCounts {
        let count = |file: &Option<fs::File>, keys: &[&str]| {
            file.as_ref()
                .and_then(|f| super::procfs::reread_small(f, |text| event_count(text, keys)).ok())
                .unwrap_or(0)
        };
        // A controller is the cgroup2 hierarchy's or a v1 one's, never both.
        LimitCounts {
            pids: count(&self.pids_events, &["max"]) + self.v1.count(Controller::Pids),
            oom_kills: count(&self.memory_events, &["oom_kill"])
                + self.v1.count(Controller::Memory),
        }
    }

    /// `cpu.pressure`'s `some total`.
    pub(super) fn pressure_total(&self) -> Option<std::time::Duration> {
        let file = self.pressure.as_ref()?;
        super::procfs::reread_small(file, parse_pressure_total).ok()?
    }
}

/// A call cgroup's `cgroup.events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Events {
    /// A process is in it or below it (or the file could not be read).
    Populated,
    /// Nothing in it or below it, not frozen.
    Empty,
    /// Nothing in it, but frozen (by someone else: we never freeze one).
    EmptyFrozen,
}

/// The numbers of the call cgroups handed out and not back yet.
static LIVE: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// One call's cgroup: taken before the spawn, handed back (or removed)
/// after the sweep.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    slot: Option<Slot>,
    cleared: AtomicBool,
    /// The last look at `cgroup.events` ([`CallCgroup::pids`]) found it
    /// empty and not frozen: [`CallCgroup::clear`] need not read it again.
    seen_empty: AtomicBool,
    killed: AtomicBool,
    /// `cpu.pressure`'s total when the call took the cgroup.
    pressure_at_start: Option<std::time::Duration>,
    /// Its total at the call's last read ([`CallCgroup::cpu_wait`]): the
    /// next call's start.
    pressure_last: Mutex<Option<std::time::Duration>>,
    /// The limits in force, and the limit events counted before the call.
    limits: CallLimits,
    counts_at_start: LimitCounts,
}

impl CallCgroup {
    /// An empty cgroup for one call, from the pool or new; `None` where
    /// cgroups are not usable.
    pub fn create(owner: &Interruptions) -> Option<CallCgroup> {
        // Without a run cgroup, no pool (nor its thread).
        if REFUSED.load(Ordering::Relaxed) || run().is_none() {
            return None;
        }
        let mut slot = match pool::take() {
            // Prepared while it waited; nothing moved in since (a plugin
            // that knew its name), as its `cgroup.events` says.
            Some(ready) if ready.events() == Events::Empty => ready,
            // Emptied by the pool's thread, and a fresh one is used.
            Some(dirty) => {
                pool::give_back(dirty);
                Slot::new()?
            }
            None => Slot::new()?,
        };
        lock(&LIVE).push(slot.n);
        set_owner(slot.n, owner);
        let limits = call_limits(run().and_then(|r| r.pids_budget));
        slot.limit(limits);
        let counts_at_start = match slot.counts.take() {
            Some(counts) => counts,
            None => slot.limit_counts(),
        };
        let pressure_at_start = slot
            .pressure_baseline
            .take()
            .or_else(|| slot.pressure_total());
        Some(CallCgroup {
            slot: Some(slot),
            cleared: AtomicBool::new(false),
            seen_empty: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            pressure_at_start,
            pressure_last: Mutex::new(None),
            limits,
            counts_at_start,
        })
    }

    fn slot(&self) -> &Slot {
        self.slot
            .as_ref()
            .expect("a call cgroup's slot is taken only on drop")
    }

    /// The cgroup's directory, open, for the leader to be born in.
    pub fn fd(&self) -> &OwnedFd {
        &self.slot().fd
    }

    /// The kernel refused to start a process in a cgroup (`clone3` or
    /// `CLONE_INTO_CGROUP` missing, or filtered): no call of this process
    /// tries again.
    pub fn refused() {
        REFUSED.store(true, Ordering::Relaxed);
    }

    /// The live processes in the cgroup and below it (zombies have left it).
    /// One read of `cgroup.events` when it is empty: the usual case.
    pub fn pids(&self) -> Vec<i32> {
        let slot = self.slot();
        match slot.events() {
            Events::Empty => {
                self.seen_empty.store(true, Ordering::Relaxed);
                Vec::new()
            }
            Events::EmptyFrozen => Vec::new(),
            Events::Populated => {
                self.seen_empty.store(false, Ordering::Relaxed);
                tree::tree_pids(&slot.dir)
            }
        }
    }

    /// SIGKILLs everything in the cgroup and below it at once. A cgroup
    /// once killed is never reused: on some kernels (seen on 6.18) a process
    /// born into it by `CLONE_INTO_CGROUP` is then killed at birth (the
    /// fork compares the kill count of the parent's cgroup with the target's).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        tree::kill_tree(&self.slot().dir);
        // Empty unless a process left the cgroup2 one (as root may).
        self.slot().v1.kill();
    }

    /// The `cgroup.procs` of its v1 dirs, open, for the leader to write
    /// itself into before its exec (`-1` where there is none).
    pub fn v1_procs(&self) -> [libc::c_int; 2] {
        self.slot().v1.procs_fds()
    }

    /// The leader could not move itself into a v1 dir: no later call of this
    /// process gets v1 dirs (their limits would be written and never apply).
    pub fn v1_refused() {
        V1_REFUSED.store(true, Ordering::Relaxed);
    }

    /// How long, since it was taken, at least one process of the call was
    /// runnable but waiting for a CPU (`cpu.pressure`, `some total`, less its
    /// value when the call took the cgroup: a pooled one carries its past
    /// calls' totals): the host's share of the call's duration, not the
    /// plugin's. `None` without pressure stall information.
    pub fn cpu_wait(&self) -> Option<std::time::Duration> {
        let now = self.slot().pressure_total()?;
        *lock(&self.pressure_last) = Some(now);
        Some(now.saturating_sub(self.pressure_at_start?))
    }

    /// The limits the call reached since it took the cgroup, in words (see
    /// [`CallLimits`]); `None` when it reached none, or no controller is on.
    pub fn limits_reached(&self) -> Option<String> {
        let slot = self.slot();
        super::cgroup_limits::limits_reached(
            self.limits,
            self.counts_at_start,
            slot.limit_counts(),
            slot.memory_events.is_none() && slot.v1.has(Controller::Memory),
        )
    }

    /// Removes the cgroups a plugin made below the call's; true once nothing
    /// is in the call cgroup and nothing is below it (it may then be reused).
    /// Fails, and may be retried, while a process is still inside.
    pub fn clear(&self) -> bool {
        if self.cleared.load(Ordering::Relaxed) {
            return true;
        }
        let slot = self.slot();
        // Right after a look that found it empty (the sweep's first, cheap
        // test), only the child cgroups are left to check. Reuse is safe
        // either way: a pooled cgroup is checked again when it is taken.
        let seen_empty = self.seen_empty.swap(false, Ordering::Relaxed);
        let clean = (seen_empty && slot.childless())
            || slot.is_clean()
            || (tree::remove_below(&slot.dir) && slot.is_clean());
        self.cleared.store(clean, Ordering::Relaxed);
        clean
    }
}

/// Whether a process whose `/proc/<pid>/cgroup` path is `rel` is in the
/// cgroup of a live call other than `own` (that call's sweep claims it).
/// One of our call cgroups that no live call holds counts as outside.
pub(crate) fn in_other_live_call(rel: &str, own: Option<&CallCgroup>) -> bool {
    let Some(run) = run() else {
        return false;
    };
    let n = call_number(rel, &run.rel);
    let own = own.and_then(|c| c.slot.as_ref()).map(|s| s.n);
    n.is_some_and(|n| Some(n) != own && lock(&LIVE).contains(&n))
}

impl Drop for CallCgroup {
    /// Back to the pool when clean and never killed; a killed one is removed;
    /// otherwise its subtree is killed and
    /// removed now, and what still cannot go is left to the removal of the
    /// run's cgroup at exit (or to the next run).
    fn drop(&mut self) {
        let Some(mut slot) = self.slot.take() else {
            return;
        };
        lock(&LIVE).retain(|&n| n != slot.n);
        let clean = self.cleared.load(Ordering::Relaxed) || slot.is_clean();
        if clean && !self.killed.load(Ordering::Relaxed) {
            slot.pressure_baseline = lock(&self.pressure_last).take();
            pool::give_back(slot);
        } else if clean && fs::remove_dir(&slot.dir).is_ok() {
            slot.v1.remove();
        } else {
            slot.remove();
        }
    }
}
