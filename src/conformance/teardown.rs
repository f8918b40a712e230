//! The run's lifecycle around its checks: the temp dir every sandbox lives
//! in, the signals that interrupt a run, and the teardown that leaves
//! nothing behind and destroys nothing that is not ours.
//!
//! Every ending goes the same way, only the first step differs:
//! 1. on SIGINT, SIGTERM or SIGHUP: no check starts any more, and the run's
//!    supervisor is cancelled (every running plugin call is killed); then the
//!    plugin's delete is sent for every volume still alive ([`LiveVolumes`]),
//!    all at once, each with its own limit, the whole within
//!    [`TEARDOWN_DEADLINE`]. A second signal cuts the deletes short;
//! 2. every mount still below the temp dir is listed (a delete left it: the
//!    terminal and the report name it), then unmounted, deepest first
//!    ([`crate::safe_fs::unmount_under`]);
//! 3. the temp dir is removed without ever crossing into another mount
//!    ([`crate::safe_fs::remove_tree`]), and whether it is gone is told as
//!    it is.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use super::context::Shared;
use crate::contract::{CreateRequest, DeleteRequest};
use crate::exec::Supervisor;
use crate::plugin::CallOptions;

/// How long the deletes of an interrupted run may take, all together.
pub const TEARDOWN_DEADLINE: Duration = Duration::from_secs(90);

/// Volumes of the run that were created and not yet deleted, by volumes dir
/// and id: what the teardown still has to delete.
///
/// A create cut short by an interrupt counts as created (the plugin may have
/// made, even mounted, the volume before it was killed); its delete is sent
/// with an empty `DHV_CREATED_PATH`, as no path was ever returned. A create
/// that failed by itself counts only if the volume existed before.
#[derive(Debug, Default)]
pub(crate) struct LiveVolumes {
    volumes: Mutex<BTreeMap<(String, String), Live>>,
    /// The run's supervisor: once cancelled, failed creates were cut short.
    run: Supervisor,
}

#[derive(Debug)]
struct Live {
    delete: DeleteRequest,
    /// A create returned a path for it (not only started).
    confirmed: bool,
}

impl LiveVolumes {
    /// A registry for the run supervised by `run`.
    pub fn new(run: Supervisor) -> LiveVolumes {
        LiveVolumes {
            volumes: Mutex::default(),
            run,
        }
    }

    /// A create of `req` starts.
    pub fn creating(&self, req: &CreateRequest) {
        let key = (req.volumes_dir.clone(), req.volume_id.clone());
        self.lock().entry(key).or_insert_with(|| Live {
            delete: DeleteRequest::for_created(req, ""),
            confirmed: false,
        });
    }

    /// A create of `req` ended: at `path`, or failed (`None`).
    pub fn create_ended(&self, req: &CreateRequest, path: Option<&str>) {
        let key = (req.volumes_dir.clone(), req.volume_id.clone());
        let mut volumes = self.lock();
        match path {
            Some(path) => {
                volumes.insert(
                    key,
                    Live {
                        delete: DeleteRequest::for_created(req, path),
                        confirmed: true,
                    },
                );
            }
            None if self.run.is_cancelled() => {}
            None => {
                if volumes.get(&key).is_some_and(|v| !v.confirmed) {
                    volumes.remove(&key);
                }
            }
        }
    }

    /// `req` was created at `path` (by the manager, on a check's behalf).
    pub fn created(&self, req: &CreateRequest, path: &str) {
        self.create_ended(req, Some(path));
    }

    /// The volume `id` in `volumes_dir` was deleted.
    pub fn deleted(&self, volumes_dir: &str, id: &str) {
        self.lock()
            .remove(&(volumes_dir.to_string(), id.to_string()));
    }

    /// Every volume still alive.
    pub fn all(&self) -> Vec<DeleteRequest> {
        self.lock().values().map(|v| v.delete.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Live>> {
        self.volumes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs every future at once on the current task and returns their outputs
/// in order (what `futures::join_all` does, without the crate).
pub(crate) async fn all_at_once<'a, T>(
    futures: Vec<Pin<Box<dyn Future<Output = T> + Send + 'a>>>,
) -> Vec<T> {
    let mut pending: Vec<_> = futures.into_iter().map(Some).collect();
    let mut done: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Some(fut) = slot {
                if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                    *out = Some(v);
                    *slot = None;
                }
            }
        }
        if pending.iter().all(Option::is_none) {
            Poll::Ready(done.iter_mut().map(|o| o.take().expect("done")).collect())
        } else {
            Poll::Pending
        }
    })
    .await
}

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
                let signo = next.await;
                if state
                    .first
                    .compare_exchange(0, signo, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    if let Some(run) = lock(&state.run).as_ref() {
                        run.cancel();
                    }
                } else {
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

    /// A supervisor for the teardown's deletes, which a second signal cancels
    /// (already cancelled if it came).
    fn teardown_supervisor(&self) -> Supervisor {
        let s = Supervisor::new();
        *lock(&self.received.teardown) = Some(s.clone());
        if self.received.hurry.load(Ordering::SeqCst) {
            s.cancel();
        }
        s
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        if let Some(l) = self.listener.take() {
            l.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the teardown did, told as it is.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Teardown {
    /// The run's temp dir.
    pub temp_dir: PathBuf,
    /// It is gone.
    pub removed: bool,
    /// Deletes sent for volumes still alive (after an interrupt).
    pub deletes: usize,
    /// Of those, the ones that failed or were cut short.
    pub deletes_failed: usize,
    /// A second signal skipped (what was left of) the deletes.
    pub deletes_skipped: bool,
    /// Mounts found below the temp dir after the plugin's deletes: each one
    /// a delete left behind.
    pub mounts_found: Vec<String>,
    /// Mounts that are still there (could not be unmounted).
    pub mounts_left: Vec<String>,
    /// Dirs the removal did not enter because they are mount points.
    pub kept: Vec<String>,
    /// `--keep`: the temp dir was left in place on request (mounts below it
    /// were still unmounted), so reproduce lines can be pasted as printed.
    pub kept_on_request: bool,
    /// What else could not be removed.
    pub errors: Vec<String>,
}

impl Teardown {
    /// What the report tells of it.
    pub fn outcome(&self) -> crate::report::SandboxOutcome {
        let mut kept = self.mounts_left.clone();
        kept.extend(
            self.kept
                .iter()
                .map(|k| format!("mount point {k} (not crossed)")),
        );
        kept.extend(self.errors.iter().cloned());
        if self.kept_on_request {
            kept.push(format!("{} (--keep)", self.temp_dir.display()));
        }
        crate::report::SandboxOutcome {
            removed: self.removed,
            mounts_left: self.mounts_found.clone(),
            kept,
        }
    }

    /// One line for the terminal: what was done and whether the temp dir is gone.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.deletes > 0 {
            parts.push(format!(
                "{} delete(s) sent for volumes still alive, {} failed",
                self.deletes, self.deletes_failed
            ));
        }
        if self.deletes_skipped {
            parts.push("deletes cut short by a second signal".to_string());
        }
        if !self.mounts_found.is_empty() {
            // A few on the terminal; the report lists them all.
            let shown: Vec<&str> = self
                .mounts_found
                .iter()
                .take(3)
                .map(String::as_str)
                .collect();
            let more = match self.mounts_found.len() - shown.len() {
                0 => String::new(),
                n => format!(" and {n} more (all in the report)"),
            };
            parts.push(format!(
                "{} mount(s) left by the plugin, unmounted by the harness: {}{more}",
                self.mounts_found.len(),
                shown.join(", ")
            ));
        }
        if self.removed {
            parts.push(format!("temp dir {} removed", self.temp_dir.display()));
        } else if self.kept_on_request {
            parts.push(format!(
                "temp dir {} kept (--keep); remove it when done",
                self.temp_dir.display()
            ));
        } else {
            let mut why = self.mounts_left.clone();
            why.extend(self.kept.iter().map(|k| format!("mount point {k}")));
            why.extend(self.errors.iter().take(3).cloned());
            parts.push(format!(
                "temp dir {} NOT removed (nothing was removed across a mount): {}",
                self.temp_dir.display(),
                why.join("; ")
            ));
        }
        parts.join("; ")
    }
}

/// The mounts at or below `dir` (a volumes dir after its volumes were
/// deleted: each one a delete left behind), for the checks to name.
pub(crate) fn mounts_left(dir: &Path) -> Vec<String> {
    crate::safe_fs::mounts_under(dir)
        .unwrap_or_default()
        .iter()
        .map(|m| m.to_string())
        .collect()
}

/// Makes the run's temp dir. It is never removed by a plain recursive
/// removal: [`finish`] removes it.
pub(crate) fn make_root() -> std::io::Result<PathBuf> {
    Ok(tempfile::Builder::new()
        .prefix("dhv-conform-")
        .tempdir()?
        .keep())
}

/// Deletes every volume still alive, all at once: the probes' volumes,
/// volumes whose delete hung, and after an interrupt whatever the checks
/// had not deleted yet.
async fn delete_live(shared: &Shared, signals: &Signals, out: &mut Teardown) {
    let live = shared.live.all();
    if live.is_empty() {
        return;
    }
    let supervisor = signals.teardown_supervisor();
    let plugin = shared.settings.target.open(&CallOptions {
        timeouts: shared.settings.timeouts(),
        supervisor: Some(supervisor.clone()),
        ..CallOptions::default()
    });
    let calls = live
        .iter()
        .map(|req| {
            let plugin = plugin.clone();
            Box::pin(async move { plugin.delete(req).await.ok() })
                as Pin<Box<dyn Future<Output = bool> + Send + '_>>
        })
        .collect();
    let results = match tokio::time::timeout(TEARDOWN_DEADLINE, all_at_once(calls)).await {
        Ok(results) => results,
        Err(_) => {
            // The deadline passed: the calls still running are killed.
            supervisor.cancel();
            vec![false; live.len()]
        }
    };
    out.deletes = live.len();
    out.deletes_failed = results.iter().filter(|ok| !**ok).count();
    out.deletes_skipped = supervisor.is_cancelled();
    for (req, ok) in live.iter().zip(&results) {
        if *ok {
            shared.live.deleted(&req.volumes_dir, &req.volume_id);
        }
    }
}

/// Ends the run: the deletes of the volumes still alive; then the mounts
/// left below the temp dir are named and unmounted, and the temp dir is
/// removed without crossing a mount.
pub(crate) fn finish(
    rt: &tokio::runtime::Runtime,
    shared: &Shared,
    signals: &Signals,
    keep: bool,
) -> Teardown {
    let mut out = Teardown {
        temp_dir: shared.root.clone(),
        ..Teardown::default()
    };
    rt.block_on(delete_live(shared, signals, &mut out));
    remove_root(&shared.root, &mut out, keep);
    out
}

/// Unmounts what plugins left below `root`, then removes it unless `keep`.
fn remove_root(root: &Path, out: &mut Teardown, keep: bool) {
    match crate::safe_fs::unmount_under(root) {
        Ok(done) => {
            out.mounts_found = done.all().map(|m| m.to_string()).collect();
            out.mounts_left = done
                .failed
                .iter()
                .map(|(m, why)| format!("{} still mounted ({why})", m.mount_point.display()))
                .collect();
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => out
            .errors
            .push(format!("cannot list the mounts below it: {e}")),
    }
    if keep {
        out.kept_on_request = true;
        return;
    }
    let removal = crate::safe_fs::remove_tree(root);
    out.removed = removal.removed;
    out.kept = removal
        .mount_points
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    out.errors.extend(removal.errors);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_volumes_follow_creates_and_deletes() {
        let live = LiveVolumes::default();
        let req = request();
        live.creating(&req);
        live.create_ended(&req, None);
        assert!(live.all().is_empty(), "a create that failed by itself");
        live.creating(&req);
        assert_eq!(live.all()[0].created_path, "", "a create under way");
        live.create_ended(&req, Some("/v/id-1"));
        assert_eq!(live.all().len(), 1);
        assert_eq!(live.all()[0].created_path, "/v/id-1");
        live.deleted("/other", "id-1");
        assert_eq!(live.all().len(), 1, "another dir's volume of the same id");
        live.deleted("/v", "id-1");
        assert!(live.all().is_empty());
    }

    fn request() -> CreateRequest {
        CreateRequest {
            volumes_dir: "/v".into(),
            plugin_dir: String::new(),
            node_pool: "default".into(),
            namespace: "default".into(),
            volume_name: "v".into(),
            volume_id: "id-1".into(),
            capacity_min_bytes: 0,
            capacity_max_bytes: 0,
            node_id: "n".into(),
            parameters: None,
        }
    }

    #[test]
    fn a_create_cut_short_by_an_interrupt_stays_alive() {
        let run = Supervisor::new();
        let live = LiveVolumes::new(run.clone());
        let req = request();
        live.creating(&req);
        run.cancel();
        live.create_ended(&req, None);
        assert_eq!(live.all().len(), 1);
        assert_eq!(live.all()[0].created_path, "");
    }

    #[test]
    fn all_at_once_runs_them_together_and_keeps_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let out = rt.block_on(all_at_once(
            (0..20u64)
                .map(|i| {
                    Box::pin(async move {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        i
                    }) as Pin<Box<dyn Future<Output = u64> + Send>>
                })
                .collect(),
        ));
        assert_eq!(out, (0..20).collect::<Vec<_>>());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}
