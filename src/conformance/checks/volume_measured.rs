//! The default volume measured, shared by volume.rs and volume_parameters.rs:
//! what the `volume.*` checks hold a plugin's answer and claims to.

use std::path::Path;

use super::{create, needs};
use crate::conformance::context::{Ctx, Finding};
use crate::conformance::volume_facts::VolumeFacts;
use crate::contract::CreateRequest;

/// The default volume's request and reported bytes, measured: or the skip
/// naming the check that owns why there is nothing to measure.
pub(super) async fn measured_probe(
    ctx: &Ctx,
) -> Result<(CreateRequest, i64, VolumeFacts), Finding> {
    let probe = ctx.prereqs().create_probe().await;
    ctx.cite(probe.call.run.as_ref());
    let resp = match &probe.call.result {
        Ok(resp) => resp,
        Err(_) if !probe.call.exited_zero() => {
            return Err(Finding::Skip(needs(&create::SUCCEEDS)));
        }
        Err(_) => return Err(Finding::Skip(needs(&create::RESPONSE))),
    };
    if !probe.path_existed || !Path::new(&resp.path).is_absolute() {
        return Err(Finding::Skip(needs(&create::PATH_EXISTS)));
    }
    let facts = VolumeFacts::measure(ctx.host(), Path::new(&resp.path)).map_err(|e| {
        Finding::Skip(format!(
            "{} (measuring {:?} failed: {e})",
            needs(&create::PATH_EXISTS),
            resp.path
        ))
    })?;
    Ok((probe.request.clone(), resp.bytes, facts))
}
