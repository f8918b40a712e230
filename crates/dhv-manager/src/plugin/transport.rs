//! Where a plugin's process runs: the seam between what a call is (an
//! [`exec::Call`](dhv_host::exec::Call): argv, the `DHV_*` environment, Nomad's
//! limits, decided by [`ExternalPlugin`](super::ExternalPlugin) in one place)
//! and how a process is started, watched and reaped. Today that is a local
//! process ([`LocalProcess`], through [`dhv_host::exec`]); a container or a
//! remote node would be one more [`Transport`], in one new file, reading the
//! same [`Call`]. The conformance engine takes the one of its run's host and
//! opens every plugin handle of the run with it
//! ([`CallOptions::transport`](super::CallOptions::transport)).

use super::BoxFuture;
use dhv_host::exec::{Call, Outcome, SpawnError};

/// Runs a [`Call`]: starts the process, enforces its limit, captures its
/// output and reports what it left behind. An interrupt of the run (the
/// call's [`supervisor`](Call::supervisor)) stops it.
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Runs it to the end; `Err` when it could not be started at all.
    fn run<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Result<Outcome, SpawnError>>;
}

/// A process on this host, as a Nomad client starts one (see [`dhv_host::exec`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProcess;

impl Transport for LocalProcess {
    fn run<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Result<Outcome, SpawnError>> {
        Box::pin(call.run())
    }
}
