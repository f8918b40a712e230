//! Restore at agent start: bring every saved volume back after a restart or a
//! reboot.
//!
//! As in Nomad, a created volume gets its plugin's create called again with the
//! stored request (plugins must be idempotent), and a registered one is checked
//! with `stat`. Unlike Nomad, a missing plugin fails only its own volumes, and at
//! most [`with_restore_concurrency`](HostVolumeManager::with_restore_concurrency)
//! calls run at once. Each plugin is looked up once per restore, not once per
//! volume. Restore reads the state and never writes it: a volume that
//! fails to restore stays saved, to be tried again next time.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::error::ManagerError;
use super::volume::Volume;
use super::volumes::HostVolumeManager;
use crate::contract::CreateRequest;
use crate::plugin::{HostVolumePlugin, PluginError, PluginRun, Timeouts};

/// The outcome of restoring one volume.
#[derive(Debug)]
pub struct Restored {
    /// The volume as saved.
    pub volume: Volume,
    /// The path the node publishes for it now, or why it is not published.
    pub result: Result<String, ManagerError>,
    /// The plugin call behind `result`, when a plugin executable ran: what it
    /// printed explains a failure better than the decoder's words alone.
    pub run: Option<PluginRun>,
}

impl Restored {
    /// Whether the volume is back.
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }

    /// The restored path.
    pub fn path(&self) -> Option<&str> {
        self.result.as_deref().ok()
    }

    /// Why it failed.
    pub fn error(&self) -> Option<&ManagerError> {
        self.result.as_ref().err()
    }
}

/// One volume's result and the plugin call behind it.
type JobResult = (Result<String, ManagerError>, Option<PluginRun>);

/// The work for one volume, decided before any call starts.
enum Job {
    Create(Arc<dyn HostVolumePlugin>, Box<CreateRequest>),
    Stat,
}

impl HostVolumeManager {
    /// Restores every saved volume, in state order, one result per volume. Only
    /// an unreadable state file fails the whole call.
    pub async fn restore(&self) -> Result<Vec<Restored>, ManagerError> {
        let volumes: Vec<Volume> = self
            .state
            .load_async()
            .await?
            .volumes
            .into_values()
            .collect();
        let jobs = self.plan_restore(&volumes);
        let outcomes = self.run_restore(&volumes, jobs).await;
        Ok(volumes.into_iter().zip(outcomes).map(restored).collect())
    }

    /// Decides each volume's job, or why it has none: a volume whose plugin is
    /// missing fails alone, before anything runs.
    fn plan_restore(&self, volumes: &[Volume]) -> Vec<Result<Job, ManagerError>> {
        let timeouts = Timeouts {
            create: self.restore_timeout,
            ..self.timeouts
        };
        // One lookup per plugin, not per volume: a node's thousand volumes
        // usually share a plugin or two, and a lookup walks the plugin dir.
        let mut plugins: HashMap<&str, Result<Arc<dyn HostVolumePlugin>, PluginError>> =
            HashMap::new();
        volumes
            .iter()
            .map(|volume| {
                let Some(req) = &volume.create_request else {
                    return Ok(Job::Stat);
                };
                let id = volume.plugin_id.as_deref().unwrap_or_default();
                match plugins
                    .entry(id)
                    .or_insert_with(|| self.plugin_with(id, timeouts))
                {
                    Ok(plugin) => Ok(Job::Create(Arc::clone(plugin), Box::new(req.clone()))),
                    Err(e) => Err(e.clone().into()),
                }
            })
            .collect()
    }

    /// Runs the jobs, at most `restore_concurrency` at once, and returns each
    /// volume's outcome in the volumes' order.
    async fn run_restore(
        &self,
        volumes: &[Volume],
        jobs: Vec<Result<Job, ManagerError>>,
    ) -> Vec<Option<JobResult>> {
        let permits = Arc::new(Semaphore::new(self.restore_concurrency));
        let mut results: Vec<Option<JobResult>> = Vec::new();
        results.resize_with(volumes.len(), || None);
        let mut tasks = JoinSet::new();
        let mut slot_of = HashMap::new();
        for (slot, (volume, job)) in volumes.iter().zip(jobs).enumerate() {
            let job = match job {
                Ok(job) => job,
                Err(e) => {
                    results[slot] = Some((Err(e), None));
                    continue;
                }
            };
            // Taken before spawning, so that at most `restore_concurrency`
            // tasks exist at all, not just run.
            let permit = Arc::clone(&permits)
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let name = volume.name.clone();
            let host_path = volume.host_path.clone();
            let handle = tasks.spawn(async move {
                let _permit = permit;
                run_job(job, name, host_path).await
            });
            slot_of.insert(handle.id(), slot);
        }
        while let Some(joined) = tasks.join_next_with_id().await {
            let (task, result) = match joined {
                Ok((task, result)) => (task, result),
                Err(e) => (e.id(), (Err(internal(e.to_string())), None)),
            };
            if let Some(slot) = slot_of.remove(&task) {
                results[slot] = Some(result);
            }
        }
        results
    }
}

/// One volume's call: create again with the stored request, or `stat` the
/// registered path.
async fn run_job(job: Job, name: String, host_path: String) -> JobResult {
    match job {
        Job::Create(plugin, req) => {
            let call = plugin.create(&req).await;
            let result = call.result.map(|r| r.path).map_err(ManagerError::from);
            (result, call.run)
        }
        Job::Stat => match tokio::fs::metadata(&host_path).await {
            Ok(_) => (Ok(host_path), None),
            Err(source) => (
                Err(ManagerError::HostPath {
                    name,
                    path: host_path.into(),
                    source,
                }),
                None,
            ),
        },
    }
}

/// A volume with its outcome; a missing outcome (a task that vanished) is an
/// error of ours, never a silent success.
fn restored((volume, outcome): (Volume, Option<JobResult>)) -> Restored {
    let (result, run) =
        outcome.unwrap_or_else(|| (Err(internal("no result was recorded".into())), None));
    Restored {
        volume,
        result,
        run,
    }
}

/// An error in restore's own machinery, not in a plugin or a volume.
fn internal(message: String) -> ManagerError {
    ManagerError::Internal {
        what: "restoring a volume".into(),
        message,
    }
}
