//! Where a plugin's process runs: the seam between what a call is (argv,
//! the `DHV_*` environment, Nomad's limits, decided by
//! [`ExternalPlugin`](super::ExternalPlugin)) and how a process is started,
//! watched and reaped. Today that is a local process ([`LocalProcess`],
//! through [`dhv_host::exec`]); a container or a remote node would be one more
//! [`Transport`], in one new file. The conformance engine takes the one of
//! its run's host and opens every plugin handle of the run with it
//! ([`CallOptions::transport`](super::CallOptions::transport)).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::BoxFuture;
use dhv_host::exec::{AtChanges, Call, KillMode, Outcome, Refusal, SpawnError, Supervisor};

/// One run of the plugin's executable, as the plugin call decided it.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The file that runs.
    pub program: PathBuf,
    /// `argv[0]`: the path Nomad runs it by.
    pub arg0: PathBuf,
    /// The rest of argv (the operation).
    pub args: Vec<OsString>,
    /// The whole environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// The working dir; `None`: the harness's own.
    pub cwd: Option<PathBuf>,
    /// The time limit.
    pub timeout: Duration,
    /// How a call past its limit is stopped.
    pub kill_mode: KillMode,
    /// How much of stderr (and of stdout, in the record) is kept.
    pub output_cap: usize,
    /// How much of stdout is kept while it runs, for decoding.
    pub stdout_cap: usize,
    /// How long the pipes are followed after the leader exits.
    pub follow: Duration,
    /// System calls its processes are refused (fault injection, see
    /// [`Call::refuse`]).
    pub refuse: Option<Refusal>,
    /// What is done at its changes of state: held for a burst, recorded, or
    /// a crash at one (see [`Call::at_changes`]).
    pub at_changes: Option<AtChanges>,
}

/// Runs a [`Launch`]: starts the process, enforces its limit, captures its
/// output and reports what it left behind. An interrupt of the run
/// (`supervisor`) stops it.
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Runs it to the end; `Err` when it could not be started at all.
    fn run<'a>(
        &'a self,
        launch: &'a Launch,
        supervisor: &'a Supervisor,
    ) -> BoxFuture<'a, Result<Outcome, SpawnError>>;
}

/// A process on this host, as a Nomad client starts one (see [`dhv_host::exec`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProcess;

impl Transport for LocalProcess {
    fn run<'a>(
        &'a self,
        launch: &'a Launch,
        supervisor: &'a Supervisor,
    ) -> BoxFuture<'a, Result<Outcome, SpawnError>> {
        let mut call = Call::new(&launch.program)
            .arg0(&launch.arg0)
            .env(launch.env.clone())
            .timeout(launch.timeout)
            .kill_mode(launch.kill_mode)
            .output_cap(launch.output_cap)
            .stdout_cap(launch.stdout_cap)
            .follow(launch.follow)
            .refuse(launch.refuse)
            .at_changes(launch.at_changes.clone())
            .supervised_by(supervisor);
        for arg in &launch.args {
            call = call.arg(arg.clone());
        }
        if let Some(dir) = &launch.cwd {
            call = call.current_dir(dir);
        }
        Box::pin(async move { call.run().await })
    }
}
