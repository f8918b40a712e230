//! Finding, recording, killing and reaping what a call left behind.
//!
//! Attribution: a leftover belongs to a call when it is in the call's cgroup
//! or below it (see [`cgroup`](super::cgroup)), or in the call's process
//! group, or when it is an orphan re-parented to us (see
//! [`process_wide`](super::process_wide)) that the call claims (see
//! [`claims_stray`]): every orphan of ours descends from some call, whatever
//! cgroup, session or environment it ended up with; or when it descends from
//! any of these. Never when it is still in the process group or cgroup of
//! another live call (whose sweep claims it). What is found is stopped before
//! the table is read again, so that nothing forks out of sight, then killed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::cgroup::{CallCgroup, in_other_live_call};
use super::cgroup_capture::Interruptions;
use super::process_wide::{self, LiveCall, unexpected_children};
use super::procfs::{
    Proc, cgroup_path, cmdline, environ_matches, holds_pipe, process_table, read_stat,
};
use super::spawn::EnvBlock;
use crate::exec::signal::{reap_blocking, signal_group, signal_one};

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

/// A live call as the sweeps know it: its leader (and process group), the
/// environment it was started with, and its cgroup when it has one.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub pgid: i32,
    pub env: EnvBlock,
    pub cgroup: Option<Arc<CallCgroup>>,
    /// When the call started, in clock ticks since boot.
    pub started: u64,
    /// Where what the call's plugin did to capture the harness is said: its
    /// supervisor's (its run's), and the call's own.
    pub interruptions: Interruptions,
}

impl Tracked {
    /// What this call's plugin was seen doing to capture the harness (moved
    /// it into the call's cgroup, left a tracer on it from there), the
    /// first time; `None` when nothing was seen, or nothing could be told
    /// to be this call's doing (a freeze of the run's cgroup).
    pub fn touched_harness(&self) -> Option<String> {
        self.interruptions.by_this_call()
    }

    /// The time the call's processes waited for a CPU, from its cgroup's
    /// `cpu.pressure`; `None` without a cgroup or pressure information.
    pub fn cpu_wait(&self) -> Option<Duration> {
        self.cgroup.as_ref().and_then(|c| c.cpu_wait())
    }

    /// The limits the call reached (`pids.max`, `memory.max`), in words;
    /// `None` when it reached none or has no cgroup.
    pub fn limits_reached(&self) -> Option<String> {
        self.cgroup.as_ref().and_then(|c| c.limits_reached())
    }

    /// SIGKILL to every process of the call at once: its group, its cgroup,
    /// and every member found (a cancel; the sweep reaps them).
    pub fn kill_all(&self) {
        signal_group(self.pgid, Signal::SIGKILL);
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
        for pid in member_pids(self) {
            signal_one(pid, Signal::SIGKILL);
        }
    }
}

/// The first, cheap look after a call: whether its process group still has a
/// member, what is still in its cgroup, and which orphans were re-parented to us.
struct Remains {
    group_alive: bool,
    in_cgroup: Vec<i32>,
    strays: Vec<i32>,
}

impl Remains {
    fn of(call: &Tracked) -> Remains {
        Remains {
            group_alive: killpg(Pid::from_raw(call.pgid), None).is_ok(),
            in_cgroup: call.cgroup.as_ref().map(|c| c.pids()).unwrap_or_default(),
            strays: unexpected_children(),
        }
    }

    /// Nothing at all is left: the usual case.
    fn nothing(&self) -> bool {
        !self.group_alive && self.in_cgroup.is_empty() && self.strays.is_empty()
    }
}

/// Finds every process that belongs to `call` (see the module docs).
/// Zombies are included (they must be reaped) but not reported as leftovers.
fn members(call: &Tracked) -> Vec<Proc> {
    let pgid = call.pgid;
    let remains = Remains::of(call);
    if remains.nothing() {
        return Vec::new();
    }
    if !remains.group_alive && remains.in_cgroup.is_empty() {
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
    let others: Vec<LiveCall> = process_wide::live_calls()
        .into_iter()
        .filter(|c| c.leader != pgid)
        .collect();
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
        // Still in the process group of another call not yet swept: that
        // call's, even when both were started with the same environment
        // (identical concurrent requests).
        let in_another_call = p.pgid != pgid && others.iter().any(|c| c.leader == p.pgid);
        let orphan_of_call = p.ppid == me
            && remains.strays.contains(&p.pid)
            && !in_another_call
            && claims_stray(call, p, &others);
        if p.pgid == pgid || orphan_of_call || remains.in_cgroup.contains(&p.pid) {
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

/// Whether `call` claims `p`, an orphan re-parented to us that is in no
/// live call's process group. Every such orphan descends from some call (this
/// process starts nothing else that leaves its process group), whatever
/// cgroup it moved to: it is this call's when it has this call's environment;
/// else unless it is in the cgroup of another live call, has another live
/// call's environment (without cgroups, as an unprivileged user, the one mark
/// of whose it is: a daemon of a neighbour, not swept yet, was named under a
/// failed create and failed `failure.clean`), or could only be another live
/// call's (born before this call started, while another was live). So each
/// is claimed by some sweep, at the latest by the last call's; with several
/// calls at once, one that changed its environment and was born while both
/// ran may be named under the other.
fn claims_stray(call: &Tracked, p: &Proc, others: &[LiveCall]) -> bool {
    if p.zombie || environ_matches(p.pid, &call.env) {
        return true;
    }
    // Still in our own process group: a child this process started itself
    // (a test's own command), not a plugin's.
    if p.pgid == nix::unistd::getpgrp().as_raw() {
        return false;
    }
    let held =
        cgroup_path(p.pid).is_some_and(|rel| in_other_live_call(&rel, call.cgroup.as_deref()));
    if held || others.iter().any(|o| environ_matches(p.pid, &o.env)) {
        return false;
    }
    // Start times have a tick's resolution: one tick of slack.
    let born_in_call = p.started + 1 >= call.started;
    born_in_call || others.iter().all(|o| o.started > p.started + 1)
}

/// [`members`], with every live one stopped (SIGSTOP) and the table read
/// again until no new one appears: a stopped process forks no more, and a
/// child it started just before is seen on the next read, before its
/// parent is killed and its ancestry lost.
fn members_stopped(call: &Tracked) -> Vec<Proc> {
    let mut stopped: BTreeSet<i32> = BTreeSet::new();
    let mut procs = Vec::new();
    // Bounded: a fork bomb that outruns the reads is still killed as a whole
    // by its cgroup, and its group.
    for _ in 0..16 {
        procs = members(call);
        let fresh: Vec<i32> = procs
            .iter()
            .filter(|p| !p.zombie && !stopped.contains(&p.pid))
            .map(|p| p.pid)
            .collect();
        if fresh.is_empty() {
            break;
        }
        // A member tracing us is killed, never stopped: stopped, it would
        // hold every traced thread of ours, this one too, for good.
        let tracer = super::procfs::tracer();
        for pid in fresh {
            match tracer == Some(pid) {
                true => super::cgroup_capture::kill_tracer(pid, Some(&call.interruptions), None),
                false => signal_one(pid, Signal::SIGSTOP),
            }
            stopped.insert(pid);
        }
    }
    procs
}

/// The pids of every process of `call`, for a kill.
pub(crate) fn member_pids(call: &Tracked) -> Vec<i32> {
    members(call).into_iter().map(|p| p.pid).collect()
}

/// Finds, records, kills and reaps everything `call` left behind, and removes
/// its cgroup. `inodes` gives the call's stdout/stderr pipe inodes, to tell
/// who held them (asked only when something is left).
pub(crate) async fn sweep(call: &Tracked, inodes: impl FnOnce() -> Vec<u64>) -> Vec<Leftover> {
    // Cheap test first, on this thread: usually nothing is left at all.
    if Remains::of(call).nothing() && call.cgroup.as_ref().is_none_or(|c| c.clear()) {
        return Vec::new();
    }
    // The harness among what is left: a plugin moved it into its cgroup.
    super::cgroup_capture::come_home();
    let pgid = call.pgid;
    // Walking /proc blocks: keep it off the async workers, which are timing
    // other plugins' calls (on this thread when no other can be started).
    let (tracked, inodes) = (call.clone(), inodes());
    let found = crate::exec::helper_thread::off_thread("dhv-sweep", move || {
        let procs = members_stopped(&tracked);
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
    let pids: Vec<i32> = match &found {
        Some((procs, _)) => procs.iter().map(|p| p.pid).collect(),
        None => Vec::new(),
    };
    kill_and_reap(call, &pids).await;
    found.map(|(_, leftovers)| leftovers).unwrap_or_default()
}

/// SIGKILLs the group, the cgroup and each pid, then reaps the ones that end
/// up as our children and removes the cgroup. Bounded: a process we cannot
/// reap within a second is left to init (and its cgroup in place).
async fn kill_and_reap(call: &Tracked, pids: &[i32]) {
    kill_everything(call, pids);
    let mut pending: Vec<i32> = pids.to_vec();
    let mut removed = call.cgroup.is_none();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    // Killed processes become zombies at once, but one whose parent is also being
    // killed is only re-parented to us a moment later: retry briefly.
    loop {
        pending.retain(|&pid| !reap_if_ours(pid));
        removed = removed || call.cgroup.as_ref().is_none_or(|c| c.clear());
        if (pending.is_empty() && removed) || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// SIGKILLs `call`'s group, its cgroup and `pids`; each of `pids` that a
/// plugin put in a v1 freezer cgroup of its own is moved out first (frozen
/// there, it would not die of the kill, see `cgroup_v1::free_from_freezer`).
fn kill_everything(call: &Tracked, pids: &[i32]) {
    for &pid in pids {
        super::cgroup_v1::free_from_freezer(pid);
    }
    signal_group(call.pgid, Signal::SIGKILL);
    if let Some(cgroup) = &call.cgroup {
        cgroup.kill();
    }
    for &pid in pids {
        signal_one(pid, Signal::SIGKILL);
    }
}

/// Returns true when `pid` is gone for good (reaped by us, or by its own parent).
fn reap_if_ours(pid: i32) -> bool {
    // With no spawn in flight, a leader that re-used the pid is recorded.
    let _settled = process_wide::settled();
    if process_wide::leaders().contains(pid) {
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
/// on a helper thread so the caller never blocks. `release` (the owning
/// supervisor forgetting the call) runs on that thread once the leader is reaped;
/// taking it as a closure keeps the sweep from depending on the supervisor.
pub(crate) fn sweep_detached(
    call: Tracked,
    leader_reaped: bool,
    release: impl FnOnce() + Send + 'static,
) {
    let pgid = call.pgid;
    let procs = members_stopped(&call);
    let others: Vec<i32> = procs.iter().map(|p| p.pid).filter(|&p| p != pgid).collect();
    kill_everything(&call, &others);
    if !leader_reaped {
        signal_one(pgid, Signal::SIGKILL);
    }
    // Where no thread can be had (a fork bomb took every task of a cap above
    // us), the reaping is done here: bounded, as on its thread.
    crate::exec::helper_thread::spawn_or_run("dhv-reap", move || {
        if !leader_reaped {
            reap_blocking(pgid);
        }
        process_wide::forget_leader(pgid);
        release();
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        let mut pending = others;
        let mut removed = call.cgroup.is_none();
        while !(pending.is_empty() && removed) && std::time::Instant::now() < deadline {
            pending.retain(|&pid| !reap_if_ours(pid));
            removed = removed || call.cgroup.as_ref().is_none_or(|c| c.clear());
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    fn env(volume: &str) -> EnvBlock {
        super::super::spawn::env_block(&[
            ("DHV_OPERATION".into(), "create".into()),
            ("DHV_VOLUME_ID".into(), volume.into()),
        ])
        .unwrap()
    }

    fn call(env: EnvBlock, started: u64) -> Tracked {
        Tracked {
            pgid: -1,
            env,
            cgroup: None,
            started,
            interruptions: Interruptions::default(),
        }
    }

    /// Without cgroups (an unprivileged run) a daemon is known by the
    /// environment it inherited: one with another live call's is that call's,
    /// even when it was born while this call ran.
    #[test]
    fn a_stray_with_another_live_calls_environment_is_that_calls() {
        let (mine, theirs) = (env("mine"), env("theirs"));
        let before = super::super::procfs::boot_ticks().saturating_sub(1);
        // A daemon in a group of its own, started with the other call's
        // environment while both calls are live.
        let mut daemon = std::process::Command::new("sleep")
            .arg("1011.1")
            .env_clear()
            .envs([("DHV_OPERATION", "create"), ("DHV_VOLUME_ID", "theirs")])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = daemon.id() as i32;
        // Its environment is its own once it has run its program.
        let bound = std::time::Instant::now() + Duration::from_secs(10);
        while !environ_matches(pid, &theirs) && std::time::Instant::now() < bound {
            std::thread::sleep(Duration::from_millis(2));
        }
        let p = read_stat(pid).expect("the daemon runs");
        let other = LiveCall {
            leader: -2,
            started: before,
            env: theirs.clone(),
        };
        let others = [other.clone()];
        let claimed_by_mine = claims_stray(&call(mine.clone(), before), &p, &others);
        let claimed_by_theirs = claims_stray(&call(theirs, before), &p, &[]);
        // With no live call of that environment, it is claimed as before: born
        // while this call ran.
        let claimed_alone = claims_stray(&call(mine, before), &p, &[]);
        let _ = daemon.kill();
        let _ = daemon.wait();
        assert!(!claimed_by_mine, "another live call's daemon was claimed");
        assert!(claimed_by_theirs, "a call did not claim its own daemon");
        assert!(claimed_alone, "an orphan born in the call was not claimed");
    }
}
