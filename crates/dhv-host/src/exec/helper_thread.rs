//! Threads the runner starts for a call's work (a sweep's walk of `/proc`,
//! the reaping after a cancelled call), which must never panic when no
//! thread can be had: a fork bomb in a cap above the harness (a user's
//! `RLIMIT_NPROC`, a pids-capped cgroup) may take every task there is, and
//! `std::thread::spawn` and tokio's `spawn_blocking` panic then. The work
//! runs on the caller's thread instead: slower, never lost.

use std::sync::{Arc, Mutex};

use crate::sync::lock;

/// Runs `work` on a thread of its own named `name`, or, when none can be
/// started, here and now.
pub(crate) fn spawn_or_run(name: &str, work: impl FnOnce() + Send + 'static) {
    let (mine, theirs) = shared(work);
    let started = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || run_taken(&theirs));
    if started.is_err() {
        run_taken(&mine);
    }
}

/// `work`'s result, computed on a thread of its own named `name` while the
/// caller's task waits (an async worker is not held up by it), or, when no
/// thread can be started, here and now. `None` when the work panicked.
pub(crate) async fn off_thread<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tell, told) = tokio::sync::oneshot::channel();
    let (mine, theirs) = shared(move || {
        let _ = tell.send(work());
    });
    let started = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || run_taken(&theirs));
    if started.is_err() {
        run_taken(&mine);
    }
    told.await.ok()
}

type Work = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

/// `work`, shared by the caller and the thread: whoever takes it runs it
/// (the thread, unless it could not be started).
fn shared(work: impl FnOnce() + Send + 'static) -> (Work, Work) {
    let work: Work = Arc::new(Mutex::new(Some(Box::new(work))));
    (Arc::clone(&work), work)
}

fn run_taken(work: &Work) {
    let taken = lock(work).take();
    if let Some(work) = taken {
        work();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_runs_once_on_its_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn_or_run("dhv-test", move || {
            tx.send(std::thread::current().name().map(str::to_owned))
                .unwrap();
        });
        let name = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the work ran");
        assert_eq!(name.as_deref(), Some("dhv-test"));
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(50))
                .is_err()
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = rt.block_on(off_thread("dhv-test", || {
            std::thread::current().name().map(str::to_owned)
        }));
        assert_eq!(got, Some(Some("dhv-test".to_owned())));
        // A panic of the work is a result of none, not the caller's panic.
        let got: Option<()> = rt.block_on(off_thread("dhv-test", || panic!("the work's")));
        assert_eq!(got, None);
    }

    #[test]
    fn taken_work_runs_on_the_caller_when_the_thread_never_started() {
        let ran = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&ran);
        let (mine, theirs) = shared(move || *lock(&counted) += 1);
        drop(theirs);
        run_taken(&mine);
        run_taken(&mine);
        assert_eq!(*lock(&ran), 1);
    }
}
