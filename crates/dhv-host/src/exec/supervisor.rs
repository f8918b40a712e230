//! The handle that owns a set of calls: which are live, and whether the set
//! has been cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::os::Tracked;

/// Owns the calls run through it: the registry of live calls and a cancel
/// flag. Cheap to clone; clones share both.
///
/// A run (a conformance suite, a manager command) makes one and passes it down
/// to every call it makes ([`Call::supervised_by`](super::Call::supervised_by);
/// a plugin's calls get it from the plugin layer's `CallOptions::supervisor`).
/// [`cancel`](Supervisor::cancel) then kills that run's plugin processes and
/// nothing else: several supervisors live side by side in one process, and a
/// fresh one stays usable after another was cancelled (a teardown that still
/// has deletes to send after an interrupt runs them through a new supervisor).
#[derive(Clone, Default)]
pub struct Supervisor(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// What its calls may still keep of their output, all together.
    budget: OutputBudget,
    /// Spawns hold it for reading from their check of the cancel flag until
    /// their leader is registered; [`Supervisor::cancel`] for writing, so
    /// that it sees every spawn under way registered. Spawns never wait for
    /// each other here.
    spawning: RwLock<()>,
    /// What a plugin of this run did to capture the harness (see
    /// [`Supervisor::interrupted`]); shared with the supervisors made
    /// [`for_the_same_run`](Supervisor::for_the_same_run).
    interruptions: super::os::Interruptions,
    /// The guard of the run's dirs against mounts put over them, once the
    /// run made one ([`Supervisor::guard_mounts`]); shared with the
    /// supervisors made [`for_the_same_run`](Supervisor::for_the_same_run).
    mounts: Arc<std::sync::OnceLock<crate::safe_fs::MountGuard>>,
}

#[derive(Default)]
struct State {
    cancelled: bool,
    /// Live calls by leader pid (= process group id), with what tells their
    /// processes apart (env, cgroup).
    calls: HashMap<i32, Tracked>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Supervisor")
            .field("cancelled", &state.cancelled)
            .field("live_calls", &state.calls.len())
            .finish()
    }
}

impl Supervisor {
    /// A supervisor with no calls, not cancelled.
    pub fn new() -> Supervisor {
        Supervisor::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.0.state)
    }

    /// Kills every live call of this supervisor (each whole process group and
    /// whatever it left behind) and makes every later call through it fail to
    /// start with `ECANCELED`. Returns at once: the killed calls reap their own
    /// processes and return to their callers. Idempotent.
    pub fn cancel(&self) {
        let calls: Vec<Tracked> = {
            // With no spawn under way: one that was is in `calls` by now,
            // and a later one sees the flag.
            let _no_spawn = crate::sync::write(&self.0.spawning);
            let mut state = self.lock();
            state.cancelled = true;
            state.calls.values().cloned().collect()
        };
        for call in &calls {
            call.kill_all();
        }
    }

    /// Whether [`cancel`](Self::cancel) has run.
    pub fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }

    /// How many calls are live right now.
    pub fn live_calls(&self) -> usize {
        self.lock().calls.len()
    }

    /// Runs `spawn` (which starts a leader and says how to track it) unless this
    /// supervisor is cancelled, and registers the leader, atomically with
    /// respect to [`cancel`](Self::cancel).
    pub(crate) fn admit<T>(
        &self,
        spawn: impl FnOnce() -> std::io::Result<(Tracked, T)>,
    ) -> std::io::Result<(Tracked, T)> {
        let _spawning = crate::sync::read(&self.0.spawning);
        if self.lock().cancelled {
            return Err(std::io::Error::from_raw_os_error(libc::ECANCELED));
        }
        let (call, spawned) = spawn()?;
        self.lock().calls.insert(call.pgid, call.clone());
        Ok((call, spawned))
    }

    /// A supervisor whose calls may keep `bytes` of output all together past
    /// the first 64 KiB of each call's stdout and 4 KiB of its stderr (a new
    /// one keeps 32 MiB): past it, their output is counted, not kept, and
    /// said truncated (see [`Outcome::streams`](super::Outcome::streams)).
    pub fn with_output_budget(bytes: usize) -> Supervisor {
        Supervisor(Arc::new(Shared {
            budget: OutputBudget::new(bytes),
            ..Shared::default()
        }))
    }

    /// The output budget its calls share (see [`OutputBudget`]).
    pub(crate) fn output_budget(&self) -> OutputBudget {
        self.0.budget.clone()
    }

    /// Whether a call of this supervisor had output counted but not kept
    /// because the budget was spent.
    pub fn output_budget_spent(&self) -> bool {
        self.0.budget.spent()
    }

    /// A fresh supervisor (no calls, not cancelled, a budget of its own) for
    /// more calls of the same run, such as a teardown's deletes after the
    /// run's supervisor was cancelled: what a plugin did to capture the
    /// harness in either is said by both ([`interrupted`](Self::interrupted)).
    pub fn for_the_same_run(&self) -> Supervisor {
        Supervisor(Arc::new(Shared {
            state: Mutex::default(),
            budget: OutputBudget::default(),
            spawning: RwLock::default(),
            interruptions: self.0.interruptions.clone(),
            mounts: self.0.mounts.clone(),
        }))
    }

    /// The guard of this run's dirs against mounts a plugin puts over them
    /// (see [`MountGuard`](crate::safe_fs::MountGuard)): made on the first
    /// ask, then the same one. It looks at the mount table before every
    /// call of this supervisor (and of those made
    /// [`for_the_same_run`](Self::for_the_same_run)) starts and after each
    /// ends, besides its own thread's looks; what it undid is
    /// [`mounts_undone`](Self::mounts_undone).
    pub fn guard_mounts(&self) -> crate::safe_fs::MountGuard {
        self.0
            .mounts
            .get_or_init(crate::safe_fs::MountGuard::new)
            .clone()
    }

    /// The mounts a plugin of this run put over the run's guarded dirs,
    /// each detached at once, in words (source → target), in order.
    pub fn mounts_undone(&self) -> Vec<String> {
        self.0
            .mounts
            .get()
            .map(crate::safe_fs::MountGuard::undone)
            .unwrap_or_default()
    }

    /// A look of the run's mount guard, when it has one (see
    /// [`guard_mounts`](Self::guard_mounts)).
    pub(crate) fn look_at_mounts(&self) {
        if let Some(guard) = self.0.mounts.get() {
            guard.look();
        }
    }

    /// What a plugin whose call ran under this supervisor (or one made
    /// [`for_the_same_run`](Self::for_the_same_run)) did to capture the
    /// harness, if it did: moved it into a cgroup of its calls (where a sweep
    /// would kill it with the plugin's processes), froze the cgroup of the
    /// calls, or left a tracer on it. The harness undid it (moved back,
    /// thawed, killed the tracer), but what ran meanwhile is not to be
    /// trusted. `None` when nothing did. Another supervisor's run, before or
    /// beside this one, is not this one's: what a call did is said to its
    /// own supervisor; only what no call can be told to have done (a freeze
    /// of the cgroup all calls of this process share) is said to every
    /// supervisor live then.
    pub fn interrupted(&self) -> Option<String> {
        self.0.interruptions.get()
    }

    /// Where what this supervisor's plugins do to capture the harness is said.
    pub(crate) fn interruptions(&self) -> &super::os::Interruptions {
        &self.0.interruptions
    }

    /// Forgets a call once everything it left is dealt with.
    pub(crate) fn release(&self, pid: i32) {
        self.lock().calls.remove(&pid);
    }
}

/// What the calls of one supervisor (a run) may keep of their output, all
/// together, past the first [`OutputBudget::FREE_STDOUT`] and
/// [`OutputBudget::FREE_STDERR`] bytes of each stream of each call: the per
/// call caps alone let a run of a few hundred calls that each flood their
/// pipes keep hundreds of MiB. Past it, output is read, counted and dropped,
/// and the stream is marked truncated, as past a call's own cap.
#[derive(Clone)]
pub(crate) struct OutputBudget(Arc<BudgetState>);

struct BudgetState {
    left: AtomicUsize,
    spent: AtomicBool,
}

impl Default for OutputBudget {
    fn default() -> Self {
        OutputBudget::new(OutputBudget::RUN)
    }
}

impl OutputBudget {
    /// The bytes a run's calls may keep past their free bytes: 32 MiB. A
    /// run holds its calls' outputs in more than one place (the run's log,
    /// the evidence each verdict cites), so the harness's memory is a few
    /// times this.
    pub(crate) const RUN: usize = 32 << 20;
    /// The first bytes of each call's stdout kept outside the budget: any
    /// answer a plugin means to give fits.
    pub(crate) const FREE_STDOUT: usize = 64 << 10;
    /// The first bytes of each call's stderr kept outside the budget: as
    /// much as a report shows of it.
    pub(crate) const FREE_STDERR: usize = 4 << 10;

    /// A budget of `bytes`.
    pub(crate) fn new(bytes: usize) -> OutputBudget {
        OutputBudget(Arc::new(BudgetState {
            left: AtomicUsize::new(bytes),
            spent: AtomicBool::new(false),
        }))
    }

    /// Takes up to `want` bytes; what was granted (0 once it is spent).
    pub(crate) fn take(&self, want: usize) -> usize {
        let mut granted = 0;
        let _ = self
            .0
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                granted = left.min(want);
                Some(left - granted)
            });
        granted
    }

    /// Gives back bytes taken and not used.
    pub(crate) fn give_back(&self, bytes: usize) {
        if bytes > 0 {
            self.0.left.fetch_add(bytes, Ordering::AcqRel);
        }
    }

    /// Says that output was dropped because the budget was spent.
    pub(crate) fn dropped(&self) {
        self.0.spent.store(true, Ordering::Release);
    }

    /// Whether output was dropped because the budget was spent.
    pub(crate) fn spent(&self) -> bool {
        self.0.spent.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod budget_tests {
    use super::OutputBudget;

    #[test]
    fn a_budget_grants_what_is_left_and_takes_back_what_was_not_used() {
        let budget = OutputBudget::new(10);
        assert_eq!(budget.take(4), 4);
        assert_eq!(budget.take(8), 6);
        assert_eq!(budget.take(1), 0);
        budget.give_back(3);
        assert_eq!(budget.take(5), 3);
    }
}
