//! The cgroup directories of this run, as trees (cgroup2's, and those of the
//! v1 hierarchies that bound its calls where cgroup2 cannot, see
//! `cgroup_v1`): the run's own cgroup
//! (`dhv-conform-run-<pid>-<start>`, named so that any later run can tell
//! whether its owner is still alive), the walk of a cgroup's whole subtree
//! (a plugin may make child cgroups of its call's and move into them), and
//! the removal of a subtree, bottom-up, once everything in it is killed.
//!
//! Only directories are ever removed here (`rmdir`), and the kernel refuses
//! to remove a cgroup that still holds a process or a child: nothing live is
//! lost by a removal that comes too early.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::procfs::{parse_pids, read_stat};

/// The prefix of a run's cgroup: `dhv-conform-run-<pid>-<start ticks>`.
const RUN_PREFIX: &str = "dhv-conform-run-";
/// The prefix every cgroup this crate ever made starts with; older versions
/// named call cgroups `dhv-conform-<pid>-<n>` directly in the base.
const ANY_PREFIX: &str = "dhv-conform-";

/// How long a removal waits for killed processes to leave a cgroup.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// The name of this process's run cgroup: its pid and start time make it
/// unique among live and dead runs alike.
pub(crate) fn run_name() -> Option<String> {
    let me = read_stat(std::process::id() as i32)?;
    Some(format!("{RUN_PREFIX}{}-{}", me.pid, me.started))
}

/// Whether the run that named a cgroup `name` (a child of the base) is over:
/// its process is gone, or its pid now belongs to a process started at
/// another time. `None` for names this crate does not make.
fn owner_is_dead(name: &str) -> Option<bool> {
    if let Some(rest) = name.strip_prefix(RUN_PREFIX) {
        let (pid, start) = rest.split_once('-')?;
        let (pid, start) = (pid.parse::<i32>().ok()?, start.parse::<u64>().ok()?);
        return Some(read_stat(pid).is_none_or(|p| p.started != start || p.zombie));
    }
    // An older version's call cgroup: only the pid says whose it was.
    let rest = name.strip_prefix(ANY_PREFIX)?;
    let pid = rest.split('-').next()?.parse::<i32>().ok()?;
    Some(read_stat(pid).is_none_or(|p| p.zombie))
}

/// Removes the cgroups that runs now dead left in `base` (killed, or ended
/// while a killed call was still being reaped), with whatever is still in
/// them: their processes are killed first. A live run's are never touched.
pub(crate) fn remove_dead_runs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let dead = name.to_str().and_then(owner_is_dead);
        if dead == Some(true) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path());
        }
    }
}

/// `dir` and every cgroup above it, up to its hierarchy's root (the dirs
/// that hold a `cgroup.procs`).
pub(crate) fn ancestry(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .take_while(|d| d.join("cgroup.procs").exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Every directory of the subtree below `dir` (not `dir` itself), parents
/// before their children. Iterative: a plugin may nest as deep as the
/// kernel allows.
pub(crate) fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut next = 0;
    push_children(dir, &mut found);
    while next < found.len() {
        let parent = found[next].clone();
        push_children(&parent, &mut found);
        next += 1;
    }
    found
}

fn push_children(dir: &Path, into: &mut Vec<PathBuf>) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            // cgroupfs holds files and directories only; a directory is a cgroup.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                into.push(entry.path());
            }
        }
    }
}

/// The live processes in `dir` and every cgroup below it.
pub(crate) fn tree_pids(dir: &Path) -> Vec<i32> {
    let mut pids = Vec::new();
    for d in std::iter::once(dir.to_path_buf()).chain(subdirs(dir)) {
        if let Ok(text) = fs::read(d.join("cgroup.procs")) {
            parse_pids(&text, &mut pids);
        }
    }
    pids
}

/// SIGKILLs everything in `dir` and below at once (`cgroup.kill`, Linux
/// 5.14, takes the subtree, processes forking right now included); before
/// that kernel, each process listed.
pub(crate) fn kill_tree(dir: &Path) {
    // Never with the harness inside: a plugin may have moved it there.
    super::cgroup_capture::come_home();
    let killed = fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
        .and_then(|mut f| f.write_all(b"1"));
    if killed.is_err() {
        // Never this process, should it still be listed (it could not move
        // back): the harness's end would be the plugin's doing.
        let me = std::process::id() as i32;
        for pid in tree_pids(dir).into_iter().filter(|&pid| pid != me) {
            crate::exec::signal::signal_one(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Whether `events` (an open `cgroup.events`) says a process is still in its
/// cgroup or below it; unreadable counts as populated.
pub(crate) fn populated(events: &fs::File) -> bool {
    super::procfs::reread_small(events, |text| !super::procfs::holds(text, b"populated 0"))
        .unwrap_or(true)
}

/// Waits, at most until `deadline`, for `events` to say the cgroup is empty,
/// woken by the kernel's notification of each change (`POLLPRI`).
pub(crate) fn wait_unpopulated(events: &fs::File, deadline: Instant) -> bool {
    loop {
        if !populated(events) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut pfd = libc::pollfd {
            fd: events.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, 100) as libc::c_int;
        // SAFETY: one valid pollfd for the length given.
        unsafe { libc::poll(&mut pfd, 1, ms) };
    }
}

/// Waits, at most until `deadline`, for `dir` and every cgroup below it to
/// list no process, looking every few milliseconds (where no notification
/// of the change exists: cgroup v1).
fn wait_no_pids(dir: &Path, deadline: Instant) {
    const LOOK: Duration = Duration::from_millis(5);
    while !tree_pids(dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(LOOK);
    }
}

/// Removes every cgroup below `dir`, deepest first; true when none is left.
/// Each must be empty already (see [`kill_tree`]).
pub(crate) fn remove_below(dir: &Path) -> bool {
    let mut all = subdirs(dir);
    all.reverse();
    // Every one is tried, even after one failed.
    all.iter()
        .filter(|d| fs::remove_dir(d).is_err() && d.exists())
        .count()
        == 0
}

/// Kills everything in `dir`'s subtree, waits (bounded) for it to leave, and
/// removes the subtree and `dir`. What cannot be removed within the bound is
/// left for a later run (and is there to be seen).
pub(crate) fn remove_tree(dir: &Path) -> bool {
    kill_tree(dir);
    let deadline = Instant::now() + KILL_WAIT;
    match fs::File::open(dir.join("cgroup.events")) {
        Ok(events) => {
            wait_unpopulated(&events, deadline);
        }
        // A v1 hierarchy's dir (see `cgroup_v1`) says nothing when it
        // empties: its process lists are looked at until they are empty.
        Err(_) => wait_no_pids(dir, deadline),
    }
    remove_below(dir);
    fs::remove_dir(dir).is_ok() || !dir.exists()
}
