//! What a check works with: the run-wide state shared by all checks ([`Shared`])
//! and each check's own sandbox ([`Ctx`]): a fresh volumes dir, fresh volume ids,
//! a plugin instance whose every call is recorded, and the shared steps (create,
//! delete, list the volumes dir, plant a canary) that every check uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;

use super::catalogue::CheckSpec;
use super::target::{Call, Instance, Target};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Parameters};
use crate::manager::{HostVolumeManager, ManagerError, Volume};
use crate::plugin::{Fingerprint, PluginRun, Recorder, Timeouts};

/// The volume request every check starts from: CONFORMANCE.md's defaults, or a
/// user fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTemplate {
    /// Volume name; `None` means `conformance-<short id>` per volume.
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
            capacity_min: 10 << 20,
            capacity_max: 20 << 20,
            parameters: None,
        }
    }
}

/// How a run is configured.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The plugin under test.
    pub target: Target,
    /// The request checks start from.
    pub template: RequestTemplate,
    /// Multiplies every time limit.
    pub timeout_scale: f64,
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
    /// Not evaluated, with the reason.
    Skip(String),
    /// A measurement.
    Info(String),
}

/// Every plugin call of the run, for the checks evaluated over the whole run.
#[derive(Debug, Clone)]
pub(crate) struct LoggedCall {
    pub check: &'static str,
    pub op: &'static str,
    pub duration: Duration,
    pub limit: Duration,
    /// No other call of the same check overlapped it (not part of a burst).
    pub alone: bool,
    /// The plugin itself reported failure (non-zero exit, signal, could not
    /// start), as opposed to Nomad rejecting the output of a successful run.
    pub plugin_failed: bool,
    /// The raw call, for external plugins; shared, so that the run-wide
    /// checks can each take the whole log without copying every call's output.
    pub run: Option<Arc<PluginRun>>,
    /// For a failed create made while nothing else ran in its volumes dir:
    /// what it left there.
    pub residue: Option<Vec<String>>,
}

/// The first fingerprint and the first default create, shared by all checks so
/// one root cause is reported once and its dependents skip.
#[derive(Debug, Clone)]
pub(crate) struct CreateProbe {
    pub request: CreateRequest,
    pub call: Call<CreateResponse>,
    /// Whether the path existed right after create.
    pub path_existed: bool,
}

/// State shared by every check of one run.
pub(crate) struct Shared {
    pub settings: Settings,
    pub root: PathBuf,
    pub node_id: String,
    fingerprint_probe: OnceCell<Call<Fingerprint>>,
    create_probe: OnceCell<CreateProbe>,
    /// The probes' sandboxes, kept so their volumes are deleted at the end.
    probes: Mutex<Vec<Ctx>>,
    log: Mutex<Vec<LoggedCall>>,
    /// Every plugin call of the run runs under it: an interrupt cancels it.
    pub supervisor: crate::exec::Supervisor,
}

impl Shared {
    pub fn new(settings: Settings, root: PathBuf) -> Shared {
        Shared {
            settings,
            root,
            node_id: uuid::Uuid::new_v4().to_string(),
            fingerprint_probe: OnceCell::new(),
            create_probe: OnceCell::new(),
            probes: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            supervisor: crate::exec::Supervisor::new(),
        }
    }

    /// Deletes what the probes created; call once every check has finished.
    pub async fn cleanup(&self) {
        let probes = std::mem::take(&mut *self.probes.lock().unwrap_or_else(|e| e.into_inner()));
        for probe in probes {
            probe.cleanup().await;
        }
    }

    pub fn log(&self) -> Vec<LoggedCall> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn push(&self, call: LoggedCall) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(call);
    }

    /// The fingerprint probe's result, if it ran.
    pub fn fingerprint_result(&self) -> Option<&Call<Fingerprint>> {
        self.fingerprint_probe.get()
    }
}

/// One check's sandbox.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    pub spec: &'static CheckSpec,
    /// The check's own dir; the volumes dir and any canaries live below it.
    pub dir: PathBuf,
    /// DHV_VOLUMES_DIR for this check.
    pub volumes: PathBuf,
    pub recorder: Recorder,
    pub plugin: Instance,
    in_flight: AtomicUsize,
    /// Calls started so far: a call was alone only if no other started before it ended.
    started: AtomicUsize,
    /// Probe calls a check's verdict rests on, shown as its evidence.
    cited: Mutex<Vec<PluginRun>>,
    /// Volumes created and not yet deleted: [`cleanup`](Self::cleanup) deletes
    /// them, so a check that stops early leaves no mount or device behind.
    live: Mutex<BTreeMap<String, (CreateRequest, String)>>,
}

impl Ctx {
    pub fn new(shared: Arc<Shared>, spec: &'static CheckSpec) -> std::io::Result<Ctx> {
        let dir = shared.root.join(spec.id);
        Ctx::in_dir(shared, spec, dir)
    }

    /// A sandbox for a shared probe, beside the checks' own.
    fn probe(shared: Arc<Shared>, id: &str) -> std::io::Result<Ctx> {
        let spec = super::catalogue::find(id).expect("probes are catalogued checks");
        let dir = shared.root.join(format!("probe-{id}"));
        Ctx::in_dir(shared, spec, dir)
    }

    fn in_dir(shared: Arc<Shared>, spec: &'static CheckSpec, dir: PathBuf) -> std::io::Result<Ctx> {
        let volumes = dir.join("volumes");
        std::fs::create_dir_all(&volumes)?;
        let recorder = Recorder::new();
        let plugin = shared.settings.target.instance(
            shared.settings.timeouts(),
            &recorder,
            &shared.supervisor,
        );
        Ok(Ctx {
            shared,
            spec,
            dir,
            volumes,
            recorder,
            plugin,
            in_flight: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            cited: Mutex::new(Vec::new()),
            live: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn is_builtin(&self) -> bool {
        self.shared.settings.target.is_builtin()
    }

    /// A fresh request: new UUID, name `conformance-<short id>` unless the fixture names it.
    pub fn request(&self) -> CreateRequest {
        self.request_in(&self.volumes)
    }

    /// A fresh request for another volumes dir.
    pub fn request_in(&self, volumes: &Path) -> CreateRequest {
        let t = &self.shared.settings.template;
        let id = uuid::Uuid::new_v4().to_string();
        let plugin_dir = match &self.plugin {
            Instance::External(p) => p.plugin_dir().to_string_lossy().into_owned(),
            Instance::Builtin(_) => String::new(),
        };
        CreateRequest {
            volumes_dir: volumes.to_string_lossy().into_owned(),
            plugin_dir,
            node_pool: t.node_pool.clone(),
            namespace: t.namespace.clone(),
            volume_name: t
                .name
                .clone()
                .unwrap_or_else(|| format!("conformance-{}", &id[..8])),
            volume_id: id,
            capacity_min_bytes: t.capacity_min,
            capacity_max_bytes: t.capacity_max,
            node_id: self.shared.node_id.clone(),
            parameters: t.parameters.clone(),
        }
    }

    /// Creates, logging the call for the run-wide checks.
    pub async fn create(&self, req: &CreateRequest) -> Call<CreateResponse> {
        let solo = self.enter();
        let before = solo
            .started_alone
            .then(|| listing(Path::new(&req.volumes_dir)));
        let call = self.plugin.create(req).await;
        let alone = solo.alone();
        let residue = match (&call.result, before, alone) {
            (Err(_), Some(before), true) => {
                let after = listing(Path::new(&req.volumes_dir));
                Some(after.difference(&before).cloned().collect())
            }
            _ => None,
        };
        drop(solo);
        let limit = self.shared.settings.timeouts().create;
        self.log("create", limit, &call, alone, residue);
        if let Ok(resp) = &call.result {
            self.live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(req.volume_id.clone(), (req.clone(), resp.path.clone()));
        }
        call
    }

    /// Deletes the volume `req` created at `created_path`.
    pub async fn delete(&self, req: &CreateRequest, created_path: &str) -> Call<()> {
        self.delete_raw(&DeleteRequest::for_created(req, created_path))
            .await
    }

    /// Sends exactly this delete request.
    pub async fn delete_raw(&self, req: &DeleteRequest) -> Call<()> {
        let solo = self.enter();
        let call = self.plugin.delete(req).await;
        let alone = solo.alone();
        drop(solo);
        self.log(
            "delete",
            self.shared.settings.timeouts().delete,
            &call,
            alone,
            None,
        );
        if call.ok() {
            self.live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&req.volume_id);
        }
        call
    }

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
            .with_plugin(self.plugin.as_dyn());
        if let Some(ext) = self.plugin.external() {
            manager = manager.with_plugin_dir(ext.plugin_dir());
        }
        Ok(manager)
    }

    /// Remembers a volume made through the manager, for [`cleanup`](Self::cleanup).
    pub fn track(&self, volume: &Volume) {
        if let Some(req) = &volume.create_request {
            self.live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(volume.id.clone(), (req.clone(), volume.host_path.clone()));
        }
    }

    /// Forgets a volume deleted through the manager.
    pub fn untrack(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// Logs, for the run-wide checks, the raw calls recorded since the
    /// recorder held `start` calls (calls the manager made on our behalf).
    pub fn log_runs_from(&self, start: usize, alone: bool) {
        let timeouts = self.shared.settings.timeouts();
        for run in self.recorder.runs().into_iter().skip(start) {
            let op: &'static str = match run.operation.as_str() {
                "fingerprint" => "fingerprint",
                "create" => "create",
                "delete" => "delete",
                _ => continue,
            };
            self.shared.push(LoggedCall {
                check: self.spec.id,
                op,
                duration: run.duration(),
                limit: timeouts.for_operation(op),
                alone,
                plugin_failed: !run.succeeded(),
                residue: None,
                run: Some(Arc::new(run)),
            });
        }
    }

    /// Deletes every volume this sandbox created and did not delete (a check
    /// that stopped early). Not logged: it is housekeeping, not a check's call.
    pub async fn cleanup(&self) {
        let live = std::mem::take(&mut *self.live.lock().unwrap_or_else(|e| e.into_inner()));
        for (req, path) in live.into_values() {
            let _ = self
                .plugin
                .delete(&DeleteRequest::for_created(&req, &path))
                .await;
        }
    }

    /// Fingerprints once more (the probe is [`fingerprint_probe`](Self::fingerprint_probe)).
    ///
    /// The call may run as long as a create: whether it works and whether it is
    /// quick enough are separate checks (`fingerprint.runs` and
    /// `fingerprint.deadline`), so it is logged against Nomad's 1 s limit but
    /// not killed at it.
    pub async fn fingerprint(&self) -> Call<Fingerprint> {
        let timeouts = self.shared.settings.timeouts();
        let solo = self.enter();
        let call = self.plugin.fingerprint_within(timeouts.create).await;
        let alone = solo.alone();
        drop(solo);
        self.log("fingerprint", timeouts.fingerprint, &call, alone, None);
        call
    }

    /// Marks a call as under way, to tell calls made alone from deliberate bursts.
    fn enter(&self) -> Solo<'_> {
        Solo {
            ticket: self.started.fetch_add(1, Ordering::SeqCst),
            started_alone: self.in_flight.fetch_add(1, Ordering::SeqCst) == 0,
            in_flight: &self.in_flight,
            started: &self.started,
        }
    }

    /// Shows a probe's call as evidence for this check's verdict.
    pub fn cite(&self, run: Option<&PluginRun>) {
        if let Some(run) = run {
            self.cited
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(run.clone());
        }
    }

    /// Every call behind this check's verdict: the probes it cited, then its own.
    pub fn evidence(&self) -> Vec<PluginRun> {
        let mut runs = self.cited.lock().unwrap_or_else(|e| e.into_inner()).clone();
        runs.extend(self.recorder.runs());
        runs
    }

    fn log<T>(
        &self,
        op: &'static str,
        limit: Duration,
        call: &Call<T>,
        alone: bool,
        residue: Option<Vec<String>>,
    ) {
        self.shared.push(LoggedCall {
            check: self.spec.id,
            op,
            duration: call.duration,
            limit,
            alone,
            plugin_failed: !call.exited_zero(),
            run: call.run.clone().map(Arc::new),
            residue,
        });
    }

    /// The run's first fingerprint, made once and shared.
    pub async fn fingerprint_probe(&self) -> &Call<Fingerprint> {
        let shared = self.shared.clone();
        self.shared
            .fingerprint_probe
            .get_or_init(|| async move {
                // A run whose temp dir cannot take one more dir is a harness
                // failure; the engine turns the panic into exit 4.
                let probe = Ctx::probe(shared, "fingerprint.runs")
                    .expect("cannot make the probe's sandbox");
                probe.fingerprint().await
            })
            .await
    }

    /// The run's first default create, made once and shared.
    pub async fn create_probe(&self) -> &CreateProbe {
        let shared = self.shared.clone();
        self.shared
            .create_probe
            .get_or_init(|| async move {
                // A run whose temp dir cannot take one more dir is a harness
                // failure; the engine turns the panic into exit 4.
                let probe =
                    Ctx::probe(shared, "create.succeeds").expect("cannot make the probe's sandbox");
                let request = probe.request();
                let call = probe.create(&request).await;
                let path_existed = match &call.result {
                    Ok(resp) => !resp.path.is_empty() && Path::new(&resp.path).exists(),
                    Err(_) => false,
                };
                let shared = probe.shared.clone();
                shared
                    .probes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(probe);
                CreateProbe {
                    request,
                    call,
                    path_existed,
                }
            })
            .await
    }

    /// `Err(skip)` unless the default create works: checks that need a volume
    /// skip instead of repeating create.succeeds's failure.
    pub async fn require_create(&self) -> Result<(), Finding> {
        let probe = self.create_probe().await;
        if !probe.call.exited_zero() {
            return Err(Finding::Skip("needs create.succeeds".into()));
        }
        match &probe.call.result {
            Err(_) => Err(Finding::Skip("needs create.response".into())),
            Ok(resp) if !Path::new(&resp.path).is_absolute() || !probe.path_existed => {
                Err(Finding::Skip("needs create.path-exists".into()))
            }
            Ok(_) => Ok(()),
        }
    }

    /// `Err(skip)` for the built-in plugin, which runs in-process.
    pub fn require_process(&self) -> Result<(), Finding> {
        if self.is_builtin() {
            Err(Finding::Skip("built-in plugin".into()))
        } else {
            Ok(())
        }
    }

    /// Creates and insists on success: the volume's response, or a finding that
    /// says which step failed.
    pub async fn create_ok(
        &self,
        req: &CreateRequest,
        step: &str,
    ) -> Result<CreateResponse, Finding> {
        let call = self.create(req).await;
        call.result
            .map_err(|e| Finding::Fail(format!("{step}: expected create to succeed; got: {e}")))
    }

    /// Writes a canary file with unique content into `dir`; returns its path.
    pub fn plant(&self, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, canary_text(&path))?;
        Ok(path)
    }
}

/// A call under way in a sandbox; [`alone`](Solo::alone) tells whether any
/// other call of the same check overlapped it.
struct Solo<'a> {
    /// How many calls had started before this one.
    ticket: usize,
    started_alone: bool,
    in_flight: &'a AtomicUsize,
    started: &'a AtomicUsize,
}

impl Solo<'_> {
    /// Nothing ran when it started, and nothing started since: a call that
    /// began and ended alone may still have had a whole other call inside it.
    fn alone(&self) -> bool {
        self.started_alone
            && self.in_flight.load(Ordering::SeqCst) == 1
            && self.started.load(Ordering::SeqCst) == self.ticket + 1
    }
}

impl Drop for Solo<'_> {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The content of a canary file: its own path, so a moved or swapped file is caught.
pub(crate) fn canary_text(path: &Path) -> String {
    format!("dhv-conform canary {}\n", path.display())
}

/// Whether the canary at `path` is still there, unchanged.
pub(crate) fn canary_intact(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|t| t == canary_text(path))
        .unwrap_or(false)
}

/// Every entry below `dir` (relative paths, `/`-separated, symlinks not
/// followed), capped so a runaway plugin cannot make us walk forever.
pub(crate) fn listing(dir: &Path) -> BTreeSet<String> {
    const CAP: usize = 20_000;
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(path);
            }
            out.insert(rel);
            if out.len() >= CAP {
                return out;
            }
        }
    }
    out
}
