//! The engine's progress hook: told as each check starts and ends, so the CLI
//! can print its own progress lines (with `warn`, `SLOW` and counts that agree
//! with the summary table) instead of libtest-mimic's.

use std::sync::Arc;

use crate::report::CheckResult;

/// What the engine reports while a suite runs.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProgressEvent<'a> {
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
