//! `volume.*`: what the volume really is. The protocol checks see what a plugin
//! prints; these measure what it made (sizes, device, filesystem, mode, owner)
//! and hold it to the plugin's answer and to the claims of its config.

use std::path::Path;

use super::volume_measured::measured_probe;
use super::{CheckSpec, FindingResult, Level, Needs, create};
use crate::conformance::claims::Attachment;
use crate::conformance::context::{Ctx, Finding};
use crate::conformance::volume_facts::{Kind, VolumeFacts};
use crate::contract::{CreateRequest, CreateResponse};

/// Sector and page rounding: a device or filesystem a few KiB off the
/// reported size is the same size.
const ROUNDING: u64 = 4096;

/// The most a capacity check writes (or allocates) past a volume's size.
const MAX_TESTED_BYTES: u64 = 4 << 30;

/// The `volume.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    BYTES_TRUE,
    CAPACITY_ENFORCED,
    super::volume_parameters::PARAMETERS,
    BLOCK_DEVICE,
];

pub(crate) const BYTES_TRUE: CheckSpec = CheckSpec {
    id: "volume.bytes-true",
    level: Level::Should,
    rule: "the `bytes` create reports is what the volume has: the block device's size, the mounted filesystem's (within its own overhead), or 0 for a plain directory",
    why: "Nomad records the `bytes` a create reports as the volume's capacity, and schedulers and operators trust it. A plugin that reports the size it was asked for rather than what it made (a size computed in MiB and truncated, an image smaller than the request, a plain directory with no limit at all) promises storage that is not there: a job fills it and fails with ENOSPC long before the capacity Nomad shows.",
    fix: "Report what the volume really holds: the size of the block device or image you made (`stat -c %s`, `blockdev --getsize64`), or 0 when the volume is a plain directory with no limit. Compute sizes in bytes, not whole MiB, and round up, not down.",
    varies: None,
    samples: &["lies-about-bytes"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(bytes_true),
};

async fn bytes_true(ctx: &Ctx) -> FindingResult {
    let (req, bytes, facts) = measured_probe(ctx).await?;
    let claims = ctx.claims();
    let what = facts.describe();
    if bytes <= 0 {
        return Ok(Finding::Pass(format!(
            "bytes not reported (0); the volume is {what}"
        )));
    }
    let bytes = bytes as u64;
    let (min, max) = (req.capacity_min_bytes, req.capacity_max_bytes);
    if (bytes as i64) < min || (max > 0 && bytes as i64 > max) {
        // Out of the range asked for: create.bytes-in-range's finding.
        return Ok(Finding::Pass(format!(
            "reports {bytes} bytes for {what}: outside the range asked for, see {}",
            create::BYTES_IN_RANGE.id
        )));
    }
    let verdict = match &facts.kind {
        Kind::BlockDevice { size, .. } => judge(bytes, *size, *size, "the device"),
        // A bind mount has no size of its own: as a plain directory.
        Kind::Mount { own: false, .. } if claims.capacity_enforced => Ok(format!(
            "nothing visible limits the bind mount; the claimed enforcement is {}'s to verify",
            CAPACITY_ENFORCED.id
        )),
        Kind::Mount { own: false, .. } => Err(
            "nothing holds the volume to that size: a bind mount has none of its own; report 0, or \
             make the size real (a filesystem image, a quota) and claim `capacity = \"enforced\"` \
             in dhv-conform.toml"
                .to_owned(),
        ),
        Kind::Mount {
            fs_bytes,
            device_bytes: Some(dev),
            ..
        } => judge(bytes, *fs_bytes, *dev, "the device under the filesystem"),
        Kind::Mount { fs_bytes, .. } => {
            judge(bytes, *fs_bytes, overhead(*fs_bytes), "the filesystem")
        }
        Kind::Directory {
            fs_bytes,
            parent_fs_bytes,
            ..
        } if fs_bytes != parent_fs_bytes => judge(
            bytes,
            *fs_bytes,
            overhead(*fs_bytes),
            "the directory's limit",
        ),
        Kind::Directory { .. } if claims.capacity_enforced => Ok(format!(
            "nothing visible limits the directory; the claimed enforcement is {}'s to verify",
            CAPACITY_ENFORCED.id
        )),
        Kind::Directory { .. } => Err(
            "nothing holds the volume to that size: report 0 for a plain directory, or make the size real \
             (a filesystem image, a quota) and claim `capacity = \"enforced\"` in dhv-conform.toml"
                .to_owned(),
        ),
        Kind::Other => Err("the path is not a volume at all".into()),
    };
    match verdict {
        Ok(note) => Ok(Finding::Pass(format!(
            "reports {bytes} bytes for {what}; {note}"
        ))),
        Err(why) => Err(Finding::Fail(format!(
            "expected the reported bytes to be what the volume has; it reports {bytes} bytes for {what}: {why}"
        ))),
    }
}

/// The most a filesystem of `fs_bytes` may honestly be reported as: its own
/// metadata (journal, inode tables) comes off the size `df` shows, up to a tenth.
fn overhead(fs_bytes: u64) -> u64 {
    fs_bytes + fs_bytes / 9 + ROUNDING
}

/// `bytes` is honest when it lies between what is usable (`low`, less 1 %
/// and rounding) and what exists (`high`, plus rounding).
fn judge(bytes: u64, low: u64, high: u64, what: &str) -> Result<String, String> {
    if bytes > high + ROUNDING {
        return Err(format!(
            "{} bytes more than {what} holds ({high} bytes){}",
            bytes - high,
            mib_hint(bytes, high)
        ));
    }
    let floor = low.saturating_sub(low / 100 + ROUNDING);
    if bytes < floor {
        return Err(format!(
            "{} bytes less than {what} holds ({low} bytes usable): report what was made, not what was asked for",
            low - bytes
        ));
    }
    Ok(format!("{what} holds {high} bytes"))
}

/// Names the common cause: a size computed in MiB, truncated.
fn mib_hint(bytes: u64, real: u64) -> String {
    const MIB: u64 = 1 << 20;
    if real % MIB == 0 && bytes / MIB == real / MIB {
        format!(
            " (the size was rounded down to whole MiB: {} MiB)",
            real / MIB
        )
    } else {
        String::new()
    }
}

pub(crate) const CAPACITY_ENFORCED: CheckSpec = CheckSpec {
    id: "volume.capacity-enforced",
    level: Level::Should,
    rule: "claimed by `capacity = \"enforced\"`: writing past the reported size fails (ENOSPC or EDQUOT), the data before it is intact and the volume still works",
    why: "A capacity that is not enforced is a promise one volume's job can break for every other volume on the node: it fills the host's disk. A plugin that claims enforcement (`capacity = \"enforced\"` in dhv-conform.toml) is held to it.",
    fix: "Back each volume with storage of its own size (a filesystem image on a loop device, an LVM volume, an XFS project quota), or do not claim enforcement.",
    varies: None,
    samples: &[],
    needs: Needs::OwnStorage,
    subject: None,
    run: scenario!(capacity_enforced),
};

/// Writing past the reported size fails, the data before it is intact, and the
/// volume still works.
async fn capacity_enforced(ctx: &Ctx) -> FindingResult {
    require_enforcement_claim(ctx)?;
    ctx.prereqs().require_create().await?;
    let req = ctx.request();
    let resp = ctx
        .steps()
        .create_ok(&req, "create a volume to fill")
        .await?;
    let (limit, past) = fill_sizes(&req, &resp)?;
    let dir = Path::new(&resp.path);
    let canary = crate::conformance::context::plant_in_volume(ctx, &resp.path, "before filling")?;
    let written = fill_past(ctx, &resp.path, past).await?;
    let refused = match written {
        Ok(()) => {
            return Err(Finding::Fail(format!(
                "expected writing {past} bytes into a volume reported as {limit} bytes to fail with ENOSPC or EDQUOT; \
                 it succeeded: the capacity is not enforced"
            )));
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) =>
        {
            e
        }
        Err(e) => {
            return Err(Finding::Fail(format!(
                "expected writing past the volume's size to fail with ENOSPC or EDQUOT; it failed with: {e}"
            )));
        }
    };
    still_works(ctx, dir, &canary).await?;
    ctx.steps()
        .delete_ok(&req, &resp.path, "delete the filled volume")
        .await?;
    Ok(Finding::Pass(format!(
        "{past} bytes into a volume of {limit}: refused ({refused}); the data before it intact, the volume usable"
    )))
}

/// The check applies to a plugin that claims `capacity = "enforced"` for
/// volumes that are not block devices.
fn require_enforcement_claim(ctx: &Ctx) -> Result<(), Finding> {
    let claims = ctx.claims();
    if !claims.capacity_enforced {
        return Err(Finding::Skip(
            "not claimed (capacity = \"enforced\")".into(),
        ));
    }
    if claims.attachment == Attachment::BlockDevice {
        return Err(Finding::Skip(format!(
            "a block device is its own size: see {}",
            BLOCK_DEVICE.id
        )));
    }
    Ok(())
}

/// The volume's size (as reported, else as asked for) and how much is
/// written to go past it; a skip when that is more than the check writes.
fn fill_sizes(req: &CreateRequest, resp: &CreateResponse) -> Result<(u64, u64), Finding> {
    let limit = match resp.bytes {
        b if b > 0 => b as u64,
        _ if req.capacity_max_bytes > 0 => req.capacity_max_bytes as u64,
        _ => req.capacity_min_bytes.max(0) as u64,
    };
    let past = limit + (limit / 10).max(1 << 20);
    if past > MAX_TESTED_BYTES {
        return Err(Finding::Skip(format!(
            "the volume's size ({limit} bytes) is over the {MAX_TESTED_BYTES} bytes this check writes at most"
        )));
    }
    Ok((limit, past))
}

/// Writes `past` bytes into a file of the volume at `path`, then removes
/// it: how the write ended, or the finding when the file could not be made
/// or removed.
async fn fill_past(ctx: &Ctx, path: &str, past: u64) -> Result<std::io::Result<()>, Finding> {
    let dir = Path::new(path);
    let host = ctx.shared_host();
    let written = ctx
        .dirs()
        .write_new_in(dir, ".dhv-conform-fill", move |fill| {
            Ok(host.fill(fill, past))
        })
        .await
        .map_err(|e| Finding::Fail(format!("expected a writable volume at {path:?}: {e}")))?;
    // The space must be free again before the volume is tried once more.
    ctx.dirs()
        .remove_file(&dir.join(".dhv-conform-fill"))
        .map_err(|e| Finding::Fail(format!("cannot remove the harness's fill file: {e}")))?;
    Ok(written)
}

/// After the refused write: the file written before it is intact and the
/// volume takes a new file.
async fn still_works(ctx: &Ctx, dir: &Path, canary: &Path) -> Result<(), Finding> {
    if !crate::conformance::context::canary_intact(ctx.host(), canary) {
        return Err(Finding::Fail(
            "writing past the volume's size was refused, but the file written before it is damaged"
                .into(),
        ));
    }
    let after = ctx
        .dirs()
        .write_new_in(dir, ".dhv-conform-after", |mut f| {
            std::io::Write::write_all(&mut f, b"still works\n")
        })
        .await;
    let _ = ctx.dirs().remove_file(&dir.join(".dhv-conform-after"));
    if let Err(e) = after {
        return Err(Finding::Fail(format!(
            "after the refused write was removed, the volume takes no new file: {e}"
        )));
    }
    Ok(())
}

pub(crate) const BLOCK_DEVICE: CheckSpec = CheckSpec {
    id: "volume.block-device",
    level: Level::Should,
    rule: "claimed by `attachment = \"block-device\"`: the path is a block device at least capacity min large, readable and writable, and the same device on create again",
    why: "A volume with `attachment_mode = \"block-device\"` is handed to the task as a device node. A path that is not a block device, a device smaller than asked for, or a different device after an agent restart loses the task's data or fails its mount.",
    fix: "Return the device node (`/dev/loopN`, `/dev/mapper/...`) of storage at least capacity min large, and return the same device when create is called again for the volume (look it up, do not attach a second one).",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: None,
    run: scenario!(block_device),
};

/// The path is a block device at least `capacity_min` large, readable and
/// writable, and the same device when create is called again.
async fn block_device(ctx: &Ctx) -> FindingResult {
    if ctx.claims().attachment != Attachment::BlockDevice {
        return Err(Finding::Skip(
            "not claimed (attachment = \"block-device\")".into(),
        ));
    }
    ctx.prereqs().require_create().await?;
    let req = ctx.request();
    let resp = ctx
        .steps()
        .create_ok(&req, "create a block-device volume")
        .await?;
    let path = Path::new(&resp.path);
    let facts = VolumeFacts::measure(ctx.host(), path)
        .map_err(|e| Finding::Fail(format!("cannot measure {:?}: {e}", resp.path)))?;
    let Kind::BlockDevice { size, rdev } = facts.kind else {
        return Err(Finding::Fail(format!(
            "expected a block device at `path` {:?}; it is {}",
            resp.path,
            facts.describe()
        )));
    };
    let min = req.capacity_min_bytes.max(0) as u64;
    if size < min {
        return Err(Finding::Fail(format!(
            "expected a device of at least capacity min {min} bytes; {:?} has {size}",
            resp.path
        )));
    }
    let io = device_io(ctx, path, size).map_err(|e| {
        Finding::Fail(format!(
            "expected {:?} to be readable and writable: {e}",
            resp.path
        ))
    })?;
    let again = ctx
        .steps()
        .create_ok(&req, "create the block-device volume again")
        .await?;
    let same = VolumeFacts::measure(ctx.host(), Path::new(&again.path))
        .ok()
        .and_then(|f| match f.kind {
            Kind::BlockDevice { rdev: r, .. } => Some(r),
            _ => None,
        });
    if again.path != resp.path || same != Some(rdev) {
        return Err(Finding::Fail(format!(
            "expected create again to return the same device; first {:?}, then {:?}",
            resp.path, again.path
        )));
    }
    ctx.steps()
        .delete_ok(&req, &resp.path, "delete the block-device volume")
        .await?;
    Ok(Finding::Pass(format!(
        "{size} bytes (at least {min}), {io}, the same device on create again"
    )))
}

/// Reads the device's first block; writes (and restores) its last block only
/// when the device is a loop device backed by a file of this run, since any
/// other device may hold data that is not ours.
fn device_io(ctx: &Ctx, path: &Path, size: u64) -> std::io::Result<String> {
    let host = ctx.host();
    let ours = host
        .loops_backed_under(ctx.dirs().run_root())
        .iter()
        .any(|l| host.canonical(path).is_ok_and(|p| p == l.device));
    host.device_round_trip(path, size, ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_rounded_down_to_mib_is_named() {
        let real = 47 << 20;
        let err = judge(50_000_000, real - 3_000_000, real, "the device").unwrap_err();
        assert!(err.contains("more than the device holds"), "{err}");
        assert!(err.contains("whole MiB: 47 MiB"), "{err}");
    }

    #[test]
    fn sector_rounding_and_filesystem_overhead_are_honest() {
        // A 50,000,000-byte image is a 49,999,872-byte loop device.
        assert!(judge(50_000_000, 44_000_000, 49_999_872, "the device").is_ok());
        // df's size of a tmpfs of 50 MB, reported as asked.
        assert!(judge(50_000_000, 50_003_968, overhead(50_003_968), "fs").is_ok());
    }

    #[test]
    fn reporting_the_request_instead_of_what_was_made_is_caught() {
        // Made 100 MB, reported the 50 MB asked for.
        let err = judge(50_000_000, 95_000_000, 100_000_000, "the device").unwrap_err();
        assert!(err.contains("less than the device holds"), "{err}");
    }
}
