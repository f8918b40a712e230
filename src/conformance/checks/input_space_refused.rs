//! The rounds of `input.volumes-dir-space` with every mount refused (its own
//! file, as that check's would be too long): a create that fails after making
//! things, and one that fails for a volume a reboot took down, must clean up
//! in a volumes dir with a space as they do in one without.

use std::path::{Path, PathBuf};

use super::refused::{AfterReboot, refused_after_reboot};
use crate::conformance::context::{Ctx, Expect, Finding, Residue, Variant, listing};
use crate::contract::DeleteRequest;

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
pub(super) async fn failed_there_leaves_nothing(
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
    let Some(first) = refused_create_cleans_up(ctx, &refused, volumes).await? else {
        return Ok(None);
    };
    let then = after_reboot_keeps(ctx, cwd, volumes).await?;
    Ok(Some(format!("{first}; {then}")))
}

/// The names a refused create in `dir` leaves there; `None` when it did not
/// fail within its limit (its own check's finding).
async fn refused_create_leaves(
    ctx: &Ctx,
    refused: &Variant<'_>,
    dir: PathBuf,
    step: &'static str,
) -> Option<Residue> {
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

/// A volumes dir without a space, beside the one with a space.
fn plain_volumes(ctx: &Ctx) -> Result<PathBuf, Finding> {
    ctx.dirs()
        .make_dirs(Path::new("space/plain-volumes"))
        .map_err(super::unprepared)
}

/// A create in the volumes dir with a space with every mount refused leaves
/// nothing there, or leaves something in a volumes dir without a space too.
/// The note for the pass; `None` when the create did not fail within its
/// limit.
async fn refused_create_cleans_up(
    ctx: &Ctx,
    refused: &Variant<'_>,
    volumes: &Path,
) -> Result<Option<&'static str>, Finding> {
    let step = "create with every mount refused, in the volumes dir with a space";
    let Some(left) = refused_create_leaves(ctx, refused, volumes.to_path_buf(), step).await else {
        return Ok(None);
    };
    if left.own.is_empty() {
        return Ok(Some(
            "a create there with every mount refused failed and left nothing",
        ));
    }
    let step = "create with every mount refused, in a volumes dir without a space";
    match refused_create_leaves(ctx, refused, plain_volumes(ctx)?, step).await {
        Some(there) if there.own.is_empty() => Err(Finding::Fail(format!(
            "a create in {volumes:?} with every mount refused failed, and left {}{}; in a \
             volumes dir without a space the same create leaves nothing (its clean-up \
             gives a path unquoted: split at the space, it removes other names)",
            left.own.join(", "),
            left.citation()
        ))),
        _ => Ok(Some(
            "what a create with every mount refused leaves is failure.mount-refused's finding",
        )),
    }
}

/// The clean-up of a create failing for a volume that exists (after a
/// reboot) must keep the volume: what it tests of the volume's files first
/// is another path an unquoted expansion splits. The note for the pass.
async fn after_reboot_keeps(
    ctx: &Ctx,
    cwd: &Path,
    volumes: &Path,
) -> Result<&'static str, Finding> {
    Ok(match refused_after_reboot(ctx, volumes, Some(cwd)).await? {
        AfterReboot::Removed(e, names) => {
            match refused_after_reboot(ctx, &plain_volumes(ctx)?, Some(cwd)).await? {
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
    })
}
