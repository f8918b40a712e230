//! `delete.*`: delete removes exactly its own volume, is idempotent, and
//! survives Nomad's dangerous compensating delete.

use std::path::Path;

use super::CheckResult;
use crate::conformance::context::{
    Ctx, Expect, Finding, VolumeAt, around, canary_intact, listing, plant_in_volume,
};
use crate::contract::DeleteRequest;

/// `delete.succeeds` (must): delete of a created volume exits 0. Judged on
/// the run's delete probe, which the other checks' "needs delete.succeeds"
/// rests on; its volume holds a file, as a volume in use does, so a plugin
/// whose delete fails on data fails here once, not in every check that
/// deletes a volume it wrote to.
pub async fn succeeds(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let probe = ctx.delete_probe().await;
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
        Err(e) => Err(Finding::Fail(format!(
            "expected delete of a created volume holding a file (DHV_CREATED_PATH={path:?}) to exit 0; got: {e}{note}"
        ))),
    }
}

/// `delete.removes` (must): the created path is gone after delete.
pub async fn removes(ctx: &Ctx) -> CheckResult {
    let (req, path) = ctx.one_volume("create before delete").await?;
    let at = VolumeAt::before_delete(&path);
    ctx.delete_ok(&req, &path, "delete").await?;
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

/// `delete.idempotent` (must): deleting twice is fine.
pub async fn idempotent(ctx: &Ctx) -> CheckResult {
    let (req, path) = ctx.one_volume("create before delete").await?;
    ctx.delete_ok(&req, &path, "first delete").await?;
    // Either: the rule judges the second delete itself, below.
    let again = ctx
        .delete(&req, &path, Expect::Either, "second delete")
        .await;
    match again.result {
        Ok(()) => Ok(Finding::Pass("second delete exits 0".into())),
        Err(e) => Err(Finding::Fail(format!(
            "expected a second delete of the same volume to exit 0 (Nomad retries deletes); got: {e}"
        ))),
    }
}

/// `delete.never-created` (must): deleting an unknown volume is fine.
pub async fn never_created(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let req = ctx.request();
    let path = Path::new(&req.volumes_dir).join(&req.volume_id);
    // Either: the rule judges this delete itself, below.
    let call = ctx
        .delete(
            &req,
            &path.to_string_lossy(),
            Expect::Either,
            "delete of a never-created volume",
        )
        .await;
    match call.result {
        Ok(()) => Ok(Finding::Pass("exit 0".into())),
        Err(e) => Err(Finding::Fail(format!(
            "expected delete of a volume that was never created to exit 0; got: {e}"
        ))),
    }
}

/// `delete.isolated` (must): deleting one volume leaves the others intact.
pub async fn isolated(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let (a_req, b_req) = (ctx.request(), ctx.request());
    let a = ctx.create_ok(&a_req, "create of volume A").await?;
    let b = ctx.create_ok(&b_req, "create of volume B").await?;
    if a.path == b.path {
        // One path for two volumes: deleting one must take the other.
        if let Some(needs) = ctx.paths_not_distinct().await {
            ctx.delete(&a_req, &a.path, Expect::Success, "delete of volume A")
                .await;
            return Err(Finding::Skip(needs));
        }
    }
    let canary = plant_in_volume(ctx, &b.path, "create of volume B")?;
    ctx.delete_ok(&a_req, &a.path, "delete of volume A").await?;
    let result = if !Path::new(&b.path).exists() || !canary_intact(&canary) {
        Err(Finding::Fail(format!(
            "expected volume B ({:?}) and its files to survive the delete of volume A ({:?}); B is gone or changed",
            b.path, a.path
        )))
    } else {
        Ok(Finding::Pass(
            "the other volume and its files are intact".into(),
        ))
    };
    ctx.delete(&b_req, &b.path, Expect::Success, "delete of volume B")
        .await;
    result
}

/// `delete.no-residue` (should): nothing the plugin made remains after all
/// deletes, in the volumes dir or beside it. The one finding for what every
/// create and delete leaves: other checks cite it ([`Ctx::leftovers`]).
pub async fn no_residue(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let before = around(&ctx.sandbox.volumes);
    let reqs = [ctx.request(), ctx.request()];
    let mut made = Vec::new();
    for req in &reqs {
        made.push(ctx.create_ok(req, "create").await?.path);
    }
    let volumes: Vec<VolumeAt> = made.iter().map(|p| VolumeAt::before_delete(p)).collect();
    for (req, path) in reqs.iter().zip(&made) {
        ctx.delete_ok(req, path, "delete").await?;
    }
    // A loop device a delete detached is released once its last opener lets
    // go: waited for here. One still backing its volume is delete.removes'
    // finding, not a residue as well.
    for at in &volumes {
        if at.is_block() && !at.gone().await {
            return Err(Finding::Skip(format!(
                "needs delete.removes ({})",
                at.still_there()
            )));
        }
    }
    let mounts = crate::conformance::teardown::mounts_left(&ctx.sandbox.volumes);
    if !mounts.is_empty() {
        return Err(Finding::Fail(format!(
            "expected every mount to be gone after every volume was deleted; still mounted: {}",
            mounts.join(", ")
        )));
    }
    let loops = crate::conformance::teardown::loops_left(&ctx.sandbox.dir);
    if !loops.is_empty() {
        return Err(Finding::Fail(format!(
            "expected every loop device to be detached after every volume was deleted; still attached: {} \
             (detach with `losetup -d` before removing the image)",
            loops.join(", ")
        )));
    }
    let left: Vec<String> = around(&ctx.sandbox.volumes)
        .difference(&before)
        .cloned()
        .collect();
    if left.is_empty() {
        Ok(Finding::Pass("volumes dir as it was".into()))
    } else {
        Err(Finding::Fail(format!(
            "expected nothing in or beside the volumes dir after every volume was deleted; left behind: {}",
            left.join(", ")
        )))
    }
}

/// `delete.auto-delete-safe` (should): Nomad's compensating delete after a failed
/// state write sends the volumes dir as DHV_CREATED_PATH with an empty name and
/// namespace. A plugin that removes DHV_CREATED_PATH blindly wipes every volume.
pub async fn auto_delete_safe(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let (other_req, new_req) = (ctx.request(), ctx.request());
    let other = ctx
        .create_ok(&other_req, "create of an unrelated volume")
        .await?;
    let canary = plant_in_volume(ctx, &other.path, "create of an unrelated volume")?;
    let new = ctx
        .create_ok(&new_req, "create of the volume whose state write 'failed'")
        .await?;
    if new.path == other.path {
        // The "unrelated" volume is the new one: nothing to tell apart.
        if let Some(needs) = ctx.paths_not_distinct().await {
            ctx.delete(
                &new_req,
                &new.path,
                Expect::Success,
                "delete of the new volume",
            )
            .await;
            return Err(Finding::Skip(needs));
        }
    }
    // Everything beside the volumes counts too: an image or a state file of
    // the unrelated volume unlinked while its filesystem stays mounted is its
    // data, lost at the next unmount.
    let before = listing(&ctx.sandbox.volumes);
    let mut nomads = DeleteRequest::for_created(&new_req, &new_req.volumes_dir);
    nomads.volume_name.clear();
    nomads.namespace.clear();
    // Either: refusing this delete is as safe as doing it carefully.
    let call = ctx
        .delete_raw(
            &nomads,
            Expect::Either,
            "Nomad's delete after a failed state write",
        )
        .await;
    let dir_ok = ctx.sandbox.volumes.is_dir();
    let after = listing(&ctx.sandbox.volumes);
    // The new volume's own entries may go: its path, and what is named after its id.
    let own = Path::new(&new.path)
        .strip_prefix(&ctx.sandbox.volumes)
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let lost: Vec<&String> = before
        .difference(&after)
        .filter(|entry| !entry.contains(&new_req.volume_id))
        .filter(|entry| {
            own.as_deref().is_none_or(|own| {
                !own.is_empty() && *entry != own && !entry.starts_with(&format!("{own}/"))
            })
        })
        .collect();
    let other_ok = canary_intact(&canary) && lost.is_empty();
    // Either: Nomad's delete may have removed it already, and whether a
    // second delete exits 0 is delete.idempotent's business.
    tokio::join!(
        ctx.delete(
            &new_req,
            &new.path,
            Expect::Either,
            "delete of the new volume",
        ),
        ctx.delete(
            &other_req,
            &other.path,
            Expect::Success,
            "delete of the unrelated volume",
        ),
    );
    if dir_ok && other_ok {
        Ok(Finding::Pass(format!(
            "the volumes dir and other volumes survived (the delete {})",
            if call.ok() { "exited 0" } else { "failed" }
        )))
    } else {
        Err(Finding::Fail(format!(
            "DATA LOSS HAZARD: when Nomad fails to save a new volume's state it sends delete with \
             DHV_CREATED_PATH = the volumes dir ({:?}) and an empty name and namespace; this plugin then \
             removed {}. Guard against it: derive the path from DHV_VOLUME_ID (e.g. \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\") \
             or refuse a DHV_CREATED_PATH that is not strictly inside DHV_VOLUMES_DIR",
            new_req.volumes_dir,
            if !dir_ok {
                "the whole volumes dir".to_owned()
            } else if lost.is_empty() {
                "another volume's files".to_owned()
            } else {
                let shown: Vec<&str> = lost.iter().take(5).map(|e| e.as_str()).collect();
                format!(
                    "what belongs to other volumes: {}{}",
                    shown.join(", "),
                    if lost.len() > 5 { ", …" } else { "" }
                )
            }
        )))
    }
}
