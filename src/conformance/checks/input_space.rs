//! `input.volumes-dir-space`: a volumes dir whose path holds a space, the
//! input that finds every unquoted path of a shell plugin. Its own file, as
//! it takes several rounds: create, create again and delete there; a create
//! and delete with a file named by the split path's first word beside the
//! dir; a create there that fails after making things, and one that fails
//! for a volume a reboot took down; and a delete in a missing dir with a
//! space.

use std::collections::BTreeSet;
use std::path::Path;

use super::input_surroundings::Surroundings;
use super::refused::{AfterReboot, refused_after_reboot};
use super::{CheckSpec, FindingResult, Level, Needs, needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, FreshVolume, Variant, VolumeAt, canary_intact, listing, plant_in_volume,
};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::plugin::PluginCall;

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
    let req = ctx.request_in(&volumes);
    let created = {
        let step = "create in a volumes dir whose path holds a space";
        not_hung(
            there.create_unloaded(&req, Expect::Either, step).await,
            step,
        )?
    };
    outside_unchanged(ctx, &around, &volumes, &before, "create").await?;
    let resp = match created.result {
        Ok(resp) => resp,
        Err(e) => {
            // Failing everywhere is create.succeeds's finding.
            if let Some(needs) = ctx.prereqs().failed_prerequisite(Operation::Create).await {
                return Err(Finding::Skip(needs));
            }
            return Err(Finding::Fail(format!(
                "expected create to work in a volumes dir whose path holds a space ({volumes:?}); \
                 it failed: {e} (it works in the default volumes dir: quote every path)"
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
    as_in_the_default_dir(ctx, &req, &resp).await?;
    let canary = match volume.is_block() {
        true => None,
        false => Some(plant_in_volume(
            ctx,
            &resp.path,
            "create in a volumes dir whose path holds a space",
        )?),
    };
    // Create again (an agent restart): the same path, and the file kept.
    let again = {
        let step = "create again in a volumes dir whose path holds a space";
        not_hung(
            there.create_unloaded(&req, Expect::Either, step).await,
            step,
        )?
    };
    outside_unchanged(ctx, &around, &volumes, &before, "create again").await?;
    let lost = canary
        .as_ref()
        .is_some_and(|c| !canary_intact(ctx.host(), c));
    // A create again that misbehaves in the default volumes dir too is
    // create.idempotent's finding.
    let probe = ctx.prereqs().again_probe().await;
    let moves_there_too = match (&probe.first.result, probe.again.as_ref().map(|a| &a.result)) {
        (Ok(first), Some(Ok(again))) => first.path != again.path,
        _ => false,
    };
    if again.result.is_err() || moves_there_too {
        if let Some(needs) = ctx.prereqs().create_again_fails().await {
            return Err(Finding::Skip(needs));
        }
    }
    if moves_there_too && again.result.as_ref().is_ok_and(|r| r.path != resp.path) {
        return Err(Finding::Skip(needs(&super::create::IDEMPOTENT)));
    }
    match &again.result {
        Err(e) => {
            if let Some(needs) = ctx.prereqs().failed_prerequisite(Operation::Create).await {
                return Err(Finding::Skip(needs));
            }
            return Err(Finding::Fail(format!(
                "expected create again to work in a volumes dir whose path holds a space \
                 ({volumes:?}), as it does in the default one; it failed: {e}"
            )));
        }
        Ok(r) if r.path != resp.path || lost => {
            return Err(Finding::Fail(format!(
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
            )));
        }
        Ok(_) => {}
    }
    let delete = DeleteRequest::for_created(&req, &resp.path);
    let deleted = {
        let step = "delete in a volumes dir whose path holds a space";
        not_hung(
            there.delete_unloaded(&delete, Expect::Either, step).await,
            step,
        )?
    };
    outside_unchanged(ctx, &around, &volumes, &before, "delete").await?;
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
    let left = ctx.prereqs().left_since(&volumes, &BTreeSet::new()).await;
    if !left.own.is_empty() {
        return Err(Finding::Fail(format!(
            "expected delete in a volumes dir whose path holds a space to leave nothing of the \
             volume, as it does in the default volumes dir; it left {}{} (a removal given the \
             path unquoted removes `.../host` and a name in its working directory instead)",
            left.own.join(", "),
            left.citation()
        )));
    }
    neighbour_kept(ctx, &there, &around, &volumes).await?;
    let refused = failed_there_leaves_nothing(ctx, &cwd, &volumes).await?;
    gone_dir_as_plain(ctx, &there).await?;
    Ok(Finding::Pass(format!(
        "created, created again and deleted in {:?}, also beside a file named by its first word, \
         nothing outside it changed{}",
        volumes.file_name().unwrap_or_default(),
        refused.map(|r| format!("; {r}")).unwrap_or_default()
    )))
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

/// For a plugin whose volumes are mounts, where calls can be refused system
/// calls: a create in the volumes dir with a space with every mount refused,
/// which fails after the plugin made its image or mount point, must leave
/// nothing there: its clean-up is the code that only failures run, where an
/// unquoted path hides longest. What it leaves is judged only when the same
/// refused create leaves nothing in a volumes dir without a space
/// (`space/plain-volumes`): otherwise it is failure.mount-refused's finding.
/// A refused create that succeeds is that check's finding too. Then the same
/// for a create again of a volume there after a reboot: it must keep the
/// volume (judged when it does in a dir without a space). A note for the
/// pass, or `None` when not applicable.
async fn failed_there_leaves_nothing(
    ctx: &Ctx,
    cwd: &Path,
    volumes: &Path,
) -> Result<Option<String>, Finding> {
    if !ctx.prereqs().create_probe().await.mounted {
        return Ok(None);
    }
    if !ctx.host().can_refuse() {
        // The pass then says less than where the host can refuse mounts.
        ctx.unpin(super::refused::CANNOT_REFUSE);
        return Ok(None);
    }
    let refused = ctx.variant(|o| {
        o.refuse = Some(crate::exec::Refusal::Mounts);
        o.cwd = Some(cwd.to_path_buf());
    });
    // The names a refused create in `dir` leaves there; `None` when it did
    // not fail within its limit (its own check's finding).
    let leaves = |dir: std::path::PathBuf, step: &'static str| {
        let refused = &refused;
        async move {
            let before = listing(ctx.host(), &dir);
            let req = ctx.request_in(&dir);
            let call = refused.create_unloaded(&req, Expect::Either, step).await;
            match &call.result {
                Ok(resp) => {
                    let delete = DeleteRequest::for_created(&req, &resp.path);
                    refused
                        .delete_unloaded(&delete, Expect::Either, "delete of what it made")
                        .await;
                    None
                }
                Err(_) if call.timed_out() => None,
                Err(_) => Some(ctx.prereqs().left_since(&dir, &before).await),
            }
        }
    };
    let step = "create with every mount refused, in the volumes dir with a space";
    let Some(left) = leaves(volumes.to_path_buf(), step).await else {
        return Ok(None);
    };
    let plain = || {
        ctx.dirs()
            .make_dirs(Path::new("space/plain-volumes"))
            .map_err(super::unprepared)
    };
    let first = if left.own.is_empty() {
        "a create there with every mount refused failed and left nothing"
    } else {
        let step = "create with every mount refused, in a volumes dir without a space";
        match leaves(plain()?, step).await {
            Some(there) if there.own.is_empty() => {
                return Err(Finding::Fail(format!(
                    "a create in {volumes:?} with every mount refused failed, and left {}{}; in a \
                     volumes dir without a space the same create leaves nothing (its clean-up \
                     gives a path unquoted: split at the space, it removes other names)",
                    left.own.join(", "),
                    left.citation()
                )));
            }
            _ => "what a create with every mount refused leaves is failure.mount-refused's finding",
        }
    };
    // The clean-up of a create failing for a volume that exists (after a
    // reboot) must keep the volume: what it tests of the volume's files
    // first is another path an unquoted expansion splits.
    let then = match refused_after_reboot(ctx, volumes, Some(cwd)).await? {
        AfterReboot::Removed(e, names) => {
            match refused_after_reboot(ctx, &plain()?, Some(cwd)).await? {
                AfterReboot::Kept => {
                    return Err(Finding::Fail(format!(
                        "after a reboot, a create again in {volumes:?} with every mount refused \
                         failed ({e}) and removed {} of the volume, which exists; in a volumes dir \
                         without a space the same create keeps it (a test of what exists is given \
                         a path unquoted: split at the space, it takes the volume's files for the \
                         call's own)",
                        names.join(", ")
                    )));
                }
                _ => {
                    "what a create again after a reboot with every mount refused removes is \
                      failure.mount-refused's finding"
                }
            }
        }
        AfterReboot::Kept => {
            "after a reboot, a create again there with every mount refused failed and removed nothing of the volume"
        }
        AfterReboot::AsDefault => {
            "after a reboot, a create again there with every mount refused made the volume as the default"
        }
        AfterReboot::Overran => {
            "after a reboot, a create again there with every mount refused overran its limit (not judged)"
        }
        AfterReboot::Unlike(_) => {
            "what a create again after a reboot with every mount refused reports is \
             failure.mount-refused's finding"
        }
    };
    Ok(Some(format!("{first}; {then}")))
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
fn not_hung<T>(call: PluginCall<T>, step: &str) -> Result<PluginCall<T>, Finding> {
    match call.timed_out() {
        true => Err(Finding::Fail(format!(
            "{step}: expected it to finish, as it does in the default volumes dir; it overran its \
             time limit, and again alone (an unquoted path split at the space can loop or wait \
             forever)"
        ))),
        false => Ok(call),
    }
}
