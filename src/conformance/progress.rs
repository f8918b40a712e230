//! The engine's progress hook: told as each check starts and ends, so the CLI
//! can print its own progress lines (with `warn`, `SLOW` and counts that agree
//! with the summary table) instead of libtest-mimic's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::exec::{Call, Outcome, SpawnError};
use crate::plugin::BoxFuture;
use crate::plugin::transport::Transport;
use crate::report::CheckResult;

/// The plugin calls of a run under way, each with its owner: the sandbox
/// it was made for (a check's id, or `probe-<id>` for a shared probe).
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveCalls(Arc<LiveState>);

#[derive(Debug, Default)]
struct LiveState {
    next: AtomicU64,
    calls: Mutex<HashMap<u64, (Arc<str>, String)>>,
}

/// One call in [`LiveCalls`], forgotten when dropped.
struct LiveCall<'a>(&'a LiveState, u64);

impl Drop for LiveCall<'_> {
    fn drop(&mut self) {
        crate::lock(&self.0.calls).remove(&self.1);
    }
}

impl LiveCalls {
    fn enter(&self, owner: &Arc<str>, op: String) -> LiveCall<'_> {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        crate::lock(&self.0.calls).insert(id, (owner.clone(), op));
        LiveCall(&self.0, id)
    }

    /// The owner and operation of every call under way.
    fn all(&self) -> Vec<(Arc<str>, String)> {
        crate::lock(&self.0.calls).values().cloned().collect()
    }

    /// `transport`, its calls entered here as `owner`'s while they run.
    pub(crate) fn owned(&self, transport: Arc<dyn Transport>, owner: &str) -> Arc<dyn Transport> {
        Arc::new(Owned {
            inner: transport,
            owner: owner.into(),
            live: self.clone(),
        })
    }
}

/// The run's transport as one sandbox's calls go through it: the owner is
/// the handle's data, set where the handle is opened, not read back from a
/// call's environment.
#[derive(Debug)]
struct Owned {
    inner: Arc<dyn Transport>,
    owner: Arc<str>,
    live: LiveCalls,
}

impl Transport for Owned {
    fn run<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Result<Outcome, SpawnError>> {
        Box::pin(async move {
            let op = call
                .args
                .first()
                .map_or_else(|| "a call".to_owned(), |a| a.to_string_lossy().into_owned());
            let _live = self.live.enter(&self.owner, op);
            self.inner.run(call).await
        })
    }
}

/// What plugin calls a check is waiting for right now (for `SLOW` lines).
#[derive(Debug, Clone)]
pub struct InFlight {
    live: LiveCalls,
}

impl InFlight {
    pub(crate) fn new(live: LiveCalls) -> InFlight {
        InFlight { live }
    }

    /// The operations in flight for `check`, in words (`create`, `delete ×8`),
    /// or the shared probe it waits on; `None` when no call is live.
    ///
    /// Each call carries its owner (the sandbox it was made for: the check's
    /// id, or `probe-<id>` for a shared probe); a call of no sandbox (the
    /// teardown's) is named as unattributed.
    pub fn describe(&self, check: &str) -> Option<String> {
        let mut own: Vec<String> = Vec::new();
        let mut other: Vec<String> = Vec::new();
        for (owner, op) in self.live.all() {
            if &*owner == check {
                own.push(op);
            } else if owner.starts_with("probe-") {
                other.push(format!("{op} ({owner})"));
            } else if owner.is_empty() {
                other.push(op);
            }
        }
        let words = |ops: Vec<String>| {
            let mut counted: std::collections::BTreeMap<String, usize> = Default::default();
            for op in ops {
                *counted.entry(op).or_default() += 1;
            }
            let parts: Vec<String> = counted
                .into_iter()
                .map(|(op, n)| if n == 1 { op } else { format!("{op} ×{n}") })
                .collect();
            parts.join(", ")
        };
        if !own.is_empty() {
            Some(words(own))
        } else if !other.is_empty() {
            Some(format!("waiting on a shared call: {}", words(other)))
        } else {
            None
        }
    }
}

/// What the engine reports while a suite runs.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProgressEvent<'a> {
    /// The run started; the handle says what each check has in flight.
    Run(InFlight),
    /// A check started (an aggregate check: once the checks it waits for ended).
    Started(&'static str),
    /// A check ended with this result.
    Finished(&'a CheckResult),
}

/// The function behind a [`Progress`].
type Sink = dyn Fn(ProgressEvent<'_>) + Send + Sync;

/// A sink for [`ProgressEvent`]s, called from the checks' threads; the default
/// ignores them.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<Sink>>);

impl Progress {
    /// A sink that calls `f` for every event.
    pub fn new(f: impl Fn(ProgressEvent<'_>) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(f)))
    }

    /// Passes `event` on.
    pub fn send(&self, event: ProgressEvent<'_>) {
        if let Some(f) = &self.0 {
            f(event);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(..)"
        } else {
            "Progress(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_its_owners_a_probes_is_shared_and_anothers_is_not_told() {
        let live = LiveCalls::default();
        let (mine, probe, other): (Arc<str>, Arc<str>, Arc<str>) = (
            "delete.removes".into(),
            "probe-create.succeeds".into(),
            "x.y".into(),
        );
        let in_flight = InFlight::new(live.clone());
        let a = live.enter(&mine, "create".into());
        let b = live.enter(&mine, "create".into());
        let p = live.enter(&probe, "delete".into());
        let _o = live.enter(&other, "fingerprint".into());
        assert_eq!(
            in_flight.describe("delete.removes").as_deref(),
            Some("create ×2")
        );
        assert_eq!(
            in_flight.describe("lifecycle.recreate").as_deref(),
            Some("waiting on a shared call: delete (probe-create.succeeds)")
        );
        drop((a, b, p));
        assert_eq!(in_flight.describe("delete.removes"), None);
    }
}
