//! `delete.in-use`: a delete while a file in the volume is held open (a
//! task still using it) ends within its limit and either removes the volume
//! or keeps it whole; once the file is closed, delete succeeds.

use std::path::{Path, PathBuf};

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, Settled, VolumeAt, canary_intact, is_mount_point, plant_in_volume,
};
use crate::conformance::host::Held;
use crate::contract::{CreateRequest, DeleteRequest, Operation};
use crate::plugin::PluginCall;

pub(crate) const IN_USE: CheckSpec = CheckSpec {
    id: "delete.in-use",
    level: Level::Should,
    rule: "with a file in the volume held open (a task still using it), delete ends within its limit, and either removes the volume or fails leaving it whole; once the file is closed, delete succeeds",
    why: "A volume can still be in use when a delete comes: a task that has not stopped, a backup reading it. A mounted volume then cannot be unmounted (`umount` fails with EBUSY); a plugin that retries forever hangs the delete until Nomad kills it, and one that removes the files under the mount, or the image behind it, destroys data it reports as kept.",
    fix: "When `umount` fails, print `{\"error\": \"...\"}` and exit 1 (Nomad keeps the volume and the user can retry), or wait a bounded time; never remove what lies beneath a mount that is still there.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(in_use),
};

/// Creates a volume, writes a file into it and holds that file open while
/// delete runs; then closes it and deletes again.
async fn in_use(ctx: &Ctx) -> FindingResult {
    let (vol, held) = volume_in_use(ctx).await?;
    let (req, path) = (&vol.req, &vol.path);
    let delete = DeleteRequest::for_created(req, path);
    let step = "delete while a file in the volume is open";
    let settled = ctx
        .steps()
        .delete_settled(&delete, Expect::Either, step)
        .await?;
    let busy = match settled {
        Settled::Hung(_) => {
            drop(held);
            return Err(Finding::Warn(format!(
                "{step}: expected it to end within its limit; it overran it, and again alone{} \
                 (a delete that retries a failing unmount forever)",
                if vol.mounted {
                    " (the volume is a mount point)"
                } else {
                    ""
                }
            )));
        }
        Settled::Ended(call) => call,
    };
    // An `Err` returns with the file still held: it is let go as it returns.
    let outcome = busy_outcome(ctx, &vol, &busy, step).await?;
    drop(held);
    if busy.result.is_err() {
        ctx.steps()
            .delete_ok(req, path, "delete again, the file closed")
            .await?;
        if !vol.at.gone().await {
            return Err(Finding::Warn(format!(
                "delete again, the file closed: exit 0, but {}",
                vol.at.still_there()
            )));
        }
    }
    Ok(Finding::Pass(format!(
        "with a file in the volume open{}, delete {outcome}{}",
        if vol.mounted { " (a mount point)" } else { "" },
        if busy.result.is_err() {
            "; with it closed, delete removed it"
        } else {
            ""
        }
    )))
}

/// The volume in use: its request, where it is, and what it was before the
/// delete.
struct InUse {
    req: CreateRequest,
    path: String,
    /// It was a mount point.
    mounted: bool,
    at: VolumeAt,
    /// The file held open in it.
    canary: PathBuf,
}

/// Creates a volume and writes a file into it, held open: not applicable
/// to a volume that is a block device.
async fn volume_in_use(ctx: &Ctx) -> Result<(InUse, Held), Finding> {
    let (req, path) = ctx.steps().one_volume("create").await?;
    let at = VolumeAt::before_delete(ctx, &path);
    if at.is_block() {
        return Err(Finding::Skip(
            "not applicable: the volume is a block device, not a directory a task holds files open in"
                .into(),
        ));
    }
    let canary = plant_in_volume(ctx, &path, "create")?;
    // Held where no plugin call of a neighbour check can inherit it, so that
    // once let go it is closed (see Host::hold).
    let held = ctx
        .host()
        .hold(crate::conformance::host::HoldTarget::File(canary.clone()))
        .map_err(|e| Finding::Skip(format!("cannot open the file written into the volume: {e}")))?;
    let mounted = is_mount_point(ctx.host(), Path::new(&path));
    let vol = InUse {
        req,
        path,
        mounted,
        at,
        canary,
    };
    Ok((vol, held))
}

/// What the delete made of the volume while its file was held open: removed
/// it, or failed and kept it whole (mounted, if it was); `Err` otherwise.
async fn busy_outcome(
    ctx: &Ctx,
    vol: &InUse,
    busy: &PluginCall<()>,
    step: &str,
) -> Result<String, Finding> {
    let path = Path::new(&vol.path);
    match &busy.result {
        Ok(()) if vol.at.gone().await => Ok("removed it".to_string()),
        Ok(()) => Err(Finding::Warn(format!(
            "{step}: exit 0, but the volume is still there ({}): a delete that succeeds must \
             remove it",
            vol.at.still_there()
        ))),
        Err(e) => {
            if !ctx.host().is_dir(path) || !canary_intact(ctx.host(), &vol.canary) {
                return Err(Finding::Warn(format!(
                    "{step}: it failed ({e}), and the volume is not whole: {}",
                    match ctx.host().is_dir(path) {
                        true => "the file written into it is gone or changed",
                        false => "its directory is gone",
                    }
                )));
            }
            if vol.mounted && !is_mount_point(ctx.host(), path) {
                return Err(Finding::Warn(format!(
                    "{step}: it failed ({e}), and left the volume unmounted: the files are kept, \
                     but not where the volume's data lives"
                )));
            }
            Ok(format!("failed and kept it whole ({e})"))
        }
    }
}
