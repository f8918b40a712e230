//! The engine's progress hook: told as each check starts and ends, so the CLI
//! can print its own progress lines (with `warn`, `SLOW` and counts that agree
//! with the summary table) instead of libtest-mimic's.

use std::sync::Arc;

use crate::exec::Supervisor;
use crate::report::CheckResult;

/// What plugin calls a check is waiting for right now (for `SLOW` lines).
#[derive(Debug, Clone)]
pub struct InFlight {
    supervisor: Supervisor,
    root: std::path::PathBuf,
}

impl InFlight {
    pub(crate) fn new(supervisor: Supervisor, root: std::path::PathBuf) -> InFlight {
        InFlight { supervisor, root }
    }

    /// The operations in flight for `check`, in words (`create`, `delete ×8`),
    /// or the shared probe it waits on; `None` when no call is live.
    ///
    /// Calls are told apart by their `DHV_VOLUMES_DIR`, which lies in each
    /// check's own sandbox; a fingerprint has none and is named as unattributed.
    pub fn describe(&self, check: &str) -> Option<String> {
        let mine = self.root.join(check);
        let mut own: Vec<String> = Vec::new();
        let mut other: Vec<String> = Vec::new();
        for env in self.supervisor.live_envs() {
            let get = |key: &str| {
                env.iter()
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                    .map(str::to_owned)
            };
            let op = get("DHV_OPERATION").unwrap_or_else(|| "a call".to_owned());
            match get("DHV_VOLUMES_DIR") {
                Some(dir) if std::path::Path::new(&dir).starts_with(&mine) => own.push(op),
                Some(dir) => {
                    let probe = std::path::Path::new(&dir)
                        .strip_prefix(&self.root)
                        .ok()
                        .and_then(|p| p.iter().next())
                        .map(|p| p.to_string_lossy().into_owned())
                        .filter(|p| p.starts_with("probe-"));
                    if let Some(probe) = probe {
                        other.push(format!("{op} ({probe})"));
                    }
                }
                None => other.push(op),
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
