//! `input.volumes-dir-space`: a volumes dir whose path holds a space, the
//! input that finds every unquoted path of a shell plugin. Its own file, as
//! it takes several rounds: create, create again and delete there; a create
//! and delete with a file named by the split path's first word beside the
//! dir; a create there that fails after making things, and one that fails
//! for a volume a reboot took down; and a delete in a missing dir with a
//! space.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::input_space_refused::failed_there_leaves_nothing;
use super::input_surroundings::Surroundings;
use super::{CheckSpec, FindingResult, Level, Needs, needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, FreshVolume, Made, Variant, VolumeAt, canary_intact, plant_in_volume,
};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::plugin::{PluginCall, PluginError};

pub(crate) const VOLUMES_DIR_SPACE: CheckSpec = CheckSpec {
    id: "input.volumes-dir-space",
    level: Level::Must,
    rule: "in a volumes dir whose path holds a space (`.../host volumes`), create and delete work, the new volume is as one made in the default volumes dir (its mode, what it holds, bytes in range), delete leaves nothing of it (beyond what it leaves in the default dir), and nothing outside the dir changes, also with a file named `.../host` beside it; for a plugin whose volumes are mounts, a create there with every mount refused leaves nothing, and one of a volume there after a reboot keeps the volume (each when it does so in a dir without a space)",
    why: "The volumes dir is the operator's `host_volumes_dir` (or under the agent's `data_dir`), and a path with a space is a valid one. A plugin that leaves a path unquoted splits it in two: it makes or removes `.../host` and `volumes` in its working directory, not the volume; an operator's file named `.../host` is then removed. The clean-up of a failed create runs only on failures, where an unquoted path hides longest.",
    fix: "Quote every expansion of a path in sh (`\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"`, `rm -rf -- \"$path\"`), and pass paths as single arguments in other languages (no shell strings).",
    varies: None,
    samples: &[],
    // Its volumes fill nothing: it runs beside the others, in a dir of its own.
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(volumes_dir_space),
};

/// Creates and deletes in `check/space/host volumes`, run from a working dir
/// of the check's own (where the second word of the split path lands): both
/// must work, the new volume must be as the run's first (in the default
/// volumes dir) was, and nothing outside the volumes dir may change. Nothing
/// is named `check/space/host`, the split path's first word: a command given
/// the split path then fails (`df`, `stat` of a missing file) instead of
/// reading a neighbour, and what it makes there shows as made outside.
async fn volumes_dir_space(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let space = SpaceDir::make(ctx)?;
    let req = ctx.request_in(&space.volumes);
    let (resp, volume) = create_there(ctx, &space, &req).await?;
    let canary = match volume.is_block() {
        true => None,
        false => Some(plant_in_volume(
            ctx,
            &resp.path,
            "create in a volumes dir whose path holds a space",
        )?),
    };
    create_again_there(ctx, &space, &req, &resp, canary.as_deref()).await?;
    delete_there(ctx, &space, &req, &resp, &volume).await?;
    neighbour_kept(ctx, &space.there, &space.around, &space.volumes).await?;
    let refused = failed_there_leaves_nothing(ctx, &space.cwd, &space.volumes).await?;
    gone_dir_as_plain(ctx, &space.there).await?;
    Ok(Finding::Pass(format!(
        "created, created again and deleted in {:?}, also beside a file named by its first word, \
         nothing outside it changed{}",
        space.volumes.file_name().unwrap_or_default(),
        refused.map(|r| format!("; {r}")).unwrap_or_default()
    )))
}

/// The volumes dir with a space the check's rounds run in, the working dir
/// its calls run from, and what lay outside the volumes dir before them.
struct SpaceDir<'a> {
    volumes: PathBuf,
    cwd: PathBuf,
    /// Calls run from `cwd`.
    there: Variant<'a>,
    around: Surroundings,
    before: BTreeSet<String>,
}

impl<'a> SpaceDir<'a> {
    /// Makes `space/host volumes` and `cwd` in the check's dir.
    fn make(ctx: &'a Ctx) -> Result<Self, Finding> {
        let volumes = ctx
            .dirs()
            .make_dirs(Path::new("space/host volumes"))
            .map_err(super::unprepared)?;
        let cwd = ctx
            .dirs()
            .make_dirs(Path::new("cwd"))
            .map_err(super::unprepared)?;
        let there = ctx.variant(|o| o.cwd = Some(cwd.clone()));
        let around = Surroundings {
            root: ctx.dirs().dir().to_path_buf(),
            canaries: Vec::new(),
        };
        // What the plugin writes into its working dir under any name but the
        // split path's second word is process.cwd-independent's finding.
        let before = space_outside(ctx, &around, &volumes);
        Ok(SpaceDir {
            volumes,
            cwd,
            there,
            around,
            before,
        })
    }

    /// [`outside_unchanged`] since the rounds began.
    async fn outside_unchanged(&self, ctx: &Ctx, what: &str) -> Result<(), Finding> {
        outside_unchanged(ctx, &self.around, &self.volumes, &self.before, what).await
    }
}

/// The first create there: it must work, make a directory (or a block
/// device), and make the volume as one in the default volumes dir. The
/// volume, measured for its delete.
async fn create_there(
    ctx: &Ctx,
    space: &SpaceDir<'_>,
    req: &CreateRequest,
) -> Result<(CreateResponse, VolumeAt), Finding> {
    let created = {
        let step = "create in a volumes dir whose path holds a space";
        not_hung(
            space.there.create_unloaded(req, Expect::Either, step).await,
            step,
        )?
    };
    space.outside_unchanged(ctx, "create").await?;
    let resp = match created.result {
        Ok(resp) => resp,
        Err(e) => {
            // Failing everywhere is create.succeeds's finding.
            if let Some(needs) = ctx.prereqs().failed_prerequisite(Operation::Create).await {
                return Err(Finding::Skip(needs));
            }
            return Err(Finding::Fail(format!(
                "expected create to work in a volumes dir whose path holds a space ({:?}); \
                 it failed: {e} (it works in the default volumes dir: quote every path)",
                space.volumes
            )));
        }
    };
    let volume = VolumeAt::before_delete(ctx, &resp.path);
    if !volume.is_block() && !ctx.host().is_dir(Path::new(&resp.path)) {
        return Err(Finding::Fail(format!(
            "expected create in a volumes dir whose path holds a space to make its volume; \
             it answered path {:?}, which is not a directory",
            resp.path
        )));
    }
    as_in_the_default_dir(ctx, req, &resp).await?;
    Ok((resp, volume))
}

/// Create again there (an agent restart): the same path, and the file
/// planted in the volume (`canary`) kept.
async fn create_again_there(
    ctx: &Ctx,
    space: &SpaceDir<'_>,
    req: &CreateRequest,
    resp: &CreateResponse,
    canary: Option<&Path>,
) -> Result<(), Finding> {
    let again = {
        let step = "create again in a volumes dir whose path holds a space";
        not_hung(
            space.there.create_unloaded(req, Expect::Either, step).await,
            step,
        )?
    };
    space.outside_unchanged(ctx, "create again").await?;
    let lost = canary.is_some_and(|c| !canary_intact(ctx.host(), c));
    again_as_in_the_default_dir(ctx, &again.result, resp).await?;
    match &again.result {
        Err(e) => {
            if let Some(needs) = ctx.prereqs().failed_prerequisite(Operation::Create).await {
                return Err(Finding::Skip(needs));
            }
            Err(Finding::Fail(format!(
                "expected create again to work in a volumes dir whose path holds a space \
                 ({:?}), as it does in the default one; it failed: {e}",
                space.volumes
            )))
        }
        Ok(r) if r.path != resp.path || lost => Err(Finding::Fail(format!(
            "expected create again in a volumes dir whose path holds a space to return the \
             same volume with its files, as it does in the default one; it answered {:?} \
             (first {:?}){}",
            r.path,
            resp.path,
            if lost {
                ", and the file written into the volume is gone"
            } else {
                ""
            }
        ))),
        Ok(_) => Ok(()),
    }
}

/// A skip when the create again there misbehaves as a create again in the
/// default volumes dir does: that is create.idempotent's finding.
async fn again_as_in_the_default_dir(
    ctx: &Ctx,
    again: &Result<CreateResponse, PluginError>,
    resp: &CreateResponse,
) -> Result<(), Finding> {
    let probe = ctx.prereqs().again_probe().await;
    let moves_there_too = match (&probe.first.result, probe.again.as_ref().map(|a| &a.result)) {
        (Ok(first), Some(Ok(again))) => first.path != again.path,
        _ => false,
    };
    if again.is_err() || moves_there_too {
        if let Some(needs) = ctx.prereqs().create_again_fails().await {
            return Err(Finding::Skip(needs));
        }
    }
    if moves_there_too && again.as_ref().is_ok_and(|r| r.path != resp.path) {
        return Err(Finding::Skip(needs(&super::create::IDEMPOTENT)));
    }
    Ok(())
}

/// The delete there: it must work, remove the volume and leave nothing of it
/// in the volumes dir (which was made empty for this check).
async fn delete_there(
    ctx: &Ctx,
    space: &SpaceDir<'_>,
    req: &CreateRequest,
    resp: &CreateResponse,
    volume: &VolumeAt,
) -> Result<(), Finding> {
    let volumes = &space.volumes;
    let delete = DeleteRequest::for_created(req, &resp.path);
    let deleted = {
        let step = "delete in a volumes dir whose path holds a space";
        not_hung(
            space
                .there
                .delete_unloaded(&delete, Expect::Either, step)
                .await,
            step,
        )?
    };
    space.outside_unchanged(ctx, "delete").await?;
    if let Err(e) = deleted.result {
        // Failing everywhere is delete.succeeds's finding.
        if let Some(needs) = ctx.prereqs().failed_prerequisite(Operation::Delete).await {
            return Err(Finding::Skip(needs));
        }
        return Err(Finding::Fail(format!(
            "expected delete to work in a volumes dir whose path holds a space ({volumes:?}); \
             it failed: {e}"
        )));
    }
    if !volume.gone().await {
        return Err(Finding::Fail(format!(
            "expected delete in a volumes dir whose path holds a space to remove the volume; {}",
            volume.still_there()
        )));
    }
    // The dir was made empty for this check: all in it now is the volume's.
    // What every delete leaves, here and in the default dir, is
    // delete.no-residue's finding.
    let left = ctx.prereqs().left_since(volumes, &BTreeSet::new()).await;
    if !left.own.is_empty() {
        return Err(Finding::Fail(format!(
            "expected delete in a volumes dir whose path holds a space to leave nothing of the \
             volume, as it does in the default volumes dir; it left {}{} (a removal given the \
             path unquoted removes `.../host` and a name in its working directory instead)",
            left.own.join(", "),
            left.citation()
        )));
    }
    Ok(())
}

/// `Ok` when a create and a delete in the volumes dir with a space, with a
/// file at the split path's first word (`space/host`, beside the dir), leave
/// that file as it was and change nothing else outside the dir: a command
/// given the path unquoted (`rm -f -- $img`) takes that file for one of its
/// operands. The first rounds have no such file, so that a command given the
/// split path fails there rather than read a neighbour.
async fn neighbour_kept(
    ctx: &Ctx,
    there: &Variant<'_>,
    around: &Surroundings,
    volumes: &Path,
) -> Result<(), Finding> {
    let space = volumes.parent().unwrap_or(volumes);
    let neighbour = ctx.dirs().plant(space, "host").map_err(super::unprepared)?;
    let before = space_outside(ctx, around, volumes);
    let req = ctx.request_in(volumes);
    let step = "create beside a file named `host`, the split path's first word";
    let created = not_hung(
        there.create_unloaded(&req, Expect::Either, step).await,
        step,
    )?;
    // The neighbour in the way of a command given the path unquoted.
    let met_the_file = |step: &str, e| {
        Finding::Fail(format!(
            "{step}: expected it to work, as it does without that file; it failed: {e} (a \
             command given the path unquoted met the file)"
        ))
    };
    let resp = created.result.map_err(|e| met_the_file(step, e))?;
    let step = "delete beside a file named `host`";
    let delete = DeleteRequest::for_created(&req, &resp.path);
    let deleted = not_hung(
        there.delete_unloaded(&delete, Expect::Either, step).await,
        step,
    )?;
    if !canary_intact(ctx.host(), &neighbour) {
        return Err(Finding::Fail(format!(
            "create and delete in {volumes:?}: expected the file {neighbour:?} beside the volumes \
             dir to stay as it was; it is gone or changed (a path given unquoted is split at the \
             space, and `.../host` is its first word: an operator's file of that name is lost)"
        )));
    }
    outside_unchanged(
        ctx,
        around,
        volumes,
        &before,
        "create and delete beside `host`",
    )
    .await?;
    let _ = ctx.dirs().remove_file(&neighbour);
    deleted.result.map_err(|e| met_the_file(step, e))
}

/// `Ok` when a delete of a volume in a volumes dir with a space that does not
/// exist ends as one in a missing dir without a space does (Nomad sends a
/// delete for a volume whose dir is gone after a reboot on tmpfs, say). How
/// the plain one ends is delete.never-created's finding.
async fn gone_dir_as_plain(ctx: &Ctx, there: &Variant<'_>) -> Result<(), Finding> {
    let delete_in = |dir: &str| {
        let req = ctx.request_in(&ctx.dirs().dir().join(dir));
        let path = Path::new(&req.volumes_dir).join(&req.volume_id);
        DeleteRequest::for_created(&req, &path.to_string_lossy())
    };
    let step = "delete of a never-created volume, no volumes dir (`space/gone-volumes`)";
    let plain = not_hung(
        there
            .delete_unloaded(&delete_in("space/gone-volumes"), Expect::Either, step)
            .await,
        step,
    )?;
    let step = "delete of a never-created volume, no volumes dir (`space/gone volumes`)";
    let spaced = not_hung(
        there
            .delete_unloaded(&delete_in("space/gone volumes"), Expect::Either, step)
            .await,
        step,
    )?;
    match (plain.result, spaced.result) {
        (Ok(()), Err(e)) => Err(Finding::Fail(format!(
            "{step}: expected exit 0, as without the space; got: {e}"
        ))),
        _ => Ok(()),
    }
}

/// `Ok` when the volume made in the volumes dir with a space is as the run's
/// first, made with the same request in the default volumes dir: the same
/// mode and entries right after create, and bytes in range if those were.
/// A plugin that splits a path can skip a step (a `chmod`, a clean-up of the
/// new filesystem) or measure a neighbour instead of its image.
async fn as_in_the_default_dir(
    ctx: &Ctx,
    req: &CreateRequest,
    resp: &CreateResponse,
) -> Result<(), Finding> {
    let probe = ctx.prereqs().create_probe().await;
    let Ok(first) = &probe.call.result else {
        return Ok(());
    };
    if probe.request.admits_bytes(first.bytes) && !req.admits_bytes(resp.bytes) {
        return Err(Finding::Fail(format!(
            "expected create in a volumes dir whose path holds a space to report bytes within \
             the capacity asked for, as it does in the default volumes dir ({}); it reported {}",
            first.bytes, resp.bytes
        )));
    }
    let (Some(default), Some(here)) = (
        &probe.fresh,
        FreshVolume::at(ctx.host(), Path::new(&resp.path)),
    ) else {
        return Ok(());
    };
    if *default != here {
        return Err(Finding::Fail(format!(
            "expected the new volume in a volumes dir whose path holds a space to be as one made \
             in the default volumes dir ({}); it is {}",
            default.describe(),
            here.describe()
        )));
    }
    Ok(())
}

/// What lies outside the volumes dir of input.volumes-dir-space that the
/// check judges: what the plugin writes into its working dir under any name
/// but the split path's second word (`volumes`) is process.cwd-independent's.
fn space_outside(ctx: &Ctx, around: &Surroundings, volumes: &Path) -> BTreeSet<String> {
    around
        .outside(ctx.host(), volumes)
        .into_iter()
        .filter(|e| !e.starts_with("cwd/") || e == "cwd/volumes" || e.starts_with("cwd/volumes/"))
        .collect()
}

/// `Ok` when nothing outside the volumes dir changed since `before` but what
/// every volume adds beside the volumes dir (delete.no-residue's finding,
/// cited); else the finding.
async fn outside_unchanged(
    ctx: &Ctx,
    around: &Surroundings,
    volumes: &Path,
    before: &BTreeSet<String>,
    what: &str,
) -> Result<(), Finding> {
    let now = space_outside(ctx, around, volumes);
    // `space/x` lies beside the volumes dir `space/host volumes`: `../x` to it.
    let beside = |e: &String| match e.strip_prefix("space/") {
        Some(rest) if !rest.starts_with("host volumes") => format!("../{rest}"),
        _ => e.clone(),
    };
    let added = ctx
        .prereqs()
        .leftovers(now.difference(before).map(beside))
        .await
        .own;
    let removed: Vec<_> = before.difference(&now).cloned().collect();
    if added.is_empty() && removed.is_empty() {
        return Ok(());
    }
    Err(Finding::Fail(format!(
        "{what} in the volumes dir {volumes:?}: expected nothing to change outside it; created: [{}], \
         removed: [{}] (relative to the check's dir, `..` to the volumes dir; the plugin ran in `cwd`) \
         — an unquoted path is split at the space",
        added.join(", "),
        removed.join(", "),
    )))
}

/// The call made again alone, unless it overran its limit again: the same
/// call works in the default volumes dir (the check needs it to), so hanging
/// here is the space's doing.
fn not_hung<T>(call: Made<T>, step: &str) -> Result<PluginCall<T>, Finding> {
    match call.timed_out() {
        true => Err(Finding::Fail(format!(
            "{step}: expected it to finish, as it does in the default volumes dir; it overran its \
             time limit, and again alone (an unquoted path split at the space can loop or wait \
             forever)"
        ))),
        false => Ok(call.into_call()),
    }
}
