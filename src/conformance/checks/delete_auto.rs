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
use crate::exec::AtChanges;

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
    /// The volumes dir's entries each create made.
    made: Made,
}

/// Whose the volumes dir's entries are, by provenance: the entries each
/// create made there (the names its own processes made, where the host
/// records them, and what appeared in the volumes dir while it ran, the only
/// call of the check's then), relative to the volumes dir. Never by name: a
/// plugin may name a volume's files after its name, which Nomad's delete
/// after a failed state write leaves empty.
#[derive(Default)]
struct Made {
    other: BTreeSet<String>,
    new: BTreeSet<String>,
}

impl Made {
    /// Whether `entry` is the unrelated volume's: the nearest of it and its
    /// parents that a create made was made by the unrelated volume's create
    /// (by it alone or by both: a name both made is shared, and so the
    /// unrelated volume's too). What no create made is no volume's.
    fn others(&self, entry: &str) -> bool {
        let mut at = Some(Path::new(entry));
        while let Some(path) = at.filter(|p| !p.as_os_str().is_empty()) {
            let name = path.to_string_lossy();
            if self.other.contains(name.as_ref()) {
                return true;
            }
            if self.new.contains(name.as_ref()) {
                return false;
            }
            at = path.parent();
        }
        false
    }
}

/// Creates `req` as Nomad does, watched for the names it makes in the
/// volumes dir: the volume, and the entries it made there.
async fn create_made(
    ctx: &Ctx,
    req: &CreateRequest,
    step: &str,
) -> Result<(CreateResponse, BTreeSet<String>), Finding> {
    let volumes = ctx.dirs().volumes();
    let before = listing(ctx.host(), volumes);
    let call = ctx
        .watched(AtChanges::RecordMade(volumes.to_path_buf()))
        .create(req, Expect::Success, step)
        .await;
    // The names are read through /proc: compare like with like.
    let root = ctx
        .host()
        .canonical(volumes)
        .unwrap_or_else(|_| volumes.to_path_buf());
    let mut made: BTreeSet<String> = call
        .run
        .as_ref()
        .and_then(|r| r.result.as_ref().ok())
        .into_iter()
        .flat_map(|o| o.changes.iter())
        .filter_map(|c| c.path.as_deref()?.strip_prefix(&root).ok())
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let resp = ctx.steps().need(call, step).await?;
    made.extend(listing(ctx.host(), volumes).difference(&before).cloned());
    Ok((resp, made))
}

impl TwoVolumes {
    /// Creates both; a skip (the new one deleted) when they got one path as
    /// every two volumes do.
    async fn make(ctx: &Ctx) -> Result<Self, Finding> {
        let (other_req, new_req) = (ctx.request(), ctx.request());
        let (other, other_made) =
            create_made(ctx, &other_req, "create of an unrelated volume").await?;
        let canary = plant_in_volume(ctx, &other.path, "create of an unrelated volume")?;
        let before_new = listing(ctx.host(), ctx.dirs().volumes());
        let (new, new_made) = create_made(
            ctx,
            &new_req,
            "create of the volume whose state write 'failed'",
        )
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
            made: Made {
                other: other_made,
                new: new_made,
            },
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
    let new_req = &volumes.new_req;
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
    // The new volume's own entries may go: those its create made; another
    // volume's are those another volume's create made.
    let lost: Vec<String> = before
        .difference(&after)
        .filter(|entry| volumes.made.others(entry))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_entry_is_the_unrelated_volumes_when_its_create_made_it_or_its_nearest_made_parent() {
        let made = Made {
            other: set(&["pool", "pool/a", ".a.img", ".shared"]),
            new: set(&["pool", "pool/b", ".conformance-b.owner", ".shared"]),
        };
        for (entry, others) in [
            ("pool/a", true),
            ("pool/a/canary", true),
            (".a.img", true),
            // Made by both: shared, so the unrelated volume's too.
            (".shared", true),
            ("pool", true),
            // Named by the volume's name, made by the new volume's create.
            (".conformance-b.owner", false),
            ("pool/b", false),
            ("pool/b/lost+found", false),
            // Made by no create: no volume's.
            ("stray", false),
        ] {
            assert_eq!(made.others(entry), others, "{entry}");
        }
    }
}
