//! The checks that drive the manager (restore, reboot), as a Nomad client
//! drives plugins: a manager over the check's sandbox that calls the plugin
//! under test, the volumes it makes tracked for the check's clean-up, and its
//! calls logged for the run-wide checks ([`Managed`], reached as
//! [`Ctx::managed`](super::Ctx::managed)).

use std::sync::Arc;

use super::{Calls, Dirs, LoggedCall};
use crate::contract::Operation;
use crate::manager::{HostVolumeManager, ManagerError, Volume};
use crate::plugin::HostVolumePlugin;

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
            .with_plugin(calls.plugin.clone())
            // A restore's creates all run together, as in Nomad, however
            // busy the host: a verdict must not depend on its load.
            .with_restore_all_at_once();
        if let Some(dir) = calls.plugin.plugin_dir() {
            manager = manager.with_plugin_dir(dir);
        }
        Ok(manager)
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
