//! The Linux side of the runner (mounted as `exec::os`), behind one facade:
//! everything here is
//! Linux-only (`clone3` with `CLONE_INTO_CGROUP`, cgroup v2, `/proc`,
//! pidfds, `PR_SET_CHILD_SUBREAPER`); what is outside it in `exec`
//! (`call.rs`, `capture.rs`, `supervisor.rs`, `signal.rs`, `tool.rs`,
//! `wait_status.rs`) is plain POSIX and uses only the items re-exported
//! below.
//!
//! What another OS would have to provide, the whole facade:
//! - [`start_leader`]: start a leader in a process group of its own, with
//!   exactly the given environment (in order), stdin `/dev/null` and the
//!   parent's ends of its stdout and stderr pipes, and say how to find its
//!   processes again ([`Tracked`]); [`ensure_subreaper`] once before;
//! - [`pidfd`], [`wait_exit`], [`try_reap`]: wait for the leader without
//!   blocking a thread, and reap it;
//! - [`Tracked::cpu_wait`], [`Tracked::kill_all`]: the time the call waited
//!   for a CPU (or `None`), and a kill of every process of the call at once;
//! - [`pipe_inode`], [`pipe_holders`]: which processes of the call still hold
//!   its pipes, and what each is doing ([`Activity`]); [`holders`]: who
//!   outside the harness (and its own clones) holds a file or pipe;
//!   [`device_holders`], [`wait_let_go`]: who keeps a device busy, and whose
//!   each is ([`HolderKind`]);
//! - [`sweep`](fn@sweep), [`sweep_detached`]: find, record ([`Leftover`]), kill and
//!   reap whatever the call left behind, awaited or from a dropped future;
//!   [`forget_leader`] once the leader is reaped;
//! - [`process_start_time`], [`env_block`], [`remove_dead_run_cgroups`],
//!   [`NO_CGROUP_VAR`]: the crate-wide helpers `exec` exports;
//! - [`cpu_use`]: the CPU this process and its calls have used, and waited
//!   for, so far;
//! - [`Interruptions`]: what a plugin did to capture the harness (moved it,
//!   froze its calls, traced it), said to the run it concerns.
//!
//! There is no port: `exec/mod.rs` stops a build for any other target with
//! a `compile_error!` naming this facade, rather than a stub that would run
//! plugins without the guarantees the module docs promise. A port is a
//! module of its own with the same items, mounted as `os` under its own
//! `#[cfg(target_os = …)]` beside this one's. (`safe_fs`, with
//! its loop devices and `mountinfo`, is Linux-only too, on its own.)

mod cgroup;
mod cgroup_capture;
mod cgroup_limits;
mod cgroup_pool;
mod cgroup_run;
mod cgroup_tree;
mod cgroup_v1;
mod clone_spawn;
mod device_holders;
mod hold;
mod hold_filter;
mod hold_notice;
mod hold_progress;
mod holders;
mod process_wide;
mod procfs;
mod seccomp;
mod spawn;
mod sweep;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub(crate) use cgroup_capture::Interruptions;
pub use cgroup_limits::{CallLimits, set_call_limits};
pub use cgroup_run::{NO_CGROUP_VAR, remove_dead_run_cgroups};
pub(crate) use cgroup_v1::free_from_freezer;
pub use device_holders::{DeviceHolder, HeldDevice, HolderKind, device_holders, wait_let_go};
pub(crate) use hold::{HeldCall, can_hold, serve as serve_holds};
pub(crate) use hold_progress::{Progress, progress};
pub use holders::Holder;
pub(crate) use holders::harness_holds;
pub use holders::{holders, kill_holders};
pub(crate) use process_wide::{ensure_subreaper, forget_leader};
pub(crate) use procfs::{Activity, thread_cpu_wait};
pub(crate) use spawn::{EnvBlock, Spawned, env_block, pidfd, pipe_inode, try_reap, wait_exit};
pub use sweep::Leftover;
pub(crate) use sweep::{Tracked, sweep, sweep_detached};

use cgroup::CallCgroup;

/// When process `pid` started (clock ticks since boot), or `None` when it is
/// gone (a zombie counts as gone).
pub(crate) fn process_start_time(pid: i32) -> Option<u64> {
    procfs::read_stat(pid)
        .filter(|p| !p.zombie)
        .map(|p| p.started)
}

/// The CPU time this process and every plugin call it ran have used so far,
/// and the time those calls waited for a CPU: the run cgroup's counters
/// where there is one (a call still running counts), else the CPU of the
/// reaped children (a call counts once it has ended) and no wait.
pub(crate) fn cpu_use() -> super::CpuUse {
    let own = procfs::clock(libc::CLOCK_PROCESS_CPUTIME_ID);
    let (calls, waited) = cgroup_run::run_cpu().unwrap_or_else(|| (reaped_children_cpu(), None));
    super::CpuUse {
        used: own + calls,
        waited,
    }
}

/// The user and system time of this process's reaped children.
fn reaped_children_cpu() -> std::time::Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage that outlives the call.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return std::time::Duration::ZERO;
    }
    let time =
        |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, 1000 * t.tv_usec as u32);
    time(u.ru_utime) + time(u.ru_stime)
}

/// Starts a leader running `program` (told it is `argv0`) with `args`, `env`
/// and `cwd`, born in a cgroup of its own where the machine gives one, and
/// registers it as a leader of this process: how to track the call, the
/// leader with its pipes, and when it started. Call under the supervisor's
/// lock ([`Supervisor::admit`](super::Supervisor::admit)).
/// With `refuse`, the call's processes are refused those system calls
/// ([`Call::refuse`](super::Call::refuse)); with `hold`, their changes of
/// state (and with `Some(true)` their process starts) notify us
/// ([`Spawned::listener`], see [`serve_holds`]). What the plugin does to
/// capture the harness is said to `interruptions` (its run's), and kept
/// as this call's doing ([`Tracked::touched_harness`]).
pub(crate) fn start_leader(
    (program, argv0): (&Path, &Path),
    args: &[OsString],
    env: &EnvBlock,
    cwd: Option<&Path>,
    refuse: Option<super::Refusal>,
    hold: Option<bool>,
    interruptions: &Interruptions,
) -> std::io::Result<(Tracked, (Spawned, Instant))> {
    let interruptions = &interruptions.for_a_call();
    let cgroup = CallCgroup::create(interruptions);
    let in_flight = process_wide::spawn_in_flight();
    let before = Instant::now();
    let started = procfs::boot_ticks();
    let spawn = || {
        let with = spawn::StartWith {
            cwd,
            cgroup: cgroup.as_ref().map(CallCgroup::fd),
            v1_procs: cgroup.as_ref().map_or([-1; 2], CallCgroup::v1_procs),
            refuse,
            hold,
        };
        spawn::spawn((program, argv0), args, env, with)
    };
    let spawned = match spawn() {
        // A plugin may have moved the harness into a cgroup where it cannot
        // fork (a `pids.max` of its own): back home (said as the run's
        // interruption), the call starts after all.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && cgroup_capture::come_home() => spawn(),
        started => started,
    }?;
    // The plugin's time starts at its exec, which the clone's child reads
    // after every step of ours: its moves into v1 cgroups wait on the
    // kernel's locks, for far longer than a call's limit on a host busy
    // with other runs' moves, and are the harness's cost, not the plugin's
    // (Nomad's own fork and exec take a millisecond).
    let start = spawned.executed_at.unwrap_or(before);
    in_flight.recorded(spawned.pid, started, EnvBlock::clone(env));
    let call = Tracked {
        pgid: spawned.pid,
        env: EnvBlock::clone(env),
        cgroup: cgroup.filter(|_| spawned.in_cgroup).map(Arc::new),
        started,
        interruptions: interruptions.clone(),
    };
    Ok((call, (spawned, start)))
}

/// Whether a call can be refused system calls here ([`Call::refuse`](super::Call::refuse)):
/// on x86-64, where `clone3` may be used (the child installs the filter;
/// no cgroup is needed, nor root: `no_new_privs` lets anyone install one).
pub fn can_refuse() -> bool {
    seccomp::filter(super::Refusal::Mounts).is_some() && clone_spawn::clone3_usable()
}

/// The processes of `call` that hold a pipe of one of these `inodes`, each with
/// what it is doing.
pub(crate) fn pipe_holders(call: &Tracked, inodes: &[u64]) -> Vec<(i32, Activity)> {
    sweep::member_pids(call)
        .into_iter()
        .filter(|&pid| procfs::holds_pipe(pid, inodes))
        .filter_map(|pid| Some((pid, procfs::activity(pid)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd as _;
    use std::time::{Duration, Instant};

    /// A pipe only the harness holds has no holder; once a child has become
    /// another program holding it, that child is one (before its exec, the
    /// child is the harness's own clone, and does not count).
    #[test]
    fn a_pipe_is_held_outside_the_harness_only_by_another_program() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let st = nix::sys::stat::fstat(r.as_fd()).unwrap();
        let id = [(st.st_dev, st.st_ino)];
        assert!(super::holders(&id).is_empty());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdout(std::process::Stdio::from(w))
            .spawn()
            .unwrap();
        let bound = Instant::now() + Duration::from_secs(10);
        let mut held = false;
        while !held && Instant::now() < bound {
            held = super::holders(&id) == vec![child.id() as i32];
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(held, "a sleep holding the pipe was never seen");
        assert!(super::holders(&id).is_empty());
    }
}
