//! The checks that drive the manager (restore, reboot), as a Nomad client
//! drives plugins: a manager over the check's sandbox that calls the plugin
//! under test, the volumes it makes tracked for the check's clean-up, and its
//! calls logged for the run-wide checks.

use std::sync::Arc;

use super::{Calls, LoggedCall};
use crate::contract::Operation;
use crate::manager::{HostVolumeManager, ManagerError, Volume};

impl Calls {
    /// A manager over this sandbox (state in `<dir>/state`) that drives the
    /// plugin under test, for the checks that exercise what a Nomad client does
    /// around plugins (restore).
    pub fn manager(&self) -> Result<HostVolumeManager, ManagerError> {
        let template = self.request();
        let mut manager = HostVolumeManager::open(self.dir.join("state"))?
            .with_volumes_dir(&self.volumes)
            .with_node_id(template.node_id)
            .with_node_pool(template.node_pool)
            .with_timeouts(self.shared.settings.timeouts())
            .with_restore_timeout(
                crate::contract::RESTORE_TIMEOUT.mul_f64(self.shared.settings.timeout_scale),
            )
            .with_plugin(self.plugin.clone());
        if let Some(dir) = self.plugin.plugin_dir() {
            manager = manager.with_plugin_dir(dir);
        }
        Ok(manager)
    }

    /// Remembers a volume made through the manager, for [`cleanup`](Self::cleanup).
    pub fn track(&self, volume: &Volume) {
        if let Some(req) = &volume.create_request {
            self.ledger.created(req, &volume.host_path);
            self.shared.live.created(req, &volume.host_path);
        }
    }

    /// Forgets a volume deleted through the manager.
    pub fn untrack(&self, id: &str) {
        if let Some(req) = self.ledger.deleted(id) {
            self.shared.live.deleted(&req.volumes_dir, id);
        }
    }

    /// Logs, for the run-wide checks, the raw calls recorded since the
    /// recorder held `start` calls (calls the manager made on our behalf).
    pub fn log_runs_from(&self, start: usize) {
        let timeouts = self.shared.settings.timeouts();
        for run in self.recorder.runs().into_iter().skip(start) {
            let Ok(op) = run.operation.parse::<Operation>() else {
                continue;
            };
            self.shared.log.push(LoggedCall {
                check: self.check,
                op,
                duration: run.duration(),
                limit: timeouts.limit(op),
                plugin_failed: !run.succeeded(),
                residue: None,
                error: None,
                run: Some(Arc::new(run)),
                phase: self.phase,
                // Calls the manager made; not counted as they ran.
                in_flight: 0,
            });
        }
    }
}
