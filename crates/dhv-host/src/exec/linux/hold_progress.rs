//! Whether a call of a held burst can still reach its first change of state
//! ([`progress`]): the Linux side of the rendezvous' release rule.
//!
//! A burst is let go as soon as no call of it can still arrive. A call that
//! ended, or has not started, is plain to see; one that runs but will not
//! arrive is one whose every process waits for something other than a CPU,
//! a timer or our answer to a change of state, and uses no CPU meanwhile: it
//! is blocked, typically on a lock that a call already held owns (a plugin
//! that takes a lock per volume). Waiting for it would wait on the harness
//! itself (the held call is ours to let go), so it is not waited for.

use std::time::Duration;

use super::hold_filter::KINDS;
use super::procfs::activity;
use super::sweep::{Tracked, member_pids};

/// What a running call of a burst is doing, seen once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Every live process of it sleeps (`S`) or is stopped, waiting on
    /// something that only another process can end (a lock, a pipe, a
    /// child that does so too), none of them on a timer, on our answer to a
    /// change of state, or in the kernel's own uninterruptible work.
    pub blocked: bool,
    /// The CPU its live processes have used so far.
    pub cpu: Duration,
}

/// What the processes of `call` are doing now.
pub(crate) fn progress(call: &Tracked) -> Progress {
    let mut blocked = true;
    let mut cpu = Duration::ZERO;
    let mut live = 0;
    for pid in member_pids(call) {
        let Some(a) = activity(pid) else { continue };
        if a.ended {
            continue;
        }
        live += 1;
        cpu += a.cpu;
        // Asleep, or stopped, and not on a timer nor on us: blocked. An
        // uninterruptible wait (`D`, a page read from a busy disk, say) is
        // the kernel's own work, which ends by itself: not blocked.
        if !a.waiting || waits_to_go_on(pid) {
            blocked = false;
        }
    }
    Progress {
        blocked: blocked && live > 0,
        cpu,
    }
}

/// Whether `pid` waits in a system call that ends on its own or by us: a
/// sleep (its timer ends it), or one the hold filter notifies (our answer
/// ends it: a change of state being looked at, not a lock).
fn waits_to_go_on(pid: i32) -> bool {
    let Some(nr) = current_syscall(pid) else {
        return false;
    };
    let sleeps = [libc::SYS_nanosleep, libc::SYS_clock_nanosleep];
    sleeps.contains(&nr) || KINDS.iter().any(|k| k.nr == nr)
}

/// The system call `pid` is blocked in (`/proc/PID/syscall`'s first field),
/// when it is blocked in one and we may read it.
fn current_syscall(pid: i32) -> Option<libc::c_long> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    text.split_ascii_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_goes_on_and_a_read_of_an_empty_pipe_does_not() {
        // A child blocked reading a pipe nobody writes: blocked. A child in
        // `sleep`: it goes on by itself.
        let mut reader = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let waiting = |pid: i32| {
            // Bounded wait for each to reach its wait (a fresh process runs first).
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < until {
                if current_syscall(pid).is_some_and(|nr| nr == libc::SYS_read)
                    || current_syscall(pid).is_some_and(|nr| {
                        [libc::SYS_nanosleep, libc::SYS_clock_nanosleep].contains(&nr)
                    })
                {
                    return true;
                }
                std::thread::yield_now();
            }
            false
        };
        let (r, s) = (reader.id() as i32, sleeper.id() as i32);
        assert!(waiting(r) && waiting(s), "both reached their wait");
        assert!(
            !waits_to_go_on(r),
            "a read of an empty pipe waits on another"
        );
        assert!(waits_to_go_on(s), "a sleep ends by itself");
        reader.kill().unwrap();
        sleeper.kill().unwrap();
        reader.wait().unwrap();
        sleeper.wait().unwrap();
    }
}
