//! `lifecycle.*`: what happens across agent restarts, re-creation, and crashes
//! in the middle of an operation.

use crate::contract::Operation;
use std::path::{Path, PathBuf};

use super::crash_plan::{CrashPlan, CrashPoint, at_each};
use super::{CheckSpec, FindingResult, Level, Needs, delete, needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, Variant, VolumeAt, canary_bytes, canary_intact, listing, plant_in_volume,
};
use crate::contract::{CreateRequest, DeleteRequest};
use crate::manager::{HostVolumeManager, Restored, Volume, VolumeSpec};

/// The `lifecycle.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    RESTORE,
    super::lifecycle_reboot::REBOOT,
    RECREATE,
    CRASH_CREATE,
    CRASH_DELETE,
    super::lifecycle_reboot::STALE_LOOP,
];

pub(crate) const RESTORE: CheckSpec = CheckSpec {
    id: "lifecycle.restore",
    level: Level::Must,
    rule: "after 4 creates, create again for all 4 at once (an agent restart) keeps paths and files",
    why: "When a Nomad agent restarts it calls create again, concurrently, for every volume it created. A plugin that fails here drops the volumes from the node; one that returns new paths hides the data.",
    fix: "Make create idempotent and safe to run for many volumes at once: return the existing volume's path untouched.",
    varies: None,
    samples: &[],
    needs: Needs::Concurrent,
    subject: Some(Operation::Create),
    run: scenario!(restore),
};

/// An agent restart calls create again for every volume at once; paths and data
/// must survive. Driven through the manager, as a Nomad client does it: volumes
/// created and saved in its state, then restored from that state with their
/// stored requests.
async fn restore(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let manager = ctx
        .managed()
        .manager()
        .map_err(|e| Finding::Skip(format!("cannot open the manager's state dir: {e}")))?;
    let made = create_to_restore(ctx, &manager).await?;
    let before_restore = ctx.managed().recorded();
    let restored = manager.restore().await;
    ctx.managed().log_runs_from(before_restore);
    let restored =
        restored.map_err(|e| Finding::Fail(format!("restore failed as a whole: {e}")))?;
    let tally = RestoreTally::judge(ctx, &made, &restored);
    delete_through_manager(ctx, &manager, &made).await;
    tally.verdict(ctx).await
}

/// Creates 4 volumes through the manager (saved in its state), each holding
/// a file: the volumes, with their files.
async fn create_to_restore(
    ctx: &Ctx,
    manager: &HostVolumeManager,
) -> Result<Vec<(Volume, PathBuf)>, Finding> {
    let mut made = Vec::new();
    for _ in 0..4 {
        // A request of its own for each volume: its own name, as Nomad requires.
        let template = ctx.request();
        let spec = VolumeSpec::new(ctx.managed().plugin().id(), template.volume_name.clone())
            .with_namespace(template.namespace.clone())
            .with_capacity(template.capacity_min_bytes, template.capacity_max_bytes);
        let spec = match &template.parameters {
            Some(p) => spec.with_parameters(p.clone()),
            None => spec,
        };
        let step = "create before the restart";
        let volume = ctx.managed().create(manager, spec, step).await;
        let volume = volume.map_err(|e| {
            Finding::Fail(format!(
                "create before the restart: expected it to succeed; got: {e}"
            ))
        })?;
        ctx.managed().track(&volume);
        let canary = plant_in_volume(ctx, &volume.host_path, "create before the restart")?;
        made.push((volume, canary));
    }
    Ok(made)
}

/// What the restore did to the volumes of lifecycle.restore.
struct RestoreTally {
    problems: Vec<String>,
    /// Whether every problem is a volume that failed to restore.
    failed_only: bool,
    /// The errors of the volumes that failed to restore.
    errors: Vec<String>,
}

impl RestoreTally {
    /// Judges each volume `made` (with its file) against what `restored` says
    /// of it: restored, at its path, with its files.
    fn judge(ctx: &Ctx, made: &[(Volume, PathBuf)], restored: &[Restored]) -> Self {
        let mut tally = RestoreTally {
            problems: Vec::new(),
            failed_only: true,
            errors: Vec::new(),
        };
        for (i, (volume, canary)) in made.iter().enumerate() {
            let Some(r) = restored.iter().find(|r| r.volume.id == volume.id) else {
                tally.failed_only = false;
                tally
                    .problems
                    .push(format!("volume #{} was not restored", i + 1));
                continue;
            };
            let problem = match (r.path(), r.error()) {
                (_, Some(e)) => {
                    tally
                        .problems
                        .push(format!("volume #{} failed to restore: {e}", i + 1));
                    tally.errors.push(e.to_string());
                    continue;
                }
                (Some(path), _) if path != volume.host_path => format!(
                    "volume #{} moved from {:?} to {path:?}",
                    i + 1,
                    volume.host_path
                ),
                _ if !canary_intact(ctx.host(), canary) => {
                    format!("volume #{} lost its files", i + 1)
                }
                _ => continue,
            };
            tally.failed_only = false;
            tally.problems.push(problem);
        }
        tally
    }

    /// The verdict of lifecycle.restore.
    async fn verdict(self, ctx: &Ctx) -> FindingResult {
        let RestoreTally {
            problems,
            failed_only,
            errors,
        } = self;
        if problems.is_empty() {
            Ok(Finding::Pass(
                "4 volumes restored at once from the manager's state: same paths, files kept"
                    .into(),
            ))
        } else if let Some(needs) = match failed_only {
            // Restore is create again: failing it is create.idempotent's finding.
            true => ctx.prereqs().create_again_fails().await,
            false => None,
        } {
            Err(Finding::Skip(needs))
        } else if let Some(cited) = match failed_only {
            // Its creates at once failed as concurrency.create's did: one
            // cause, reported there.
            true => super::company::cited(ctx, "its creates at once", &errors).await,
            false => None,
        } {
            Err(cited)
        } else {
            Err(Finding::Fail(format!(
                "expected create called again for 4 existing volumes at once (an agent restart) to exit 0 \
                 with unchanged paths and files; {}",
                problems.join("; ")
            )))
        }
    }
}

/// Deletes the volumes `made` through the manager, at once (a plugin whose
/// deletes hang costs one delete limit here), each noted as the run's call.
async fn delete_through_manager(
    ctx: &Ctx,
    manager: &HostVolumeManager,
    made: &[(Volume, PathBuf)],
) {
    let before_delete = ctx.managed().recorded();
    let deletes = super::join_all(made.iter().map(|(volume, _)| manager.delete(&volume.id))).await;
    for ((volume, _), deleted) in made.iter().zip(deletes) {
        if deleted.is_ok() {
            ctx.managed().untrack(&volume.id);
        }
        let error = deleted.err().map(|e| e.to_string());
        ctx.calls().note(
            "delete through the manager after the restore",
            "delete",
            Expect::Success,
            error,
        );
    }
    ctx.managed().log_runs_from(before_delete);
}

pub(crate) const RECREATE: CheckSpec = CheckSpec {
    id: "lifecycle.recreate",
    level: Level::Should,
    rule: "create, delete, create of the same id succeeds and the new volume is empty",
    why: "Users delete a volume and create one with the same id; a stale leftover of the first volume would leak old data into the new one.",
    fix: "Leave nothing of a deleted volume behind, so the next create starts empty.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(recreate),
};

async fn recreate(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let req = ctx.request();
    let first = ctx.steps().create_ok(&req, "first create").await?;
    let canary = plant_in_volume(ctx, &first.path, "first create")?;
    ctx.steps()
        .delete_ok(&req, &first.path, "delete between the creates")
        .await?;
    let second = ctx.steps().create_ok(&req, "create after delete").await?;
    // A block-device volume may come back on another device: the new
    // volume is empty when its device does not hold the old one's canary.
    let stale = if ctx.host().is_block_device(&canary) {
        ctx.host()
            .has_marker(Path::new(&second.path), &canary_bytes(&canary))
    } else {
        canary_intact(ctx.host(), &canary)
    };
    ctx.calls()
        .delete(
            &req,
            &second.path,
            Expect::Success,
            "delete after the re-create",
        )
        .await;
    if stale {
        Err(Finding::Fail(format!(
            "expected the re-created volume to be empty; the file {} from before the delete is still there",
            canary.display()
        )))
    } else {
        Ok(Finding::Pass("re-created, empty".into()))
    }
}

pub(crate) const CRASH_CREATE: CheckSpec = CheckSpec {
    id: "lifecycle.crash-create",
    level: Level::Should,
    rule: "create killed before each of its steps (every change of state in its dirs, mount, loop device or process start; SIGKILL to all its processes), then create again succeeds and delete leaves nothing",
    why: "Nomad kills a create that overruns its limit, and nodes crash; the next create of that volume must repair or finish it, not report a half-made volume as ready.",
    fix: "Do the work under a temporary name and rename at the end, or check every step before skipping it; record \"done\" only after the work.",
    varies: None,
    samples: &["crash-unsafe", "mkfs-crash-window", "racy-concurrency"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(crash_create),
};

/// A create killed part way is finished by the next create, and delete then
/// leaves nothing.
async fn crash_create(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    ctx.prereqs().require_create().await?;
    // Decided before any crash, never by where a kill lands: a create that
    // fails for an existing volume fails "create again" whenever the kill
    // came after the volume was made, and passes when it came before.
    if let Some(needs) = ctx.prereqs().create_again_fails().await {
        return Err(Finding::Skip(needs));
    }
    let before = listing(ctx.host(), ctx.dirs().volumes());
    let plan = measure_create(ctx).await?;
    let points = plan.points("create");
    let killed = at_each(&points, |point| crashed_create_recovers(ctx, &plan, point)).await?;
    let left = ctx
        .prereqs()
        .left_since(ctx.dirs().volumes(), &before)
        .await;
    if !left.own.is_empty() {
        return Err(Finding::Fail(format!(
            "after crashed creates, re-creates and deletes, expected an empty volumes dir; left: {}{}",
            left.own.join(", "),
            left.citation()
        )));
    }
    Ok(Finding::Pass(format!(
        "killed {}: create again recovered, delete left nothing{}",
        plan.describe("create", &killed),
        match left.cited.is_empty() {
            true => String::new(),
            false => format!(" of its own{}", left.citation()),
        }
    )))
}

/// Where to kill a create: the steps of a measuring create (then deleted).
async fn measure_create(ctx: &Ctx) -> Result<CrashPlan, Finding> {
    let probe = ctx.request();
    // The check runs alone (its phase): the measuring create has the host
    // to itself, and its steps are the plugin's own.
    let (plan, call) = CrashPlan::measure(ctx, async |v: &Variant<'_>| {
        v.create_unloaded(&probe, Expect::Success, "measuring create")
            .await
    })
    .await;
    let resp = ctx.steps().need(call, "measuring create").await?;
    ctx.steps()
        .delete_ok(&probe, &resp.path, "delete after measuring create")
        .await?;
    Ok(plan)
}

/// A create of a new volume killed at `point`, then create again, which must
/// give an existing path, then delete. Whether the kill landed.
async fn crashed_create_recovers(
    ctx: &Ctx,
    plan: &CrashPlan,
    point: &CrashPoint,
) -> Result<bool, Finding> {
    let req = ctx.request();
    let label = &point.label;
    let crashed = plan
        .crasher(ctx, point)
        .create(&req, Expect::Either, label)
        .await;
    let killed = plan.killed(point, &crashed);
    // Either: the rule judges create again itself, below; re-run alone
    // if it timed out, as the load may have made it overrun.
    let again = ctx
        .steps()
        .create_unloaded(&req, Expect::Either, &format!("{label}: create again"))
        .await?
        .into_call();
    let resp = match again.result {
        Ok(resp) => resp,
        Err(e) => {
            return Err(Finding::Fail(format!(
                "{label}: expected create again to succeed; got: {e}"
            )));
        }
    };
    if resp.path.is_empty() || !ctx.host().exists(Path::new(&resp.path)) {
        return Err(Finding::Fail(format!(
            "{label}: create again exited 0 but its path {:?} does not exist: the plugin took a \
             half-made volume for a finished one",
            resp.path
        )));
    }
    ctx.steps()
        .delete_ok(&req, &resp.path, &format!("{label}: delete afterwards"))
        .await?;
    Ok(killed)
}

pub(crate) const CRASH_DELETE: CheckSpec = CheckSpec {
    id: "lifecycle.crash-delete",
    level: Level::Should,
    rule: "delete killed before each of its steps (as for lifecycle.crash-create), then delete again succeeds and the path is gone",
    why: "Nomad does not retry a delete killed part way (at its 60 s limit, say): it returns the error and keeps the volume, and an operator sends delete again; if that delete fails on the first one's partial work, the volume can never be deleted.",
    fix: "Make each step of delete tolerate the previous attempt's partial work (`rm -rf`, unmount only when mounted).",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(crash_delete),
};

/// A delete killed part way is finished by the next delete.
async fn crash_delete(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    ctx.prereqs().require_create().await?;
    // One cause, one finding, decided before any crash: a delete that fails
    // whenever its volume is already gone fails "delete again" for
    // delete.idempotent's reason when a kill lands after the removal, and
    // passes when it lands before; which one happens is luck.
    if second_delete_fails(ctx).await {
        return Err(Finding::Skip(format!(
            "{} (a second delete fails without a crash too)",
            needs(&delete::IDEMPOTENT)
        )));
    }
    let plan = measure_delete(ctx).await?;
    let points = plan.points("delete");
    let killed = at_each(&points, |point| crashed_delete_finished(ctx, &plan, point)).await?;
    Ok(Finding::Pass(format!(
        "killed {}: delete again finished the job",
        plan.describe("delete", &killed)
    )))
}

/// Where to kill a delete: the steps of a measuring delete (of a volume made
/// for it).
async fn measure_delete(ctx: &Ctx) -> Result<CrashPlan, Finding> {
    let probe = ctx.request();
    let resp = ctx
        .steps()
        .create_ok(&probe, "create before measuring delete")
        .await?;
    let measured = DeleteRequest::for_created(&probe, &resp.path);
    let (plan, call) = CrashPlan::measure(ctx, async |v: &Variant<'_>| {
        v.delete(&measured, Expect::Success, "measuring delete")
            .await
    })
    .await;
    ctx.steps().need(call, "measuring delete").await?;
    Ok(plan)
}

/// A delete of a new volume killed at `point`, then delete again, which must
/// exit 0 and remove the volume. Whether the kill landed.
async fn crashed_delete_finished(
    ctx: &Ctx,
    plan: &CrashPlan,
    point: &CrashPoint,
) -> Result<bool, Finding> {
    let req: CreateRequest = ctx.request();
    let resp = ctx
        .steps()
        .create_ok(&req, "create before the crashed delete")
        .await?;
    let label = &point.label;
    let volume = VolumeAt::before_delete(ctx, &resp.path);
    let delete = DeleteRequest::for_created(&req, &resp.path);
    let crashed = plan
        .crasher(ctx, point)
        .delete(&delete, Expect::Either, label)
        .await;
    let killed = plan.killed(point, &crashed);
    // Either: the rule judges delete again itself, below (re-run alone
    // if it timed out).
    let again = ctx
        .steps()
        .delete_unloaded(
            &DeleteRequest::for_created(&req, &resp.path),
            Expect::Either,
            &format!("{label}: delete again"),
        )
        .await?
        .into_call();
    if let Err(e) = again.result {
        return Err(Finding::Fail(format!(
            "{label}: expected delete again to exit 0; got: {e}"
        )));
    }
    if !volume.gone().await && volume.is_block() {
        return Err(Finding::Fail(format!(
            "{label}: expected delete again to remove the volume; {}",
            volume.still_there()
        )));
    }
    if !volume.gone().await {
        return Err(Finding::Fail(format!(
            "{label}: expected delete again to remove {:?}; it is still there",
            resp.path
        )));
    }
    Ok(killed)
}

/// Whether a second delete of a volume deleted without a crash fails too:
/// then a delete again after a crash fails for `delete.idempotent`'s reason,
/// whatever the crash did.
async fn second_delete_fails(ctx: &Ctx) -> bool {
    const STEP: &str = "to tell a crash from a second delete";
    let Ok((req, path)) = ctx.steps().one_volume(&format!("create {STEP}")).await else {
        return false;
    };
    if ctx
        .steps()
        .delete_ok(&req, &path, &format!("delete {STEP}"))
        .await
        .is_err()
    {
        return false;
    }
    // Either: whether it fails is what is asked.
    !ctx.calls()
        .delete(
            &req,
            &path,
            Expect::Either,
            &format!("second delete {STEP}"),
        )
        .await
        .ok()
}
