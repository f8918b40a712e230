//! `delete.device-held`: a delete while another process holds the volume's
//! loop device open. Its own file: it is the one check that holds a device,
//! and the kernel's deferred detach it meets needs explaining.

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Expect, Finding, Settled, VolumeAt, still_attached};
use crate::conformance::host::{Held, HoldTarget, LoopDevice};
use crate::contract::{CreateRequest, DeleteRequest, Operation};
use crate::plugin::PluginCall;

pub(crate) const DEVICE_HELD: CheckSpec = CheckSpec {
    id: "delete.device-held",
    level: Level::Should,
    rule: "for a plugin whose volumes use loop devices: with the volume's loop devices held open by another process for the whole delete, delete ends within its limit; once they are let go, none of them stays attached and a delete (again, if the first failed) removes the volume",
    why: "Other processes open a loop device for moments or for long: udev's `blkid` probe after every change, a backup or `dd` reading the device, a monitoring agent. The kernel then only marks a detach, and clears the device on the last close. A delete that waits for the device to go without a bound hangs until Nomad kills it, and the volume is stuck half deleted; one that removes the image without asking for the detach leaves a device attached to a deleted file, holding its space, for good.",
    fix: "After `umount`, detach the volume's loop devices (`losetup -d`: a busy one is then cleared on its last close) and wait a bounded time, well within the 60 s a delete has, for them to go; if one stays, print `{\"error\": \"...\"}` and exit 1 (Nomad keeps the volume, and a later delete finishes it), or exit 0 once its detach is asked for.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Delete),
    run: scenario!(device_held),
};

/// Creates a volume, holds every loop device its create attached open while
/// delete runs, lets them go, then judges what is left (deleting again
/// after a failed delete).
async fn device_held(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    // Asks create's prerequisites first (needs create.succeeds, ...).
    ctx.prereqs().require_delete().await?;
    let vol = volume_on_loops(ctx).await?;
    let held = hold_devices(ctx, &vol).await?;
    let names = &vol.names;
    let at = VolumeAt::before_delete(ctx, &vol.path);
    let step = format!("delete while {names} is held open");
    let delete = DeleteRequest::for_created(&vol.req, &vol.path);
    let settled = ctx
        .steps()
        .delete_settled(&delete, Expect::Either, &step)
        .await?;
    drop(held);
    let call = match settled {
        Settled::Hung(_) => {
            return Err(Finding::Warn(format!(
                "{step}: expected it to end within its limit; it overran it, and again alone (a \
                 delete that waits without a bound for a loop device another process holds)"
            )));
        }
        Settled::Ended(call) => call,
    };
    let outcome = removed_after(ctx, &vol, &at, &call, &step).await?;
    released(ctx, &vol, &step, &outcome).await
}

/// A volume of the check's and the loop devices its create attached.
struct OnLoops {
    req: CreateRequest,
    path: String,
    devices: Vec<LoopDevice>,
    /// The devices' nodes, for the messages.
    names: String,
}

/// Creates the volume and finds the loop devices its create attached; one
/// on none is deleted, and the check does not apply.
async fn volume_on_loops(ctx: &Ctx) -> Result<OnLoops, Finding> {
    let dir = ctx.dirs().dir().to_path_buf();
    // The devices a volume can be on: one of size 0 holds none.
    let before = ctx.host().sized_loops_backed_under(&dir);
    let (req, path) = ctx.steps().one_volume("create").await?;
    let devices: Vec<LoopDevice> = ctx
        .host()
        .sized_loops_backed_under(&dir)
        .into_iter()
        .filter(|l| !before.contains(l))
        .collect();
    if devices.is_empty() {
        ctx.steps().delete_ok(&req, &path, "delete").await?;
        return Err(Finding::Skip(
            "not applicable: the create attached no loop device (to a file of the check's)".into(),
        ));
    }
    let names = devices
        .iter()
        .map(|d| d.device.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    Ok(OnLoops {
        req,
        path,
        devices,
        names,
    })
}

/// Holds every device of the volume open; when that cannot be done the
/// volume is deleted and the check skipped.
async fn hold_devices(ctx: &Ctx, vol: &OnLoops) -> Result<Vec<Held>, Finding> {
    // Held where no plugin call of a neighbour check can inherit them, so
    // that once let go they are closed (see Host::hold).
    let held = vol
        .devices
        .iter()
        .map(|d| ctx.host().hold(HoldTarget::Loop(d.clone())))
        .collect::<std::io::Result<Vec<_>>>();
    match held {
        Ok(held) => Ok(held),
        Err(e) => {
            ctx.steps().delete_ok(&vol.req, &vol.path, "delete").await?;
            Err(Finding::Skip(format!(
                "cannot hold the volume's loop device open: {e}"
            )))
        }
    }
}

/// What the delete made of the volume, its devices let go: removed, or
/// (after it failed) removed by a delete again; `Err` when it stayed.
async fn removed_after(
    ctx: &Ctx,
    vol: &OnLoops,
    at: &VolumeAt,
    call: &PluginCall<()>,
    step: &str,
) -> Result<String, Finding> {
    match &call.result {
        Ok(()) => {
            if !at.gone().await {
                return Err(Finding::Warn(format!(
                    "{step}: exit 0, but {}",
                    at.still_there()
                )));
            }
            Ok("exited 0 and removed the volume".to_string())
        }
        Err(e) => {
            let again = format!("delete again, {} let go", vol.names);
            ctx.steps().delete_ok(&vol.req, &vol.path, &again).await?;
            if !at.gone().await {
                return Err(Finding::Warn(format!(
                    "{again}: exit 0, but {}",
                    at.still_there()
                )));
            }
            Ok(format!(
                "failed ({e}), and a delete after it removed the volume"
            ))
        }
    }
}

/// The verdict once the volume is gone: every device it was on released.
async fn released(ctx: &Ctx, vol: &OnLoops, step: &str, outcome: &str) -> FindingResult {
    let names = &vol.names;
    let stayed: Vec<String> = still_attached(ctx.host(), &vol.devices)
        .await
        .iter()
        .map(ToString::to_string)
        .collect();
    if !stayed.is_empty() {
        return Err(Finding::Warn(format!(
            "{step}: it {outcome}, but once {names} was let go, {} stayed attached (deleted or \
             not, the image's space is held until someone detaches it): a busy device must be \
             detached (`losetup -d`), which the kernel finishes on its last close",
            stayed.join(", ")
        )));
    }
    Ok(Finding::Pass(format!(
        "with {names} held open, delete {outcome}; once let go, the device was released"
    )))
}
