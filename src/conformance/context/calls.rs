//! The calls a check makes of the plugin as Nomad runs it ([`Calls`]). Each
//! states what it expects ([`Expect`]); the check's ledger keeps every call
//! with its expectation, and an unmet one is the check's finding (see
//! [`Calls::settle`]). Each takes the one path of [`route`](super::route),
//! which also logs it for the run-wide checks ([`CallLog`](super::CallLog)).
//! The steps composed of these calls are [`Steps`](super::Steps)'; the same
//! plugin with other options is a [`Variant`](super::Variant); the manager
//! some checks drive it through is [`Managed`](super::Managed)'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::attempt::{Made, Nth};
use super::ledger::Ledger;
use super::route::{Caller, Route, Start};
use super::{Asker, CallPhase, Finding, Prereqs, Shared};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::plugin::{Fingerprint, HostVolumePlugin, PluginRun, Recorder};

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

/// The plugin under test as one check calls it, as Nomad runs it: every call
/// recorded for the check's evidence, accounted in its ledger with what was
/// expected of it, and logged for the run-wide checks. It also holds what the
/// other views of the check's calls share ([`Steps`](super::Steps),
/// [`Variant`](super::Variant), [`Managed`](super::Managed)).
pub(crate) struct Calls {
    /// The run the calls are made in.
    pub(super) shared: Arc<Shared>,
    /// The check it is for (its catalogue entry stays with the engine: the
    /// context knows no check table).
    pub(super) asker: Asker,
    /// The plugin under test, as Nomad runs it, opened with the checks' call
    /// options ([`Shared::call_options`]: a fingerprint is killed only at the
    /// create limit).
    pub(super) plugin: Arc<dyn HostVolumePlugin>,
    /// The sandbox its calls are made for (the check's id, or `probe-<id>`):
    /// what each call is known by while it runs.
    pub(super) owner: String,
    /// Every raw call this check made, for its evidence.
    pub(super) recorder: Recorder,
    /// Every call made, with what was expected of it.
    pub(super) ledger: Ledger,
    /// When its calls are made (for the timing checks).
    pub(super) phase: CallPhase,
    /// The manager's next calls are made alone (see
    /// [`Managed::create`](super::Managed::create)).
    pub(super) managed_alone: Arc<std::sync::atomic::AtomicBool>,
    /// The check's dir (the manager keeps its state below it) and its volumes dir.
    pub(super) dir: PathBuf,
    pub(super) volumes: PathBuf,
}

impl Calls {
    /// The calls of `check`, made in its sandbox `owner` (the name of its
    /// dir in the run's), whose dirs are `dir` and its volumes dir `volumes`.
    pub(super) fn new(
        shared: Arc<Shared>,
        check: Asker,
        owner: &str,
        dir: &Path,
        volumes: &Path,
    ) -> Calls {
        let recorder = Recorder::new();
        let opts = shared.call_options(&recorder, owner);
        Calls {
            plugin: shared.settings.target.open(&opts),
            shared,
            asker: check,
            owner: owner.to_owned(),
            recorder,
            ledger: Ledger::default(),
            phase: CallPhase::Parallel,
            managed_alone: Arc::default(),
            dir: dir.to_path_buf(),
            volumes: volumes.to_path_buf(),
        }
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

    /// The path Nomad's calls take: through the plugin as Nomad runs it,
    /// logged for the run-wide checks (see [`route`](super::route)).
    pub(super) fn nomads(&self) -> Route<'_> {
        Route {
            calls: self,
            plugin: &*self.plugin,
            caller: Caller::Nomad,
        }
    }

    /// Creates, logging the call for the run-wide checks.
    pub async fn create(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
    ) -> Made<CreateResponse> {
        self.nomads()
            .create(req, expect, step, Start::Now, Nth::First)
            .await
    }

    /// Creates, starting as `start` says (a burst's aligned start, say).
    pub async fn create_with(
        &self,
        req: &CreateRequest,
        expect: Expect,
        step: &str,
        start: Start<'_>,
    ) -> Made<CreateResponse> {
        self.nomads()
            .create(req, expect, step, start, Nth::First)
            .await
    }

    /// Deletes the volume `req` created at `created_path`.
    pub async fn delete(
        &self,
        req: &CreateRequest,
        created_path: &str,
        expect: Expect,
        step: &str,
    ) -> Made<()> {
        let req = DeleteRequest::for_created(req, created_path);
        self.nomads()
            .delete(&req, expect, step, Start::Now, Nth::First)
            .await
    }

    /// Sends exactly this delete request, starting as `start` says.
    pub async fn delete_with(
        &self,
        req: &DeleteRequest,
        expect: Expect,
        step: &str,
        start: Start<'_>,
    ) -> Made<()> {
        self.nomads()
            .delete(req, expect, step, start, Nth::First)
            .await
    }

    /// Fingerprints once more (the probe is [`Prereqs::fingerprint_probe`]).
    pub async fn fingerprint(&self, expect: Expect, step: &str) -> Made<Fingerprint> {
        self.nomads()
            .fingerprint(expect, step, Start::Now, Nth::First)
            .await
    }

    /// Records a call made some other way (through the manager, or an
    /// operation Nomad does not have) in the ledger.
    pub fn note(&self, step: &str, op: &str, expect: Expect, error: Option<String>) {
        self.ledger.note(None, step, op, expect, error);
    }

    /// The check's finding once every call is accounted for. A call that did
    /// not do what was expected of it is the check's failure, with that call
    /// as evidence, unless the check already failed, or the call failed only
    /// because its prerequisite did (then the finding stands: the
    /// prerequisite's own check reports the cause).
    pub(super) async fn settle(&self, finding: Finding) -> Finding {
        let mut own = Vec::new();
        for entry in self.ledger.unmet() {
            let explained = match (entry.op, entry.routed) {
                (Some(op), routed) if entry.expect == Expect::Success => {
                    self.prereqs().failed_prerequisite(op).await.is_some()
                        || match routed {
                            Some(r) => self.raced_when_settled(r.attempt.id, op).await,
                            None => false,
                        }
                }
                _ => false,
            };
            if !explained {
                own.push(entry.describe());
            }
        }
        let finding = match (finding, own.first()) {
            (finding @ Finding::Fail(_), _) | (finding, None) => finding,
            (_, Some(first)) => Finding::Fail(if own.len() == 1 {
                first.clone()
            } else {
                format!(
                    "{first} (and {} more calls did not do what was expected)",
                    own.len() - 1
                )
            }),
        };
        let finding = match (finding, self.why_inconclusive()) {
            (Finding::Fail(_) | Finding::Warn(_), Some(why)) => {
                Finding::Skip(format!("inconclusive: {why}"))
            }
            (finding, _) => finding,
        };
        self.cite_repeats(finding)
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
