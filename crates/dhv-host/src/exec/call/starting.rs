//! The steps of `Call::start`: the leader started under the supervisor, its
//! held system calls answered, its exit and its pipes made ready to wait on.

use std::os::fd::OwnedFd;
use std::time::Instant;

use tokio::io::unix::AsyncFd;

use super::super::capture::Capture;
use super::super::os::{self, Tracked};
use super::super::supervisor::{OutputBudget, Supervisor};
use super::super::{AtChanges, Call, SpawnError};
use super::{AbortOnDrop, Seen};

impl Call {
    /// Starts the leader, to be held at its changes when the call watches them.
    pub(super) fn start_leader(
        &self,
        env: &os::EnvBlock,
        supervisor: &Supervisor,
    ) -> std::io::Result<(Tracked, (os::Spawned, Instant))> {
        let argv0 = self.arg0.as_deref().unwrap_or(&self.program);
        let program = (self.program.as_path(), argv0);
        // A burst is held at changes of state only, and what is
        // made in or outside a dir is names only; a crash point or a
        // record counts process starts too.
        let hold = self.at_changes.as_ref().map(|w| {
            !matches!(
                w,
                AtChanges::Hold(_) | AtChanges::RecordOutside(_) | AtChanges::RecordMade(_)
            )
        });
        os::start_leader(
            program,
            &self.args,
            env,
            self.cwd.as_deref(),
            self.refuse,
            hold,
            supervisor.interruptions(),
        )
    }

    /// The task that answers the call's held system calls, when the call
    /// watches its changes and the leader was started with a listener.
    pub(super) fn serve_holds(
        &self,
        call: &Tracked,
        listener: Option<OwnedFd>,
    ) -> Option<(AbortOnDrop, Seen)> {
        // The seat is taken whether or not the call can be held, so that a
        // call that runs unheld is counted as arrived when it ends.
        let seat = match &self.at_changes {
            Some(AtChanges::Hold(r)) => Some(r.take_seat(Some(call.clone()))),
            _ => None,
        };
        match (self.at_changes.clone(), listener) {
            (Some(watch), Some(listener)) => {
                let seen = Seen::default();
                let tracked = call.clone();
                let kill = move || tracked.kill_all();
                let task = tokio::spawn(os::serve_holds(listener, watch, seat, seen.clone(), kill));
                Some((AbortOnDrop(task), seen))
            }
            _ => None,
        }
    }

    /// The leader's pidfd, registered with the runtime to wait for its exit.
    pub(super) fn exit_fd(&self, pid: i32) -> Result<AsyncFd<OwnedFd>, SpawnError> {
        let exit_fd = os::pidfd(pid).map_err(|e| self.spawn_error(e))?;
        // SAFETY: the AsyncFd owns the OwnedFd, so the descriptor stays open and
        // the same for the AsyncFd's whole life.
        unsafe { AsyncFd::register_with_interest(exit_fd, tokio::io::Interest::READABLE) }
            .map_err(|e| self.spawn_error(e.into()))
    }

    /// The readers of the leader's stdout and stderr, within the call's caps
    /// and the supervisor's output `budget`.
    pub(super) fn captures(
        &self,
        (stdout, stderr): (OwnedFd, OwnedFd),
        budget: OutputBudget,
    ) -> Result<(Capture, Capture), SpawnError> {
        // Both pipes are read right here, in the same loop that waits for the
        // exit and the timers: no task per pipe, no hand-off between threads.
        let out_cap = self.stdout_cap.unwrap_or(self.output_cap);
        let out = Capture::new(stdout, out_cap, budget.clone(), OutputBudget::FREE_STDOUT)
            .map_err(|e| self.spawn_error(e))?;
        let err = Capture::new(stderr, self.output_cap, budget, OutputBudget::FREE_STDERR)
            .map_err(|e| self.spawn_error(e))?;
        Ok((out, err))
    }
}
