//! Finding, recording, killing and reaping what a call left behind.
//!
//! Attribution: a leftover belongs to a call when it is in the call's process group,
//! or when it is an orphan re-parented to us (see
//! [`process_wide`](super::process_wide)) whose environment still holds every
//! variable the call was started with (plugins inherit the cleared `DHV_*` env),
//! or when it descends from either.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::process_wide::{self, unexpected_children};
use super::procfs::{Proc, cmdline, environ_matches, holds_pipe, process_table, read_stat};
use super::spawn::{EnvBlock, reap_blocking, signal_group, signal_one};
use super::supervisor::Supervisor;

/// A process the plugin left behind, as seen in `/proc` when it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Its process id at the time it was found (it has been killed since).
    pub pid: i32,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// Whether it had left the plugin's process group (setsid, setpgid).
    pub escaped_group: bool,
    /// Whether it still held the plugin's stdout or stderr pipe open.
    pub held_stdio: bool,
}

/// The first, cheap look after a call: whether its process group still has a
/// member, and which orphans were re-parented to us.
struct Remains {
    group_alive: bool,
    strays: Vec<i32>,
}

impl Remains {
    fn of(pgid: i32) -> Remains {
        Remains {
            group_alive: killpg(Pid::from_raw(pgid), None).is_ok(),
            strays: unexpected_children(),
        }
    }

    /// Nothing at all is left: the usual case.
    fn nothing(&self) -> bool {
        !self.group_alive && self.strays.is_empty()
    }
}

/// Finds every process that belongs to the call led by `pgid` (see the module docs).
/// Zombies are included (they must be reaped) but not reported as leftovers.
fn members(pgid: i32, env: &[CString]) -> Vec<Proc> {
    let remains = Remains::of(pgid);
    if remains.nothing() {
        return Vec::new();
    }
    if !remains.group_alive {
        // Strays that are all zombies (what is left of a group some call
        // killed) or already gone have no descendants to look for: they only
        // need reaping, and the walk of the whole process table is spared.
        let stats: Option<Vec<Proc>> = remains
            .strays
            .iter()
            .filter_map(|&pid| read_stat(pid))
            .map(|p| p.zombie.then_some(p))
            .collect();
        if let Some(zombies) = stats {
            return zombies;
        }
    }
    let me = std::process::id() as i32;
    let table = process_table();
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in table.iter().enumerate() {
        children.entry(p.ppid).or_default().push(i);
    }
    let mut seeds: Vec<usize> = Vec::new();
    for (i, p) in table.iter().enumerate() {
        if p.pid == me {
            continue;
        }
        let orphan_of_call = p.ppid == me
            && remains.strays.contains(&p.pid)
            && (p.zombie || environ_matches(p.pid, env));
        if p.pgid == pgid || orphan_of_call {
            seeds.push(i);
        }
    }
    let mut found: BTreeSet<usize> = BTreeSet::new();
    while let Some(i) = seeds.pop() {
        if found.insert(i) {
            seeds.extend(children.get(&table[i].pid).into_iter().flatten());
        }
    }
    found.into_iter().map(|i| table[i].clone()).collect()
}

/// The pids of every process of the call led by `pgid`, for a kill.
pub(crate) fn member_pids(pgid: i32, env: &[CString]) -> Vec<i32> {
    members(pgid, env).into_iter().map(|p| p.pid).collect()
}

/// Finds, records, kills and reaps everything the call led by `pgid` left behind.
/// `inodes` are the call's stdout/stderr pipe inodes, to tell who held them.
pub(crate) async fn sweep(pgid: i32, env: &EnvBlock, inodes: &[u64]) -> Vec<Leftover> {
    // Cheap test first, on this thread: usually nothing is left at all.
    if Remains::of(pgid).nothing() {
        return Vec::new();
    }
    // Walking /proc blocks: keep it off the async workers, which are timing
    // other plugins' calls.
    let (env, inodes) = (EnvBlock::clone(env), inodes.to_vec());
    let found = tokio::task::spawn_blocking(move || {
        let procs = members(pgid, &env);
        let leftovers: Vec<Leftover> = procs
            .iter()
            .filter(|p| !p.zombie)
            .map(|p| Leftover {
                pid: p.pid,
                cmdline: cmdline(p.pid),
                escaped_group: p.pgid != pgid,
                held_stdio: holds_pipe(p.pid, &inodes),
            })
            .collect();
        (procs, leftovers)
    })
    .await;
    let Ok((procs, leftovers)) = found else {
        return Vec::new();
    };
    let pids: Vec<i32> = procs.iter().map(|p| p.pid).collect();
    kill_and_reap(pgid, &pids).await;
    leftovers
}

/// SIGKILLs the group and each pid, then reaps the ones that end up as our
/// children. Bounded: a process we cannot reap within a second is left to init.
async fn kill_and_reap(pgid: i32, pids: &[i32]) {
    signal_group(pgid, Signal::SIGKILL);
    for &pid in pids {
        signal_one(pid, Signal::SIGKILL);
    }
    let mut pending: Vec<i32> = pids.to_vec();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    // Killed processes become zombies at once, but one whose parent is also being
    // killed is only re-parented to us a moment later: retry briefly.
    loop {
        pending.retain(|&pid| !reap_if_ours(pid));
        if pending.is_empty() || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Returns true when `pid` is gone for good (reaped by us, or by its own parent).
fn reap_if_ours(pid: i32) -> bool {
    let leaders = process_wide::leaders();
    if leaders.contains(pid) {
        return true; // a live leader of another call re-used the pid: not ours to touch
    }
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(nix::sys::wait::WaitStatus::StillAlive) => false,
        Ok(_) => true,
        Err(Errno::ECHILD) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        Err(_) => true,
    }
}

/// The synchronous sweep used when a call is cancelled (its future dropped):
/// find everything attributable while the tree is intact, kill it all, and reap
/// on a helper thread so the caller never blocks.
pub(crate) fn sweep_detached(
    supervisor: Supervisor,
    pgid: i32,
    env: EnvBlock,
    leader_reaped: bool,
) {
    let procs = members(pgid, &env);
    signal_group(pgid, Signal::SIGKILL);
    if !leader_reaped {
        signal_one(pgid, Signal::SIGKILL);
    }
    let others: Vec<i32> = procs.iter().map(|p| p.pid).filter(|&p| p != pgid).collect();
    for &pid in &others {
        signal_one(pid, Signal::SIGKILL);
    }
    std::thread::spawn(move || {
        if !leader_reaped {
            reap_blocking(pgid);
        }
        process_wide::forget_leader(pgid);
        supervisor.release(pgid);
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        let mut pending = others;
        while !pending.is_empty() && std::time::Instant::now() < deadline {
            pending.retain(|&pid| !reap_if_ours(pid));
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}
