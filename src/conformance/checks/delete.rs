//! `delete.*`: delete removes exactly its own volume, is idempotent, and
//! survives Nomad's dangerous compensating delete.

use std::path::Path;

use super::CheckResult;
use super::create::plant_in_volume;
use crate::conformance::context::{Ctx, Finding, canary_intact, listing};
use crate::contract::DeleteRequest;

/// Creates one volume for a delete check.
async fn one_volume(ctx: &Ctx) -> Result<(crate::contract::CreateRequest, String), Finding> {
    ctx.require_create().await?;
    let req = ctx.request();
    let resp = ctx.create_ok(&req, "create before delete").await?;
    Ok((req, resp.path))
}

/// `delete.succeeds` (must): delete of a created volume exits 0.
pub async fn succeeds(ctx: &Ctx) -> CheckResult {
    let (req, path) = one_volume(ctx).await?;
    let call = ctx.delete(&req, &path).await;
    match call.result {
        Ok(()) => Ok(Finding::Pass(format!(
            "exit 0 in {:.1} ms",
            call.duration.as_secs_f64() * 1e3
        ))),
        Err(e) => Err(Finding::Fail(format!(
            "expected delete (DHV_CREATED_PATH={path:?}) to exit 0; got: {e}"
        ))),
    }
}

/// `delete.removes` (must): the created path is gone after delete.
pub async fn removes(ctx: &Ctx) -> CheckResult {
    let (req, path) = one_volume(ctx).await?;
    if let Err(e) = ctx.delete(&req, &path).await.result {
        return Err(Finding::Skip(format!("needs delete.succeeds ({e})")));
    }
    if Path::new(&path).exists() {
        Err(Finding::Fail(format!(
            "expected {path:?} to be gone after delete; it still exists"
        )))
    } else {
        Ok(Finding::Pass("path removed".into()))
    }
}

/// `delete.idempotent` (must): deleting twice is fine.
pub async fn idempotent(ctx: &Ctx) -> CheckResult {
    let (req, path) = one_volume(ctx).await?;
    if let Err(e) = ctx.delete(&req, &path).await.result {
        return Err(Finding::Skip(format!("needs delete.succeeds ({e})")));
    }
    match ctx.delete(&req, &path).await.result {
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
    match ctx.delete(&req, &path.to_string_lossy()).await.result {
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
    let canary = plant_in_volume(ctx, &b.path, "create of volume B")?;
    if let Err(e) = ctx.delete(&a_req, &a.path).await.result {
        return Err(Finding::Skip(format!("needs delete.succeeds ({e})")));
    }
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
    ctx.delete(&b_req, &b.path).await;
    result
}

/// `delete.no-residue` (should): nothing the plugin made remains after all deletes.
pub async fn no_residue(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let before = listing(&ctx.volumes);
    let reqs = [ctx.request(), ctx.request()];
    let mut made = Vec::new();
    for req in &reqs {
        made.push(ctx.create_ok(req, "create").await?.path);
    }
    for (req, path) in reqs.iter().zip(&made) {
        if let Err(e) = ctx.delete(req, path).await.result {
            return Err(Finding::Skip(format!("needs delete.succeeds ({e})")));
        }
    }
    let left: Vec<String> = listing(&ctx.volumes).difference(&before).cloned().collect();
    if left.is_empty() {
        Ok(Finding::Pass("volumes dir as it was".into()))
    } else {
        Err(Finding::Fail(format!(
            "expected the volumes dir to hold nothing after every volume was deleted; left behind: {}",
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
    let mut nomads = DeleteRequest::for_created(&new_req, &new_req.volumes_dir);
    nomads.volume_name.clear();
    nomads.namespace.clear();
    let call = ctx.delete_raw(&nomads).await;
    let dir_ok = ctx.volumes.is_dir();
    let other_ok = canary_intact(&canary);
    ctx.delete(&new_req, &new.path).await;
    ctx.delete(&other_req, &other.path).await;
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
            if dir_ok {
                "another volume's files"
            } else {
                "the whole volumes dir"
            }
        )))
    }
}
