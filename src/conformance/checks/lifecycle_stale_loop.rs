//! The steps of `lifecycle.stale-loop` (its own file, as lifecycle_reboot.rs
//! would be too long): a second loop device attached to a volume's image as
//! a killed call leaves one, and what is left on the image after delete.

use std::path::Path;

use crate::conformance::context::{Ctx, Expect, Finding, LOOP_RELEASE as DETACH_BOUND};
use crate::conformance::host::{Host, LoopDevice};
use crate::contract::CreateRequest;

/// Attaches a second loop device to the image of the volume at `path` (the
/// file of a device that was not among `before`). A skip, with the volume
/// deleted, when the plugin attached no loop device or the harness cannot
/// attach one.
pub(super) async fn attach_stale(
    ctx: &Ctx,
    req: &CreateRequest,
    path: &str,
    before: &[LoopDevice],
) -> Result<LoopDevice, Finding> {
    let made: Vec<_> = ctx
        .host()
        .sized_loops_backed_under(ctx.dirs().dir())
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    let Some(image) = made.first().map(|d| d.backing_file.clone()) else {
        ctx.calls()
            .delete(
                req,
                path,
                Expect::Success,
                "delete of a volume with no loop device",
            )
            .await;
        return Err(Finding::Skip(
            "not applicable: the plugin attaches no loop device to its volumes".into(),
        ));
    };
    match ctx.host().attach_loop(&image, ctx.dirs().run_root()) {
        Ok(dev) => Ok(dev),
        Err(e) => {
            ctx.calls()
                .delete(req, path, Expect::Success, "delete of the volume")
                .await;
            // The host's doing (its loop devices taken by others), not the plugin's.
            let why = format!(
                "inconclusive: the harness could not attach a loop device to {}: {e}",
                image.display()
            );
            ctx.unpin(why.clone());
            Err(Finding::Skip(why))
        }
    }
}

/// The loop devices on files under `dir` that were not among `before`, once
/// they are gone or [`DETACH_BOUND`] passed: a detach while another process
/// holds the device is finished later by the kernel, given the time a
/// delete's detach may take.
pub(super) async fn loops_left_after_detach(
    host: &dyn Host,
    dir: &Path,
    before: &[LoopDevice],
) -> Vec<LoopDevice> {
    let deadline = std::time::Instant::now() + DETACH_BOUND;
    loop {
        let left: Vec<_> = host
            .loops_backed_under(dir)
            .into_iter()
            .filter(|d| !before.contains(d))
            .collect();
        if left.is_empty() || std::time::Instant::now() >= deadline {
            break left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
