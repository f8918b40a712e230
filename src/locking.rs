//! The one way the crate takes a lock: a mutex that a panic poisoned is
//! used as it is. A panic elsewhere (a check's, a progress hook's) must not
//! take the run's bookkeeping (its live volumes, its call log, the files it
//! wrote, what its teardown needs) down with it.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, poisoned or not.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
