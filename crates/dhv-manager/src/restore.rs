//! Restore at agent start: bring every saved volume back after a restart or a
//! reboot.
//!
//! As in Nomad, a created volume gets its plugin's create called again with the
//! stored request (plugins must be idempotent), and a registered one is checked
//! with `stat`. Unlike Nomad, a missing plugin fails only its own volumes, and at
//! most [`with_restore_concurrency`](HostVolumeManager::with_restore_concurrency)
//! calls run at once, each lane on a thread of its own, one per core at
//! first and more while the CPUs have room (see `run_restore`).
//! Each plugin is looked up once per restore, not once per volume. Restore
//! reads the state and never writes it: a volume that fails to restore stays
//! saved, to be tried again next time.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::error::ManagerError;
use super::volume::Volume;
use super::volumes::{HostVolumeManager, cores};
use crate::contract::CreateRequest;
use crate::plugin::{HostVolumePlugin, PluginError, PluginRun, Timeouts};
use dhv_host::exec::CpuUse;

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
    /// Lanes take the next job from one queue until it is empty. Each lane is
    /// a thread of its own with a runtime of its own: a call's readiness
    /// wakes the one thread waiting for it, which starts the lane's next call
    /// right there. On the caller's runtime the lanes' events would be shared
    /// out between its workers, waking one another to hand work over
    /// (measured: a tenth more time for a restore of a thousand volumes of
    /// the reference plugin than plain threads with `std::process::Command`),
    /// and a worker waiting for its child's `execve` would hold up the other
    /// lanes queued on it.
    ///
    /// There is one lane per core at first, and more (up to the limit) while
    /// the CPUs have room for them (see [`grow_lanes`]), or all of them at
    /// once with
    /// [`with_restore_all_at_once`](HostVolumeManager::with_restore_all_at_once).
    /// A job that panics loses its own result only (an error of ours for that
    /// volume); its lane goes on with the next job. Dropping the restore stops
    /// every lane: its call in flight is dropped, which kills and sweeps its
    /// processes, as for any call.
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
        let most = self.restore_concurrency.min(queue.len());
        let first = if self.restore_all_at_once {
            most
        } else {
            most.min(cores())
        };
        let queue: Queue = Arc::new(Mutex::new(queue));
        let (done, mut outcomes) = mpsc::unbounded_channel();
        // Dropped with this future (or at its end): every lane stops, and so
        // does the thread that adds lanes.
        let (_running, stop) = watch::channel(());
        let (_growing, ended) = std::sync::mpsc::channel::<()>();
        for _ in 0..first {
            start_lane(&queue, done.clone(), &stop);
        }
        if first < most {
            let lanes = Lanes {
                queue: Arc::clone(&queue),
                done: done.downgrade(),
                stop: stop.clone(),
            };
            // Without it the restore keeps its first lanes.
            let _ = std::thread::Builder::new()
                .name("dhv-restore".into())
                .spawn(move || grow_lanes(lanes, first, most - first, ended));
        }
        drop(done);
        collect(&mut outcomes, &mut results).await;
        // Jobs that no lane took (no thread could be started, or none could
        // make its runtime: a process at its limits) run here, one at a time,
        // on the caller's runtime.
        if !dhv_host::sync::lock(&queue).is_empty() {
            let (done, mut outcomes) = mpsc::unbounded_channel();
            tokio::join!(
                lane(queue, done, stop),
                collect(&mut outcomes, &mut results)
            );
        }
        results
    }
}

/// Starts a lane on a thread of its own. One that cannot be started leaves
/// its share to the others.
fn start_lane(
    queue: &Queue,
    done: mpsc::UnboundedSender<(usize, JobResult)>,
    stop: &watch::Receiver<()>,
) -> bool {
    let (queue, stop) = (Arc::clone(queue), stop.clone());
    std::thread::Builder::new()
        .name("dhv-restore".into())
        .spawn(move || lane_thread(queue, done, stop))
        .is_ok()
}

/// What [`grow_lanes`] needs to start a lane. It holds the results' sender
/// weakly: the restore ends when its lanes have, whatever this thread does.
struct Lanes {
    queue: Queue,
    done: mpsc::WeakUnboundedSender<(usize, JobResult)>,
    stop: watch::Receiver<()>,
}

/// How often [`grow_lanes`] looks at the CPUs: several scheduler ticks, so
/// that the time of a process still running is mostly counted.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// How long the lanes may go without taking a job before [`grow_lanes`]
/// adds one anyway.
const STUCK_FOR: Duration = Duration::from_secs(1);

/// Adds up to `more` lanes to a restore that started with `started`, at each
/// look (every [`LOOK_EVERY`]) as many as the CPUs have room for
/// ([`room_for`]), until the queue is empty or the restore has ended
/// (`ended` disconnected). When no lane has taken a job for [`STUCK_FOR`],
/// it adds one whatever the CPUs say: calls that long make switching
/// between lanes cost nothing, and calls that wait for one another (or for
/// something the host is too busy to give) get on.
///
/// One lane per core keeps the cores busy with plugins that compute (the
/// reference plugin's create is two `execve`s); more of them only queue for
/// the CPUs, and each costs its thread's wake-ups (a thousand volumes took
/// 1–3% longer with four lanes per core than with one: docs/performance.md,
/// section 3), while a host busy with other work gets no more plugin
/// processes at once than it has cores. Plugins that wait on a disk or a
/// network leave the CPUs idle, and get their lanes at the first look.
fn grow_lanes(
    lanes: Lanes,
    mut started: usize,
    mut more: usize,
    ended: std::sync::mpsc::Receiver<()>,
) {
    let cores = cores();
    let mut last = (Instant::now(), dhv_host::exec::cpu_use());
    // How many jobs were waiting, and since when.
    let mut waiting = (dhv_host::sync::lock(&lanes.queue).len(), last.0);
    while more > 0 {
        match ended.recv_timeout(LOOK_EVERY) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let now = (Instant::now(), dhv_host::exec::cpu_use());
        let used = now.1.since(&last.1);
        let over = now.0.duration_since(last.0);
        last = now;
        let left = dhv_host::sync::lock(&lanes.queue).len();
        if left == 0 {
            return;
        }
        if left != waiting.0 {
            waiting = (left, now.0);
        }
        let mut add = room_for(used, over, cores, started);
        if add == 0 && now.0.duration_since(waiting.1) >= STUCK_FOR {
            // No lane took a job for that long: whatever holds the CPUs
            // (this process's other work, another program), one more.
            add = 1;
            waiting.1 = now.0;
        }
        for _ in 0..add.min(more) {
            if dhv_host::sync::lock(&lanes.queue).is_empty() {
                return;
            }
            let Some(done) = lanes.done.upgrade() else {
                return;
            };
            if !start_lane(&lanes.queue, done, &lanes.stop) {
                return;
            }
            started += 1;
            more -= 1;
        }
    }
}

/// How many more lanes the machine had room for over `over`, given what
/// this process and the calls of its `lanes` used of the CPUs meanwhile:
/// none unless at least half a core was left idle and the calls waited for
/// a CPU less than a tenth of the time (where that is known: a busy host
/// makes them wait however little we use); then one, and one more for each
/// share of a lane (what a lane used on average) that the rest of the idle
/// time holds.
fn room_for(used: CpuUse, over: Duration, cores: usize, lanes: usize) -> usize {
    let over_s = over.as_secs_f64();
    let idle = over_s * cores as f64 - used.used.as_secs_f64();
    let half_core = over_s / 2.0;
    let waited_little = used.waited.is_none_or(|w| w.as_secs_f64() < over_s / 10.0);
    if idle < half_core || !waited_little {
        return 0;
    }
    // A lane that used next to nothing counts as a hundredth of a core.
    let per_lane = (used.used.as_secs_f64() / lanes.max(1) as f64).max(over_s / 100.0);
    1 + ((idle - half_core) / per_lane) as usize
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
        let next = dhv_host::sync::lock(&queue).pop_front();
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
            Err(panic) => Poll::Ready(Err(dhv_host::sync::panic_text(&*panic))),
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

#[cfg(test)]
mod tests {
    use super::*;

    const LOOK: Duration = Duration::from_millis(20);

    fn cores_used(cores: f64, waited_ms: Option<u64>) -> CpuUse {
        CpuUse {
            used: LOOK.mul_f64(cores),
            waited: waited_ms.map(Duration::from_millis),
        }
    }

    #[test]
    fn busy_cores_leave_no_room() {
        // Two lanes of a plugin that computes, on two cores.
        assert_eq!(room_for(cores_used(1.95, Some(1)), LOOK, 2, 2), 0);
        assert_eq!(room_for(cores_used(1.6, None), LOOK, 2, 2), 0);
    }

    #[test]
    fn idle_cores_make_room_for_as_many_lanes_as_they_hold() {
        // Lanes whose plugins wait on a disk or a network: each used 0.04
        // of a core, and 1.42 cores are idle beyond the margin.
        assert_eq!(room_for(cores_used(0.08, Some(0)), LOOK, 2, 2), 36);
        assert_eq!(room_for(cores_used(0.08, None), LOOK, 2, 2), 36);
        // 0.45 of a core each, 1.1 cores idle: one lane, and one more.
        assert_eq!(room_for(cores_used(0.9, Some(0)), LOOK, 2, 2), 2);
        // Half a core idle is enough for one.
        assert_eq!(room_for(cores_used(1.45, Some(0)), LOOK, 2, 2), 1);
        assert_eq!(room_for(cores_used(3.4, Some(1)), LOOK, 4, 4), 1);
        // Lanes that used nothing at all count as a hundredth of a core
        // each: room for many, never for infinitely many.
        assert!((100..200).contains(&room_for(cores_used(0.0, Some(0)), LOOK, 2, 2)));
    }

    #[test]
    fn calls_waiting_for_a_cpu_leave_no_room_however_little_we_use() {
        // A host busy with other work: our calls queue for the CPUs.
        assert_eq!(room_for(cores_used(0.5, Some(5)), LOOK, 2, 2), 0);
        assert!(room_for(cores_used(0.5, Some(1)), LOOK, 2, 2) > 0);
    }
}
