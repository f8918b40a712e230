//! Races forced, not hoped for: a [`Rendezvous`] holds each of a burst's
//! calls at its first change of state, until no call of the burst can still
//! reach its own (every one reached it, ended without one, or is blocked on
//! something only a held call can end), then lets them all go at once, in
//! an order the caller chooses. A bound on the wait stays as a last resort,
//! for a call that sleeps before its change longer than a race is worth.
//!
//! Aligned starts do not align a window of microseconds that opens after
//! 50 ms of interpreter start-up: the calls of a burst reach a
//! check-then-act window at times that depend on the host's load. Held at
//! the act itself (the `mkdir` after the check), every call has made its
//! check before any makes its change, so a plugin whose create tests for a
//! directory and then makes it meets its race in every round, and one that
//! makes it race-free (`mkdir -p`, a lock per volume) is never troubled.
//!
//! What counts as a change of state, and how a call is held, is the OS
//! side's (`linux/hold.rs`, with `hold_filter.rs` and `hold_notice.rs`):
//! here is what is the same for any way of holding: the seats, the release,
//! and what is said of each call ([`HoldPoint`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::os::{HeldCall, Tracked};

/// How long the first call held waits for the others, at most. A sibling
/// blocked on what a held call owns is not waited for at all (see
/// [`QUIET`]); this bound is for one that keeps going (or sleeps) without
/// reaching its change: a race needs only two calls held together, which a
/// loaded host still gives well within it.
pub const DEFAULT_HOLD_BOUND: Duration = Duration::from_secs(3);

/// How long a running sibling must be seen blocked, using no CPU, before it
/// is taken to be unable to arrive: longer than any wait of a call that
/// goes on by itself between two of its own steps (a pipe to a child that is
/// being scheduled), far shorter than the bound.
pub const QUIET: Duration = Duration::from_millis(80);

/// How often the siblings still awaited are looked at while calls are held.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// What a call's changes of state are watched for ([`Call::at_changes`](super::Call::at_changes)).
/// A change of state is a system call that makes, renames, links or removes a
/// name under the scope, an `open` with `O_CREAT` there, a mount, or a
/// loop-device ioctl; it is stopped before it runs, then let go (or, at a
/// crash point, the call is killed instead).
#[derive(Debug, Clone)]
pub enum AtChanges {
    /// Held at the first one until the burst is let go (see [`Rendezvous`]).
    Hold(Rendezvous),
    /// Recorded ([`Outcome::changes`](super::Outcome::changes)), each let go at once.
    Record(PathBuf),
    /// Recorded, and the call's processes killed at the `n`th (from 1),
    /// before it runs: a crash at a point of the plugin's own making, the
    /// same on any host and under any load.
    KillAt(PathBuf, usize),
    /// The names made *outside* the dir (made, created, linked or renamed
    /// to), recorded, each let go at once; nothing under it, nothing that
    /// only removes, no mount or process start. Where a call writes on the
    /// node beyond the dirs it was given, told by its own processes.
    RecordOutside(PathBuf),
    /// The names made *under* the dir (made, created, linked or renamed to:
    /// a rename by its target), recorded, each let go at once; nothing that
    /// only removes, no mount or process start. What a call made there, told
    /// by its own processes: whose a file is.
    RecordMade(PathBuf),
}

impl AtChanges {
    /// The dir whose changes count.
    pub(crate) fn scope(&self) -> &Path {
        match self {
            AtChanges::Hold(r) => r.scope(),
            AtChanges::Record(scope)
            | AtChanges::KillAt(scope, _)
            | AtChanges::RecordOutside(scope)
            | AtChanges::RecordMade(scope) => scope,
        }
    }
}

/// One change of state a call made (or was killed before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The system call (`mkdir`, `openat`, `renameat2`, `ioctl`, ...).
    pub syscall: &'static str,
    /// What it names, when it names a path that could be read.
    pub path: Option<PathBuf>,
}

impl Change {
    /// In a report's words: `mkdir /v/ID`, `ioctl`.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(p) => format!("{} {}", self.syscall, p.display()),
            None => self.syscall.to_string(),
        }
    }
}

/// What was seen of a call's changes of state, filled in while it runs.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    /// Where it was held for its burst.
    pub held: Option<HoldPoint>,
    /// Its changes, in order, up to [`MAX_CHANGES`] (recorded and crash modes).
    pub changes: Vec<Change>,
    /// It was killed at its last change.
    pub killed: bool,
}

/// The system call of a [`Change`] that starts a program (its path is the
/// program's): a step of the call, never a change of state to hold at.
pub const STARTS_A_PROCESS: &str = "execve";

/// The most changes recorded of one call.
pub const MAX_CHANGES: usize = 256;

/// Where one call of a burst was held, and how it was let go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldPoint {
    /// The system call it was held at (`mkdirat`, `openat`, `ioctl`, ...).
    pub syscall: &'static str,
    /// What that call names, when it names a path that could be read.
    pub path: Option<PathBuf>,
    /// Its place in the release order (1: let go first); `None` when the
    /// call ended before the release (killed, say).
    pub released: Option<usize>,
    /// How many calls of the burst were held and let go together.
    pub together: usize,
    /// How many calls the burst has.
    pub of: usize,
    /// How long it was held, from its change to its release; `None` when
    /// it ended before the release.
    pub waited: Option<Duration>,
}

impl HoldPoint {
    /// In a report's words: `held at mkdirat /v/ID, let go 2nd of 6 held together`.
    pub fn describe(&self) -> String {
        let what = match &self.path {
            Some(p) => format!("{} {}", self.syscall, p.display()),
            None => self.syscall.to_string(),
        };
        match self.released {
            Some(n) => format!(
                "held at {what}, let go {} of {} held together (burst of {})",
                ordinal(n),
                self.together,
                self.of
            ),
            None => format!("held at {what}; it ended before the release"),
        }
    }
}

/// `n` as a word of order, as reports say a release or a step: `1st`,
/// `2nd`, `3rd`, `4th`, ... `11th`, ... `21st`.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A burst's meeting point: `size` calls, held at their first change of
/// state under `scope`, let go together starting with seat `first`. Cheap
/// to clone; clones are the same rendezvous. Give it to each call of the
/// burst ([`Call::hold`](super::Call::hold)); a call takes the next seat as
/// it starts.
#[derive(Clone)]
pub struct Rendezvous(Arc<Inner>);

impl std::fmt::Debug for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendezvous")
            .field("size", &self.0.size)
            .field("first", &self.0.first)
            .field("scope", &self.0.scope)
            .finish()
    }
}

struct Inner {
    size: usize,
    first: usize,
    bound: Duration,
    scope: PathBuf,
    state: Mutex<State>,
    released: tokio::sync::Notify,
}

/// What is seen of a call's changes ([`Watched`]), shared by the task that
/// answers them, its call, and the rendezvous that lets it go.
pub(crate) type SeenSlot = Arc<Mutex<Watched>>;

#[derive(Default)]
struct State {
    /// Seats taken so far (the next call gets this one).
    seated: usize,
    /// Calls held, by seat, not yet let go, and since when.
    held: Vec<(usize, HeldCall, SeenSlot, Instant)>,
    /// Calls held or ended without a change: the burst is complete when
    /// they are all of it.
    accounted: usize,
    /// When the first call was held: the bound runs from then.
    first_held: Option<Instant>,
    /// Once let go, later changes pass at once.
    released: bool,
    /// The calls started that have neither reached their change nor ended,
    /// by seat: what is seen of each while calls are held.
    running: Vec<(usize, Awaited)>,
    /// When the siblings were last looked at.
    looked: Option<Instant>,
}

/// A call of the burst still awaited, and what was seen of it.
struct Awaited {
    call: Tracked,
    /// The CPU it had used when it was first seen blocked, and when: it is
    /// blocked for good once it stays so, using no more, for [`QUIET`].
    blocked_since: Option<(Duration, Instant)>,
}

impl Rendezvous {
    /// A rendezvous of `size` calls whose changes under `scope` (and every
    /// mount or loop device) are held; seat `first` (modulo `size`) is let
    /// go first, the others in seat order after it.
    pub fn new(size: usize, first: usize, scope: impl Into<PathBuf>) -> Rendezvous {
        Rendezvous::with_bound(size, first, scope, DEFAULT_HOLD_BOUND)
    }

    /// [`new`](Self::new) with another bound on the wait for the others.
    pub fn with_bound(
        size: usize,
        first: usize,
        scope: impl Into<PathBuf>,
        bound: Duration,
    ) -> Rendezvous {
        let scope = scope.into();
        // The paths the calls name are resolved through /proc: compare like
        // with like.
        let scope = std::fs::canonicalize(&scope).unwrap_or(scope);
        Rendezvous(Arc::new(Inner {
            size: size.max(1),
            first: first % size.max(1),
            bound,
            scope,
            state: Mutex::default(),
            released: tokio::sync::Notify::new(),
        }))
    }

    /// Whether calls can be held on this host at all; where not, a call
    /// given a rendezvous runs unheld and its outcome has no [`HoldPoint`].
    pub fn available() -> bool {
        super::os::can_hold()
    }

    /// The dir whose changes are held.
    pub(crate) fn scope(&self) -> &Path {
        &self.0.scope
    }

    /// The next seat, for a call that starts (its processes: `call`).
    pub(crate) fn take_seat(&self, call: Option<Tracked>) -> Seat {
        let index = {
            let mut s = crate::sync::lock(&self.0.state);
            let index = s.seated;
            s.seated += 1;
            if let Some(call) = call {
                let awaited = Awaited {
                    call,
                    blocked_since: None,
                };
                s.running.push((index, awaited));
            }
            index
        };
        Seat {
            rendezvous: self.clone(),
            index,
            arrived: false,
        }
    }

    /// Lets every held call go, in seat order from `first`, if the burst is
    /// complete or `force`; whether it is (now or already) let go.
    fn release_if(&self, force: bool) -> bool {
        let mut s = crate::sync::lock(&self.0.state);
        if s.released {
            return true;
        }
        if !force && s.accounted < self.0.size {
            return false;
        }
        s.released = true;
        s.running.clear();
        let (size, first) = (self.0.size, self.0.first);
        let mut held = std::mem::take(&mut s.held);
        held.sort_by_key(|(seat, ..)| (seat + size - first) % size);
        let together = held.len();
        // Told first, let go after: the calls then run with nothing of ours
        // between their releases but the system calls themselves.
        let now = Instant::now();
        for (n, (_, _, point, since)) in held.iter().enumerate() {
            if let Some(p) = crate::sync::lock(point).held.as_mut() {
                p.released = Some(n + 1);
                p.together = together;
                p.waited = Some(now.duration_since(*since));
            }
        }
        for (_, call, ..) in held {
            call.release();
        }
        drop(s);
        self.0.released.notify_waiters();
        true
    }
}

/// One call's place in a [`Rendezvous`]. Dropped when the call ends: a call
/// that ended without a change counts as arrived, so the others do not wait
/// for it.
pub(crate) struct Seat {
    rendezvous: Rendezvous,
    index: usize,
    arrived: bool,
}

/// What [`Seat::arrive`] did with a change.
pub(crate) enum Arrival {
    /// Held until the release (which was already let go through `point`).
    Held,
    /// The burst was let go already: the change passes now.
    Pass(HeldCall),
}

impl Seat {
    /// Whether this call was held already (its later changes pass).
    pub fn arrived(&self) -> bool {
        self.arrived
    }

    /// This call reached its first change: `call` is held (recorded in
    /// `point`) until the burst is let go, or passes when it already was.
    pub fn arrive(&mut self, call: HeldCall, point: SeenSlot) -> Arrival {
        self.arrived = true;
        let r = &self.rendezvous;
        {
            let mut s = crate::sync::lock(&r.0.state);
            if s.released {
                return Arrival::Pass(call);
            }
            s.accounted += 1;
            s.first_held.get_or_insert_with(Instant::now);
            s.held.push((self.index, call, point, Instant::now()));
            s.running.retain(|(seat, _)| *seat != self.index);
        }
        r.release_if(false);
        Arrival::Held
    }

    /// Its size, for the point's words.
    pub fn of(&self) -> usize {
        self.rendezvous.0.size
    }
}

impl Rendezvous {
    /// Waits until the burst is let go: by its last call's arrival, once
    /// every sibling still awaited is blocked for good, or at the bound.
    pub(crate) async fn until_released(&self) {
        let r = self;
        loop {
            let notified = r.0.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let due = {
                let s = crate::sync::lock(&r.0.state);
                if s.released {
                    return;
                }
                s.first_held.map(|t| t + r.0.bound)
            };
            let Some(due) = due else {
                notified.await;
                continue;
            };
            let look = tokio::time::Instant::now() + LOOK_EVERY;
            let due = tokio::time::Instant::from_std(due);
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(look.min(due)) => {
                    let bound = tokio::time::Instant::now() >= due;
                    if bound || r.none_can_arrive() {
                        r.release_if(true);
                    }
                }
            }
        }
    }

    /// Whether no call of the burst can still reach its change: every seat
    /// taken (the burst's calls were let in together, so a seat not taken
    /// yet is a call being started), and every call still awaited seen
    /// blocked, using no CPU, for [`QUIET`]. Each held call's task asks;
    /// the siblings are looked at once per [`LOOK_EVERY`] whoever asks.
    fn none_can_arrive(&self) -> bool {
        let now = Instant::now();
        let calls: Vec<(usize, Tracked)> = {
            let mut s = crate::sync::lock(&self.0.state);
            if s.seated < self.0.size {
                return false;
            }
            if s.looked.is_some_and(|t| now < t + LOOK_EVERY) {
                return Self::all_blocked(&s.running, now);
            }
            s.looked = Some(now);
            s.running
                .iter()
                .map(|(seat, a)| (*seat, a.call.clone()))
                .collect()
        };
        // Looked at outside the lock: a call that arrives meanwhile is
        // taken out of `running` and its look dropped below.
        let seen: Vec<(usize, super::os::Progress)> = calls
            .iter()
            .map(|(seat, call)| (*seat, super::os::progress(call)))
            .collect();
        let mut s = crate::sync::lock(&self.0.state);
        for (seat, progress) in seen {
            let Some((_, awaited)) = s.running.iter_mut().find(|(n, _)| *n == seat) else {
                continue;
            };
            awaited.blocked_since = match (progress.blocked, awaited.blocked_since) {
                (false, _) => None,
                (true, Some((cpu, since))) if cpu == progress.cpu => Some((cpu, since)),
                (true, _) => Some((progress.cpu, now)),
            };
        }
        Self::all_blocked(&s.running, now)
    }

    /// Whether every call in `running` has been blocked for [`QUIET`] by `now`.
    fn all_blocked(running: &[(usize, Awaited)], now: Instant) -> bool {
        running.iter().all(|(_, a)| {
            a.blocked_since
                .is_some_and(|(_, since)| now.duration_since(since) >= QUIET)
        })
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if self.arrived {
            return;
        }
        let r = &self.rendezvous;
        {
            let mut s = crate::sync::lock(&r.0.state);
            if s.released {
                return;
            }
            s.accounted += 1;
            s.running.retain(|(seat, _)| *seat != self.index);
        }
        r.release_if(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_read_as_words() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22].map(ordinal).into();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd"
            ]
        );
    }

    #[test]
    fn a_burst_whose_calls_all_end_unheld_is_complete() {
        let r = Rendezvous::new(2, 0, "/nonexistent-scope");
        let (a, b) = (r.take_seat(None), r.take_seat(None));
        drop(a);
        assert!(!r.release_if(false), "one of two accounted");
        drop(b);
        assert!(r.release_if(false), "both accounted: let go");
    }
}
