//! Signals during manager commands that run plugins (`volume create`,
//! `delete`, `restore`): SIGINT, SIGTERM and SIGHUP kill every plugin call's
//! whole process group, start no more, and let the command finish what it was
//! doing with the state, so the state file is whole (the volume saved or not,
//! never half a file), then exit 128 + the signal: 130, 143, 129.

use std::future::Future;
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
    eprintln!("dhv-conform: interrupted by {name}: {what}");
    Ok((128 + number) as u8)
}
