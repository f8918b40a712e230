//! `delete.auto-delete-safe`: Nomad's compensating delete (sent when it
//! fails to save a new volume's state, with `DHV_CREATED_PATH` set to the
//! volumes dir and an empty name and namespace) removes no other volume, and
//! leaves nothing of the new one when it exits 0. Its own file: the one
//! check that sends a request no ordinary Nomad call would.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, Start, canary_intact, listing, plant_in_volume,
};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};

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
    let volumes = TwoVolumes::make(ctx).await?;
    let seen = nomads_delete(ctx, &volumes).await;
    // What of the new volume a delete that exited 0 left (Nomad forgets the
    // volume then): named by its id alone, it must go whole.
    let left = match seen.exited_zero && seen.dir_ok && seen.other_ok {
        true => {
            ctx.prereqs()
                .left_since(ctx.dirs().volumes(), &volumes.before_new)
                .await
        }
        false => Default::default(),
    };
    volumes.delete_both(ctx).await;
    if !left.own.is_empty() {
        return Err(Finding::Warn(format!(
            "Nomad's delete after a failed state write (DHV_CREATED_PATH = the volumes dir, an empty \
             name and namespace) exited 0, but left the new volume's {}{}: Nomad forgets the volume, so \
             nothing will remove them; name every file of a volume by DHV_VOLUME_ID alone",
            left.own.join(", "),
            left.citation()
        )));
    }
    seen.verdict(&volumes.new_req.volumes_dir)
}

/// The volumes of delete.auto-delete-safe: an unrelated one holding a file,
/// and the new one whose state write "failed".
struct TwoVolumes {
    other_req: CreateRequest,
    other: CreateResponse,
    /// The file planted in the unrelated volume.
    canary: PathBuf,
    new_req: CreateRequest,
    new: CreateResponse,
    /// The volumes dir's entries before the new volume was made.
    before_new: BTreeSet<String>,
}

impl TwoVolumes {
    /// Creates both; a skip (the new one deleted) when they got one path as
    /// every two volumes do.
    async fn make(ctx: &Ctx) -> Result<Self, Finding> {
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
        Ok(TwoVolumes {
            other_req,
            other,
            canary,
            new_req,
            new,
            before_new,
        })
    }

    /// Deletes both volumes, at once.
    async fn delete_both(&self, ctx: &Ctx) {
        // Either: Nomad's delete may have removed it already, and whether a
        // second delete exits 0 is delete.idempotent's business.
        tokio::join!(
            ctx.calls().delete(
                &self.new_req,
                &self.new.path,
                Expect::Either,
                "delete of the new volume",
            ),
            ctx.calls().delete(
                &self.other_req,
                &self.other.path,
                Expect::Success,
                "delete of the unrelated volume",
            ),
        );
    }
}

/// What Nomad's compensating delete did to the volumes dir and to the
/// unrelated volume.
struct AfterNomads {
    exited_zero: bool,
    /// Whether the volumes dir is still there.
    dir_ok: bool,
    /// The entries of the volumes dir it removed that are not the new volume's.
    lost: Vec<String>,
    /// Whether the unrelated volume kept its file and every entry.
    other_ok: bool,
}

/// Sends Nomad's compensating delete for the new volume and looks at what it
/// removed.
async fn nomads_delete(ctx: &Ctx, volumes: &TwoVolumes) -> AfterNomads {
    let (new_req, new) = (&volumes.new_req, &volumes.new);
    // Everything beside the volumes counts too: an image or a state file of
    // the unrelated volume unlinked while its filesystem stays mounted is its
    // data, lost at the next unmount.
    let before = listing(ctx.host(), ctx.dirs().volumes());
    let mut nomads = DeleteRequest::for_created(new_req, &new_req.volumes_dir);
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
    let lost: Vec<String> = before
        .difference(&after)
        .filter(|entry| !entry.contains(&new_req.volume_id))
        .filter(|entry| {
            own.as_deref().is_none_or(|own| {
                !own.is_empty() && *entry != own && !entry.starts_with(&format!("{own}/"))
            })
        })
        .cloned()
        .collect();
    let other_ok = canary_intact(ctx.host(), &volumes.canary) && lost.is_empty();
    AfterNomads {
        exited_zero: call.ok(),
        dir_ok,
        lost,
        other_ok,
    }
}

impl AfterNomads {
    /// A pass when the volumes dir and the unrelated volume survived; else a
    /// fail naming what went (`volumes_dir`, as the request sent it).
    fn verdict(&self, volumes_dir: &str) -> FindingResult {
        let lost = &self.lost;
        if self.dir_ok && self.other_ok {
            return Ok(Finding::Pass(format!(
                "the volumes dir and other volumes survived (the delete {})",
                if self.exited_zero {
                    "exited 0"
                } else {
                    "failed"
                }
            )));
        }
        Err(Finding::Fail(format!(
            "DATA LOSS HAZARD: when Nomad fails to save a new volume's state it sends delete with \
             DHV_CREATED_PATH = the volumes dir ({:?}) and an empty name and namespace; this plugin then \
             removed {}. Guard against it: derive the path from DHV_VOLUME_ID (e.g. \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\") \
             or refuse a DHV_CREATED_PATH that is not strictly inside DHV_VOLUMES_DIR",
            volumes_dir,
            if !self.dir_ok {
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
