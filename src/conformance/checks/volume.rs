//! `volume.*`: what the volume really is. The protocol checks see what a plugin
//! prints; these measure what it made (sizes, device, filesystem, mode, owner)
//! and hold it to the plugin's answer and to the claims of its config.

use std::collections::BTreeMap;
use std::path::Path;

use super::CheckResult;
use crate::conformance::claims::{Attachment, Effect, ParameterClaim};
use crate::conformance::context::{Ctx, Finding};
use crate::conformance::volume_facts::{Kind, VolumeFacts};
use crate::contract::CreateRequest;

/// Sector and page rounding: a device or filesystem a few KiB off the
/// reported size is the same size.
const ROUNDING: u64 = 4096;

/// The most a capacity check writes (or allocates) past a volume's size.
const MAX_TESTED_BYTES: u64 = 4 << 30;

/// The default volume's request and reported bytes, measured: or the skip
/// naming the check that owns why there is nothing to measure.
async fn measured_probe(ctx: &Ctx) -> Result<(CreateRequest, i64, VolumeFacts), Finding> {
    let probe = ctx.create_probe().await;
    ctx.cite(probe.call.run.as_ref());
    let resp = match &probe.call.result {
        Ok(resp) => resp,
        Err(_) if !probe.call.exited_zero() => {
            return Err(Finding::Skip("needs create.succeeds".into()));
        }
        Err(_) => return Err(Finding::Skip("needs create.response".into())),
    };
    if !probe.path_existed || !Path::new(&resp.path).is_absolute() {
        return Err(Finding::Skip("needs create.path-exists".into()));
    }
    let facts = VolumeFacts::measure(Path::new(&resp.path)).map_err(|e| {
        Finding::Skip(format!(
            "needs create.path-exists (measuring {:?} failed: {e})",
            resp.path
        ))
    })?;
    Ok((probe.request.clone(), resp.bytes, facts))
}

/// `volume.bytes-true` (should): the reported `bytes` is what the volume has.
pub async fn bytes_true(ctx: &Ctx) -> CheckResult {
    let (req, bytes, facts) = measured_probe(ctx).await?;
    let claims = &ctx.shared.settings.claims;
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
            "reports {bytes} bytes for {what}: outside the range asked for, see create.bytes-in-range"
        )));
    }
    let verdict = match &facts.kind {
        Kind::BlockDevice { size, .. } => judge(bytes, *size, *size, "the device"),
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
        Kind::Directory { .. } if claims.capacity_enforced => Ok(
            "nothing visible limits the directory; the claimed enforcement is volume.capacity-enforced's to verify"
                .to_owned(),
        ),
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

/// `volume.capacity-enforced` (claim `capacity = "enforced"`): writing past the
/// reported size fails, the data before it is intact, and the volume still works.
pub async fn capacity_enforced(ctx: &Ctx) -> CheckResult {
    let claims = &ctx.shared.settings.claims;
    if !claims.capacity_enforced {
        return Err(Finding::Skip(
            "not claimed (capacity = \"enforced\")".into(),
        ));
    }
    if claims.attachment == Attachment::BlockDevice {
        return Err(Finding::Skip(
            "a block device is its own size: see volume.block-device".into(),
        ));
    }
    ctx.require_create().await?;
    let req = ctx.request();
    let resp = ctx.create_ok(&req, "create a volume to fill").await?;
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
    let dir = Path::new(&resp.path);
    let canary = crate::conformance::context::plant_in_volume(ctx, &resp.path, "before filling")?;
    let fill = ctx.create_new_in(dir, ".dhv-conform-fill").map_err(|e| {
        Finding::Fail(format!(
            "expected a writable volume at {:?}: {e}",
            resp.path
        ))
    })?;
    let written = tokio::task::spawn_blocking(move || fill_to(fill, past))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
    // The space must be free again before the volume is tried once more.
    ctx.remove_file(&dir.join(".dhv-conform-fill"))
        .map_err(|e| Finding::Fail(format!("cannot remove the harness's fill file: {e}")))?;
    let refused = match written {
        Ok(()) => {
            return Err(Finding::Fail(format!(
                "expected writing {past} bytes into a volume reported as {limit} bytes to fail with ENOSPC or EDQUOT; \
                 it succeeded: the capacity is not enforced"
            )));
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) => e,
        Err(e) => {
            return Err(Finding::Fail(format!(
                "expected writing past the volume's size to fail with ENOSPC or EDQUOT; it failed with: {e}"
            )));
        }
    };
    if !crate::conformance::context::canary_intact(&canary) {
        return Err(Finding::Fail(
            "writing past the volume's size was refused, but the file written before it is damaged"
                .into(),
        ));
    }
    let after = ctx
        .create_new_in(dir, ".dhv-conform-after")
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"still works\n"));
    let _ = ctx.remove_file(&dir.join(".dhv-conform-after"));
    if let Err(e) = after {
        return Err(Finding::Fail(format!(
            "after the refused write was removed, the volume takes no new file: {e}"
        )));
    }
    ctx.delete_ok(&req, &resp.path, "delete the filled volume")
        .await?;
    Ok(Finding::Pass(format!(
        "{past} bytes into a volume of {limit}: refused ({refused}); the data before it intact, the volume usable"
    )))
}

/// Allocates `bytes` in `file` (`fallocate`, so nothing is written), or
/// writes them in 1 MiB blocks where the filesystem cannot allocate.
fn fill_to(file: std::fs::File, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is open for the call.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, bytes as libc::off_t) };
    if rc == 0 {
        return file.sync_all();
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
        return Err(err);
    }
    let block = vec![0xa5u8; 1 << 20];
    let mut file = file;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        std::io::Write::write_all(&mut file, &block[..n])?;
        left -= n as u64;
    }
    file.sync_all()
}

/// `volume.parameters` (claim: what each parameter sets): each declared effect
/// holds on the volume created with it. Without a claim, a request whose
/// parameters use Nomad's own names (`mode`, `uid`, `gid`, as the built-in
/// `mkdir` reads them) is held to them on the default volume.
pub async fn parameters(ctx: &Ctx) -> CheckResult {
    let claims = ctx.shared.settings.claims.clone();
    let requested = requested(ctx.shared.settings.template.parameters.as_ref());
    if claims.parameters.is_empty() && claims.filesystem.is_none() && requested.is_empty() {
        return Err(Finding::Skip(
            "not claimed (no [claims.parameters] or filesystem in dhv-conform.toml)".into(),
        ));
    }
    let mut held = Vec::new();
    if let Some(fs) = &claims.filesystem {
        let (_, _, facts) = measured_probe(ctx).await?;
        check_fs(&facts, fs, "the default volume").map_err(Finding::Fail)?;
        held.push(format!("filesystem {fs}"));
    }
    let asks_mode = requested.iter().any(|(_, e, _)| *e == Effect::Mode);
    if claims.implicit && !asks_mode {
        // Nomad's mkdir: 0700 when no mode is asked for.
        let (_, _, facts) = measured_probe(ctx).await?;
        if facts.mode != 0o700 {
            return Err(Finding::Fail(format!(
                "expected the default volume's mode to be 0700 (Nomad's default); it is {:04o}",
                facts.mode
            )));
        }
        held.push("default mode 0700".into());
    }
    if claims.parameters.is_empty() && !requested.is_empty() {
        let (_, _, facts) = measured_probe(ctx).await?;
        for (key, effect, value) in &requested {
            effect_holds(&facts, *effect, value).map_err(|got| {
                Finding::Fail(format!(
                    "expected the request's {key} = {value:?} (Nomad's name for it) to set the volume's {}; \
                     the default volume is {}: {got}",
                    effect.as_str(),
                    facts.describe()
                ))
            })?;
            held.push(format!("the request's {key} = {value:?} holds"));
        }
    }
    for claim in &claims.parameters {
        for value in &claim.values {
            held.push(one_parameter(ctx, claim, value).await?);
        }
    }
    Ok(Finding::Pass(held.join("; ")))
}

/// The request's parameters that carry Nomad's own names and a value of the
/// form Nomad's `mkdir` reads (an octal mode, a decimal id other than -1).
fn requested(params: Option<&crate::contract::Parameters>) -> Vec<(String, Effect, String)> {
    let Some(params) = params else {
        return Vec::new();
    };
    [
        ("mode", Effect::Mode),
        ("uid", Effect::Uid),
        ("gid", Effect::Gid),
    ]
    .into_iter()
    .filter_map(|(key, effect)| {
        let value = params.get(key)?;
        let fits = match effect {
            Effect::Mode => u32::from_str_radix(value, 8).is_ok(),
            _ => value.parse::<u32>().is_ok(),
        };
        fits.then(|| (key.to_owned(), effect, value.clone()))
    })
    .collect()
}

/// Whether `effect` with `value` holds on the measured volume; what it is instead.
fn effect_holds(facts: &VolumeFacts, effect: Effect, value: &str) -> Result<(), String> {
    match effect {
        Effect::Mode => match u32::from_str_radix(value.trim_start_matches("0o"), 8) {
            Ok(want) if facts.mode == want & 0o7777 => Ok(()),
            Ok(want) => Err(format!(
                "mode {:04o}, not {:04o}",
                facts.mode,
                want & 0o7777
            )),
            Err(_) => Err(format!("the claimed value {value:?} is not an octal mode")),
        },
        Effect::Uid => id_holds(facts.uid, value, "owner"),
        Effect::Gid => id_holds(facts.gid, value, "group"),
        Effect::FsType => check_fs(facts, value, "the volume"),
    }
}

/// Creates a volume with `claim.key = value`, measures it, deletes it.
async fn one_parameter(ctx: &Ctx, claim: &ParameterClaim, value: &str) -> Result<String, Finding> {
    ctx.require_create().await?;
    let mut req = ctx.request();
    let mut params: BTreeMap<String, String> = req
        .parameters
        .clone()
        .map(|p| p.into_iter().collect())
        .unwrap_or_default();
    params.insert(claim.key.clone(), value.to_owned());
    req.parameters = Some(params.into_iter().collect());
    let step = format!("create with {} = {value:?}", claim.key);
    let resp = ctx.create_ok(&req, &step).await?;
    let facts = VolumeFacts::measure(Path::new(&resp.path))
        .map_err(|e| Finding::Fail(format!("{step}: cannot measure {:?}: {e}", resp.path)))?;
    let holds = effect_holds(&facts, claim.effect, value);
    ctx.delete_ok(&req, &resp.path, &format!("delete after {step}"))
        .await?;
    holds
        .map(|()| {
            format!(
                "{} = {value:?} sets the {}",
                claim.key,
                claim.effect.as_str()
            )
        })
        .map_err(|got| {
            Finding::Fail(format!(
                "expected {} = {value:?} to set the volume's {}; {step} made {}: {got}",
                claim.key,
                claim.effect.as_str(),
                facts.describe()
            ))
        })
}

fn id_holds(have: u32, value: &str, what: &str) -> Result<(), String> {
    match value.parse::<u32>() {
        Ok(want) if want == have => Ok(()),
        Ok(want) => Err(format!("{what} {have}, not {want}")),
        Err(_) => Err(format!("the claimed value {value:?} is not a number")),
    }
}

fn check_fs(facts: &VolumeFacts, want: &str, which: &str) -> Result<(), String> {
    match &facts.kind {
        Kind::Mount { fs_type, .. } if fs_type == want => Ok(()),
        Kind::Mount { fs_type, .. } => Err(format!(
            "expected {which} to be a {want} filesystem; it is {fs_type}"
        )),
        _ => Err(format!(
            "expected {which} to be a {want} filesystem mounted at its path; it is {}",
            facts.describe()
        )),
    }
}

/// `volume.block-device` (claim `attachment = "block-device"`): the path is a
/// block device at least `capacity_min` large, readable and writable, and the
/// same device when create is called again.
pub async fn block_device(ctx: &Ctx) -> CheckResult {
    if ctx.shared.settings.claims.attachment != Attachment::BlockDevice {
        return Err(Finding::Skip(
            "not claimed (attachment = \"block-device\")".into(),
        ));
    }
    ctx.require_create().await?;
    let req = ctx.request();
    let resp = ctx.create_ok(&req, "create a block-device volume").await?;
    let path = Path::new(&resp.path);
    let facts = VolumeFacts::measure(path)
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
    let io = device_io(path, size, ctx.shared.root.as_path()).map_err(|e| {
        Finding::Fail(format!(
            "expected {:?} to be readable and writable: {e}",
            resp.path
        ))
    })?;
    let again = ctx
        .create_ok(&req, "create the block-device volume again")
        .await?;
    let same = VolumeFacts::measure(Path::new(&again.path))
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
    ctx.delete_ok(&req, &resp.path, "delete the block-device volume")
        .await?;
    Ok(Finding::Pass(format!(
        "{size} bytes (at least {min}), {io}, the same device on create again"
    )))
}

/// Reads the device's first block; writes (and restores) its last block only
/// when the device is a loop device backed by a file of this run, since any
/// other device may hold data that is not ours.
fn device_io(path: &Path, size: u64, root: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut block = vec![0u8; 4096.min(size as usize)];
    file.read_exact_at(&mut block, 0)?;
    let ours = crate::safe_fs::loops_backed_under(root)
        .iter()
        .any(|l| path.canonicalize().is_ok_and(|p| p == l.device));
    if !ours || size < 4096 {
        return Ok(
            "readable, opened for writing (not written: not backed by a file of this run)".into(),
        );
    }
    let at = size - 4096;
    let mut saved = vec![0u8; 4096];
    file.read_exact_at(&mut saved, at)?;
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 13) as u8).collect();
    file.write_all_at(&pattern, at)?;
    file.sync_data()?;
    let mut back = vec![0u8; 4096];
    file.read_exact_at(&mut back, at)?;
    file.write_all_at(&saved, at)?;
    file.sync_data()?;
    if back != pattern {
        return Err(std::io::Error::other("a block written read back different"));
    }
    Ok("readable and writable".into())
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
