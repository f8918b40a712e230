//! Restore at agent start: bring every saved volume back after a restart or a
//! reboot.
//!
//! As in Nomad, a created volume gets its plugin's create called again with the
//! stored request (plugins must be idempotent), and a registered one is checked
//! with `stat`. Unlike Nomad, a missing plugin fails only its own volumes, and at
//! most [`with_restore_concurrency`](HostVolumeManager::with_restore_concurrency)
//! calls run at once, each lane on a thread of its own (see `run_restore`).
//! Each plugin is looked up once per restore, not once per volume. Restore
//! reads the state and never writes it: a volume that fails to restore stays
//! saved, to be tried again next time.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::{mpsc, watch};

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
    ///
    /// `restore_concurrency` lanes take the next job from one queue until it
    /// is empty. Each lane is a thread of its own with a runtime of its own:
    /// a call's readiness wakes the one thread waiting for it, which starts
    /// the lane's next call right there. On the caller's runtime the lanes'
    /// events would be shared out between its workers, waking one another to
    /// hand work over (measured: a tenth more time for a restore of a
    /// thousand volumes of the reference plugin than plain threads with
    /// `std::process::Command`), and a worker waiting for its child's
    /// `execve` would hold up the other lanes queued on it. A job that panics
    /// loses its own result only (an error of ours for that volume); its lane
    /// goes on with the next job. Dropping the restore stops every lane: its
    /// call in flight is dropped, which kills and sweeps its processes, as
    /// for any call.
    async fn run_restore(
        &self,
        volumes: &[Volume],
        jobs: Vec<Result<Job, ManagerError>>,
    ) -> Vec<Option<JobResult>> {
        let mut results: Vec<Option<JobResult>> = Vec::new();
        results.resize_with(volumes.len(), || None);
        let mut queue = VecDeque::new();
        for (slot, (volume, job)) in volumes.iter().zip(jobs).enumerate() {
            match job {
                Ok(job) => {
                    queue.push_back((slot, job, volume.name.clone(), volume.host_path.clone()))
                }
                Err(e) => results[slot] = Some((Err(e), None)),
            }
        }
        let lanes = self.restore_concurrency.min(queue.len());
        let queue: Queue = Arc::new(Mutex::new(queue));
        let (done, mut outcomes) = mpsc::unbounded_channel();
        // Dropped with this future (or at its end): every lane stops.
        let (_running, stop) = watch::channel(());
        for _ in 0..lanes {
            let (queue, done, stop) = (Arc::clone(&queue), done.clone(), stop.clone());
            // One that cannot be started leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name("dhv-restore".into())
                .spawn(move || lane_thread(queue, done, stop));
        }
        drop(done);
        collect(&mut outcomes, &mut results).await;
        // Jobs that no lane took (no thread could be started, or none could
        // make its runtime: a process at its limits) run here, one at a time,
        // on the caller's runtime.
        if !crate::lock(&queue).is_empty() {
            let (done, mut outcomes) = mpsc::unbounded_channel();
            tokio::join!(
                lane(queue, done, stop),
                collect(&mut outcomes, &mut results)
            );
        }
        results
    }
}

/// Puts each lane's results in their volumes' slots until every lane has
/// ended. A lane catches its jobs' panics; one that ends otherwise leaves its
/// volume without a result (an error of ours, see [`restored`]).
async fn collect(
    outcomes: &mut mpsc::UnboundedReceiver<(usize, JobResult)>,
    results: &mut [Option<JobResult>],
) {
    while let Some((slot, result)) = outcomes.recv().await {
        results[slot] = Some(result);
    }
}

/// The jobs not started yet: a volume's slot, its job, its name and path.
type Queue = Arc<Mutex<VecDeque<(usize, Job, String, String)>>>;

/// One lane on a thread of its own, with a runtime of its own.
fn lane_thread(
    queue: Queue,
    done: mpsc::UnboundedSender<(usize, JobResult)>,
    stop: watch::Receiver<()>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    // Without one, the other lanes (or the caller's runtime) take its jobs.
    if let Ok(runtime) = runtime {
        runtime.block_on(lane(queue, done, stop));
    }
}

/// Takes the next job until none is left or the restore is dropped, and
/// sends each result as it comes.
async fn lane(
    queue: Queue,
    done: mpsc::UnboundedSender<(usize, JobResult)>,
    mut stop: watch::Receiver<()>,
) {
    loop {
        // The lock is held for the pop alone, never across an await.
        let next = crate::lock(&queue).pop_front();
        let Some((slot, job, name, host_path)) = next else {
            return;
        };
        let result = tokio::select! {
            biased;
            _ = stop.changed() => return,
            result = CatchPanic(run_job(job, name, host_path)) => result
                .unwrap_or_else(|panic| (Err(internal(format!("it panicked: {panic}"))), None)),
        };
        if done.send((slot, result)).is_err() {
            return;
        }
    }
}

/// A future whose panic becomes an `Err` with the panic's message (empty
/// when it had none), so that one volume's failure of ours does not take its
/// lane's other volumes along.
struct CatchPanic<F>(F);

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: the inner future is never moved out of the pinned wrapper.
        let inner = unsafe { self.map_unchecked_mut(|c| &mut c.0) };
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(crate::panic_text(&*panic))),
        }
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
