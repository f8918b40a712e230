//! The call cgroups waiting for a call, prepared off the calls' path. A
//! call used to take a pooled cgroup and check it on its own thread, right
//! before its spawn: `cgroup.events`, the link count, and on a hybrid host
//! each v1 dir's link count and `cgroup.procs`, then its limit counts
//! (`pids.events`, `memory.events` or their v1 files) and `cpu.pressure`.
//! Here a thread of the run's does all of that when a call hands its cgroup
//! back, and makes new ones ahead (up to [`SPARE`] ready), so that
//! a call takes a cgroup that is ready: one read of its `cgroup.events`
//! (nothing moved in since) and no `mkdir`. The thread is woken only when
//! [`LOW`] or fewer are ready, and then prepares every one handed back
//! since: a wake-up per few calls, not two per call (on a host whose CPUs
//! the plugins keep busy, a wake-up costs them as much as the work moved).
//!
//! Every cgroup here lives in the run's cgroup (and its v1 dirs in the
//! run's v1 dirs), so the removal of the run's at exit, and of a dead run's
//! by the next run or `clean`, takes the spare ones too; [`stop`] keeps
//! this thread from making one while that removal runs. Where the thread
//! cannot be started (a host out of tasks), a call prepares its cgroup
//! itself, as before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, Once};

use super::cgroup::Slot;
use super::cgroup_limits::call_limits;
use super::cgroup_run::run;
use crate::sync::lock;

/// How many prepared cgroups the thread makes ready when it is woken.
const SPARE: usize = 4;
/// The thread is woken when this many or fewer are ready.
const LOW: usize = 1;

/// Cgroups ready for a call, and those handed back and not yet checked.
struct Pool {
    ready: Vec<Slot>,
    returned: Vec<Slot>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    ready: Vec::new(),
    returned: Vec::new(),
});
/// Woken when [`LOW`] or fewer are ready.
static CHANGED: Condvar = Condvar::new();
/// Whether the preparing thread runs.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Held while the thread makes a cgroup; set once the run's cgroup is
/// being removed (see [`stop`]).
static MAKING: Mutex<bool> = Mutex::new(false);

/// A prepared cgroup, when one is ready (the thread is started on the
/// first take).
pub(super) fn take() -> Option<Slot> {
    static START: Once = Once::new();
    START.call_once(start);
    let mut pool = lock(&POOL);
    let slot = pool.ready.pop();
    if pool.ready.len() <= LOW {
        CHANGED.notify_one();
    }
    slot
}

/// A cgroup a call is done with, clean and never killed: checked and
/// prepared again by the thread (here, without one).
pub(super) fn give_back(slot: Slot) {
    if !RUNNING.load(Ordering::Relaxed) {
        if let Some(slot) = prepared(slot) {
            lock(&POOL).ready.push(slot);
        }
        return;
    }
    let mut pool = lock(&POOL);
    pool.returned.push(slot);
    if pool.ready.len() <= LOW {
        CHANGED.notify_one();
    }
}

/// No cgroup is made from now on: the run's are being removed (at exit).
/// Waits for one being made to be done.
pub(super) fn stop() {
    *lock(&MAKING) = true;
}

fn start() {
    let started = std::thread::Builder::new()
        .name("dhv-cgroups".into())
        .spawn(prepare_forever);
    RUNNING.store(started.is_ok(), Ordering::Relaxed);
}

/// The thread: when [`LOW`] or fewer are ready, checks what was handed
/// back, and makes new ones until [`SPARE`] are ready.
fn prepare_forever() {
    loop {
        let returned = {
            let mut pool = lock(&POOL);
            while pool.ready.len() > LOW {
                pool = CHANGED.wait(pool).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::take(&mut pool.returned)
        };
        let mut ready: Vec<Slot> = returned.into_iter().filter_map(prepared).collect();
        let short = SPARE.saturating_sub(lock(&POOL).ready.len() + ready.len());
        for _ in 0..short {
            let making = lock(&MAKING);
            if *making {
                return;
            }
            match Slot::new().and_then(prepared) {
                Some(slot) => ready.push(slot),
                // None can be made: calls make their own (and fail alike).
                None => {
                    RUNNING.store(false, Ordering::Relaxed);
                    lock(&POOL).ready.append(&mut ready);
                    return;
                }
            }
        }
        lock(&POOL).ready.append(&mut ready);
    }
}

/// `slot` ready for a call: clean (else removed, with whatever moved in),
/// with the limits in force, its limit counts and `cpu.pressure` read.
fn prepared(mut slot: Slot) -> Option<Slot> {
    if !slot.is_clean() {
        slot.remove();
        return None;
    }
    slot.limit(call_limits(run().and_then(|r| r.pids_budget)));
    slot.counts = Some(slot.limit_counts());
    if slot.pressure_baseline.is_none() {
        slot.pressure_baseline = slot.pressure_total();
    }
    Some(slot)
}
