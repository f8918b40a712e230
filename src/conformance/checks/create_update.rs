//! `create.update`, in its own file (the other `create.*` checks fill
//! create.rs): create again of an existing volume, with a bigger capacity and
//! with other parameters, keeps its path and its data.

use std::path::Path;

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Expect, Fact, Finding, canary_intact, plant_in_volume};
use crate::conformance::host::Host;
use crate::contract::{CreateRequest, Operation};

pub(crate) const UPDATE: CheckSpec = CheckSpec {
    id: "create.update",
    level: Level::Should,
    rule: "create again with the same id and a doubled capacity min exits 0 with the same path; that create and one with other parameters keep the volume's data (a file written into it survives), or fail leaving the volume as it was",
    why: "`nomad volume create` with an existing id updates the volume: the plugin gets create again with a new capacity or new parameters, and a failure there is shown to the user as a failed update. An update that removes and re-makes the volume (to resize or re-format it) loses every file the volume held.",
    fix: "Treat create of an existing volume as an update: resize in place if you can, otherwise keep the volume and exit 0 with the same path; never remove, re-make or re-format an existing volume to apply a new capacity or parameters.",
    varies: None,
    samples: &["wipes-on-update"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(update),
};

/// The parameter key the update with other parameters adds: one no plugin
/// knows, so a plugin either ignores it or refuses it.
const UPDATE_PARAMETER: &str = "dhv_conform_update";

async fn update(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let req = ctx.request();
    let first = ctx.steps().create_ok(&req, "first create").await?;
    // The data an update must keep: a file in the volume, as a task would
    // have written. Where none can be written (create.idempotent says why),
    // the path alone is judged, saying so.
    let canary = plant_in_volume(ctx, &first.path, "first create").ok();
    let mut result = bigger_capacity(ctx, &req, &first.path, canary.as_deref()).await;
    if result.is_ok() {
        if let Some(fail) = other_parameters(ctx, &req, &first.path, canary.as_deref()).await {
            result = Err(fail);
        }
    }
    if result.is_ok() && canary.is_none() {
        result = Ok(Finding::Pass(
            "update kept the path (its data not seen: no file could be written into the volume)"
                .into(),
        ));
    }
    // The harness's own file goes before the delete: a delete that cannot
    // remove a volume holding files is delete.succeeds's finding, not this one's.
    if let Some(c) = &canary {
        let _ = ctx.dirs().remove_file(c);
    }
    ctx.calls()
        .delete(
            &req,
            &first.path,
            Expect::Success,
            "delete after the update",
        )
        .await;
    result
}

/// The file written into the volume, when it is gone or changed.
fn lost<'a>(host: &dyn Host, canary: Option<&'a Path>) -> Option<&'a Path> {
    canary.filter(|c| !canary_intact(host, c))
}

/// The failure of `what`, which lost the file `canary` written into the volume.
fn wiped(what: &str, canary: &Path) -> Finding {
    Finding::Fail(format!(
        "expected {what} to keep the volume's data; the file {} written into it after the first create is gone or changed: \
         the update removed or re-made the volume",
        canary.display()
    ))
}

/// Create again with the capacity doubled: the path and the data kept.
async fn bigger_capacity(
    ctx: &Ctx,
    req: &CreateRequest,
    first_path: &str,
    canary: Option<&Path>,
) -> FindingResult {
    let mut bigger = req.clone();
    // A user asking for more raises both bounds: doubling only the min
    // could leave min = max, a range a block-granular plugin cannot meet.
    bigger.capacity_min_bytes = req.capacity_min_bytes.saturating_mul(2);
    if bigger.capacity_max_bytes > 0 {
        bigger.capacity_max_bytes = req.capacity_max_bytes.saturating_mul(2);
    }
    if bigger.capacity_max_bytes > 0 && bigger.capacity_max_bytes < bigger.capacity_min_bytes {
        bigger.capacity_max_bytes = bigger.capacity_min_bytes;
    }
    // Either: the rule judges the update's outcome below.
    let call = ctx
        .calls()
        .create(
            &bigger,
            Expect::Either,
            "create again with capacity min doubled",
        )
        .await;
    if let Some(lost) = lost(ctx.host(), canary) {
        let what = match call.result {
            Ok(_) => "an update (same id, capacity min doubled)",
            Err(_) => "a failed update (same id, capacity min doubled)",
        };
        ctx.publish(Fact::UpdateLostData { what: what.into() });
        return Err(wiped(what, lost));
    }
    match &call.result {
        Ok(resp) if resp.path == first_path => Ok(Finding::Pass("update kept the path".into())),
        Ok(resp) => Err(Finding::Fail(format!(
            "expected an update (same id, capacity min doubled) to keep path {:?}; got {:?}",
            first_path, resp.path
        ))),
        Err(e) => match ctx.prereqs().create_again_fails().await {
            Some(needs) => Err(Finding::Skip(needs)),
            None => Err(Finding::Fail(format!(
                "expected an update (same id, capacity min doubled to {}) to exit 0; got: {e}",
                bigger.capacity_min_bytes
            ))),
        },
    }
}

/// Create again with other parameters: a plugin may refuse a key it does
/// not know, but neither outcome may cost the volume its data or its path.
/// The failure, if it did.
async fn other_parameters(
    ctx: &Ctx,
    req: &CreateRequest,
    first_path: &str,
    canary: Option<&Path>,
) -> Option<Finding> {
    let mut other = req.clone();
    other
        .parameters
        .get_or_insert_with(Default::default)
        .insert(UPDATE_PARAMETER.into(), "1".into());
    let call = ctx
        .calls()
        .create(&other, Expect::Either, "create again with other parameters")
        .await;
    if let Some(lost) = lost(ctx.host(), canary) {
        let what = match call.result {
            Ok(_) => "a create with other parameters",
            Err(_) => "a failed create with other parameters",
        };
        return Some(wiped(what, lost));
    }
    let moved = call.result.as_ref().ok().filter(|r| r.path != first_path)?;
    Some(Finding::Fail(format!(
        "expected a create of the same volume with other parameters to keep path {:?} or fail; got {:?}",
        first_path, moved.path
    )))
}
