//! The run's plan of the work filesystem's space ([`SpacePlan`]): before the
//! run, each check's demand (its volumes at once times the request's
//! capacity, and what it writes: see `checks::storage`) and the free space
//! of the filesystem the run's temp dir is on. Checks are let in, in the
//! run's planned order, only while what the checks in flight hold fits that
//! free space beside what the probes hold for the whole run; the others
//! wait for room. A check whose demand alone cannot fit is not run: it ends
//! skip, inconclusive, and the report says the run was limited by space.
//!
//! In order, never out of it: a check waits only for checks planned before
//! it (the checks it awaits are planned first), and those are let in first,
//! so no check holds room that one it waits for needs. Where every check's
//! demand fits at once (a large disk) nothing is ordered or counted: each
//! check is let in as it comes, as before the plan.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};

use super::catalogue::CheckSpec;
use super::checks::storage::PROBES;
use super::context::RequestTemplate;
use crate::report::SpaceLimited;

/// The run's plan of the work filesystem's space.
pub(super) struct SpacePlan {
    /// Bytes free on the work filesystem when the run started; `None` when
    /// it could not be read (then nothing is planned).
    free: Option<u64>,
    /// What the probes hold for the whole run.
    standing: u64,
    /// Each check's place in the run's plan and its own demand.
    checks: HashMap<&'static str, (usize, u64)>,
    /// Every check's demand fits at once (or the free space is unknown):
    /// each is let in as it comes, in no order, and nothing is counted.
    ample: bool,
    state: Mutex<State>,
    turn: Condvar,
}

/// The plan as it stands.
#[derive(Default)]
struct State {
    /// The place of the next check to let in.
    next: usize,
    /// What the checks let in and not ended hold.
    held: u64,
    /// The checks not run: their demand alone does not fit.
    skipped: Vec<String>,
    /// How many checks waited for others to end before they fitted.
    waited: usize,
}

/// A check let in: what it holds is given back when this is dropped.
pub(super) struct Admitted<'a> {
    plan: &'a SpacePlan,
    bytes: u64,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut state = crate::lock(&self.plan.state);
        state.held = state.held.saturating_sub(self.bytes);
        self.plan.turn.notify_all();
    }
}

impl SpacePlan {
    /// The plan of `ordered` (the run's checks in the order they are
    /// dispatched) for requests made from `template`, on a filesystem with
    /// `free` bytes free (`None`: unknown, nothing is planned).
    pub(super) fn new(
        ordered: &[&'static CheckSpec],
        template: &RequestTemplate,
        free: Option<u64>,
    ) -> SpacePlan {
        let checks: HashMap<_, _> = ordered
            .iter()
            .enumerate()
            .map(|(place, spec)| (spec.id, (place, spec.storage().bytes(template))))
            .collect();
        // The probes' volumes are not a check's: their own writes are counted
        // by the checks.
        let standing = PROBES
            .bytes(template)
            .saturating_sub(super::checks::storage::WRITES);
        let all = checks
            .values()
            .fold(standing, |sum, (_, own)| sum.saturating_add(*own));
        SpacePlan {
            free,
            standing,
            // The common case, a large disk: no check waits for the one
            // planned before it to be let in (a chain of wake-ups that a
            // loaded host's scheduler makes slow).
            ample: free.is_none_or(|free| all <= free),
            checks,
            state: Mutex::default(),
            turn: Condvar::new(),
        }
    }

    /// Lets `spec` in once every check planned before it was let in and its
    /// demand fits beside what the checks in flight hold; the skip reason
    /// when its demand alone does not fit (it is then not run).
    pub(super) fn admit(&self, spec: &CheckSpec) -> Result<Admitted<'_>, String> {
        let Some(&(place, own)) = self.checks.get(spec.id).filter(|_| !self.ample) else {
            return Ok(Admitted {
                plan: self,
                bytes: 0,
            });
        };
        let needs = match own {
            0 => 0,
            _ => self.standing.saturating_add(own),
        };
        let mut state = crate::lock(&self.state);
        while state.next != place {
            state = self.turn.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let free = self.free.unwrap_or(u64::MAX);
        let outcome = if needs > free {
            state.skipped.push(spec.id.to_owned());
            Err(format!(
                "inconclusive: needs {needs} bytes at once, the work filesystem has {free} free \
                 (use --work-dir on a larger filesystem, or a smaller capacity in the fixture)"
            ))
        } else {
            let room = free - needs;
            if state.held > room {
                state.waited += 1;
            }
            while state.held > room {
                state = self.turn.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.held += own;
            Ok(Admitted {
                plan: self,
                bytes: own,
            })
        };
        state.next += 1;
        self.turn.notify_all();
        outcome
    }

    /// What the report says of a run the space limited; `None` when every
    /// check was let in without waiting.
    pub(super) fn limited(&self) -> Option<SpaceLimited> {
        let state = crate::lock(&self.state);
        if state.skipped.is_empty() && state.waited == 0 {
            return None;
        }
        Some(SpaceLimited {
            free_bytes: self.free.unwrap_or(0),
            not_run: state.skipped.clone(),
            waited: state.waited,
        })
    }
}

#[cfg(test)]
#[path = "space_tests.rs"]
mod tests;
