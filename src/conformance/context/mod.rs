//! What a check works with, split by concern:
//! - [`sandbox`]: the check's own dirs, listings of them and canary files,
//!   which a check reaches through [`dirs`];
//! - [`calls`]: the calls a check makes, each with its stated expectation
//!   ([`Expect`]), kept in the check's [`ledger`]; [`variant`]: the same
//!   plugin with other call options; [`managed`]: the manager some checks
//!   drive it through; every one of them takes the one path of [`route`]
//!   (admitted through the run's gate, ended in the ledger, logged when it
//!   is a call Nomad makes);
//! - [`log`]: the run's call log ([`CallLog`]), all the run-wide checks read;
//! - [`probes`]: the run's shared first calls and the prerequisites checks
//!   derive from them ("needs create.succeeds");
//! - [`steps`]: the scenario steps several checks share, made of those calls
//!   ([`Steps`]: a call that must succeed, create cleanly; plant a canary in
//!   a volume);
//! - [`residue`]: what every create and delete leaves (one root cause, one
//!   finding: `delete.no-residue`'s), for other checks to cite;
//! - [`alone`]: calls re-run alone when they timed out under the run's load;
//! - [`settings`]: how a run is configured ([`Settings`], with the
//!   [`RequestTemplate`] every check's request starts from).
//!
//! What any of them sees of the machine (a canary, a listing, a mount point,
//! a loop device, what a delete left) it sees through the run's host
//! ([`Shared::host`], a check's [`Ctx::host`]); every plugin handle they open
//! runs its processes through that host's transport, each call known by its
//! owner, the sandbox it is made for ([`Shared::call_options`]). Only the
//! harness's own files in its own dirs ([`sandbox`]: held dirs, canaries
//! planted and removed) stay on `safe_fs` (see [`crate::conformance::host`]).
//!
//! [`Ctx`] is what one check sees of them (a few small types, each with one
//! owner: [`Ctx::calls`], [`Ctx::steps`], [`Ctx::variant`], [`Ctx::managed`],
//! [`Ctx::dirs`], [`Ctx::prereqs`], [`Ctx::host`]); [`ScenarioRun`] is the
//! engine's handle on a check's run; [`Shared`] holds what the checks of one
//! run share, and no check reaches it.

mod alone;
mod attempt;
mod calls;
mod cause;
mod create_cleanly;
mod dirs;
mod facts;
mod held;
mod ledger;
mod log;
mod managed;
mod probe_results;
mod probes;
mod repeat;
mod residue;
mod route;
mod sandbox;
mod settings;
mod steps;
mod timing;
mod variant;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub(crate) use alone::Settled;
pub(crate) use attempt::Made;
pub(crate) use calls::{Calls, Expect};
pub(crate) use cause::Awaited;
pub(crate) use dirs::Dirs;
pub(crate) use facts::{Fact, Facts};
pub(crate) use log::{CallLog, LoggedCall, RunLog, shown};
pub(crate) use managed::Managed;
pub(crate) use probe_results::{FreshVolume, is_mount_point};
pub(crate) use probes::{Prereqs, ProbeOwners, Probes};
pub(crate) use repeat::Repeat;
pub(crate) use residue::{Residue, around};
pub(crate) use route::{Race, Start};
pub(crate) use sandbox::{Planted, Sandbox, canary_bytes, canary_intact, listing};
pub use settings::{RequestTemplate, Settings};
pub(crate) use steps::{
    Holds, LOOP_RELEASE, Steps, VolumeAt, loops_left, mounts_left, plant_in_volume, still_attached,
};
pub(crate) use timing::{CallPhase, is_provoked, killed_waiting, late, overran};
pub(crate) use variant::Variant;

use super::host::Host;
use super::progress::LiveCalls;
use crate::contract::CreateRequest;
use crate::plugin::{CallOptions, PluginRun, PluginSource, Recorder};

/// The check a context's calls are made for, as the engine hands it over
/// from its catalogue entry (the context knows no check table, and names no
/// check): its id, for the log and the sandbox, and what its question is
/// about, for how a failed call is judged (see [`repeat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Asker {
    /// The check's id.
    pub id: &'static str,
    /// The operation its question is about, when it is one.
    pub subject: Option<crate::contract::Operation>,
    /// Whether a call of its subject that failed beside other calls is made
    /// again alone: not for the checks whose question is the company itself
    /// (the concurrency checks).
    pub repeats: bool,
}

/// A verdict before the level is applied (a failed should becomes a warning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The rule holds.
    Pass(String),
    /// The rule is broken: expected vs. got.
    Fail(String),
    /// A finding the rule itself puts at should level (a warning, and a
    /// failure under `--strict`). Only a should check warns: in a must check
    /// it is a failure, as a must ends pass, fail or skip.
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
    /// Calls made as Nomad makes them on a host that refuses a step (the
    /// `failure.*-refused` checks): Nomad reads their answers as it reads
    /// any, so `failure.error-json` judges them; no other run-wide check sees
    /// them (what they leave, and how long they take, are their own checks'
    /// findings).
    pub refused_log: CallLog,
    /// Plugin calls of the run under way right now.
    in_flight: std::sync::atomic::AtomicUsize,
    /// Plugin calls of the run started so far: a call was alone in the run
    /// only if none started before it ended.
    calls_started: std::sync::atomic::AtomicUsize,
    /// The timing phase, run once after the parallel checks.
    timing: tokio::sync::OnceCell<()>,
    /// Every call of a check holds it shared; a re-run alone holds it
    /// exclusively (it waits for the calls in flight, and new ones wait for it).
    gate: Arc<tokio::sync::RwLock<()>>,
    /// How many volumes were named after the fixture's name so far.
    names: std::sync::atomic::AtomicUsize,
    /// Every plugin call of the run runs under it: an interrupt cancels it.
    pub supervisor: crate::exec::Supervisor,
    /// The plugin file pinned for the run: every call looks at it first.
    pub pin: Option<Arc<crate::plugin::PluginPin>>,
    /// Volumes created and not yet deleted, for an interrupted run's teardown.
    pub live: super::live::LiveVolumes,
    /// Calls that failed in a bystander check and succeeded made again alone.
    repeats: Mutex<Vec<Repeat>>,
    /// The checks that cannot judge their plugin, by id, and why (a device
    /// held by another than the plugin, see [`held`]); run-wide for probes.
    inconclusive: Mutex<std::collections::BTreeMap<&'static str, String>>,
    /// What checks established that another check's rule owns.
    pub facts: Facts,
    /// The checks others wait for (see [`cause`]).
    pub awaited: Awaited,
    /// The checks the run's probes are made for.
    pub probe_owners: ProbeOwners,
    /// The machine the run's calls run on and its checks look at.
    pub host: Arc<dyn Host>,
    /// The run's plugin calls under way, each with its owner (for progress).
    pub live_calls: LiveCalls,
}

impl Shared {
    pub fn new(
        settings: Settings,
        root: crate::safe_fs::HeldDir,
        probe_owners: ProbeOwners,
        host: Arc<dyn Host>,
    ) -> Shared {
        let supervisor = crate::exec::Supervisor::new();
        // A mount a plugin puts over a dir of the run is detached at once,
        // and said as what it did to the harness (see `MountGuard`).
        let root = root.guarded_by(&supervisor.guard_mounts());
        let pin = settings
            .pin
            .clone()
            .or_else(|| crate::plugin::PluginPin::for_source(&settings.target));
        Shared {
            pin,
            settings,
            root: root.path().to_path_buf(),
            root_dir: Arc::new(root),
            planted: Planted::default(),
            node_id: uuid::Uuid::new_v4().to_string(),
            probes: Probes::default(),
            log: CallLog::default(),
            refused_log: CallLog::default(),
            names: std::sync::atomic::AtomicUsize::new(0),
            live: super::live::LiveVolumes::new(supervisor.clone()),
            supervisor,
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            calls_started: std::sync::atomic::AtomicUsize::new(0),
            timing: tokio::sync::OnceCell::new(),
            gate: Arc::new(tokio::sync::RwLock::new(())),
            repeats: Mutex::new(Vec::new()),
            inconclusive: Mutex::new(std::collections::BTreeMap::new()),
            facts: Facts::default(),
            awaited: Awaited::default(),
            probe_owners,
            host,
            live_calls: LiveCalls::default(),
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

    /// How a check's calls are made, Nomad's and a variant's alike: under the
    /// run's limits and supervisor, every raw call kept in the check's
    /// `recorder`. A fingerprint is judged against Nomad's fingerprint limit
    /// (the deadline checks) but only killed at the create limit: whether it
    /// works (from another dir, with Nomad's bare environment) and whether it
    /// is quick are separate checks, and a loaded host must not turn the one
    /// into the other. Its processes run through the host's transport, each
    /// call known as `owner`'s (the sandbox it is made for) while it runs.
    pub fn call_options(&self, recorder: &Recorder, owner: &str) -> CallOptions {
        let mut timeouts = self.settings.timeouts();
        timeouts.fingerprint = timeouts.create;
        let mut opts = CallOptions::new(timeouts)
            .under(self.supervisor.clone())
            .recorded_in(recorder)
            .pinned(self.pin.clone());
        opts.transport = Some(self.live_calls.owned(self.host.transport(), owner));
        opts
    }

    /// Runs the timing phase ([`timing`]) once; call when every parallel
    /// check has finished.
    pub async fn timing_phase(self: &Arc<Self>) {
        let shared = self.clone();
        self.timing.get_or_init(|| timing::run(shared)).await;
    }
}

/// What a check sees of the run: its requests, calls ([`Calls`]), steps
/// ([`Steps`]), the plugin with other options ([`Variant`]) or under the
/// manager ([`Managed`]), its dirs ([`Dirs`]), the probes ([`Prereqs`]) and
/// its evidence. The run's bookkeeping stays with the engine: [`ScenarioRun`]
/// lends a check its `Ctx` and settles it afterwards.
pub(crate) struct Ctx {
    /// The plugin under test and every call made of it, accounted for.
    calls: Calls,
    /// The check's own dirs and the files it writes.
    dirs: Dirs,
    /// Probe calls a check's verdict rests on, shown as its evidence.
    cited: Mutex<Vec<PluginRun>>,
    /// Why the check's verdict is not pinned in a snapshot, if it is not.
    unpinned: Mutex<Option<String>>,
}

impl Ctx {
    /// A context for `check` whose sandbox is the new dir `dir` of the run.
    fn in_dir(shared: Arc<Shared>, check: Asker, dir: &str) -> std::io::Result<Ctx> {
        let dirs = Dirs::new(shared.clone(), dir)?;
        Ok(Ctx {
            calls: Calls::new(shared, check, dir, dirs.dir(), dirs.volumes()),
            dirs,
            cited: Mutex::new(Vec::new()),
            unpinned: Mutex::new(None),
        })
    }

    /// The verdict depends on what this host can do, not only on the plugin
    /// (a refusal it cannot impose, say): a snapshot does not pin it, so one
    /// blessed on another host still matches (see `report::pin_as_stored`).
    pub fn unpin(&self, why: impl Into<String>) {
        *crate::lock(&self.unpinned) = Some(why.into());
    }

    /// The plugin under test: every call a check makes of it, as Nomad makes it.
    pub fn calls(&self) -> &Calls {
        &self.calls
    }

    /// Whether the run was interrupted: no more calls are worth making.
    pub fn cancelled(&self) -> bool {
        self.calls.shared.supervisor.is_cancelled()
    }

    /// The steps several checks share, made of those calls.
    pub fn steps(&self) -> Steps<'_> {
        Steps { calls: &self.calls }
    }

    /// The same plugin with other call options (a working dir, extra
    /// variables), sharing this check's recorder and ledger. Its calls are
    /// not what Nomad makes, so they are not logged for the run-wide checks.
    pub fn variant(&self, adjust: impl FnOnce(&mut CallOptions)) -> Variant<'_> {
        Variant::new(&self.calls, adjust)
    }

    /// Nomad's calls, each watched as `watch` says (see
    /// [`Variant::watched`]): logged and made again alone as Nomad's are.
    pub fn watched(&self, watch: crate::exec::AtChanges) -> Variant<'_> {
        Variant::watched(&self.calls, watch)
    }

    /// The same plugin, each create or delete killed (SIGKILL to its whole
    /// group) `after` it starts: the crash checks'. Killed on purpose, so
    /// make its calls expecting either outcome (`Expect::Either`).
    pub fn crasher(&self, after: std::time::Duration) -> Variant<'_> {
        Variant::crasher(&self.calls, after)
    }

    /// The manager over this check's sandbox, and the calls it makes on the
    /// check's behalf.
    pub fn managed(&self) -> Managed<'_> {
        Managed {
            calls: &self.calls,
            dirs: &self.dirs,
        }
    }

    /// The check's own dirs (its volumes dir among them) and its files.
    pub fn dirs(&self) -> &Dirs {
        &self.dirs
    }

    /// The machine the plugin runs on: how a check looks at disks, mounts,
    /// loop devices and files around its calls (see [`Host`]).
    pub fn host(&self) -> &dyn Host {
        &*self.calls.shared.host
    }

    /// The same host, shared: for work a check hands to another thread.
    pub fn shared_host(&self) -> Arc<dyn Host> {
        self.calls.shared.host.clone()
    }

    /// The run's shared probes, and the prerequisites ("needs X") derived
    /// from them.
    pub fn prereqs(&self) -> Prereqs<'_> {
        self.calls.prereqs()
    }

    /// A fresh request: new UUID, name `conformance-<short id>` unless the fixture names it.
    pub fn request(&self) -> CreateRequest {
        self.calls.request()
    }

    /// A fresh request for another volumes dir.
    pub fn request_in(&self, volumes: &std::path::Path) -> CreateRequest {
        self.calls.request_in(volumes)
    }

    /// Shows a probe's call as evidence for this check's verdict.
    pub fn cite(&self, run: Option<&PluginRun>) {
        if let Some(run) = run {
            crate::lock(&self.cited).push(run.clone());
        }
    }

    /// What the run's checks established so far that another check's rule
    /// owns ([`Fact`]).
    pub fn facts(&self) -> Vec<Fact> {
        self.calls.shared.facts.all()
    }

    /// The plugin under test, as the user named it.
    pub fn target(&self) -> &PluginSource {
        &self.calls.shared.settings.target
    }

    /// The request template of the run (docs/checks.md's defaults, or the fixture).
    pub fn template(&self) -> &RequestTemplate {
        &self.calls.shared.settings.template
    }

    /// What the plugin claims its volumes are.
    pub fn claims(&self) -> &crate::conformance::claims::Claims {
        &self.calls.shared.settings.claims
    }

    /// `Err(skip)` for the built-in plugin, which runs in-process.
    pub fn require_process(&self) -> Result<(), Finding> {
        if self.target().is_builtin() {
            Err(Finding::Skip("built-in plugin".into()))
        } else {
            Ok(())
        }
    }

    /// Every call behind this check's verdict: the probes it cited, then its own.
    /// Moves the calls out: the check's last word, once its clean-up is done.
    fn evidence(self) -> Vec<PluginRun> {
        let mut runs = std::mem::take(&mut *crate::lock(&self.cited));
        runs.extend(self.calls.recorder.take());
        runs
    }

    /// Deletes every volume the check created and did not delete, and
    /// removes the files it wrote (see [`Calls::cleanup`]).
    pub(super) async fn cleanup(&self) {
        self.calls.cleanup().await;
        self.dirs.remove_canaries();
    }
}

/// The engine's side of one scenario check: it makes the check's [`Ctx`],
/// lends it to the check's body, then settles what the body's calls did,
/// cleans up and hands back the evidence. A check only ever sees the `&Ctx`.
pub(crate) struct ScenarioRun {
    ctx: Ctx,
}

impl ScenarioRun {
    /// The run of `check`, in a new sandbox of its own.
    pub fn new(shared: Arc<Shared>, check: Asker) -> std::io::Result<ScenarioRun> {
        Ok(ScenarioRun {
            ctx: Ctx::in_dir(shared, check, check.id)?,
        })
    }

    /// A run of `check` in the new dir `dir` of the run (`explore` plays
    /// each history in a sandbox of its own).
    pub fn in_dir(shared: Arc<Shared>, check: Asker, dir: &str) -> std::io::Result<ScenarioRun> {
        Ok(ScenarioRun {
            ctx: Ctx::in_dir(shared, check, dir)?,
        })
    }

    /// What the check's body works with.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The check's finding once every call is accounted for (see
    /// [`Calls::settle`]), its evidence, after its clean-up, and why it is
    /// not pinned, if it is not ([`Ctx::unpin`]).
    pub async fn finish(self, finding: Finding) -> (Finding, Vec<PluginRun>, Option<String>) {
        let finding = self.ctx.calls.settle(finding).await;
        self.ctx.cleanup().await;
        let unpinned = crate::lock(&self.ctx.unpinned).clone();
        (finding, self.ctx.evidence(), unpinned)
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
            pin: None,
        };
        let root = crate::safe_fs::HeldDir::make_temp("dhv-conform-test-").unwrap();
        let path = root.path().to_path_buf();
        let asker = Asker {
            id: "a-check",
            subject: None,
            repeats: true,
        };
        let shared = Arc::new(Shared::new(
            settings,
            root,
            ProbeOwners::all(asker),
            crate::conformance::host::local(),
        ));
        let run = ScenarioRun::new(shared, asker).unwrap();
        let ctx = run.ctx();
        let names: Vec<String> = (0..3).map(|_| ctx.request().volume_name).collect();
        assert_eq!(names, ["pg-data", "pg-data-1", "pg-data-2"]);
        drop(run);
        assert!(crate::safe_fs::remove_tree(&path).removed);
        let default = RequestTemplate::default();
        assert_eq!(
            (default.capacity_min, default.capacity_max),
            (50_000_000, 100_000_000)
        );
    }
}
