//! What a check works with, split by concern:
//! - [`sandbox`]: the check's own dirs, listings of them and canary files;
//! - [`calls`]: the calls a check makes, each with its stated expectation
//!   ([`Expect`]), kept in the check's [`ledger`]; [`variant`]: the same
//!   plugin with other call options; [`managed`]: the manager some checks
//!   drive it through;
//! - [`log`]: the run's call log ([`CallLog`]) that the run-wide checks read
//!   (and nothing else);
//! - [`probes`]: the run's shared first calls and the prerequisites checks
//!   derive from them ("needs create.succeeds");
//! - [`steps`]: the scenario steps several checks share (create cleanly,
//!   plant a canary in a volume);
//! - [`residue`]: what every create and delete leaves (one root cause, one
//!   finding: `delete.no-residue`'s), for other checks to cite;
//! - [`unloaded`]: calls re-run alone when they timed out under the run's
//!   own load, for the checks that compare or diagnose.
//!
//! [`Ctx`] ties them together for one check; [`Shared`] holds what the checks
//! of one run share.

mod calls;
mod ledger;
mod log;
mod managed;
mod probes;
mod repeat;
mod residue;
mod sandbox;
mod steps;
mod timing;
mod unloaded;
mod variant;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub(crate) use calls::Expect;
pub(crate) use log::{CallLog, LoggedCall, RunLog};
pub(crate) use probes::Probes;
pub(crate) use repeat::Repeat;
pub(crate) use residue::{Residue, around};
pub(crate) use sandbox::{Planted, Sandbox, canary_bytes, canary_intact, listing};
pub(crate) use steps::{Holds, VolumeAt, plant_in_volume};
pub(crate) use timing::{Phase, is_provoked, overran};
pub(crate) use variant::Variant;

use crate::contract::{CreateRequest, Parameters};
use crate::plugin::{CallOptions, HostVolumePlugin, PluginRun, PluginSource, Recorder, Timeouts};

/// The volume request every check starts from: docs/checks.md's defaults, or a
/// user fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTemplate {
    /// Volume name; `None` means `conformance-<short id>` per volume. A
    /// fixture's name is the first volume's; the others of the run are
    /// `<name>-1`, `<name>-2`, … (Nomad refuses two volumes of one name on a node).
    pub name: Option<String>,
    /// DHV_NAMESPACE.
    pub namespace: String,
    /// DHV_NODE_POOL.
    pub node_pool: String,
    /// DHV_CAPACITY_MIN_BYTES.
    pub capacity_min: i64,
    /// DHV_CAPACITY_MAX_BYTES.
    pub capacity_max: i64,
    /// DHV_PARAMETERS (`None` is Nomad's `null`).
    pub parameters: Option<Parameters>,
}

impl Default for RequestTemplate {
    fn default() -> Self {
        RequestTemplate {
            name: None,
            namespace: "default".into(),
            node_pool: "default".into(),
            // Decimal, as Nomad's docs write them (`capacity_min = "50MB"`): a
            // MiB-aligned default would hide plugins that round down to whole MiB.
            capacity_min: 50_000_000,
            capacity_max: 100_000_000,
            parameters: None,
        }
    }
}

impl RequestTemplate {
    /// The create request this template makes for one volume: the one place a
    /// request is built from a template.
    pub fn request(
        &self,
        volumes_dir: &str,
        plugin_dir: &str,
        volume_name: String,
        volume_id: String,
        node_id: &str,
    ) -> CreateRequest {
        CreateRequest {
            volumes_dir: volumes_dir.to_owned(),
            plugin_dir: plugin_dir.to_owned(),
            node_pool: self.node_pool.clone(),
            namespace: self.namespace.clone(),
            volume_name,
            volume_id,
            capacity_min_bytes: self.capacity_min,
            capacity_max_bytes: self.capacity_max,
            node_id: node_id.to_owned(),
            parameters: self.parameters.clone(),
        }
    }
}

/// How a run is configured.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The plugin under test.
    pub target: PluginSource,
    /// The request checks start from.
    pub template: RequestTemplate,
    /// Multiplies every time limit.
    pub timeout_scale: f64,
    /// What the plugin claims its volumes are, and the checks its config skips.
    pub claims: crate::conformance::claims::Claims,
}

impl Settings {
    /// Nomad's limits, scaled.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts::default().scaled(self.timeout_scale)
    }
}

/// A verdict before the level is applied (a failed should becomes a warning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The rule holds.
    Pass(String),
    /// The rule is broken: expected vs. got.
    Fail(String),
    /// A finding the rule itself puts at should level, even in a must check
    /// (a warning, and a failure under `--strict`).
    Warn(String),
    /// Not evaluated, with the reason.
    Skip(String),
    /// A measurement.
    Info(String),
}

/// State shared by every check of one run.
pub(crate) struct Shared {
    pub settings: Settings,
    /// The run's temp dir.
    pub root: PathBuf,
    /// The same, held: every check's dir is made in it.
    pub root_dir: Arc<crate::safe_fs::HeldDir>,
    /// Every file the harness wrote in the run and has not removed yet.
    pub planted: Planted,
    pub node_id: String,
    pub probes: Probes,
    pub log: CallLog,
    /// Plugin calls of the run under way right now.
    in_flight: std::sync::atomic::AtomicUsize,
    /// The timing phase, run once after the parallel checks.
    timing: tokio::sync::OnceCell<()>,
    /// Every call of a check holds it shared; a re-run alone holds it
    /// exclusively (it waits for the calls in flight, and new ones wait for it).
    gate: tokio::sync::RwLock<()>,
    /// How many volumes were named after the fixture's name so far.
    names: std::sync::atomic::AtomicUsize,
    /// Every plugin call of the run runs under it: an interrupt cancels it.
    pub supervisor: crate::exec::Supervisor,
    /// Volumes created and not yet deleted, for an interrupted run's teardown.
    pub live: super::live::LiveVolumes,
    /// Calls that failed in a bystander check and succeeded made again alone.
    repeats: Mutex<Vec<Repeat>>,
    /// What failed creates of other checks left, for `failure.clean`.
    failed_leftovers: Mutex<Vec<String>>,
}

impl Shared {
    pub fn new(settings: Settings, root: crate::safe_fs::HeldDir) -> Shared {
        let supervisor = crate::exec::Supervisor::new();
        Shared {
            settings,
            root: root.path().to_path_buf(),
            root_dir: Arc::new(root),
            planted: Planted::default(),
            node_id: uuid::Uuid::new_v4().to_string(),
            probes: Probes::default(),
            log: CallLog::default(),
            names: std::sync::atomic::AtomicUsize::new(0),
            live: super::live::LiveVolumes::new(supervisor.clone()),
            supervisor,
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            timing: tokio::sync::OnceCell::new(),
            gate: tokio::sync::RwLock::new(()),
            repeats: Mutex::new(Vec::new()),
            failed_leftovers: Mutex::new(Vec::new()),
        }
    }

    /// A name of its own for the next volume of the run: the fixture's name
    /// `base` for the first, then `base-1`, `base-2`, …
    fn fixture_name(&self, base: &str) -> String {
        match self
            .names
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        {
            0 => base.to_string(),
            n => format!("{base}-{n}"),
        }
    }

    /// Hands what a failed create left (seen by another check) to
    /// `failure.clean`, which owns that finding.
    pub fn hand_to_failure_clean(&self, what: String) {
        crate::lock(&self.failed_leftovers).push(what);
    }

    /// What failed creates left, as other checks saw it.
    pub fn failed_leftovers(&self) -> Vec<String> {
        crate::lock(&self.failed_leftovers).clone()
    }

    /// How a check's calls are made: under the run's limits and supervisor,
    /// every raw call kept in the check's `recorder`.
    pub fn call_options(&self, recorder: &Recorder) -> CallOptions {
        CallOptions::new(self.settings.timeouts())
            .under(self.supervisor.clone())
            .recorded_in(recorder)
    }

    /// Runs the timing phase ([`timing`]) once; call when every parallel
    /// check has finished.
    pub async fn timing_phase(self: &Arc<Self>) {
        let shared = self.clone();
        self.timing.get_or_init(|| timing::run(shared)).await;
    }
}

/// One check's context: its sandbox, the plugin whose every call is recorded
/// and accounted for, and the run it belongs to.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    /// The id of the check it is for (its catalogue entry stays with the
    /// engine: the context knows no check table).
    pub check: &'static str,
    /// The check's own dirs.
    pub sandbox: Sandbox,
    /// Every raw call this check made, for its evidence.
    pub recorder: Recorder,
    /// The plugin under test, as Nomad runs it (fingerprint is logged against
    /// Nomad's 1 s limit but only killed at the create limit: whether it works
    /// and whether it is quick are separate checks).
    plugin: Arc<dyn HostVolumePlugin>,
    /// Every call made, with what was expected of it.
    calls: ledger::Ledger,
    /// When its calls are made (for the timing checks).
    phase: Phase,
    /// Probe calls a check's verdict rests on, shown as its evidence.
    cited: Mutex<Vec<PluginRun>>,
    /// Its token for the files it writes ([`Planted`]): [`cleanup`](Ctx::cleanup)
    /// removes them.
    owner: u64,
}

impl Ctx {
    pub fn new(shared: Arc<Shared>, check: &'static str) -> std::io::Result<Ctx> {
        Ctx::in_dir(shared, check, check)
    }

    fn in_dir(shared: Arc<Shared>, check: &'static str, dir: &str) -> std::io::Result<Ctx> {
        let sandbox = Sandbox::new(&shared.root_dir, dir)?;
        let recorder = Recorder::new();
        let mut opts = shared.call_options(&recorder);
        opts.timeouts.fingerprint = opts.timeouts.create;
        let plugin = shared.settings.target.open(&opts);
        Ok(Ctx {
            check,
            sandbox,
            recorder,
            plugin,
            calls: ledger::Ledger::default(),
            phase: Phase::Parallel,
            cited: Mutex::new(Vec::new()),
            owner: shared.planted.owner(),
            shared,
        })
    }

    pub fn is_builtin(&self) -> bool {
        self.shared.settings.target.is_builtin()
    }

    /// The plugin under test, as the user named it.
    pub fn target(&self) -> &crate::plugin::PluginSource {
        &self.shared.settings.target
    }

    /// The plugin under test, for the manager the lifecycle checks drive.
    pub fn plugin(&self) -> &Arc<dyn HostVolumePlugin> {
        &self.plugin
    }

    /// A fresh request: new UUID, name `conformance-<short id>` unless the fixture names it.
    pub fn request(&self) -> CreateRequest {
        self.request_in(&self.sandbox.volumes)
    }

    /// A fresh request for another volumes dir.
    pub fn request_in(&self, volumes: &std::path::Path) -> CreateRequest {
        let t = &self.shared.settings.template;
        let id = uuid::Uuid::new_v4().to_string();
        let name = match &t.name {
            Some(base) => self.shared.fixture_name(base),
            None => format!("conformance-{}", &id[..8]),
        };
        let plugin_dir = self
            .plugin
            .plugin_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        t.request(
            &volumes.to_string_lossy(),
            &plugin_dir,
            name,
            id,
            &self.shared.node_id,
        )
    }

    /// Shows a probe's call as evidence for this check's verdict.
    pub fn cite(&self, run: Option<&PluginRun>) {
        if let Some(run) = run {
            crate::lock(&self.cited).push(run.clone());
        }
    }

    /// Every call behind this check's verdict: the probes it cited, then its own.
    pub fn evidence(&self) -> Vec<PluginRun> {
        let mut runs = crate::lock(&self.cited).clone();
        runs.extend(self.recorder.runs());
        runs
    }

    /// `Err(skip)` for the built-in plugin, which runs in-process.
    pub fn require_process(&self) -> Result<(), Finding> {
        if self.is_builtin() {
            Err(Finding::Skip("built-in plugin".into()))
        } else {
            Ok(())
        }
    }

    /// Writes a canary file with unique content into `dir`; returns its path.
    /// Only inside the run's sandbox (resolved, symlinks and all): a path a
    /// plugin returned may lead anywhere, and nothing outside is ours to write.
    /// The file is made new: a name that exists (a hard link to a file
    /// elsewhere, say) is never written through, and is an error whose
    /// kind is `AlreadyExists`.
    pub fn plant(&self, dir: &std::path::Path, name: &str) -> std::io::Result<PathBuf> {
        self.sandbox.plant(
            &self.shared.root_dir,
            &self.shared.planted,
            self.owner,
            dir,
            name,
        )
    }

    /// A new file `name` in `dir` for a check to fill (see
    /// [`Sandbox::create_file`]); removed at the end of the check, or
    /// earlier by [`remove_file`](Self::remove_file).
    pub fn create_new_in(
        &self,
        dir: &std::path::Path,
        name: &str,
    ) -> std::io::Result<std::fs::File> {
        self.sandbox.create_file(
            &self.shared.root_dir,
            &self.shared.planted,
            self.owner,
            dir,
            name,
        )
    }

    /// Removes a file this check made (by name, only while it is the file
    /// that was made).
    pub fn remove_file(&self, path: &std::path::Path) -> Result<(), String> {
        self.shared.planted.remove_path(self.owner, path)
    }

    /// Removes the files this check wrote that are still the files it made
    /// (by name, in the dirs it made them in).
    pub fn remove_canaries(&self) {
        let _ = self.shared.planted.remove(Some(self.owner));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nomad refuses two volumes of one name on a node: a fixture's name is
    /// the first volume's, the others get `-1`, `-2`, …
    #[test]
    fn every_volume_of_a_run_has_its_own_name() {
        let settings = Settings {
            target: PluginSource::Builtin,
            template: RequestTemplate {
                name: Some("pg-data".into()),
                ..RequestTemplate::default()
            },
            timeout_scale: 1.0,
            claims: Default::default(),
        };
        let root = crate::safe_fs::HeldDir::make_temp("dhv-conform-test-").unwrap();
        let path = root.path().to_path_buf();
        let shared = Arc::new(Shared::new(settings, root));
        let ctx = Ctx::new(shared, "create.distinct").unwrap();
        let names: Vec<String> = (0..3).map(|_| ctx.request().volume_name).collect();
        assert_eq!(names, ["pg-data", "pg-data-1", "pg-data-2"]);
        drop(ctx);
        assert!(crate::safe_fs::remove_tree(&path).removed);
        let default = RequestTemplate::default();
        assert_eq!(
            (default.capacity_min, default.capacity_max),
            (50_000_000, 100_000_000)
        );
    }
}
