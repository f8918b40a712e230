//! `delete.auto-delete-safe`: Nomad's compensating delete (sent when it
//! fails to save a new volume's state, with `DHV_CREATED_PATH` set to the
//! volumes dir and an empty name and namespace) removes no other volume, and
//! leaves nothing of the new one when it exits 0. Its own file: the one
//! check that sends a request no ordinary Nomad call would.

use std::path::Path;

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, Start, canary_intact, listing, plant_in_volume,
};
use crate::contract::{DeleteRequest, Operation};

pub(crate) const AUTO_DELETE_SAFE: CheckSpec = CheckSpec {
    id: "delete.auto-delete-safe",
    level: Level::Should,
    rule: "Nomad's compensating delete (DHV_CREATED_PATH = the volumes dir, empty name and namespace) removes no other volume; when it exits 0, nothing of the new volume is left",
    why: "When Nomad fails to save a new volume's state it deletes the volume with `DHV_CREATED_PATH` set to the volumes dir itself and an empty name and namespace: a plugin that runs `rm -rf \"$DHV_CREATED_PATH\"` wipes every volume on the node. A delete that exits 0 there but finds the volume's files by its name (empty in this call) leaves them behind for good: Nomad forgets the volume, and nothing will ever remove them.",
    fix: "Derive what to remove from `DHV_VOLUME_ID` alone (never the name or `DHV_CREATED_PATH`), or refuse a `DHV_CREATED_PATH` equal to `DHV_VOLUMES_DIR`.",
    varies: None,
    samples: &["blind-delete"],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(auto_delete_safe),
};

/// Nomad's compensating delete after a failed state write sends the volumes dir
/// as DHV_CREATED_PATH with an empty name and namespace. A plugin that removes
/// DHV_CREATED_PATH blindly wipes every volume.
async fn auto_delete_safe(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let (other_req, new_req) = (ctx.request(), ctx.request());
    let other = ctx
        .steps()
        .create_ok(&other_req, "create of an unrelated volume")
        .await?;
    let canary = plant_in_volume(ctx, &other.path, "create of an unrelated volume")?;
    let before_new = listing(ctx.host(), ctx.dirs().volumes());
    let new = ctx
        .steps()
        .create_ok(&new_req, "create of the volume whose state write 'failed'")
        .await?;
    if new.path == other.path {
        // The "unrelated" volume is the new one: nothing to tell apart.
        if let Some(needs) = ctx.prereqs().paths_not_distinct().await {
            ctx.calls()
                .delete(
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
    let before = listing(ctx.host(), ctx.dirs().volumes());
    let mut nomads = DeleteRequest::for_created(&new_req, &new_req.volumes_dir);
    nomads.volume_name.clear();
    nomads.namespace.clear();
    // Either: refusing this delete is as safe as doing it carefully.
    let call = ctx
        .calls()
        .delete_with(
            &nomads,
            Expect::Either,
            "Nomad's delete after a failed state write",
            Start::Now,
        )
        .await;
    let dir_ok = ctx.host().is_dir(ctx.dirs().volumes());
    let after = listing(ctx.host(), ctx.dirs().volumes());
    // The new volume's own entries may go: its path, and what is named after its id.
    let own = Path::new(&new.path)
        .strip_prefix(ctx.dirs().volumes())
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
    let other_ok = canary_intact(ctx.host(), &canary) && lost.is_empty();
    // What of the new volume a delete that exited 0 left (Nomad forgets the
    // volume then): named by its id alone, it must go whole.
    let left = match call.ok() && dir_ok && other_ok {
        true => {
            ctx.prereqs()
                .left_since(ctx.dirs().volumes(), &before_new)
                .await
        }
        false => Default::default(),
    };
    // Either: Nomad's delete may have removed it already, and whether a
    // second delete exits 0 is delete.idempotent's business.
    tokio::join!(
        ctx.calls().delete(
            &new_req,
            &new.path,
            Expect::Either,
            "delete of the new volume",
        ),
        ctx.calls().delete(
            &other_req,
            &other.path,
            Expect::Success,
            "delete of the unrelated volume",
        ),
    );
    if !left.own.is_empty() {
        return Err(Finding::Warn(format!(
            "Nomad's delete after a failed state write (DHV_CREATED_PATH = the volumes dir, an empty \
             name and namespace) exited 0, but left the new volume's {}{}: Nomad forgets the volume, so \
             nothing will remove them; name every file of a volume by DHV_VOLUME_ID alone",
            left.own.join(", "),
            left.citation()
        )));
    }
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
