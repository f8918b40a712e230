//! The checks that drive the manager (restore, reboot), as a Nomad client
//! drives plugins: a manager over the check's sandbox that calls the plugin
//! under test, the volumes it makes tracked for the check's clean-up, and its
//! calls logged for the run-wide checks ([`Managed`], reached as
//! [`Ctx::managed`](super::Ctx::managed)).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::attempt::{Again, By, End, Failed, Nth, When};
use super::ledger::Gate;
use super::{Calls, Dirs, LoggedCall, Shared};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::manager::{HostVolumeManager, ManagerError, Volume, VolumeSpec};
use crate::plugin::{BoxFuture, Fingerprint, HostVolumePlugin, PluginCall, PluginRun};

/// The plugin under test as the manager drives it: each of its calls passes
/// the run's gate and counts as under way in the run while it runs, as the
/// checks' own calls do, so that a call made alone has none of the
/// manager's beside it, and one that failed beside the manager's (a
/// restore's creates, all at once) is known to have had company.
struct Counted {
    plugin: Arc<dyn HostVolumePlugin>,
    run: Arc<Shared>,
    /// Its calls are made alone for now (they hold the gate exclusively).
    alone: Arc<std::sync::atomic::AtomicBool>,
    /// The check whose calls these are, and its dir (where its volumes'
    /// devices are looked for when a delete fails: see [`held`](super::held)).
    check: &'static str,
    dir: std::path::PathBuf,
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("plugin", &self.plugin)
            .finish_non_exhaustive()
    }
}

/// One call of [`Counted`] under way, through the gate.
struct UnderWay<'a>(&'a Shared, #[allow(dead_code)] Gate<'a>);

impl Counted {
    async fn under_way(&self) -> UnderWay<'_> {
        let gate = Gate::hold(&self.run, self.alone.load(Ordering::SeqCst)).await;
        self.run.calls_started.fetch_add(1, Ordering::SeqCst);
        self.run.in_flight.fetch_add(1, Ordering::SeqCst);
        UnderWay(&self.run, gate)
    }
}

impl Drop for UnderWay<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl HostVolumePlugin for Counted {
    fn id(&self) -> &str {
        self.plugin.id()
    }

    fn is_builtin(&self) -> bool {
        self.plugin.is_builtin()
    }

    fn plugin_dir(&self) -> Option<&std::path::Path> {
        self.plugin.plugin_dir()
    }

    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>> {
        Box::pin(async move {
            let _counted = self.under_way().await;
            self.plugin.fingerprint().await
        })
    }

    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>> {
        Box::pin(async move {
            let _counted = self.under_way().await;
            self.plugin.create(req).await
        })
    }

    fn delete<'a>(&'a self, req: &'a DeleteRequest) -> BoxFuture<'a, PluginCall<()>> {
        Box::pin(async move {
            let once = || async {
                let _counted = self.under_way().await;
                self.plugin.delete(req).await
            };
            super::held::delete_managed(&self.run, self.check, &self.dir, once).await
        })
    }

    fn run_unknown<'a>(
        &'a self,
        op: &'a str,
        env: Vec<(String, String)>,
    ) -> BoxFuture<'a, Option<PluginRun>> {
        self.plugin.run_unknown(op, env)
    }
}

/// The check's calls as the manager makes them on its behalf.
#[derive(Clone, Copy)]
pub(crate) struct Managed<'a> {
    pub(super) calls: &'a Calls,
    /// The check's dirs, where the manager's state lives.
    pub(super) dirs: &'a Dirs,
}

impl Managed<'_> {
    /// The plugin under test, as Nomad runs it, for the manager to drive.
    pub fn plugin(&self) -> &Arc<dyn HostVolumePlugin> {
        &self.calls.plugin
    }

    /// How many raw calls the check made so far (see [`log_runs_from`](Self::log_runs_from)).
    pub fn recorded(&self) -> usize {
        self.calls.recorder.len()
    }

    /// A manager over this sandbox (state in `<dir>/state`) that drives the
    /// plugin under test, for the checks that exercise what a Nomad client does
    /// around plugins (restore).
    pub fn manager(&self) -> Result<HostVolumeManager, ManagerError> {
        let calls = self.calls;
        let template = calls.request();
        // By the harness's own descriptor of the dir: a plugin that mounts
        // something over the run's temp dir (or the check's) must not have
        // the manager write its state there.
        let state = self
            .dirs
            .make_dirs_through_fd(std::path::Path::new("state"))
            .map_err(|source| {
                ManagerError::from(crate::manager::StateError::CreateDir {
                    dir: calls.dir.join("state"),
                    source,
                })
            })?;
        let mut manager = HostVolumeManager::open(state)?
            .with_volumes_dir(&calls.volumes)
            .with_node_id(template.node_id)
            .with_node_pool(template.node_pool)
            .with_timeouts(calls.shared.settings.timeouts())
            .with_restore_timeout(
                crate::contract::RESTORE_TIMEOUT.mul_f64(calls.shared.settings.timeout_scale),
            )
            .with_plugin(Arc::new(Counted {
                plugin: calls.plugin.clone(),
                run: calls.shared.clone(),
                alone: calls.managed_alone.clone(),
                check: calls.asker.id,
                dir: calls.dir.clone(),
            }))
            // A restore's creates all run together, as in Nomad, however
            // busy the host: a verdict must not depend on its load.
            .with_restore_all_at_once();
        if let Some(dir) = calls.plugin.plugin_dir() {
            manager = manager.with_plugin_dir(dir);
        }
        Ok(manager)
    }

    /// Creates `spec` through `manager`, as a Nomad client does, its calls
    /// logged for the run-wide checks. A create that failed (not by its
    /// limit) while another call of the run was under way is made again
    /// alone, and that one is the answer when it succeeds: the race is
    /// `process.repeatable`'s, cited by the check (see
    /// [`repeat`](super::repeat)).
    pub async fn create(
        &self,
        manager: &HostVolumeManager,
        spec: VolumeSpec,
        step: &str,
    ) -> Result<Volume, ManagerError> {
        let calls = self.calls;
        let shared = &calls.shared;
        let before = self.recorded();
        let (first, alone) = {
            // Alone: nothing under way when it began, and no call of the run
            // started while it ran but its own one (the manager's plugin
            // calls are counted, see `Counted`).
            let idle = shared.in_flight.load(Ordering::SeqCst) == 0;
            let ticket = shared.calls_started.load(Ordering::SeqCst);
            let made = manager.create(spec.clone()).await;
            let started = shared.calls_started.load(Ordering::SeqCst) - ticket;
            (made, idle && started <= 1)
        };
        self.log_runs_from(before);
        let failed = calls.recorder.runs().into_iter().skip(before).last();
        let Err(error) = &first else {
            return first;
        };
        // The manager knows a failure by its error only: one that ran out of
        // time is the deadline checks', any other may be made again alone.
        let end = match failed.as_ref().is_some_and(|r| r.timed_out()) {
            true => End::Overran,
            false => End::Failed,
        };
        let policy = Failed {
            expect: super::Expect::Success,
            at_once: true,
            company: !alone,
            repeats: calls.asker.repeats,
            ..Failed::new(By::Manager, Nth::First, end)
        };
        if policy.again(When::Ended) != Some(Again::Alone) {
            return first;
        }
        let again = self.recorded();
        calls.managed_alone.store(true, Ordering::SeqCst);
        let second = manager.create(spec).await;
        calls.managed_alone.store(false, Ordering::SeqCst);
        self.log_runs_from(again);
        if second.is_err() {
            return first;
        }
        let alone_run = calls.recorder.runs().into_iter().skip(again).last();
        calls.record(
            step,
            Operation::Create,
            &error.to_string(),
            [failed, alone_run],
        );
        second
    }

    /// Remembers a volume made through the manager, for the check's clean-up.
    pub fn track(&self, volume: &Volume) {
        if let Some(req) = &volume.create_request {
            self.calls.ledger.created(req, &volume.host_path);
            self.calls.shared.live.created(req, &volume.host_path);
        }
    }

    /// Forgets a volume deleted through the manager.
    pub fn untrack(&self, id: &str) {
        if let Some(req) = self.calls.ledger.deleted(id) {
            self.calls.shared.live.deleted(&req.volumes_dir, id);
        }
    }

    /// Logs, for the run-wide checks, the raw calls recorded since the
    /// recorder held `start` calls (calls the manager made on our behalf).
    pub fn log_runs_from(&self, start: usize) {
        let calls = self.calls;
        let timeouts = calls.shared.settings.timeouts();
        for run in calls.recorder.runs().into_iter().skip(start) {
            let Ok(op) = run.operation.parse::<Operation>() else {
                continue;
            };
            calls.shared.log.push(LoggedCall {
                check: calls.asker.id,
                op,
                duration: run.duration(),
                limit: timeouts.limit(op),
                plugin_failed: !run.succeeded(),
                residue: None,
                error: None,
                run: Some(Arc::new(run)),
                phase: calls.phase,
                // Calls the manager made; not counted as they ran.
                in_flight: 0,
            });
        }
    }
}
