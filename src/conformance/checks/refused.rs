//! `failure.*-refused`: a plugin's failure paths when the host refuses a step
//! on the way (a mount, a mode change, a removal). Each check makes its calls
//! with one family of system calls refused (`EPERM`, by a seccomp filter on
//! the plugin's processes: [`Refusal`]), as some hosts refuse them, so the
//! plugin's own error handling runs: what it does when a step fails, and what
//! it leaves. Then the same call with nothing refused must still work, as a
//! retry by Nomad would.

use std::collections::BTreeSet;
use std::path::Path;

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{
    Ctx, Expect, Fact, Finding, VolumeAt, is_mount_point, listing, plant_in_volume, still_attached,
};
use crate::conformance::host::LoopDevice;
use crate::contract::Operation;
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::exec::Refusal;

pub(crate) const MOUNT_REFUSED: CheckSpec = CheckSpec {
    id: "failure.mount-refused",
    level: Level::Should,
    rule: "for a plugin whose volumes are mounts: when the host refuses every mount (`mount(2)` fails with EPERM), create either fails, leaving nothing new in the volumes dir and no loop device attached, or makes the volume as the default create does (mounted); a create after that makes the volume as the default; after a reboot (the volume's mount and loop devices taken away), a create again with every mount refused fails and keeps every file of the volume in the volumes dir (its image, its mount point), or makes it as the default",
    why: "A mount fails on real hosts: an agent in a container without CAP_SYS_ADMIN, a security module, no free loop device. Every step the create made before it (an image, a mount point, a lock file, a loop device) is then the plugin's to undo, since Nomad records no volume it could delete later; but a create again of a volume that exists (the client's create at start, after a reboot) must undo only what it made itself, or its clean-up removes the volume's image or mount point; a create that reports success anyway hands Nomad a plain directory in the volumes dir's filesystem as the volume, without its size limit, and the data written there is not in the volume.",
    fix: "Check `mount`'s status and take the failure path (`{\"error\": \"...\"}`, exit 1) after undoing what this call made: remove the image and the mount point it created, detach its loop device.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(mount_refused),
};

/// A create made with every mount refused, judged against the run's first
/// create, which mounted its volume (see [`create_refused`]).
async fn mount_refused(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    if !ctx.prereqs().create_probe().await.mounted {
        return Err(Finding::Skip(
            "not applicable: the plugin's volumes are not mounts (the default create mounted nothing at its path)"
                .into(),
        ));
    }
    require_refusal(ctx)?;
    let first = match create_refused(ctx, Refusal::Mounts, "mounts").await? {
        Finding::Pass(note) => note,
        other => return Ok(other),
    };
    let volumes = ctx.dirs().volumes().to_path_buf();
    let step = "create again after a reboot, with every mount refused";
    let then = match refused_after_reboot(ctx, &volumes, None).await? {
        AfterReboot::Kept => {
            "after a reboot, a create again with mounts refused failed and removed nothing of the volume"
                .to_string()
        }
        AfterReboot::AsDefault => "after a reboot, a create again with mounts refused made the \
                                   volume as the default"
            .to_string(),
        AfterReboot::Overran => "after a reboot, a create again with mounts refused overran its \
                                 limit (not judged)"
            .to_string(),
        AfterReboot::Removed(e, names) => {
            return Err(Finding::Warn(format!(
                "{step}: expected it to fail and keep the volume, which exists (a reboot leaves \
                 its files on disk); it failed ({e}) and removed {} of it from the volumes dir: a \
                 failed create must undo only what it made",
                names.join(", ")
            )));
        }
        AfterReboot::Unlike(how) => {
            return Err(Finding::Warn(format!(
                "{step}: expected it to fail, or to make the volume as the default create does; \
                 it reported success with a volume that {how}"
            )));
        }
    };
    Ok(Finding::Pass(format!("{first}; {then}")))
}

pub(crate) const CHMOD_REFUSED: CheckSpec = CheckSpec {
    id: "failure.chmod-refused",
    level: Level::Should,
    rule: "when the host refuses every mode change (`chmod(2)` and its kin fail with EPERM), create either fails, leaving nothing new in the volumes dir, no mount and no loop device, or makes a volume as the default create makes it (its mode, what it holds, mounted or not); a create after that makes the volume as the default",
    why: "A mode change fails on real hosts: a volumes dir on a filesystem that keeps no modes (vfat, some FUSE and NFS exports), a security module. A plugin that carries on after a failed `chmod` reports success for a volume it did not finish (its root left open to every user, say); one that gives up without undoing what it made leaves a mounted filesystem or a half-made directory that nothing will remove, as Nomad records no volume for a failed create.",
    fix: "Check every step's status. When one fails, undo what this call made (unmount what it mounted, remove what it created, detach its loop device) and print `{\"error\": \"...\"}` with exit 1; or make the step unnecessary (`mkdir -m 0700` needs no `chmod`).",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(chmod_refused),
};

/// A create made with every mode change refused (see [`create_refused`]).
async fn chmod_refused(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    ctx.prereqs().require_create().await?;
    require_refusal(ctx)?;
    create_refused(ctx, Refusal::ModeChanges, "mode changes").await
}

pub(crate) const REMOVE_REFUSED: CheckSpec = CheckSpec {
    id: "failure.remove-refused",
    level: Level::Should,
    rule: "delete of a volume holding a file, once with every removal of a file refused and once with every removal of a directory refused (`unlink(2)`, `rmdir(2)` fail with EPERM), ends within its limit and either fails or leaves nothing of the volume; a delete after each, removals allowed, removes the volume",
    why: "A removal fails on real hosts: a file or directory marked immutable (`chattr +i`), a read-only remount, a security module. Nomad forgets a volume whose delete exits 0, so a delete that reports success without checking its `rm` leaves the volume's data on the node for good, where nothing will remove it and the next volume with its name may find it.",
    fix: "Check the status of every removal (`rm -rf -- \"$path\" || fail ...`; in Python, let the error reach your handler) and fail with `{\"error\": \"...\"}`, exit 1: Nomad keeps the volume and a later delete can finish the job.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(remove_refused),
};

/// For each removal refusal: a volume made and given a file, deleted with
/// the refusal (a success must leave nothing of it), then deleted without.
async fn remove_refused(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    // Asks create's prerequisites first (needs create.succeeds, ...).
    ctx.prereqs().require_delete().await?;
    require_refusal(ctx)?;
    let volumes = ctx.dirs().volumes().to_path_buf();
    let mut outcomes = Vec::new();
    for refusal in [Refusal::FileRemovals, Refusal::DirRemovals] {
        outcomes.push(delete_refused(ctx, refusal, &volumes).await?);
    }
    Ok(Finding::Pass(format!(
        "delete of a volume holding a file: {}",
        outcomes.join("; ")
    )))
}

/// A volume made and given a file, deleted with `refusal`: removed and
/// nothing left of it, or failed and removed by a delete after it, nothing
/// refused. What happened, in words, or the finding.
async fn delete_refused(ctx: &Ctx, refusal: Refusal, volumes: &Path) -> Result<String, Finding> {
    let before = listing(ctx.host(), volumes);
    let made = format!("create, for a delete with {} refused", refusal.describe());
    let (req, path) = ctx.steps().one_volume(&made).await?;
    let at = VolumeAt::before_delete(ctx, &path);
    if !at.is_block() {
        plant_in_volume(ctx, &path, &made)?;
    }
    let step = format!("delete with {} refused", refusal.describe());
    let delete = DeleteRequest::for_created(&req, &path);
    let refused = ctx.variant(|o| o.refuse = Some(refusal));
    let call = refused
        .delete_unloaded(&delete, Expect::Either, &step)
        .await;
    if call.timed_out() {
        return Err(Finding::Warn(format!(
            "{step}: expected it to end within its limit; it overran it, and again alone (a \
             delete that retries a removal that cannot work)"
        )));
    }
    match &call.result {
        Ok(()) => {
            left_nothing(ctx, volumes, &before, &at, &step).await?;
            Ok(format!("with {} refused it removed it", refusal.describe()))
        }
        Err(e) => {
            let again = format!(
                "delete after the one with {} refused, nothing refused",
                refusal.describe()
            );
            ctx.steps().delete_ok(&req, &path, &again).await?;
            if !at.gone().await {
                return Err(Finding::Warn(format!(
                    "{again}: exit 0, but {}: a delete after a failed one must finish it",
                    at.still_there()
                )));
            }
            Ok(format!(
                "with {} refused it failed ({e}), and a delete after it removed the volume",
                refusal.describe()
            ))
        }
    }
}

/// A delete with removals refused that exited 0 left nothing of the volume
/// at `at`, and nothing new in `volumes` since `before`.
async fn left_nothing(
    ctx: &Ctx,
    volumes: &Path,
    before: &BTreeSet<String>,
    at: &VolumeAt,
    step: &str,
) -> Result<(), Finding> {
    let left = ctx.prereqs().left_since(volumes, before).await;
    if !at.gone().await || !left.own.is_empty() {
        let what = match left.own.is_empty() {
            true => at.still_there(),
            false => format!("it left {}{}", left.own.join(", "), left.citation()),
        };
        return Err(Finding::Warn(format!(
            "{step}: expected it to fail, as the volume cannot be removed, or to \
             leave nothing of it; it exited 0, and {what}: Nomad forgets the volume, \
             and nothing will remove what is left"
        )));
    }
    Ok(())
}

/// A create with `refusal` (of `what`, in words): a failure must leave
/// nothing, a success must make the volume as the default create does;
/// then a create with nothing refused must make the default volume.
async fn create_refused(ctx: &Ctx, refusal: Refusal, what: &str) -> FindingResult {
    let step = format!("create with {} refused", refusal.describe());
    let failed = match refused_create(ctx, refusal, &step).await? {
        Ok(resp) => {
            let differs = ctx.prereqs().unlike_default(&resp).await;
            delete_what_it_made(ctx, &resp).await?;
            if let Some(how) = differs {
                return Err(Finding::Warn(format!(
                    "{step}: expected it to fail, or to make the volume as the default create \
                     does; it reported success with a volume that {how}"
                )));
            }
            None
        }
        Err(e) => Some(e),
    };
    let lifted = format!("create after the refused one, {what} allowed");
    create_as_default(ctx, &lifted).await?;
    Ok(Finding::Pass(match failed {
        Some(how) => {
            format!("with {what} refused, create {how}; then create made the volume as the default")
        }
        None => format!("with {what} refused, create made the volume as the default all the same"),
    }))
}

/// How a create of an existing volume ends with every mount refused, after
/// a reboot took its mount away ([`refused_after_reboot`]).
pub(super) enum AfterReboot {
    /// It failed, and every name of the volumes dir is still there.
    Kept,
    /// It failed (the error), and removed these names of the volumes dir:
    /// what a reboot leaves of the volume (its image, its mount point).
    Removed(String, Vec<String>),
    /// It reported success with a volume unlike the default create's (how).
    Unlike(String),
    /// It reported success with a volume like the default create's.
    AsDefault,
    /// It overran its limit, and again alone: not judged here (a create that
    /// retries a refused mount is [`refused_create`]'s finding).
    Overran,
}

/// In `dir`, calls made from `cwd` when given: a volume made; a reboot (its
/// mount and loop devices taken away); a create again with every mount
/// refused, judged by what it leaves of the volume ([`AfterReboot`]); then
/// a create with nothing refused and a delete. A create failing for a
/// volume that exists must undo only what it made: a clean-up that takes
/// the volume's image for its own loses the volume's data.
pub(super) async fn refused_after_reboot(
    ctx: &Ctx,
    dir: &std::path::Path,
    cwd: Option<&std::path::Path>,
) -> Result<AfterReboot, Finding> {
    let plain = ctx.variant(|o| o.cwd = cwd.map(ToOwned::to_owned));
    let refused = ctx.variant(|o| {
        o.refuse = Some(Refusal::Mounts);
        o.cwd = cwd.map(ToOwned::to_owned);
    });
    let req = ctx.request_in(dir);
    let made = "create of the volume a reboot takes down";
    let resp = ctx
        .steps()
        .need(
            plain.create_unloaded(&req, Expect::Success, made).await,
            made,
        )
        .await?;
    super::lifecycle_reboot::take_away(ctx, std::slice::from_ref(&resp.path))?;
    let before = listing(ctx.host(), dir);
    let step = "create again after a reboot, with every mount refused";
    let call = refused.create_unloaded(&req, Expect::Either, step).await;
    let outcome = match &call.result {
        _ if call.timed_out() => AfterReboot::Overran,
        Ok(again) => match ctx.prereqs().unlike_default(again).await {
            Some(how) => AfterReboot::Unlike(how),
            None => AfterReboot::AsDefault,
        },
        Err(e) => {
            let now = listing(ctx.host(), dir);
            let removed: Vec<String> = before.difference(&now).cloned().collect();
            match removed.is_empty() {
                true => AfterReboot::Kept,
                false => AfterReboot::Removed(e.to_string(), removed),
            }
        }
    };
    // The volume is deleted as Nomad would, after a create that finds it
    // again: whether that create finds its files is lifecycle.reboot's
    // finding (a plugin that formats what it finds unmounted), not this one's.
    let step = "create after the refused one, mounts allowed";
    let again = plain.create_unloaded(&req, Expect::Either, step).await;
    let path = again
        .result
        .as_ref()
        .map_or(resp.path.as_str(), |r| r.path.as_str());
    let delete = DeleteRequest::for_created(&req, path);
    let deleted = plain
        .delete_unloaded(&delete, Expect::Either, "delete of the volume")
        .await;
    if matches!(outcome, AfterReboot::Kept) && again.result.is_ok() {
        ctx.steps().need(deleted, "delete of the volume").await?;
    }
    Ok(outcome)
}

/// Why a check that needs a refusal cannot judge on this host.
pub(super) const CANNOT_REFUSE: &str = "system calls cannot be refused to a plugin here (the harness needs clone3 to install a seccomp filter: x86-64, Linux 5.7 or later, clone3 not filtered by a container)";

/// `Err(skip)` where a plugin's calls cannot be refused system calls; the
/// verdict is then the host's, not the plugin's, and is not pinned.
fn require_refusal(ctx: &Ctx) -> Result<(), Finding> {
    match ctx.host().can_refuse() {
        true => Ok(()),
        false => {
            ctx.unpin(CANNOT_REFUSE);
            Err(Finding::Skip(CANNOT_REFUSE.into()))
        }
    }
}

/// A create of the default request with `refusal`: its answer when it
/// succeeded (the caller judges the volume, then deletes it), or how it
/// failed, in words: it left nothing (no file in the volumes dir, no loop
/// device attached to a file of the check's, waited for within
/// [`LOOP_RELEASE`], as the kernel may defer a detach), or what it left in
/// the volumes dir is failure.clean's finding (published for that check,
/// with its loop devices: one cause, one finding). A create that overran
/// its limit alone too, or one that left only loop devices, is the finding.
async fn refused_create(
    ctx: &Ctx,
    refusal: Refusal,
    step: &str,
) -> Result<Result<CreateResponse, String>, Finding> {
    let volumes = ctx.dirs().volumes().to_path_buf();
    let before = listing(ctx.host(), &volumes);
    let loops_before = ctx.host().loops_backed_under(ctx.dirs().dir());
    let req = ctx.request();
    let refused = ctx.variant(|o| o.refuse = Some(refusal));
    let call = refused
        .create_unloaded(&req, Expect::Either, step)
        .await
        .into_call();
    if call.timed_out() {
        return Err(Finding::Warn(format!(
            "{step}: expected it to end within its limit; it overran it, and again alone (a \
             create that retries a step that cannot work)"
        )));
    }
    let e = match call.result {
        Ok(resp) => return Ok(Ok(resp)),
        Err(e) => e.to_string(),
    };
    let left = ctx.prereqs().left_since(&volumes, &before).await;
    let loops = loops_left(ctx, &loops_before).await;
    if left.own.is_empty() && loops.is_empty() {
        return Ok(Err(format!("failed ({e}) and left nothing")));
    }
    if left.own.is_empty() {
        // A loop device alone is no file in the volumes dir: outside
        // failure.clean's rule, so this check's own finding.
        return Err(Finding::Warn(format!(
            "{step}: it failed ({e}), and left loop devices attached: {}",
            loops.join(", ")
        )));
    }
    // A failed create that left a half-made volume is failure.clean's
    // finding, whichever step failed: published for it (with the loop
    // devices of that volume), and named here rather than reported again.
    let files = left
        .own
        .iter()
        .map(
            |entry| match is_mount_point(ctx.host(), &volumes.join(entry)) {
                true => format!("{entry} (mounted)"),
                false => entry.clone(),
            },
        )
        .collect();
    ctx.publish(Fact::FailedCreateLeft {
        check: ctx.check_id(),
        step: step.to_string(),
        error: e.clone(),
        files,
        processes: Vec::new(),
        loops,
    });
    Ok(Err(format!(
        "failed ({e}), and what it left is failure.clean's finding{}",
        left.citation()
    )))
}

/// The loop devices attached to files under the check's dir that were not
/// attached `before`, once each had [`LOOP_RELEASE`](crate::conformance::context::LOOP_RELEASE)
/// to be let go.
async fn loops_left(ctx: &Ctx, before: &[LoopDevice]) -> Vec<String> {
    let new: Vec<_> = ctx
        .host()
        .loops_backed_under(ctx.dirs().dir())
        .into_iter()
        .filter(|l| !before.contains(l))
        .collect();
    still_attached(ctx.host(), &new)
        .await
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Removes a volume a refused create made, as Nomad would: by a delete.
async fn delete_what_it_made(ctx: &Ctx, resp: &CreateResponse) -> Result<(), Finding> {
    let req = ctx.request();
    let delete = DeleteRequest::for_created(&req, &resp.path);
    ctx.steps()
        .delete_unloaded(&delete, Expect::Either, "delete of what it made")
        .await
        .map(drop)
}

/// A create of the default request, nothing refused, after a refused one:
/// it must make the volume as the run's first create did (a refused create
/// may leave something a new one trusts); then it is deleted.
async fn create_as_default(ctx: &Ctx, step: &str) -> Result<(), Finding> {
    let req: CreateRequest = ctx.request();
    let resp = ctx.steps().create_ok(&req, step).await?;
    let differs = ctx.prereqs().unlike_default(&resp).await;
    ctx.steps().delete_ok(&req, &resp.path, "delete").await?;
    match differs {
        None => Ok(()),
        Some(how) => Err(Finding::Warn(format!(
            "{step}: expected the volume as the default create makes it; it made one that {how} \
             (the refused create left something a new create trusts)"
        ))),
    }
}
