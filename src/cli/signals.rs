//! Signals during manager commands that run plugins (`volume create`,
//! `delete`, `restore`): SIGINT, SIGTERM and SIGHUP kill every plugin call's
//! whole process group, start no more, and let the command finish what it was
//! doing with the state, so the state file is whole (the volume saved or not,
//! never half a file), then exit 128 + the signal: 130, 143, 129. For `check`,
//! which listens during the suite itself, the same exit for a signal that
//! comes once the suite is over, while its reports are written.

use std::future::Future;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use super::{CliError, CliResult};
use crate::exec::Supervisor;

/// How long the command may take to wind down once its plugin calls are
/// killed: a state write, a lock release. A second signal does not shorten it:
/// cutting a state write short is what this module exists to prevent.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// The signals that end a command, with their numbers.
struct Endings {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Endings {
    fn install() -> Result<Endings, CliError> {
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|e| CliError::harness(format!("cannot listen for signals: {e}")))
        };
        Ok(Endings {
            int: listen(SignalKind::interrupt())?,
            term: listen(SignalKind::terminate())?,
            hup: listen(SignalKind::hangup())?,
        })
    }

    /// The next of the three to arrive: its number and name.
    async fn next(&mut self) -> (i32, &'static str) {
        tokio::select! {
            _ = self.int.recv() => (libc::SIGINT, "SIGINT"),
            _ = self.term.recv() => (libc::SIGTERM, "SIGTERM"),
            _ = self.hup.recv() => (libc::SIGHUP, "SIGHUP"),
        }
    }
}

/// The first ending signal since a [`LateEnding`] started listening (0: none).
/// Set in the signal handler itself rather than by the runtime's driver: the
/// reports can be written and the process gone before a driver thread runs.
static LATE: AtomicI32 = AtomicI32::new(0);

/// An ending signal that comes after the suite stopped listening, while the
/// reports are written. The suite's handlers stay installed once it is over,
/// so such a signal would be swallowed and the run would exit with its
/// verdict as if nothing had come; listened for from before the suite
/// starts, so none falls between the two listeners.
pub struct LateEnding {
    handlers: Vec<signal_hook_registry::SigId>,
}

impl LateEnding {
    /// Starts listening, beside (not instead of) any other handler.
    pub fn listen() -> Result<LateEnding, CliError> {
        let mut handlers = Vec::new();
        for signo in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            let note = move || {
                let _ = LATE.compare_exchange(0, signo, Ordering::SeqCst, Ordering::SeqCst);
            };
            // SAFETY: the action only stores to an atomic, which is
            // async-signal-safe; the registry chains it with tokio's handler.
            let id = unsafe { signal_hook_registry::register(signo, note) }
                .map_err(|e| CliError::harness(format!("cannot listen for signals: {e}")))?;
            handlers.push(id);
        }
        Ok(LateEnding { handlers })
    }

    /// The signal that has come since [`listen`](Self::listen), if one has:
    /// its number and name. Never waits.
    pub fn arrived(&self) -> Option<(i32, String)> {
        match LATE.load(Ordering::SeqCst) {
            0 => None,
            n => Some((n, signal_name(n))),
        }
    }
}

impl Drop for LateEnding {
    fn drop(&mut self) {
        for id in self.handlers.drain(..) {
            signal_hook_registry::unregister(id);
        }
    }
}

/// `SIGINT`, or `signal N` for a number without a name.
pub fn signal_name(signo: i32) -> String {
    nix::sys::signal::Signal::try_from(signo)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {signo}"))
}

/// Runs `command`, whose plugin calls run under `supervisor`, until it ends or
/// a signal arrives (see the module docs).
pub async fn until_signal(
    supervisor: &Supervisor,
    command: impl Future<Output = CliResult>,
) -> CliResult {
    let mut endings = Endings::install()?;
    tokio::pin!(command);
    let (number, name) = tokio::select! {
        result = &mut command => return result,
        ending = endings.next() => ending,
    };
    supervisor.cancel();
    let finished = tokio::time::timeout(WIND_DOWN, &mut command).await.is_ok();
    let what = if finished {
        "every plugin call was killed and the state file is whole"
    } else {
        "every plugin call was killed; the command did not finish in time"
    };
    super::print_stderr(&format!("dhv-conform: interrupted by {name}: {what}\n"));
    Ok((128 + number) as u8)
}
