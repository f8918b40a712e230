//! `delete.*`: delete removes exactly its own volume, is idempotent, and
//! survives Nomad's dangerous compensating delete. The checks that set up a
//! situation of their own have files of their own: `delete_auto.rs`
//! (Nomad's compensating delete), `delete_in_use.rs` (a file held open) and
//! `delete_held.rs` (a loop device held open).

use std::path::Path;

use super::node_residue::{Elsewhere, NodeWatch};
use super::{CheckSpec, FindingResult, Level, Needs, needs, node_residue};
use crate::conformance::context::{
    Ctx, Expect, Fact, Finding, Race, RunLog, VolumeAt, around, canary_intact, loops_left,
    mounts_left, plant_in_volume,
};
use crate::contract::{CreateRequest, DeleteRequest, Operation};
use crate::exec::{AtChanges, Change};

/// The `delete.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    SUCCEEDS,
    REMOVES,
    IDEMPOTENT,
    NEVER_CREATED,
    ISOLATED,
    NO_RESIDUE,
    super::delete_auto::AUTO_DELETE_SAFE,
    super::delete_in_use::IN_USE,
    super::delete_held::DEVICE_HELD,
    DEADLINE,
];

pub(crate) const SUCCEEDS: CheckSpec = CheckSpec {
    id: "delete.succeeds",
    level: Level::Must,
    rule: "delete of a created volume holding a file (as a volume in use does) exits 0 within 60 s",
    why: "A failing delete keeps the volume in Nomad's state: `nomad volume delete` fails and the volume cannot be removed from the node.",
    fix: "Remove the volume at `$DHV_CREATED_PATH`, with whatever it holds, and exit 0 within 60 s; print `{\"error\": \"...\"}` when you really cannot.",
    varies: None,
    samples: &["rmdir-delete"],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(succeeds),
};

/// Delete of a created volume exits 0. Judged on the run's delete probe, which
/// the other checks' "needs delete.succeeds" rests on; its volume holds a file,
/// as a volume in use does, so a plugin whose delete fails on data fails here
/// once, not in every check that deletes a volume it wrote to.
async fn succeeds(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let probe = ctx.prereqs().delete_probe().await;
    ctx.cite(probe.create.run.as_ref());
    if let Err(e) = &probe.create.result {
        return Err(Finding::Fail(format!(
            "create before delete: expected create to succeed; got: {e}"
        )));
    }
    let Some(call) = &probe.delete else {
        unreachable!("the probe deletes whenever its create succeeded");
    };
    ctx.cite(call.run.as_ref());
    let path = call
        .request
        .iter()
        .find(|(k, _)| k == crate::contract::var::CREATED_PATH)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    // A volume the harness could not write its file into: said, as evidence.
    let note = probe
        .no_data
        .as_ref()
        .map(|e| format!(" (the harness wrote no file into the volume first: {e})"))
        .unwrap_or_default();
    match &call.result {
        Ok(()) => Ok(Finding::Pass(format!(
            "exit 0 in {:.1} ms{note}",
            call.duration.as_secs_f64() * 1e3
        ))),
        Err(e) => {
            // What the failed delete did, observed: a path it removed before
            // failing is said (Nomad keeps the volume and its state all the
            // same, so the next delete meets a volume that is gone).
            let removed = match !path.is_empty() && !ctx.host().exists(Path::new(&path)) {
                true => " (it removed the path all the same: the delete did its work, then failed)",
                false => "",
            };
            Err(Finding::Fail(format!(
                "expected delete of a created volume holding a file (DHV_CREATED_PATH={path:?}) to exit 0; got: {e}{removed}{note}"
            )))
        }
    }
}

pub(crate) const REMOVES: CheckSpec = CheckSpec {
    id: "delete.removes",
    level: Level::Must,
    rule: "the created path no longer exists after delete",
    why: "Nomad forgets the volume after a successful delete; anything left at the path is invisible to Nomad and fills the disk.",
    fix: "Remove everything at the created path (unmount first if you mounted it), and only then exit 0.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(removes),
};

async fn removes(ctx: &Ctx) -> FindingResult {
    let (req, path) = ctx.steps().one_volume("create before delete").await?;
    let at = VolumeAt::before_delete(ctx, &path);
    ctx.steps().delete_ok(&req, &path, "delete").await?;
    if !at.gone().await && at.is_block() {
        Err(Finding::Fail(format!(
            "expected the volume to be gone after delete; {}",
            at.still_there()
        )))
    } else if !at.gone().await {
        Err(Finding::Fail(format!(
            "expected {path:?} to be gone after delete; it still exists"
        )))
    } else if at.is_block() {
        Ok(Finding::Pass(
            "the block device no longer backs the volume (its node stays, as device nodes do)"
                .into(),
        ))
    } else {
        Ok(Finding::Pass("path removed".into()))
    }
}

pub(crate) const IDEMPOTENT: CheckSpec = CheckSpec {
    id: "delete.idempotent",
    level: Level::Must,
    rule: "a second delete of the same volume exits 0",
    why: "A delete can come again for a volume already gone (an operator running the command twice, or again after a delete that failed part way; Nomad itself never retries one): failing because the volume is already gone leaves a volume that cannot be deleted.",
    fix: "Treat a volume that is already gone as deleted: `rm -rf`, `umount` only when mounted, exit 0.",
    varies: None,
    samples: &["fails-on-missing-dir"],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(idempotent),
};

async fn idempotent(ctx: &Ctx) -> FindingResult {
    let (req, path) = ctx.steps().one_volume("create before delete").await?;
    ctx.steps().delete_ok(&req, &path, "first delete").await?;
    // Either: the rule judges the second delete itself, below.
    let again = ctx
        .calls()
        .delete(&req, &path, Expect::Either, "second delete")
        .await
        .into_call();
    match again.result {
        Ok(()) => Ok(Finding::Pass("second delete exits 0".into())),
        Err(e) => Err(Finding::Fail(format!(
            "expected a second delete of the same volume to exit 0 (Nomad retries deletes); got: {e}"
        ))),
    }
}

pub(crate) const NEVER_CREATED: CheckSpec = CheckSpec {
    id: "delete.never-created",
    level: Level::Must,
    rule: "delete of a volume id that was never created exits 0, also when the volumes dir does not exist",
    why: "Nomad sends delete for volumes whose create failed part way or never ran; failing there keeps a broken volume in the state forever. Nomad does not make the volumes dir itself (only a create makes it), so the delete of a volume whose create failed early can find no volumes dir at all.",
    fix: "Exit 0 when there is nothing to delete, including when the volumes dir is missing (do not take a lock file inside a dir that is not there).",
    varies: None,
    samples: &["fails-on-missing-dir"],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(never_created),
};

async fn never_created(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let req = ctx.request();
    let path = Path::new(&req.volumes_dir).join(&req.volume_id);
    // Either: the rule judges this delete itself, below.
    let call = ctx
        .calls()
        .delete(
            &req,
            &path.to_string_lossy(),
            Expect::Either,
            "delete of a never-created volume",
        )
        .await
        .into_call();
    if let Err(e) = call.result {
        return Err(Finding::Fail(format!(
            "expected delete of a volume that was never created to exit 0; got: {e}"
        )));
    }
    // A volumes dir that was never made (nor its parent).
    let missing = ctx.dirs().dir().join("never-made").join("volumes");
    let req = ctx.request_in(&missing);
    let path = missing.join(&req.volume_id);
    let step = "delete of a never-created volume, with no volumes dir";
    let call = ctx
        .steps()
        .delete_unloaded(
            &DeleteRequest::for_created(&req, &path.to_string_lossy()),
            Expect::Either,
            step,
        )
        .await?
        .into_call();
    match call.result {
        Ok(()) => Ok(Finding::Pass(
            "exit 0, and exit 0 with no volumes dir either".into(),
        )),
        Err(e) => Err(Finding::Fail(format!(
            "expected delete of a volume that was never created to exit 0 when the volumes dir \
             does not exist either (Nomad does not make it: only a create does); got: {e}"
        ))),
    }
}

pub(crate) const ISOLATED: CheckSpec = CheckSpec {
    id: "delete.isolated",
    level: Level::Must,
    rule: "deleting one volume leaves every other volume intact: one holding a file (which survives too), and one empty",
    why: "A delete that touches other volumes destroys other jobs' data.",
    fix: "Remove only `$DHV_CREATED_PATH` (and the files the plugin keeps for that one volume id).",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(isolated),
};

async fn isolated(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let (a_req, b_req) = (ctx.request(), ctx.request());
    let a = ctx.steps().create_ok(&a_req, "create of volume A").await?;
    let b = ctx.steps().create_ok(&b_req, "create of volume B").await?;
    if a.path == b.path {
        // One path for two volumes: deleting one must take the other.
        if let Some(needs) = ctx.prereqs().paths_not_distinct().await {
            ctx.calls()
                .delete(&a_req, &a.path, Expect::Success, "delete of volume A")
                .await;
            return Err(Finding::Skip(needs));
        }
    }
    let canary = plant_in_volume(ctx, &b.path, "create of volume B")?;
    // An empty sibling too: a delete that removes every empty volume
    // directory leaves B (it holds a file) and takes C.
    let c_req = ctx.request();
    let c = ctx.steps().create_ok(&c_req, "create of volume C").await?;
    ctx.steps()
        .delete_ok(&a_req, &a.path, "delete of volume A")
        .await?;
    let result = if !ctx.host().exists(Path::new(&b.path)) || !canary_intact(ctx.host(), &canary) {
        Err(Finding::Fail(format!(
            "expected volume B ({:?}) and its files to survive the delete of volume A ({:?}); B is gone or changed",
            b.path, a.path
        )))
    } else if c.path != a.path && !ctx.host().exists(Path::new(&c.path)) {
        Err(Finding::Fail(format!(
            "expected volume C ({:?}), empty, to survive the delete of volume A ({:?}); C is gone",
            c.path, a.path
        )))
    } else {
        Ok(Finding::Pass(
            "the other volumes, one holding a file and one empty, are intact".into(),
        ))
    };
    for (req, path, step) in [
        (&b_req, &b.path, "delete of volume B"),
        (&c_req, &c.path, "delete of volume C"),
    ] {
        ctx.calls().delete(req, path, Expect::Success, step).await;
    }
    result
}

pub(crate) const NO_RESIDUE: CheckSpec = CheckSpec {
    id: "delete.no-residue",
    level: Level::Should,
    rule: "after every volume is deleted, nothing the plugin made remains in or beside the volumes dir, nor anywhere else on the node its calls wrote (`/tmp`, `/var/tmp`, `/run`, `/dev/shm`, ...: told by the plugin's own processes where they can be watched, else by a volume's id or name in the name); other checks that find the same leftovers cite this one",
    why: "Images, lock files and state left by a delete accumulate on the node and are found by no one; a mount left behind keeps a device busy and exposes whatever it shows to anything that cleans up the volumes dir. Plugins run with the node's temp dirs: a log or state file left there by every create fills `/tmp` (or `/run`, which is memory) one volume at a time.",
    fix: "Unmount the volume (every stacked mount) before removing anything, then remove every file the plugin made for the volume: images, lock and state files, mount points, and any log or temp file written elsewhere (remove it before exiting, or keep it in the volumes dir beside the volume and remove it on delete).",
    varies: None,
    samples: &["side-file", "tmp-log"],
    needs: Needs::RunEnd,
    subject: Some(Operation::Delete),
    run: scenario!(no_residue),
};

/// Nothing the plugin made remains after all deletes, in the volumes dir or
/// beside it, or elsewhere on the node (see [`node_residue`]). The one finding for what every create and delete leaves: other
/// checks cite it ([`Prereqs::leftovers`](crate::conformance::context::Prereqs::leftovers)).
/// It runs last, once the run's end is cleared: what the harness could not
/// remove of the whole run then ([`Fact::RunEndLeft`]) is its finding too.
async fn no_residue(ctx: &Ctx) -> FindingResult {
    let own = own_residue(ctx).await;
    let Some(left) = ctx
        .facts()
        .into_iter()
        .find(|f| matches!(f, Fact::RunEndLeft { .. }))
    else {
        return own;
    };
    let text = left.describe();
    let only_held_elsewhere = matches!(
        &left,
        Fact::RunEndLeft { left, held_elsewhere, .. }
            if left.iter().all(|l| held_elsewhere.contains(l))
    );
    match own.unwrap_or_else(|f| f) {
        Finding::Fail(m) | Finding::Warn(m) => Err(Finding::Fail(format!("{m}; {text}"))),
        // A device another run or program holds is no residue of the
        // plugin's: the check cannot say whether its delete let go of it.
        _ if only_held_elsewhere => Err(Finding::Skip(format!("inconclusive: {text}"))),
        _ => Err(Finding::Fail(format!(
            "expected the run's temp dir to be removable; {text}"
        ))),
    }
}

/// What one create and delete of this check's own left.
async fn own_residue(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let before = around(ctx.host(), ctx.dirs().volumes());
    let reqs = [ctx.request(), ctx.request()];
    let node = NodeWatch::start(ctx.host(), Race::holds(ctx.calls()));
    let (outside, volumes) = create_and_delete(ctx, &reqs).await?;
    // A loop device a delete detached is released once its last opener lets
    // go: waited for here. One still backing its volume is delete.removes'
    // finding, not a residue as well.
    for at in &volumes {
        if at.is_block() && !at.gone().await {
            return Err(Finding::Skip(format!(
                "{} ({})",
                needs(&REMOVES),
                at.still_there()
            )));
        }
    }
    no_mount_or_loop_left(ctx)?;
    let left: Vec<String> = around(ctx.host(), ctx.dirs().volumes())
        .difference(&before)
        .cloned()
        .collect();
    let elsewhere = node.left_elsewhere(ctx.host(), &reqs, &outside);
    residue_verdict(&node, left, elsewhere)
}

/// Creates, then deletes, a volume per request, each call watched for what it
/// makes outside the run's dirs. What each volume's calls made there, and
/// the volumes as they were before their deletes.
async fn create_and_delete(
    ctx: &Ctx,
    reqs: &[CreateRequest],
) -> Result<(Vec<Vec<Change>>, Vec<VolumeAt>), Finding> {
    let nomad = ctx.watched(AtChanges::RecordOutside(
        ctx.dirs().run_root().to_path_buf(),
    ));
    let mut outside: Vec<Vec<Change>> = vec![Vec::new(); reqs.len()];
    let mut made = Vec::new();
    for (req, changes) in reqs.iter().zip(outside.iter_mut()) {
        let call = nomad.create(req, Expect::Success, "create").await;
        record_outside(changes, call.run.as_ref());
        made.push(ctx.steps().need(call, "create").await?.path);
    }
    let volumes: Vec<VolumeAt> = made
        .iter()
        .map(|p| VolumeAt::before_delete(ctx, p))
        .collect();
    for ((req, path), changes) in reqs.iter().zip(&made).zip(outside.iter_mut()) {
        let del = DeleteRequest::for_created(req, path);
        let call = nomad.delete(&del, Expect::Success, "delete").await;
        record_outside(changes, call.run.as_ref());
        ctx.steps().need(call, "delete").await?;
    }
    Ok((outside, volumes))
}

/// Adds what a call's process made outside the run's dirs to `changes`.
fn record_outside(changes: &mut Vec<Change>, run: Option<&crate::plugin::PluginRun>) {
    if let Some(outcome) = run.and_then(|r| r.result.as_ref().ok()) {
        changes.extend(outcome.changes.iter().cloned());
    }
}

/// `Ok` when no mount is left in the volumes dir and no loop device on a
/// file in the check's dir.
fn no_mount_or_loop_left(ctx: &Ctx) -> Result<(), Finding> {
    let mounts = mounts_left(ctx.host(), ctx.dirs().volumes());
    if !mounts.is_empty() {
        return Err(Finding::Fail(format!(
            "expected every mount to be gone after every volume was deleted; still mounted: {}",
            mounts.join(", ")
        )));
    }
    let loops = loops_left(ctx.host(), ctx.dirs().dir());
    if !loops.is_empty() {
        return Err(Finding::Fail(format!(
            "expected every loop device to be detached after every volume was deleted; still attached: {} \
             (detach with `losetup -d` before removing the image)",
            loops.join(", ")
        )));
    }
    Ok(())
}

/// The verdict on what was `left` in or beside the volumes dir and
/// elsewhere on the node (as `node` told it).
fn residue_verdict(
    node: &NodeWatch,
    left: Vec<String>,
    (elsewhere, told): Elsewhere,
) -> FindingResult {
    let watched = node.watched();
    let node = || match watched {
        true => format!(
            "outside the run's dirs, still there: {} ({told})",
            elsewhere.join(", ")
        ),
        false => format!(
            "in {}, still there: {} ({told})",
            node_residue::NODE_DIRS.join(", "),
            elsewhere.join(", ")
        ),
    };
    match (left.is_empty(), elsewhere.is_empty()) {
        (true, true) => Ok(Finding::Pass(match watched {
            true => "volumes dir as it was".into(),
            false => {
                "volumes dir as it was (outside it, only names after a volume were looked for: \
                        the plugin's processes could not be watched here)"
                    .into()
            }
        })),
        (false, true) => Err(Finding::Fail(format!(
            "expected nothing in or beside the volumes dir after every volume was deleted; left behind: {}",
            left.join(", ")
        ))),
        (true, false) => Err(Finding::Fail(format!(
            "expected nothing the plugin's calls made on the node to remain after every volume was deleted; \
             left behind {}",
            node()
        ))),
        (false, false) => Err(Finding::Fail(format!(
            "expected nothing the plugin's calls made on the node to remain after every volume was deleted; \
             left behind in or beside the volumes dir: {}; and {}",
            left.join(", "),
            node()
        ))),
    }
}

pub(crate) const DEADLINE: CheckSpec = CheckSpec {
    id: "delete.deadline",
    level: Level::Must,
    rule: "every delete call made alone finishes within 60 s",
    why: "Nomad allows 60 s for the delete RPC, then kills the plugin: the volume stays in Nomad's state, half deleted.",
    fix: "Finish within 60 s; make delete resumable so the next call completes it.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: run_wide!(deadline),
};

fn deadline(log: &RunLog) -> FindingResult {
    super::deadline::judge(log, Operation::Delete)
}
