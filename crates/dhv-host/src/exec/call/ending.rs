//! The steps of a call's end: the killing of a leader that overran its time
//! limit, the wait-delay, and the sweep of whatever is left.

use std::pin::Pin;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::Sleep;

use super::super::capture::drain_until;
use super::super::os;
use super::super::signal::{signal_group, signal_one};
use super::super::{Call, KillMode};
use super::{Holding, KILLED_LOOK, Started, held_after_the_sweep, kept_open, pipe_inodes};

/// How far the killing of a leader that overran its time limit has gone.
#[derive(Debug, Default)]
pub(super) struct Killing {
    /// The time limit ran out.
    pub(super) timed_out: bool,
    /// The SIGTERM was sent: the SIGKILL follows when the grace runs out.
    pub(super) kill_pending: bool,
    /// The SIGKILL was sent: a leader still there is looked at again.
    pub(super) killed: bool,
}

impl Killing {
    /// The SIGKILL was sent: the leader is looked at again if it is still there
    /// after [`KILLED_LOOK`].
    pub(super) fn sigkill_sent(&mut self, killed_look: Pin<&mut Sleep>) {
        self.killed = true;
        killed_look.reset(tokio::time::Instant::now() + KILLED_LOOK);
    }
}

impl Call {
    /// The time limit ran out: the leader, or its group, is signalled as the
    /// call's kill mode says; `kill` is armed when a SIGTERM's grace runs.
    pub(super) fn overrun(
        &self,
        pid: i32,
        killing: &mut Killing,
        kill: Pin<&mut Sleep>,
        killed_look: Pin<&mut Sleep>,
    ) {
        killing.timed_out = true;
        match self.kill_mode {
            KillMode::Group => {
                signal_group(pid, Signal::SIGTERM);
                kill.reset(tokio::time::Instant::now() + self.term_grace);
                killing.kill_pending = true;
            }
            KillMode::NomadLeader => signal_one(pid, Signal::SIGKILL),
            KillMode::GroupKill => signal_group(pid, Signal::SIGKILL),
        }
        if !killing.kill_pending {
            killing.sigkill_sent(killed_look);
        }
    }

    /// Phase 2, the wait-delay: whether the pipes, when still open after it,
    /// are kept by a holder, and the following of a holder that kept them.
    pub(super) async fn through_wait_delay(&self, call: &mut Started) -> Holding {
        let (out, err) = (&mut call.out, &mut call.err);
        // Both pipes at EOF means nobody holds them; usually they already
        // are, and no timer is armed at all.
        drain_until(out, err, self.wait_delay).await;
        let open_after_delay = !(out.eof && err.eof);
        let kept = match open_after_delay {
            true => kept_open(&call.call, out, err, self.wait_delay).await,
            false => Holding::Closed,
        };
        // A holder that kept a pipe is a leak, whether or not it closes while
        // we follow it.
        if kept == Holding::Kept && !self.follow.is_zero() {
            drain_until(out, err, self.follow).await;
        }
        kept
    }
}

/// Phase 3: finds, records, kills and reaps whatever is left of the call;
/// returns the leftovers and whether the call's pipes leaked.
pub(super) async fn sweep_leftovers(
    call: &mut Started,
    kept: Holding,
) -> (Vec<os::Leftover>, bool) {
    let (out, err) = (&mut call.out, &mut call.err);
    let leftovers = os::sweep(&call.call, || pipe_inodes(out, err)).await;
    call.guard.done = true;
    os::forget_leader(call.pid);
    call.guard.supervisor.release(call.pid);
    // With the holders dead the pipes close; a holder we could not attribute
    // must not hang us, so this wait is bounded too.
    drain_until(out, err, Duration::from_secs(1)).await;
    // A leak is a pipe held past the wait-delay by someone: a leftover seen
    // holding it, or a holder we could not find (the pipe never closed). A
    // pipe that was merely read late on a loaded machine is not one.
    let leaked = match kept {
        Holding::Closed => false,
        Holding::Kept => true,
        Holding::Unseen => {
            leftovers.iter().any(|l| l.held_stdio) || held_after_the_sweep(out, err).await
        }
    };
    (leftovers, leaked)
}
