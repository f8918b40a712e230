//! The descriptor fence: no clone that starts a plugin copies a descriptor
//! the harness holds inside the paths a plugin made.
//!
//! The clone that starts a plugin copies this process's whole descriptor
//! table and holds the copy until it closes them (first thing it does; they
//! are close-on-exec too). On a loaded host the clone can wait long for a CPU
//! before that, and a copied descriptor inside a volume keeps the volume's
//! mount busy for as long: a neighbour check's `umount` then fails, a failure
//! that is the harness's and would be judged the plugin's. So the harness
//! opens descriptors inside plugins' paths only [`inside`] the fence (an
//! exclusive hold, short), and a plugin is cloned only under `cloning` (the
//! runner's; a shared hold, so spawns never wait for each other), which waits
//! until no such descriptor is open and keeps new ones from being opened until
//! the clone is made: the table it copies holds none.
//!
//! A file that must stay open while plugins run (a check holding a volume in
//! use) is held on a thread with a table of its own instead
//! ([`safe_fs::HeldApart`](crate::safe_fs::HeldApart)).

use std::cell::Cell;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Exclusive for a holder of descriptors inside plugins' paths, shared by
/// the clones.
static FENCE: RwLock<()> = RwLock::new(());

thread_local! {
    /// How many [`Inside`]s this thread holds: only the outermost takes the
    /// lock (taken twice by one thread, it would wait for itself).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// An exclusive hold of the fence: while it lives, no plugin is cloned. Open
/// descriptors inside plugins' paths under it, and close them before it is
/// dropped. Not `Send`: it cannot be held across an `.await` of a task that
/// may move.
#[must_use = "the fence is let go when this is dropped"]
pub struct Inside {
    _guard: Option<RwLockWriteGuard<'static, ()>>,
}

/// Holds the fence until the returned [`Inside`] is dropped; nested holds on
/// one thread are free.
pub fn inside() -> Inside {
    let outermost = DEPTH.with(|d| {
        let depth = d.get();
        d.set(depth + 1);
        depth == 0
    });
    Inside {
        _guard: outermost.then(|| crate::sync::write(&FENCE)),
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Runs `f` inside the fence: for a short piece of work that opens and
/// closes descriptors inside plugins' paths.
pub fn within<R>(f: impl FnOnce() -> R) -> R {
    let _inside = inside();
    f()
}

/// The shared hold a clone is made under: it waits until no thread is
/// [`inside`]. `None` on a thread that is inside itself (it would wait for
/// itself), where the clone goes ahead: no code of the harness starts a
/// process while it holds a descriptor inside a plugin's path.
pub(crate) fn cloning() -> Option<RwLockReadGuard<'static, ()>> {
    let inside_here = DEPTH.with(|d| d.get() > 0);
    debug_assert!(!inside_here, "a process started inside the fence");
    (!inside_here).then(|| crate::sync::read(&FENCE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_clone_waits_for_every_holder_and_nested_holds_are_free() {
        let outer = inside();
        // Nested on one thread: no second lock (it would deadlock behind a
        // waiting clone).
        let inner = inside();
        let (tx, rx) = mpsc::channel();
        let clone = std::thread::spawn(move || {
            let _g = cloning();
            tx.send(()).unwrap();
        });
        // Still held: the clone cannot be made (bounded wait, then on).
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(inner);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(outer);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the clone went ahead once the fence was let go");
        clone.join().unwrap();
        assert_eq!(DEPTH.with(Cell::get), 0);
    }
}
