//! The phases of [`Steps::create_cleanly`]: a create that succeeded is
//! measured, deleted and judged on what it made; one that failed is judged
//! on what it left.

use std::collections::BTreeSet;
use std::path::Path;

use super::{Expect, Finding, Holds, Residue, Steps};
use crate::conformance::host::Host;
use crate::conformance::volume_facts::VolumeFacts;
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::plugin::{PluginCall, PluginError};

/// The create [`Steps::create_cleanly`] judges: its request, its name in the
/// messages, what it is held to, and the volumes dir before it.
#[derive(Clone, Copy)]
pub(super) struct CreateUnderTest<'r> {
    pub req: &'r CreateRequest,
    pub label: &'r str,
    pub holds: Holds,
    pub before: &'r BTreeSet<String>,
}

impl CreateUnderTest<'_> {
    fn dir(&self) -> &Path {
        Path::new(&self.req.volumes_dir)
    }
}

/// What a successful create made, measured before its delete takes the
/// volume away.
struct Made {
    /// The `bytes` it reported lie outside a satisfiable range asked for.
    outside: bool,
    /// The size of the device behind it, when below the least asked for.
    short: Option<u64>,
    /// A loop device's sparse image past its filesystem's free space.
    overcommitted: bool,
}

impl Made {
    fn measure(host: &dyn Host, create: CreateUnderTest, resp: &CreateResponse) -> Made {
        let (req, holds) = (create.req, create.holds);
        let (min, max) = (req.capacity_min_bytes, req.capacity_max_bytes);
        // No bytes lie in a range whose min is above its max: such a
        // create is judged by how it ends, not by its answer.
        let satisfiable = max <= 0 || min <= max;
        let outside = satisfiable && !req.admits_bytes(resp.bytes);
        let facts = VolumeFacts::measure(host, Path::new(&resp.path)).ok();
        let overcommitted =
            holds.backed && facts.as_ref().is_some_and(|f| f.is_overcommitted(host));
        // What the device behind it really holds, against the least
        // asked for: a block device of 0 bytes meets no request.
        let short = facts
            .as_ref()
            .and_then(VolumeFacts::device_bytes)
            .filter(|&size| holds.bytes_in_range && satisfiable && (size as i64) < min);
        Made {
            outside,
            short,
            overcommitted,
        }
    }

    /// The verdict on the volume once deleted, `left` being what its
    /// delete left in the volumes dir.
    fn verdict(
        &self,
        create: CreateUnderTest,
        resp: &CreateResponse,
        left: &Residue,
    ) -> Result<String, Finding> {
        let (label, holds) = (create.label, create.holds);
        let (min, max) = (create.req.capacity_min_bytes, create.req.capacity_max_bytes);
        if holds.bytes_in_range && self.outside {
            return Err(Finding::Fail(format!(
                "{label}: expected bytes within the capacity asked for (min {min}{}); \
                 create reported bytes {}",
                if max > 0 {
                    format!(", max {max}")
                } else {
                    String::new()
                },
                resp.bytes
            )));
        }
        if let Some(size) = self.short {
            return Err(Finding::Fail(format!(
                "{label}: expected a volume of at least {min} bytes; create made one whose \
                 device holds {size} bytes (measured: the block device's size)"
            )));
        }
        if holds.no_residue && !left.own.is_empty() {
            return Err(Finding::Fail(format!(
                "{label}: create succeeded, but after delete the volumes dir still holds {}{}",
                left.own.join(", "),
                left.citation()
            )));
        }
        if self.overcommitted {
            // No sizes: they are the host's free space, not the plugin's.
            return Err(Finding::Fail(format!(
                "{label}: expected the volume to be storage that can hold it; create made \
                 a loop device's image larger than its filesystem can hold (a sparse file \
                 past the free space): writes inside the volume fail once that filesystem \
                 is full, long before the bytes Nomad records. Refuse a capacity the \
                 storage cannot hold, or allocate the image whole (fallocate)"
            )));
        }
        Ok(format!("{label}: created and deleted{}", left.citation()))
    }
}

impl Steps<'_> {
    /// A create that succeeded: measured, deleted (which must succeed), then
    /// held to `create.holds`.
    pub(super) async fn created_then_deleted(
        self,
        create: CreateUnderTest<'_>,
        resp: &CreateResponse,
    ) -> Result<String, Finding> {
        let made = Made::measure(&*self.calls.shared.host, create, resp);
        let step = format!("{}: delete after a successful create", create.label);
        let delete = DeleteRequest::for_created(create.req, &resp.path);
        let deleted = self
            .delete_unloaded(&delete, Expect::Success, &step)
            .await?;
        self.need(deleted, &step).await?;
        let left = self.prereqs().left_since(create.dir(), create.before).await;
        made.verdict(create, resp, &left)
    }

    /// A create that failed with `e`: clean when it left nothing; what it
    /// left otherwise is failure.clean's finding, published for that check.
    pub(super) async fn failed_create(
        self,
        create: CreateUnderTest<'_>,
        call: &PluginCall<CreateResponse>,
        e: &PluginError,
    ) -> Result<String, Finding> {
        let label = create.label;
        let left = self.prereqs().left_since(create.dir(), create.before).await;
        let procs: Vec<String> = call
            .run
            .iter()
            .flat_map(|r| r.leftovers().iter().map(|l| l.cmdline.clone()))
            .collect();
        // Exit 0 with an answer Nomad cannot decode: Nomad counts the
        // create as failed and never deletes what it made. Not a
        // refusal, and not failure.clean's (whose rule is about
        // non-zero exits): this check's own finding when it left
        // something, and said as what it is when not.
        let exited_zero = call.exited_zero();
        if exited_zero && !(left.own.is_empty() && procs.is_empty()) {
            return Err(Finding::Fail(format!(
                "{label}: create exited 0 with an answer Nomad cannot decode ({e}), so Nomad \
                 counts it failed and never deletes it; it left {}",
                left.own
                    .iter()
                    .chain(&procs)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if left.own.is_empty() && procs.is_empty() {
            return left_nothing(create, e, exited_zero, &left);
        }
        // What a failed create left is failure.clean's finding, not
        // this check's (its input caused no command, no escape): it
        // is published for that check, and this one names the owner.
        self.calls
            .shared
            .facts
            .publish(super::Fact::FailedCreateLeft {
                check: self.calls.asker.id,
                step: label.to_string(),
                error: e.to_string(),
                files: left.own.clone(),
                processes: procs,
                loops: Vec::new(),
            });
        if create.holds.succeeds {
            return Err(Finding::Warn(format!(
                "{label}: expected create to succeed, as it does for the default \
                 request; it failed: {e} (what it left is failure.clean's finding)"
            )));
        }
        Ok(format!(
            "{label}: refused (what the failed create left is failure.clean's finding){}",
            left.citation()
        ))
    }
}

/// The verdict on a failed create that left nothing behind.
fn left_nothing(
    create: CreateUnderTest,
    e: &PluginError,
    exited_zero: bool,
    left: &Residue,
) -> Result<String, Finding> {
    let (label, holds) = (create.label, create.holds);
    if exited_zero && !holds.succeeds {
        return Ok(format!(
            "{label}: exited 0 with an answer Nomad cannot decode ({e}), leaving \
             nothing{}",
            left.citation()
        ));
    }
    if holds.succeeds {
        return Err(Finding::Warn(format!(
            "{label}: expected create to succeed, as it does for the default \
             request; it failed: {e}"
        )));
    }
    Ok(format!("{label}: refused cleanly{}", left.citation()))
}
