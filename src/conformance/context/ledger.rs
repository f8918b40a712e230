//! A check's own record of its calls ([`Ledger`]): what each was expected to
//! do, which volumes it made and has not deleted, and which calls are under
//! way; and the run's gate every call passes ([`Gate`]). The calls themselves
//! take the one path of [`route`](super::route).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::Expect;
use super::attempt::{Attempt, CallId, End};
use super::route::Caller;
use crate::contract::{CreateRequest, DeleteRequest, Operation};
use crate::lock;
use crate::plugin::PluginRun;

/// The request of a call, kept to make it again alone (see [`repeat`](super::repeat)).
#[derive(Debug, Clone)]
pub(crate) enum Redo {
    Create(CreateRequest),
    Delete(DeleteRequest),
}

/// What a call that took the route is, for the policy (see
/// [`Failed`](super::attempt::Failed)).
#[derive(Debug, Clone, Copy)]
pub(super) struct Routed {
    /// Its id, and which attempt of a call it is.
    pub attempt: Attempt,
    /// Whose call it was.
    pub caller: Caller,
    /// How it ended.
    pub end: End,
}

/// One call in a check's ledger.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// Which call it is, when it took the route (a call noted some other
    /// way, see [`Calls::note`](super::Calls::note), has none).
    pub routed: Option<Routed>,
    /// The words a report shows for it (never how it is found).
    pub step: String,
    /// The operation, when it is one of Nomad's.
    pub op: Option<Operation>,
    /// The operation word sent.
    word: String,
    pub expect: Expect,
    /// Nomad's error text; `None` when the call succeeded.
    error: Option<String>,
    /// The request, to make a failed call again alone (see [`repeat`](super::repeat)).
    redo: Option<Redo>,
    /// The raw call, when it failed.
    pub run: Option<PluginRun>,
    /// It was made again alone already (see [`repeat`](super::repeat)).
    pub repeated: bool,
}

impl Entry {
    fn met(&self) -> bool {
        match self.expect {
            Expect::Success => self.error.is_none(),
            Expect::Failure => self.error.is_some(),
            Expect::Either => true,
        }
    }

    /// "step: expected create to succeed; got: …".
    pub fn describe(&self) -> String {
        match (&self.error, self.expect) {
            (Some(e), _) => format!("{}: expected {} to succeed; got: {e}", self.step, self.word),
            (None, _) => format!(
                "{}: expected {} to fail; it succeeded",
                self.step, self.word
            ),
        }
    }
}

/// A check's own record of its calls: what each was expected to do, which
/// volumes are live, and how many calls are under way.
#[derive(Default)]
pub(super) struct Ledger {
    entries: Mutex<Vec<Entry>>,
    /// Volumes created and not yet deleted: [`Ctx::cleanup`](super::Ctx::cleanup) deletes them, so
    /// a check that stops early leaves no mount or device behind.
    live: Mutex<BTreeMap<String, (CreateRequest, String)>>,
    /// Volumes whose delete ran out of time: [`Ctx::cleanup`](super::Ctx::cleanup) leaves them to
    /// the run's teardown, which deletes whatever is left all at once, so a
    /// plugin whose deletes hang costs one more limit per run, not per check.
    hung: Mutex<BTreeSet<String>>,
    in_flight: AtomicUsize,
    /// Calls started so far: a call was alone only if no other started before it ended.
    started: AtomicUsize,
}

impl Ledger {
    /// Records a call (`routed`, when it took the route), shown as `step`:
    /// its operation word, what was expected of it, and Nomad's error text
    /// when it failed.
    pub fn note(
        &self,
        routed: Option<Routed>,
        step: &str,
        op: &str,
        expect: Expect,
        error: Option<String>,
    ) {
        lock(&self.entries).push(Entry {
            routed,
            step: step.to_string(),
            op: op.parse().ok(),
            word: op.to_string(),
            expect,
            error,
            redo: None,
            run: None,
            repeated: false,
        });
    }

    /// The call `id`, as noted.
    pub(super) fn entry(&self, id: CallId) -> Option<Entry> {
        lock(&self.entries)
            .iter()
            .find(|e| e.routed.is_some_and(|r| r.attempt.id == id))
            .cloned()
    }

    /// Changes the call `id` in the ledger.
    fn with(&self, id: CallId, change: impl FnOnce(&mut Entry)) {
        if let Some(entry) = lock(&self.entries)
            .iter_mut()
            .find(|e| e.routed.is_some_and(|r| r.attempt.id == id))
        {
            change(entry);
        }
    }

    /// The request, error and raw call of the failed call `id`, when its
    /// request was kept to make it again (see [`keep_redo`](Self::keep_redo)).
    pub fn failed(&self, id: CallId) -> Option<(Redo, String, Option<PluginRun>)> {
        let entry = self.entry(id)?;
        Some((entry.redo?, entry.error?, entry.run))
    }

    /// The call `id` was made again alone: never once more.
    pub fn repeated(&self, id: CallId) {
        self.with(id, |e| e.repeated = true);
    }

    /// Takes back the expectation of the call `id`: it failed beside other
    /// calls and was made again alone, which is judged instead (see
    /// [`repeat`](super::repeat)); or it is that call made again alone,
    /// which failed too, and the first failure stands for both; or it timed
    /// out under the run's load and was re-run alone (see
    /// [`alone`](super::alone)). It stays in the run's log as evidence.
    pub fn excuse(&self, id: CallId) {
        self.with(id, |e| e.expect = Expect::Either);
    }

    /// Whether the volume `id` was created by this check and not deleted.
    pub fn is_live(&self, id: &str) -> bool {
        lock(&self.live).contains_key(id)
    }

    /// The calls that did not do what was expected of them.
    pub fn unmet(&self) -> Vec<Entry> {
        lock(&self.entries)
            .iter()
            .filter(|e| !e.met())
            .cloned()
            .collect()
    }

    /// Keeps what the call `id` (it failed) needs to be made again alone:
    /// its request and raw call.
    pub fn keep_redo(&self, id: CallId, redo: Redo, run: Option<PluginRun>) {
        self.with(id, |e| {
            e.redo = Some(redo);
            e.run = run;
        });
    }

    /// `req`'s volume was created at `path`.
    pub fn created(&self, req: &CreateRequest, path: &str) {
        lock(&self.live).insert(req.volume_id.clone(), (req.clone(), path.to_owned()));
    }

    /// The volume `id` was deleted: its create request, if it was live.
    pub fn deleted(&self, id: &str) -> Option<CreateRequest> {
        lock(&self.live).remove(id).map(|(req, _)| req)
    }

    /// The delete of volume `id` ran out of time.
    pub fn hung(&self, id: &str) {
        lock(&self.hung).insert(id.to_owned());
    }

    /// The deletes of every volume still live, taken off the ledger: all but
    /// those whose delete hung (the run's teardown deletes them).
    pub fn take_live(&self) -> Vec<DeleteRequest> {
        let live = std::mem::take(&mut *lock(&self.live));
        let hung = lock(&self.hung).clone();
        live.into_values()
            .filter(|(req, _)| !hung.contains(&req.volume_id))
            .map(|(req, path)| DeleteRequest::for_created(&req, &path))
            .collect()
    }

    /// Marks a call as under way, to tell calls made alone from deliberate
    /// bursts; `run` counts the run's calls in flight, `run_started` those
    /// started so far.
    pub fn enter<'a>(&'a self, run: &'a AtomicUsize, run_started: &'a AtomicUsize) -> Solo<'a> {
        Solo {
            ticket: self.started.fetch_add(1, Ordering::SeqCst),
            started_alone: self.in_flight.fetch_add(1, Ordering::SeqCst) == 0,
            run_in_flight: run.fetch_add(1, Ordering::SeqCst) + 1,
            run_ticket: run_started.fetch_add(1, Ordering::SeqCst),
            run,
            run_started,
            ledger: self,
        }
    }
}

/// A call under way in a sandbox; [`alone`](Solo::alone) tells whether any
/// other call of the same check overlapped it.
pub(super) struct Solo<'a> {
    /// How many calls had started before this one.
    ticket: usize,
    /// No other call of the check was under way when it started.
    pub started_alone: bool,
    /// The run's calls in flight when it started, itself included.
    pub run_in_flight: usize,
    /// How many calls of the run had started before this one.
    run_ticket: usize,
    run: &'a AtomicUsize,
    run_started: &'a AtomicUsize,
    ledger: &'a Ledger,
}

impl Solo<'_> {
    /// Nothing ran when it started, and nothing started since: a call that
    /// began and ended alone may still have had a whole other call inside it.
    pub fn alone(&self) -> bool {
        self.started_alone
            && self.ledger.in_flight.load(Ordering::SeqCst) == 1
            && self.ledger.started.load(Ordering::SeqCst) == self.ticket + 1
    }
}

impl Solo<'_> {
    /// The call's id in the run: how many calls of it had started before.
    pub(super) fn id(&self) -> CallId {
        CallId(self.run_ticket)
    }

    /// No other call of the whole run was under way at any moment of this
    /// one (call before it ends): one that fails then cannot blame company.
    pub fn alone_in_run(&self) -> bool {
        self.run_in_flight == 1
            && self.run.load(Ordering::SeqCst) == 1
            && self.run_started.load(Ordering::SeqCst) == self.run_ticket + 1
    }
}

impl Drop for Solo<'_> {
    fn drop(&mut self) {
        self.ledger.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.run.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The run's gate, held for one call (only for its drop: the guards are never
/// read). Every call holds it shared; a call made alone holds it exclusively,
/// so it waits for the calls in flight and new ones wait for it. The calls of
/// a burst share one shared hold ([`BurstGate`]): let in one by one, a call
/// made alone that asked in between would be let in before the rest of the
/// burst, and wait for the calls of it already held at their first change,
/// which wait for the rest of the burst.
pub(super) enum Gate<'a> {
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'a, ()>),
    Burst(#[allow(dead_code)] Arc<tokio::sync::OwnedRwLockReadGuard<()>>),
    Alone(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'a, ()>),
}

impl Gate<'_> {
    /// Holds the gate for one call: shared, or exclusive when `alone`.
    pub async fn hold(shared: &super::Shared, alone: bool) -> Gate<'_> {
        if alone {
            Gate::Alone(shared.gate.write().await)
        } else {
            Gate::Shared(shared.gate.read().await)
        }
    }
}

/// One shared hold of the run's gate for every call of a burst: the first
/// call of the burst to ask takes it, the others join it, and it is let go
/// when the last call holding it ends.
#[derive(Default)]
pub(crate) struct BurstGate(tokio::sync::Mutex<Weak<tokio::sync::OwnedRwLockReadGuard<()>>>);

impl BurstGate {
    /// Holds the run's gate for one call of the burst.
    pub async fn hold(&self, shared: &super::Shared) -> Gate<'static> {
        let mut held = self.0.lock().await;
        if let Some(guard) = held.upgrade() {
            return Gate::Burst(guard);
        }
        let guard = Arc::new(shared.gate.clone().read_owned().await);
        *held = Arc::downgrade(&guard);
        Gate::Burst(guard)
    }
}
