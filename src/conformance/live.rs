//! What both the checks' context and the run's teardown keep track of or
//! need, kept apart from both so neither imports the other: the registry of
//! volumes still alive ([`LiveVolumes`]) and [`join_all`], which runs a
//! batch of calls together.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;

use crate::contract::{CreateRequest, DeleteRequest};
use crate::exec::Supervisor;

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
        crate::lock(&self.volumes)
    }
}

/// Awaits every future at once, on the current task, and returns their
/// outputs in order (what `futures::join_all` does, without the crate).
pub(crate) async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
    fn join_all_runs_them_together_and_keeps_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let out = rt.block_on(join_all((0..20u64).map(|i| async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            i
        })));
        assert_eq!(out, (0..20).collect::<Vec<_>>());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}
