//! The signals that end a run (SIGINT, SIGTERM, SIGHUP), or a [`Trigger`]
//! that ends it from code as the first signal would: the first cancels the
//! run's supervisor (no check starts any more, every plugin call is killed),
//! a second one cuts the teardown's deletes short ([`super::teardown`]).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use crate::exec::Supervisor;
use crate::lock;

/// The signals that end a run, as they arrive.
#[derive(Debug, Default)]
struct Received {
    /// The first signal's number (0: none yet).
    first: AtomicI32,
    /// A second signal came: skip what is left of the deletes.
    hurry: AtomicBool,
    /// The supervisor of the teardown's deletes, once they run.
    teardown: Mutex<Option<Supervisor>>,
    /// The run's supervisor, once the run has one.
    run: Mutex<Option<Supervisor>>,
}

impl Received {
    /// `signo` came: when it is the first, it is recorded as the signal that
    /// ended the run and the run is cancelled (if it has started). Whether it
    /// was the first.
    fn first_signal(&self, signo: i32) -> bool {
        let first = self
            .first
            .compare_exchange(0, signo, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if first {
            if let Some(run) = lock(&self.run).as_ref() {
                run.cancel();
            }
        }
        first
    }
}

/// Listens for SIGINT, SIGTERM and SIGHUP while a run is live.
pub(crate) struct Signals {
    received: Arc<Received>,
    listener: Option<tokio::task::JoinHandle<()>>,
}

impl Signals {
    /// Starts listening, before the run makes anything to clean up; the first
    /// signal cancels the run's supervisor once it has one ([`watch`](Self::watch):
    /// its plugin calls are killed, none starts any more), a second one the
    /// teardown's deletes.
    pub fn install(rt: &tokio::runtime::Runtime) -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        let received = Arc::new(Received::default());
        let kinds = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ];
        // Registered here, not in the task, so no signal falls between
        // "installed" and "listening".
        let streams: Vec<_> = {
            let _guard = rt.enter();
            kinds
                .iter()
                .filter_map(|k| Some((k.as_raw_value(), signal(*k).ok()?)))
                .collect()
        };
        let state = received.clone();
        let listener = rt.spawn(async move {
            let mut streams = streams;
            loop {
                let next = std::future::poll_fn(|cx| {
                    for (signo, s) in streams.iter_mut() {
                        if let Poll::Ready(Some(())) = s.poll_recv(cx) {
                            return Poll::Ready(*signo);
                        }
                    }
                    Poll::Pending
                });
                if !state.first_signal(next.await) {
                    state.hurry.store(true, Ordering::SeqCst);
                    if let Some(t) = lock(&state.teardown).as_ref() {
                        t.cancel();
                    }
                }
            }
        });
        Signals {
            received,
            listener: Some(listener),
        }
    }

    /// No listener: the run ends early only when its [`Trigger`] fires (the library's
    /// runs, which leave the host program's signals alone unless it asks).
    pub fn manual() -> Signals {
        Signals {
            received: Arc::default(),
            listener: None,
        }
    }

    /// The same signals for another run of the same caller (the library's run
    /// of each request): what this one received ends that one too. The
    /// listener stays with this one, which must outlive it.
    pub fn share(&self) -> Signals {
        Signals {
            received: self.received.clone(),
            listener: None,
        }
    }

    /// Ends the run from code as its first signal would.
    pub fn trigger(&self) -> Trigger {
        Trigger(self.received.clone())
    }

    /// Makes `run` the supervisor the first signal cancels (at once, if it
    /// already came).
    pub fn watch(&self, run: &Supervisor) {
        *lock(&self.received.run) = Some(run.clone());
        if self.received().is_some() {
            run.cancel();
        }
    }

    /// The first signal received, if any.
    pub fn received(&self) -> Option<i32> {
        match self.received.first.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n),
        }
    }

    /// A supervisor for the teardown's deletes, of the run's (see
    /// [`Supervisor::for_the_same_run`]), which a second signal cancels
    /// (already cancelled if it came).
    pub(super) fn teardown_supervisor(&self) -> Supervisor {
        // Of the same run: what its plugin does to the harness in a delete
        // is the run's.
        let s = lock(&self.received.run)
            .as_ref()
            .map_or_else(Supervisor::new, Supervisor::for_the_same_run);
        *lock(&self.received.teardown) = Some(s.clone());
        if self.received.hurry.load(Ordering::SeqCst) {
            s.cancel();
        }
        s
    }
}

/// Ends a run from code as its first signal would: no check starts any more, its
/// plugin calls are killed, and the teardown runs.
#[derive(Clone)]
pub(crate) struct Trigger(Arc<Received>);

impl Trigger {
    /// Fires, recording `signo` as the signal that ended the run.
    pub fn fire(&self, signo: i32) {
        self.0.first_signal(signo);
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        if let Some(l) = self.listener.take() {
            l.abort();
        }
    }
}
