//! The plugin under test, and one uniform way to call it whether it is the
//! built-in `mkdir` (in-process, through the trait) or an executable (through the
//! runner, with every raw call kept).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::exec::Supervisor;
use crate::plugin::{
    ExternalPlugin, Fingerprint, HostVolumePlugin, MkdirPlugin, PluginError, PluginRun, Recorder,
    Timeouts,
};

/// What `dhv-conform check` was asked to test.
#[derive(Debug, Clone)]
pub enum Target {
    /// The built-in `mkdir` plugin.
    Builtin,
    /// A plugin executable, by path.
    External(PathBuf),
}

impl Target {
    /// `mkdir` means the built-in; anything else is a path.
    pub fn parse(arg: &str) -> Target {
        if arg == "mkdir" {
            Target::Builtin
        } else {
            Target::External(PathBuf::from(arg))
        }
    }

    /// Whether this is the in-process built-in.
    pub fn is_builtin(&self) -> bool {
        matches!(self, Target::Builtin)
    }

    /// A callable instance that records into `recorder`.
    pub(crate) fn instance(
        &self,
        timeouts: Timeouts,
        recorder: &Recorder,
        supervisor: &Supervisor,
    ) -> Instance {
        match self {
            Target::Builtin => Instance::Builtin(MkdirPlugin),
            Target::External(path) => Instance::External(Arc::new(
                ExternalPlugin::from_path(path)
                    .with_timeouts(timeouts)
                    .with_recorder(recorder.clone())
                    .with_supervisor(supervisor.clone()),
            )),
        }
    }
}

/// A callable plugin.
#[derive(Debug, Clone)]
pub(crate) enum Instance {
    Builtin(MkdirPlugin),
    External(Arc<ExternalPlugin>),
}

/// One call and what came of it.
#[derive(Debug, Clone)]
pub(crate) struct Call<T> {
    pub result: Result<T, PluginError>,
    /// The raw call, for external plugins.
    pub run: Option<PluginRun>,
    pub duration: Duration,
}

impl<T> Call<T> {
    /// A built-in call, timed here (there is no process to time).
    async fn timed(call: impl std::future::Future<Output = Result<T, PluginError>>) -> Call<T> {
        let start = Instant::now();
        let result = call.await;
        Call {
            result,
            run: None,
            duration: start.elapsed(),
        }
    }

    /// An external call, timed by the runner.
    fn from_run((run, result): (PluginRun, Result<T, PluginError>)) -> Call<T> {
        Call {
            result,
            duration: run.duration(),
            run: Some(run),
        }
    }

    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }

    /// Nomad's error text, or "" on success.
    pub fn error_text(&self) -> String {
        self.result
            .as_ref()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    /// Whether the process started and exited 0 (true for a successful built-in call).
    pub fn exited_zero(&self) -> bool {
        match &self.run {
            Some(run) => run.succeeded(),
            None => self.result.is_ok(),
        }
    }
}

impl Instance {
    /// Fingerprints, killing the call only after `limit`.
    pub async fn fingerprint_within(&self, limit: Duration) -> Call<Fingerprint> {
        match self {
            Instance::Builtin(p) => Call::timed(p.fingerprint()).await,
            Instance::External(p) => {
                let mut timeouts = p.timeouts();
                timeouts.fingerprint = limit;
                let p = p.as_ref().clone().with_timeouts(timeouts);
                Call::from_run(p.fingerprint_run().await)
            }
        }
    }

    pub async fn create(&self, req: &CreateRequest) -> Call<CreateResponse> {
        match self {
            Instance::Builtin(p) => Call::timed(p.create(req)).await,
            Instance::External(p) => Call::from_run(p.create_run(req).await),
        }
    }

    pub async fn delete(&self, req: &DeleteRequest) -> Call<()> {
        match self {
            Instance::Builtin(p) => Call::timed(p.delete(req)).await,
            Instance::External(p) => Call::from_run(p.delete_run(req).await),
        }
    }

    /// The plugin id, as the manager looks it up.
    pub fn id(&self) -> &str {
        match self {
            Instance::Builtin(p) => p.id(),
            Instance::External(p) => p.id(),
        }
    }

    /// The same plugin as the manager takes it.
    pub fn as_dyn(&self) -> Arc<dyn HostVolumePlugin> {
        match self {
            Instance::Builtin(p) => Arc::new(p.clone()),
            Instance::External(p) => p.clone(),
        }
    }

    pub fn external(&self) -> Option<&ExternalPlugin> {
        match self {
            Instance::External(p) => Some(p),
            Instance::Builtin(_) => None,
        }
    }
}
