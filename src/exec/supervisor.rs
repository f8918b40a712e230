//! The handle that owns a set of calls: which are live, and whether the set
//! has been cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::os::Tracked;

/// Owns the calls run through it: the registry of live calls and a cancel
/// flag. Cheap to clone; clones share both.
///
/// A run (a conformance suite, a manager command) makes one and passes it down
/// to every call it makes ([`Call::supervised_by`](super::Call::supervised_by),
/// [`ExternalPlugin::with_supervisor`](crate::plugin::ExternalPlugin::with_supervisor)).
/// [`cancel`](Supervisor::cancel) then kills that run's plugin processes and
/// nothing else: several supervisors live side by side in one process, and a
/// fresh one stays usable after another was cancelled (a teardown that still
/// has deletes to send after an interrupt runs them through a new supervisor).
#[derive(Clone, Default)]
pub struct Supervisor(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Spawns hold it for reading from their check of the cancel flag until
    /// their leader is registered; [`Supervisor::cancel`] for writing, so
    /// that it sees every spawn under way registered. Spawns never wait for
    /// each other here.
    spawning: RwLock<()>,
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
        crate::lock(&self.0.state)
    }

    /// Kills every live call of this supervisor (each whole process group and
    /// whatever it left behind) and makes every later call through it fail to
    /// start with `ECANCELED`. Returns at once: the killed calls reap their own
    /// processes and return to their callers. Idempotent.
    pub fn cancel(&self) {
        let calls: Vec<Tracked> = {
            // With no spawn under way: one that was is in `calls` by now,
            // and a later one sees the flag.
            let _no_spawn = crate::write(&self.0.spawning);
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

    /// The environment of every live call, as `K=V` strings: what a progress
    /// line needs to say which operation is in flight, and for which dir.
    pub fn live_envs(&self) -> Vec<Vec<String>> {
        self.lock()
            .calls
            .values()
            .map(|call| {
                call.env
                    .iter()
                    .map(|kv| kv.to_string_lossy().into_owned())
                    .collect()
            })
            .collect()
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
        let _spawning = crate::read(&self.0.spawning);
        if self.lock().cancelled {
            return Err(std::io::Error::from_raw_os_error(libc::ECANCELED));
        }
        let (call, spawned) = spawn()?;
        self.lock().calls.insert(call.pgid, call.clone());
        Ok((call, spawned))
    }

    /// Forgets a call once everything it left is dealt with.
    pub(crate) fn release(&self, pid: i32) {
        self.lock().calls.remove(&pid);
    }
}
