//! The calls a check makes. Each states what it expects ([`Expect`]); the
//! check's ledger keeps every call with its expectation, and an unmet one is
//! the check's finding (see [`Calls::settle`]). Calls of the plugin as Nomad
//! runs it are also logged for the run-wide checks ([`CallLog`](super::CallLog)).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ledger::{Gate, Ledger, Solo};
use super::repeat::{Redo, again_alone};
use super::{Finding, LoggedCall, Phase, Prereqs, Shared, listing};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::plugin::{Fingerprint, HostVolumePlugin, PluginCall, PluginRun, Recorder};

/// What a check expects of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The call must succeed (exit 0, output accepted).
    Success,
    /// The call must fail (non-zero exit).
    Failure,
    /// Either is fine: the check's rule judges the outcome itself (say why at the call).
    Either,
}

/// The plugin under test as one check calls it: every call recorded for the
/// check's evidence, accounted in its ledger with what was expected of it,
/// and (when made as Nomad makes it) logged for the run-wide checks.
pub(crate) struct Calls {
    /// The run the calls are made in.
    pub(super) shared: Arc<Shared>,
    /// The id of the check it is for (its catalogue entry stays with the
    /// engine: the context knows no check table).
    pub(super) check: &'static str,
    /// The plugin under test, as Nomad runs it (fingerprint is logged against
    /// Nomad's 1 s limit but only killed at the create limit: whether it works
    /// and whether it is quick are separate checks).
    pub(super) plugin: Arc<dyn HostVolumePlugin>,
    /// Every raw call this check made, for its evidence.
    pub(super) recorder: Recorder,
    /// Every call made, with what was expected of it.
    pub(super) ledger: Ledger,
    /// When its calls are made (for the timing checks).
    pub(super) phase: Phase,
    /// The check's dir (the manager keeps its state below it) and its volumes dir.
    pub(super) dir: PathBuf,
    pub(super) volumes: PathBuf,
}

impl Calls {
    /// The calls of `check`, whose dirs are `dir` and its volumes dir `volumes`.
    pub(super) fn new(
        shared: Arc<Shared>,
        check: &'static str,
        dir: &Path,
        volumes: &Path,
    ) -> Calls {
        let recorder = Recorder::new();
        let mut opts = shared.call_options(&recorder);
        opts.timeouts.fingerprint = opts.timeouts.create;
        Calls {
            plugin: shared.settings.target.open(&opts),
            shared,
            check,
            recorder,
            ledger: Ledger::default(),
            phase: Phase::Parallel,
            dir: dir.to_path_buf(),
            volumes: volumes.to_path_buf(),
        }
    }

    /// The plugin under test, for the manager the lifecycle checks drive.
    pub fn plugin(&self) -> &Arc<dyn HostVolumePlugin> {
        &self.plugin
    }

    /// How many raw calls the check made so far (see [`log_runs_from`](Self::log_runs_from)).
    pub fn recorded(&self) -> usize {
        self.recorder.len()
    }

    /// The run's probes and prerequisites, as the calls' findings need them.
    pub(super) fn prereqs(&self) -> Prereqs<'_> {
        Prereqs::of(&self.shared)
    }

    /// A fresh request: new UUID, name `conformance-<short id>` unless the fixture names it.
    pub(super) fn request(&self) -> CreateRequest {
        self.request_in(&self.volumes)
    }

    /// A fresh request for another volumes dir.
    pub(super) fn request_in(&self, volumes: &Path) -> CreateRequest {
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

    /// Creates, logging the call for the run-wide checks.
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<CreateResponse> {
        self.create_as(req, expect, step, false).await
    }

    /// Creates; `alone`: with no other call of the run in flight (see [`Gate`]).
    pub(super) async fn create_as(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        alone: bool,
    ) -> PluginCall<CreateResponse> {
        self.create_started(req, expect, step, alone, None).await
    }

    /// Creates as one call of a burst: it starts once every call of the
    /// burst has reached `start`, so their starts are aligned (a race
    /// between them is met by design, not by chance).
    pub async fn create_aligned(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        start: &tokio::sync::Barrier,
    ) -> PluginCall<CreateResponse> {
        self.create_started(req, expect, step, false, Some(start))
            .await
    }

    async fn create_started(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        alone: bool,
        start: Option<&tokio::sync::Barrier>,
    ) -> PluginCall<CreateResponse> {
        let (_gate, solo) = self.admit(alone, start).await;
        let before = solo
            .started_alone
            .then(|| listing(Path::new(&req.volumes_dir)));
        self.shared.live.creating(req);
        let call = self.plugin.create(req).await;
        let residue = match (&call.result, before, solo.alone()) {
            (Err(_), Some(before), true) => {
                let after = listing(Path::new(&req.volumes_dir));
                Some(after.difference(&before).cloned().collect())
            }
            _ => None,
        };
        self.ended(solo, &call, residue, step, expect);
        self.keep_redo(step, &call, || Redo::Create(req.clone()));
        self.create_ended(req, &call);
        call
    }

    /// Deletes the volume `req` created at `created_path`.
    pub async fn delete(
        &self,
        req: &CreateRequest,
        created_path: &str,
        expect: Expect,
        step: &str,
    ) -> PluginCall<()> {
        self.delete_raw(&DeleteRequest::for_created(req, created_path), expect, step)
            .await
    }

    /// Sends exactly this delete request.
    pub async fn delete_raw(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
    ) -> PluginCall<()> {
        self.delete_as(req, expect, step, false).await
    }

    /// Sends this delete request; `alone`: as for [`create_as`](Self::create_as).
    pub(super) async fn delete_as(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        alone: bool,
    ) -> PluginCall<()> {
        self.delete_started(req, expect, step, alone, None).await
    }

    /// Deletes as one call of a burst (see [`create_aligned`](Self::create_aligned)).
    pub async fn delete_aligned(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        start: &tokio::sync::Barrier,
    ) -> PluginCall<()> {
        self.delete_started(req, expect, step, false, Some(start))
            .await
    }

    async fn delete_started(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        alone: bool,
        start: Option<&tokio::sync::Barrier>,
    ) -> PluginCall<()> {
        let (_gate, solo) = self.admit(alone, start).await;
        let call = self.plugin.delete(req).await;
        self.ended(solo, &call, None, step, expect);
        self.keep_redo(step, &call, || Redo::Delete(req.clone()));
        self.delete_ended(req, &call);
        call
    }

    /// Fingerprints once more (the probe is [`Prereqs::fingerprint_probe`]).
    pub async fn fingerprint(&self, expect: Expect, step: &str) -> PluginCall<Fingerprint> {
        self.fingerprint_as(expect, step, false).await
    }

    /// Fingerprints; `alone`: as for [`create_as`](Self::create_as).
    pub(super) async fn fingerprint_as(
        &self,
        expect: Expect,
        step: &str,
        alone: bool,
    ) -> PluginCall<Fingerprint> {
        let (_gate, solo) = self.admit(alone, None).await;
        let call = self.plugin.fingerprint().await;
        self.ended(solo, &call, None, step, expect);
        call
    }

    /// Lets a call in: once every call of its burst has reached `start`
    /// (when aligned), through the run's gate (exclusively when `alone`),
    /// counted as under way in the check and the run.
    async fn admit(
        &self,
        alone: bool,
        start: Option<&tokio::sync::Barrier>,
    ) -> (Gate<'_>, Solo<'_>) {
        // Aligned before the gate: a burst call holding the gate while it
        // waits for the others could deadlock behind a call made alone.
        if let Some(start) = start {
            start.wait().await;
        }
        let gate = Gate::hold(&self.shared, alone).await;
        (gate, self.ledger.enter(&self.shared.in_flight))
    }

    /// A call let in by [`admit`](Self::admit) ended: it no longer counts as
    /// under way, it is logged for the run-wide checks (with what its failed
    /// create left, `residue`) and accounted in the ledger.
    fn ended<T>(
        &self,
        solo: Solo<'_>,
        call: &PluginCall<T>,
        residue: Option<Vec<String>>,
        step: &str,
        expect: Expect,
    ) {
        let in_flight = solo.run_in_flight;
        drop(solo);
        self.log(call, in_flight, residue);
        self.account(step, expect, call);
    }

    /// A create of `req` ended: its volume is live in the check and the run
    /// when it succeeded, and no longer under way either way.
    pub(super) fn create_ended(&self, req: &CreateRequest, call: &PluginCall<CreateResponse>) {
        if let Ok(resp) = &call.result {
            self.ledger.created(req, &resp.path);
        }
        let path = call.result.as_ref().ok().map(|r| r.path.as_str());
        self.shared.live.create_ended(req, path);
    }

    /// A delete of `req` ended: its volume is gone when it succeeded; when it
    /// timed out, it is left to the run's teardown.
    pub(super) fn delete_ended(&self, req: &DeleteRequest, call: &PluginCall<()>) {
        if call.ok() {
            self.ledger.deleted(&req.volume_id);
            self.shared.live.deleted(&req.volumes_dir, &req.volume_id);
        } else if call.timed_out() {
            self.ledger.hung(&req.volume_id);
        }
    }

    /// Creates, expecting success: the response, or the finding for this
    /// step (see [`need`](Self::need)).
    pub async fn create_ok(
        &self,
        req: &CreateRequest,
        step: &str,
    ) -> Result<CreateResponse, Finding> {
        let call = self.create(req, Expect::Success, step).await;
        self.need(call, step).await
    }

    /// Deletes, expecting success; `Err` is the finding for this step.
    pub async fn delete_ok(
        &self,
        req: &CreateRequest,
        path: &str,
        step: &str,
    ) -> Result<(), Finding> {
        let call = self.delete(req, path, Expect::Success, step).await;
        self.need(call, step).await
    }

    /// A call's value, or the finding its failure makes: a skip naming the
    /// prerequisite when that prerequisite itself did not pass, else this
    /// check's failure.
    pub async fn need<T: 'static>(&self, call: PluginCall<T>, step: &str) -> Result<T, Finding> {
        match call.result {
            Ok(value) => Ok(value),
            Err(e) => match self.prereqs().failed_prerequisite(call.operation).await {
                Some(needs) => Err(Finding::Skip(needs)),
                None => match self.raced(step, call.operation).await {
                    // It failed by chance: the check goes on from the call
                    // made again alone.
                    Some(value) => match value.downcast::<T>() {
                        Ok(value) => Ok(*value),
                        Err(_) => Err(Finding::Skip("needs process.repeatable".into())),
                    },
                    None => Err(Finding::Fail(format!(
                        "{step}: expected {} to succeed; got: {e}",
                        call.operation
                    ))),
                },
            },
        }
    }

    /// Records a call made some other way (through the manager, or an
    /// operation Nomad does not have) in the ledger.
    pub fn note(&self, step: &str, op: &str, expect: Expect, error: Option<String>) {
        self.ledger.note(step, op, expect, error);
    }

    /// Keeps what a failed call needs to be made again alone.
    fn keep_redo<T>(&self, step: &str, call: &PluginCall<T>, redo: impl FnOnce() -> Redo) {
        // A call that timed out is not made again here: the deadline checks
        // own that, and a call made again alone would cost its whole limit.
        if call.result.is_ok() || call.timed_out() {
            return;
        }
        self.ledger.keep_redo(step, redo(), call.run.clone());
    }

    /// Whether the failed call of `step` is a bystander's race: made again
    /// alone, it succeeded (see [`repeat`](super::repeat)). Calls made again
    /// alone are not made again once more.
    /// Its value is the call's made again alone.
    async fn raced(&self, step: &str, op: Operation) -> Option<Box<dyn std::any::Any + Send>> {
        if !self.is_bystander(op) || step.ends_with(&again_alone("")) {
            return None;
        }
        let (redo, error, run) = self.ledger.failed(step)?;
        self.repeat_alone(step, &redo, &error, run).await
    }

    pub(super) fn account<T>(&self, step: &str, expect: Expect, call: &PluginCall<T>) {
        let error = call.result.as_ref().err().map(|e| e.to_string());
        self.ledger
            .note(step, call.operation.as_str(), expect, error);
    }

    /// Logs a call; `in_flight`: the run's calls in flight when it started.
    fn log<T>(&self, call: &PluginCall<T>, in_flight: usize, residue: Option<Vec<String>>) {
        self.shared.log.push(LoggedCall {
            check: self.check,
            op: call.operation,
            duration: call.duration,
            limit: self.shared.settings.timeouts().limit(call.operation),
            phase: self.phase,
            in_flight,
            plugin_failed: !call.exited_zero(),
            run: call.run.clone().map(Arc::new),
            residue,
            error: call.result.as_ref().err().map(ToString::to_string),
        });
    }

    /// The check's finding once every call is accounted for. A call that did
    /// not do what was expected of it is the check's failure, with that call
    /// as evidence, unless the check already failed, or the call failed only
    /// because its prerequisite did (then the finding stands: the
    /// prerequisite's own check reports the cause).
    pub(super) async fn settle(&self, finding: Finding) -> Finding {
        let mut own = Vec::new();
        for entry in self.ledger.unmet() {
            let explained = match entry.op {
                Some(op) if entry.expect == Expect::Success => {
                    self.prereqs().failed_prerequisite(op).await.is_some()
                        || self.raced(&entry.step, op).await.is_some()
                }
                _ => false,
            };
            if !explained {
                own.push(entry.describe());
            }
        }
        match (finding, own.first()) {
            (finding @ Finding::Fail(_), _) | (finding, None) => finding,
            (_, Some(first)) => Finding::Fail(if own.len() == 1 {
                first.clone()
            } else {
                format!(
                    "{first} (and {} more calls did not do what was expected)",
                    own.len() - 1
                )
            }),
        }
    }

    /// Runs an operation Nomad does not have; `None` for the built-in.
    pub async fn run_unknown(&self, op: &str, env: Vec<(String, String)>) -> Option<PluginRun> {
        self.plugin.run_unknown(op, env).await
    }

    /// Deletes every volume this check created and did not delete (a check
    /// that stopped early). Not logged: it is housekeeping after the verdict.
    ///
    /// All at once: a plugin whose deletes hang costs one delete limit here,
    /// not one per volume; a volume whose delete already hung is left to the
    /// run's teardown.
    pub(super) async fn cleanup(&self) {
        let deletes = self.ledger.take_live();
        crate::conformance::live::join_all(deletes.iter().map(|req| async move {
            if self.plugin.delete(req).await.ok() {
                self.shared.live.deleted(&req.volumes_dir, &req.volume_id);
            }
        }))
        .await;
    }
}
