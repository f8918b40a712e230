//! Signalling and reaping single processes and groups: the low-level leaf that
//! `call.rs` and, in `linux/`, `clone_spawn.rs`, the cgroups and the sweep all
//! use, so none of them has to import another for it.

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

/// Sends `sig` to every process of the group led by `pgid`.
pub(crate) fn signal_group(pgid: i32, sig: Signal) {
    let _ = killpg(Pid::from_raw(pgid), sig);
}

/// Sends `sig` to one process.
pub(crate) fn signal_one(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// Blocks until our child `pid` is reaped (used on a helper thread after SIGKILL).
pub(crate) fn reap_blocking(pid: i32) {
    loop {
        match waitpid(Pid::from_raw(pid), None) {
            Err(Errno::EINTR) => continue,
            _ => return,
        }
    }
}
