//! One call's lifecycle, in the order it happens: start under a supervisor,
//! wait for the leader (reading both pipes and enforcing the time limit in the
//! same loop), the wait-delay, then the sweep of whatever is left.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;

use super::capture::{Capture, drain_until};
use super::os::{self, Tracked};
use super::signal::{signal_group, signal_one};
use super::supervisor::Supervisor;
use super::{Call, ExitReason, Outcome, SpawnError};

mod ending;
mod starting;

use ending::{Killing, sweep_leftovers};

/// A started call: the leader, its pipes, and the guard that cleans up after
/// it whatever happens to the future running it.
struct Started {
    pid: i32,
    call: Tracked,
    start: Instant,
    exit_fd: AsyncFd<std::os::fd::OwnedFd>,
    out: Capture,
    err: Capture,
    guard: CallGuard,
    /// Answers the call's held system calls while it lasts (see `hold`);
    /// aborted when the call ends.
    holds: Option<(AbortOnDrop, Seen)>,
}

/// What was seen of a call's changes, filled in by the task that answers them.
type Seen = super::rendezvous::SeenSlot;

/// A task aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Call {
    /// Runs the call to completion (see the module docs for every step), under
    /// its supervisor, or under a fresh one of its own when none was given.
    pub async fn run(&self) -> Result<Outcome, SpawnError> {
        let supervisor = self.supervisor.clone().unwrap_or_default();
        // A mount a plugin put over the run's dirs is gone before the next
        // call starts (its own thread is quicker still; see `guard_mounts`).
        supervisor.look_at_mounts();
        let ours_before = os::thread_cpu_wait();
        let looks = supervisor.clone();
        let mut call = self.start(supervisor)?;
        let (exit, timed_out) = self.wait_leader(&mut call).await;
        let duration = call.start.elapsed();
        let cpu_wait = call
            .call
            .cpu_wait()
            .map(|plugin| plugin + ours_waited(ours_before, os::thread_cpu_wait()));
        call.guard.leader_reaped = true;
        let tracked = call.call.clone();
        let mut outcome = self.finish(call, exit, timed_out, duration).await;
        outcome.cpu_wait = cpu_wait;
        // After the sweep: a leftover that hit a limit before it was killed counts.
        outcome.limits_reached = tracked.limits_reached();
        // After the sweep too: its sweep is where a capture is first seen.
        outcome.touched_harness = tracked.touched_harness();
        // And after it: a mount made by this call is gone before the call
        // is judged or another starts.
        looks.look_at_mounts();
        Ok(outcome)
    }

    fn spawn_error(&self, source: std::io::Error) -> SpawnError {
        SpawnError {
            program: self.program.clone(),
            source,
        }
    }

    /// Spawns the leader and registers it with the supervisor and as a child
    /// of this process, atomically with respect to a cancel and to a reap.
    fn start(&self, supervisor: Supervisor) -> Result<Started, SpawnError> {
        os::ensure_subreaper();
        let env = os::env_block(&self.env).map_err(|e| self.spawn_error(e))?;
        let (call, (spawned, start)) = supervisor
            .admit(|| self.start_leader(&env, &supervisor))
            .map_err(|e| self.spawn_error(e))?;
        let holds = self.serve_holds(&call, spawned.listener);
        let pid = call.pgid;
        let guard = CallGuard {
            supervisor,
            call: call.clone(),
            done: false,
            leader_reaped: false,
        };
        let exit_fd = self.exit_fd(pid)?;
        let (out, err) = self.captures(
            (spawned.stdout, spawned.stderr),
            guard.supervisor.output_budget(),
        )?;
        Ok(Started {
            pid,
            call,
            start,
            exit_fd,
            out,
            err,
            guard,
            holds,
        })
    }

    /// Phase 1: until the leader exits (or is killed for overrunning). Returns
    /// its wait status and whether it timed out.
    async fn wait_leader(&self, call: &mut Started) -> (ExitReason, bool) {
        let pid = call.pid;
        let exited = os::wait_exit(pid, &call.exit_fd);
        tokio::pin!(exited);
        let deadline = self
            .timeout
            .map(|t| tokio::time::Instant::from_std(call.start + t));
        let overrun = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now));
        tokio::pin!(overrun);
        let kill = tokio::time::sleep(self.term_grace);
        tokio::pin!(kill);
        // Once the SIGKILL is sent: a leader that still has not exited is
        // looked at (see `os::free_from_freezer`) and killed again.
        let killed_look = tokio::time::sleep(KILLED_LOOK);
        tokio::pin!(killed_look);
        let mut killing = Killing::default();
        let (out, err) = (&mut call.out, &mut call.err);
        let status = loop {
            tokio::select! {
                status = &mut exited => {
                    // The leader's descriptors closed before it became a
                    // zombie: unless something else holds them, the pipes
                    // are at EOF already, and no wake-up is spent on them.
                    out.read_now();
                    err.read_now();
                    break status;
                }
                ready = out.pipe.readable(), if !out.eof => {
                    out.read_ready(ready);
                    if let Some(status) = ended_with(out, err, pid) {
                        break status;
                    }
                }
                ready = err.pipe.readable(), if !err.eof => {
                    err.read_ready(ready);
                    if let Some(status) = ended_with(err, out, pid) {
                        break status;
                    }
                }
                _ = &mut overrun, if deadline.is_some() && !killing.timed_out => {
                    self.overrun(pid, &mut killing, kill.as_mut(), killed_look.as_mut());
                }
                _ = &mut kill, if killing.kill_pending => {
                    signal_group(pid, Signal::SIGKILL);
                    killing.kill_pending = false;
                    killing.sigkill_sent(killed_look.as_mut());
                }
                _ = &mut killed_look, if killing.killed => {
                    // Frozen in a v1 freezer cgroup by its plugin, a killed
                    // leader never exits: moved out, it thaws and dies.
                    os::free_from_freezer(pid);
                    signal_one(pid, Signal::SIGKILL);
                    killed_look.as_mut().reset(tokio::time::Instant::now() + KILLED_LOOK);
                }
            }
        };
        (status, killing.timed_out)
    }

    /// Phases 2 and 3: the wait-delay, then find, record, kill and reap
    /// whatever is left.
    async fn finish(
        &self,
        mut call: Started,
        exit: ExitReason,
        timed_out: bool,
        duration: Duration,
    ) -> Outcome {
        let kept = self.through_wait_delay(&mut call).await;
        let exited_at = call.start + duration;
        let closed_after_exit = (call.out.eof && call.err.eof).then(|| exited_at.elapsed());
        let (leftovers, leaked) = sweep_leftovers(&mut call, kept).await;
        let (out, err) = (&mut call.out, &mut call.err);
        // Every process of the call is gone: its holds are over.
        let seen = call
            .holds
            .take()
            .map(|(_task, seen)| std::mem::take(&mut *crate::sync::lock(&seen)))
            .unwrap_or_default();
        Outcome {
            exit,
            // Kept for the run: no spare capacity from the buffers' growth.
            stdout: shrunk(std::mem::take(&mut out.kept)),
            stderr: shrunk(std::mem::take(&mut err.kept)),
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            stdout_len: out.total,
            stderr_len: err.total,
            closed_after_exit,
            timed_out,
            leaked,
            leftovers,
            duration,
            cpu_wait: None,
            limits_reached: None,
            touched_harness: None,
            pid: call.pid as u32,
            held: seen.held,
            changes: seen.changes,
            killed_at_change: seen.killed,
        }
    }
}

/// After a read of `this` pipe: when it reached EOF, the leader is likely
/// exiting (a process's descriptors close as it exits), so the `other` pipe
/// is read and the leader reaped if it is done, without waiting for the
/// event loop to report either: one wake-up for what would take three.
fn ended_with(this: &Capture, other: &mut Capture, pid: i32) -> Option<ExitReason> {
    if !this.eof {
        return None;
    }
    other.read_now();
    os::try_reap(pid)
}

/// What the thread that started a call and saw it end waited for a CPU in
/// between: on a busy host, the end of a call is seen late by as much, and
/// that is the host's doing, not the plugin's. Nothing when the call's future
/// moved to another thread (a runtime of several) or the kernel keeps no
/// scheduler statistics.
fn ours_waited(before: Option<(i32, Duration)>, after: Option<(i32, Duration)>) -> Duration {
    match (before, after) {
        (Some((tid, was)), Some((same, now))) if tid == same => now.saturating_sub(was),
        _ => Duration::ZERO,
    }
}

/// How a call's pipes, still open after the wait-delay, came to be closed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holding {
    /// Every holder let go on its own while still on its way (runnable, having
    /// used less CPU than the wait-delay): a shell between its fork and its
    /// redirection on a loaded host, say. Not a leak.
    Closed,
    /// A holder was seen keeping a pipe: waiting for something (asleep or
    /// stopped) two looks in a row, having run longer than the wait-delay,
    /// stuck in an uninterruptible wait at the bound, or still only runnable
    /// at the far bound.
    Kept,
    /// No process of the call could be seen holding a pipe that is open: the
    /// sweep and the pipes' state decide.
    Unseen,
}

/// How long after its SIGKILL a leader that has not exited is looked at
/// again (and again at this pace): a killed process normally exits at once.
const KILLED_LOOK: Duration = Duration::from_millis(500);

/// How often the holders of a pipe left open after the wait-delay are looked
/// at, and for how long at most. Waiting for a CPU is not holding: on a loaded
/// host a shell's background child can wait longer than the wait-delay to run
/// the redirection that lets go of stdout, and that is the host's doing, not
/// the plugin's. So [`HOLDER_BOUND`] ends the looks only when the last look
/// saw no holder (the sweep decides) or one stuck in an uninterruptible wait;
/// holders that are only runnable are given until [`RUNNABLE_BOUND`], a bound
/// still, so that no call holds up the run for good.
const HOLDER_LOOK: Duration = Duration::from_millis(5);
const HOLDER_BOUND: Duration = Duration::from_secs(5);
const RUNNABLE_BOUND: Duration = Duration::from_secs(60);

/// Tells a holder keeping a call's pipe open from one still on its way to
/// letting go, by what the holder does rather than by the time it took: a
/// holder waiting for something while it holds the pipe (seen asleep or
/// stopped twice in a row), or one that used more CPU than the wait-delay,
/// keeps it; one that is only waiting for a CPU is given it.
async fn kept_open(
    call: &Tracked,
    out: &mut Capture,
    err: &mut Capture,
    wait_delay: Duration,
) -> Holding {
    let start = Instant::now();
    let mut asleep: Vec<i32> = Vec::new();
    let mut unseen = 0;
    loop {
        if out.eof && err.eof {
            return Holding::Closed;
        }
        let holders = os::pipe_holders(call, &pipe_inodes(out, err));
        if holders.is_empty() {
            // Gone between the read and the look, or out of sight: three
            // looks in a row without one decide.
            unseen += 1;
            if unseen >= 3 {
                return Holding::Unseen;
            }
        } else {
            unseen = 0;
        }
        let was_asleep = std::mem::take(&mut asleep);
        if keeps(&holders, &was_asleep, wait_delay, &mut asleep) {
            return Holding::Kept;
        }
        if let Some(decided) = at_the_bound(&holders, start.elapsed()) {
            return decided;
        }
        drain_until(out, err, HOLDER_LOOK).await;
    }
}

/// Whether a call's pipe, open with no process of the call seen holding it
/// and its leftovers swept, is held by someone who keeps it for the plugin: a
/// process outside the harness (a daemon that left the call's cgroup and
/// group), or, at the bound, a holder out of sight. A pipe held only by the
/// harness's own (a neighbour call's clone before its exec, which on a loaded
/// host may wait long for a CPU) is let go and is no leak.
async fn held_after_the_sweep(out: &mut Capture, err: &mut Capture) -> bool {
    let bound = Instant::now() + HOLDER_BOUND;
    loop {
        if out.eof && err.eof {
            return false;
        }
        let ids = pipe_ids(out, err);
        if !os::holders(&ids).is_empty() {
            return true;
        }
        if Instant::now() >= bound {
            return !os::harness_holds(&ids);
        }
        drain_until(out, err, OUTSIDE_LOOK).await;
    }
}

/// A call's stdout and stderr pipes by identity (device, inode), to find
/// their holders outside the call.
fn pipe_ids(out: &Capture, err: &Capture) -> Vec<(u64, u64)> {
    [out.pipe.as_fd(), err.pipe.as_fd()]
        .into_iter()
        .filter_map(|fd| nix::sys::stat::fstat(fd).ok())
        .map(|st| (st.st_dev, st.st_ino))
        .collect()
}

/// How often [`held_after_the_sweep`] looks again (a look reads every
/// process's descriptors).
const OUTSIDE_LOOK: Duration = Duration::from_millis(50);

/// Whether one of these `holders` keeps the pipe: it used more CPU than the
/// wait-delay, or it is waiting now and was waiting at the last look (in
/// `was_asleep`). The ones waiting now are put in `asleep` for the next look.
fn keeps(
    holders: &[(i32, os::Activity)],
    was_asleep: &[i32],
    wait_delay: Duration,
    asleep: &mut Vec<i32>,
) -> bool {
    let mut kept = false;
    for &(pid, activity) in holders {
        kept |= activity.cpu > wait_delay || (activity.waiting && was_asleep.contains(&pid));
        if activity.waiting {
            asleep.push(pid);
        }
    }
    kept
}

/// What the looks at a pipe's `holders` decide once `looked` has passed a
/// bound, or `None` to look again: after [`HOLDER_BOUND`], a look that saw no
/// holder leaves it to the sweep, and a holder stuck in an uninterruptible
/// wait keeps the pipe; holders that are only runnable are waited for until
/// [`RUNNABLE_BOUND`], and then keep it.
fn at_the_bound(holders: &[(i32, os::Activity)], looked: Duration) -> Option<Holding> {
    if looked < HOLDER_BOUND {
        return None;
    }
    if holders.is_empty() {
        return Some(Holding::Unseen);
    }
    let stuck = holders.iter().any(|(_, a)| a.stuck);
    (stuck || looked >= RUNNABLE_BOUND).then_some(Holding::Kept)
}

/// The inodes of a call's stdout and stderr pipes, so that leftovers holding
/// the other ends can be recognised; found only when something is left.
fn pipe_inodes(out: &Capture, err: &Capture) -> Vec<u64> {
    [out.pipe.as_fd(), err.pipe.as_fd()]
        .into_iter()
        .filter_map(os::pipe_inode)
        .collect()
}

/// Kills everything a call started if its future is dropped before the end.
struct CallGuard {
    supervisor: Supervisor,
    call: Tracked,
    done: bool,
    /// Once reaped, the leader's pid may be re-used: never wait on it again.
    leader_reaped: bool,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.done {
            let (supervisor, pgid) = (self.supervisor.clone(), self.call.pgid);
            os::sweep_detached(self.call.clone(), self.leader_reaped, move || {
                supervisor.release(pgid)
            });
        }
    }
}

fn shrunk(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.shrink_to_fit();
    bytes
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
