//! The run's shared first calls (a fingerprint, a default create, a delete of
//! a created volume), made once, and the prerequisites derived from them: a
//! check skips "needs X" only when X itself did not pass, so one root cause is
//! reported once and its dependents skip. What each probe found is recorded
//! in the types of `probe_results.rs`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::probe_results::{
    AgainProbe, CreateProbe, DeleteProbe, DistinctProbe, FreshVolume, is_mount_point,
};
use super::residue::{Footprint, around};
use super::{Asker, Ctx, Expect, Finding, Sandbox, Shared, plant_in_volume};
use crate::contract::{CreateRequest, CreateResponse, Operation};
use crate::plugin::{Fingerprint, PluginCall};

/// The probes of one run.
#[derive(Default)]
pub(crate) struct Probes {
    fingerprint: OnceCell<PluginCall<Fingerprint>>,
    create: OnceCell<CreateProbe>,
    delete: OnceCell<DeleteProbe>,
    again: OnceCell<AgainProbe>,
    distinct: OnceCell<DistinctProbe>,
    /// The probes' sandboxes (their held dirs), kept for the run: their
    /// volumes are in the run's live volumes, which the teardown deletes.
    /// Only the sandboxes: a probe's [`Ctx`] holds the run's [`Shared`],
    /// which holds these probes, and that cycle would keep the whole run
    /// (its call log, every captured output) alive for good.
    sandboxes: Mutex<Vec<Sandbox>>,
}

impl Probes {
    /// The fingerprint probe's result, if it ran.
    pub fn fingerprint_result(&self) -> Option<&PluginCall<Fingerprint>> {
        self.fingerprint.get()
    }

    /// Keeps what the run still needs of a probe's context once its calls
    /// are made: its sandbox (the context itself is dropped).
    fn keep(&self, probe: Ctx) {
        crate::lock(&self.sandboxes).push(probe.dirs.sandbox);
    }
}

/// The checks whose rules the run's probes answer, handed over by the
/// engine from the catalogue: a probe's calls are made for its owner (logged
/// under its id, in a sandbox named after it, judged by its subject).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeOwners {
    /// The first fingerprint's: `fingerprint.runs`.
    pub fingerprint: Asker,
    /// The first default create's: `create.succeeds`.
    pub create: Asker,
    /// The first delete's: `delete.succeeds`.
    pub delete: Asker,
    /// The create made again for an existing volume: `create.idempotent`.
    pub again: Asker,
    /// The two volumes' creates: `create.distinct`.
    pub distinct: Asker,
    /// The timing phase's calls: `timing.margin`.
    pub timing: Asker,
}

impl ProbeOwners {
    /// Every probe made for `asker` (for tests of the context alone, and
    /// `explore`, which makes no probe).
    pub fn all(asker: Asker) -> ProbeOwners {
        ProbeOwners {
            fingerprint: asker,
            create: asker,
            delete: asker,
            again: asker,
            distinct: asker,
            timing: asker,
        }
    }
}

/// A sandbox for a shared probe, beside the checks' own, made for `owner`. A
/// run whose temp dir cannot take one more dir is a harness failure; the
/// engine turns the panic into exit 4.
pub(super) fn probe_ctx(shared: Arc<Shared>, owner: Asker) -> Ctx {
    let dir = format!("probe-{}", owner.id);
    Ctx::in_dir(shared, owner, &dir).expect("cannot make the probe's sandbox")
}

/// The run's probes as a check sees them, and the prerequisites derived
/// from them ([`Ctx::prereqs`]): a check cites another check's finding
/// through them ("needs create.succeeds").
#[derive(Clone, Copy)]
pub(crate) struct Prereqs<'a> {
    /// The run, which holds the probes.
    pub(super) run: &'a Arc<Shared>,
}

impl<'a> Prereqs<'a> {
    /// The probes of the run `run`.
    pub(super) fn of(run: &'a Arc<Shared>) -> Prereqs<'a> {
        Prereqs { run }
    }

    /// The run's first fingerprint, made once and shared.
    pub async fn fingerprint_probe(&self) -> &'a PluginCall<Fingerprint> {
        let shared = self.run.clone();
        self.run
            .probes
            .fingerprint
            .get_or_init(|| async move {
                // Made again alone if it overran under the run's first rush:
                // what the checks judge must not depend on the host's load.
                let probe = probe_ctx(shared.clone(), shared.probe_owners.fingerprint);
                probe
                    .steps()
                    .fingerprint_unloaded(Expect::Success, "fingerprint")
                    .await
                    .into_call()
            })
            .await
    }

    /// The run's first default create, made once and shared.
    pub async fn create_probe(&self) -> &'a CreateProbe {
        let shared = self.run.clone();
        self.run
            .probes
            .create
            .get_or_init(|| async move {
                let probe = probe_ctx(shared.clone(), shared.probe_owners.create);
                let request = probe.request();
                let call = probe
                    .calls
                    .create(&request, Expect::Success, "create with the default request")
                    .await
                    .into_call();
                let host = &*shared.host;
                let path_existed = match &call.result {
                    Ok(resp) => !resp.path.is_empty() && host.exists(Path::new(&resp.path)),
                    Err(_) => false,
                };
                let fresh = match &call.result {
                    Ok(resp) if path_existed => FreshVolume::at(host, Path::new(&resp.path)),
                    _ => None,
                };
                let mounted = match &call.result {
                    Ok(resp) if path_existed => is_mount_point(host, Path::new(&resp.path)),
                    _ => false,
                };
                shared.probes.keep(probe);
                CreateProbe {
                    request,
                    call,
                    path_existed,
                    fresh,
                    mounted,
                }
            })
            .await
    }

    /// The run's first delete of a created volume, made once and shared.
    pub async fn delete_probe(&self) -> &'a DeleteProbe {
        let shared = self.run.clone();
        self.run
            .probes
            .delete
            .get_or_init(|| async move {
                let probe = probe_ctx(shared.clone(), shared.probe_owners.delete);
                let req = probe.request();
                let create = probe
                    .calls
                    .create(&req, Expect::Success, "create before delete")
                    .await
                    .into_call();
                let (delete, footprint, no_data) = match &create.result {
                    Ok(resp) => {
                        let held = delete_holding_data(&probe, &req, resp).await;
                        (Some(held.call), held.footprint, held.no_data)
                    }
                    Err(_) => (None, None, None),
                };
                shared.probes.keep(probe);
                DeleteProbe {
                    create,
                    delete,
                    footprint,
                    no_data,
                }
            })
            .await
    }

    /// The run's create-again probe ([`AgainProbe`]), made once and shared.
    pub async fn again_probe(&self) -> &'a AgainProbe {
        let shared = self.run.clone();
        self.run
            .probes
            .again
            .get_or_init(|| async move {
                let probe = probe_ctx(shared.clone(), shared.probe_owners.again);
                let request = probe.request();
                let first = probe
                    .calls
                    .create(&request, Expect::Success, "first create")
                    .await
                    .into_call();
                let (mut canary, mut again) = (Err(Finding::Skip("no volume".into())), None);
                if let Ok(resp) = &first.result {
                    canary = plant_in_volume(&probe, &resp.path, "first create");
                    let step = "second create of the same volume";
                    let call = probe.calls.create(&request, Expect::Success, step).await;
                    again = Some(call.into_call());
                }
                shared.probes.keep(probe);
                AgainProbe {
                    request,
                    first,
                    canary,
                    again,
                }
            })
            .await
    }

    /// The run's two-volume probe ([`DistinctProbe`]), made once and shared.
    pub async fn distinct_probe(&self) -> &'a DistinctProbe {
        let shared = self.run.clone();
        self.run
            .probes
            .distinct
            .get_or_init(|| async move {
                let probe = probe_ctx(shared.clone(), shared.probe_owners.distinct);
                let requests = [probe.request(), probe.request()];
                let a = probe
                    .calls
                    .create(&requests[0], Expect::Success, "create of volume A")
                    .await
                    .into_call();
                let (mut canary, mut b) = (Err(Finding::Skip("no volume".into())), None);
                if let Ok(resp) = &a.result {
                    canary = plant_in_volume(&probe, &resp.path, "create of volume A");
                    let step = "create of volume B";
                    b = Some(
                        probe
                            .calls
                            .create(&requests[1], Expect::Success, step)
                            .await
                            .into_call(),
                    );
                }
                shared.probes.keep(probe);
                DistinctProbe {
                    requests,
                    a,
                    canary,
                    b,
                }
            })
            .await
    }

    /// "needs create.distinct" when two volumes get one path (the
    /// two-volume probe's did): a check whose volumes collide then skips,
    /// naming the check that reports the cause.
    pub async fn paths_not_distinct(&self) -> Option<String> {
        self.distinct_probe()
            .await
            .shared_path()
            .then(|| "needs create.distinct".to_string())
    }

    /// "needs create.idempotent" when a create made again for an existing
    /// volume fails (the create-again probe's): a check whose own create
    /// again failed then skips, naming the check that reports the cause.
    pub async fn create_again_fails(&self) -> Option<String> {
        let probe = self.again_probe().await;
        probe
            .again
            .as_ref()
            .is_some_and(|again| !again.ok())
            .then(|| "needs create.idempotent".to_string())
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

    /// How the volume a create answered with `resp` differs from the run's
    /// first default create's (it exists, is a mount where that was one, and
    /// has its mode and entries), in words that follow "a volume that", or
    /// `None` when it is as that one.
    pub async fn unlike_default(&self, resp: &CreateResponse) -> Option<String> {
        let probe = self.create_probe().await;
        let path = Path::new(&resp.path);
        let host = &*self.run.host;
        if !host.exists(path) {
            return Some(format!(
                "does not exist at {:?}: Nomad would hand out a path with no volume",
                resp.path
            ));
        }
        if probe.mounted && !is_mount_point(host, path) {
            return Some(format!(
                "is not a mount point at {:?} (the default create's is): Nomad would hand out a \
                 plain directory as the volume",
                resp.path
            ));
        }
        match (&probe.fresh, FreshVolume::at(host, path)) {
            (Some(default), Some(here)) if *default != here => Some(format!(
                "is {}, where the default create's is {}",
                here.describe(),
                default.describe()
            )),
            (Some(_), None) => Some(format!(
                "is no directory at {:?} (the default create's is one)",
                resp.path
            )),
            _ => None,
        }
    }

    /// `Err(skip)` unless a created volume can be deleted (delete.succeeds passed).
    pub async fn require_delete(&self) -> Result<(), Finding> {
        self.require_create().await?;
        if self.delete_probe().await.passed() {
            Ok(())
        } else {
            Err(Finding::Skip("needs delete.succeeds".into()))
        }
    }

    /// Why a call of `op` expected to succeed may have failed for a reason
    /// another check reports: the "needs X" of that check, when X did not pass.
    pub async fn failed_prerequisite(&self, op: Operation) -> Option<String> {
        let skip = |f: Finding| match f {
            Finding::Skip(why) => Some(why),
            _ => None,
        };
        match op {
            Operation::Fingerprint => {
                let probe = self.fingerprint_probe().await;
                let limit = self.run.settings.timeouts().fingerprint;
                if !probe.exited_zero() {
                    Some("needs fingerprint.runs".into())
                } else if probe.duration > limit {
                    // Calls made under Nomad's limit time out for that reason.
                    Some("needs fingerprint.deadline".into())
                } else if !probe.ok() {
                    Some("needs fingerprint.version".into())
                } else {
                    None
                }
            }
            Operation::Create => self.require_create().await.err().and_then(skip),
            Operation::Delete => self.require_delete().await.err().and_then(skip),
        }
    }
}

/// What the delete probe's delete of a volume holding a file did.
struct DeletedHoldingData {
    /// The delete.
    call: PluginCall<()>,
    /// What lay beside the volumes dir once the volume was made, and what its
    /// delete left there (when it succeeded).
    footprint: Option<Footprint>,
    /// The file's name was already in the new volume (evidence, and said).
    no_data: Option<String>,
}

/// Plants a file in the volume `resp` made, as in any volume in use, and
/// deletes it, noting what lay around the volumes dir before and after.
async fn delete_holding_data(
    probe: &Ctx,
    req: &CreateRequest,
    resp: &CreateResponse,
) -> DeletedHoldingData {
    let host = probe.host();
    let volumes = probe.dirs.volumes().to_path_buf();
    let created_beside = around(host, &volumes)
        .into_iter()
        .filter(|e| e.starts_with("../"))
        .map(|e| probe.prereqs().shape(&e))
        .collect();
    // A file in it, as in any volume in use; a path outside
    // the sandbox gets none (and is create's finding).
    // Its name already there is evidence, and said; a path
    // outside the sandbox is create's finding.
    let no_data = probe
        .dirs
        .plant(Path::new(&resp.path), "data")
        .err()
        .filter(|e| e.kind() == std::io::ErrorKind::AlreadyExists)
        .map(|e| e.to_string());
    let call = probe
        .calls
        .delete(
            req,
            &resp.path,
            Expect::Success,
            "delete of a volume holding a file",
        )
        .await;
    let footprint = call.ok().then(|| {
        let left = around(host, &volumes)
            .iter()
            .map(|e| probe.prereqs().shape(e))
            .collect();
        Footprint {
            created_beside,
            left,
        }
    });
    DeletedHoldingData {
        call: call.into_call(),
        footprint,
        no_data,
    }
}
