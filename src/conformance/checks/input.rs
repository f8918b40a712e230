//! `input.*`: hostile volume names and capacities. The name and parameters come
//! from whoever may submit a volume spec: a plugin must treat them as data.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{CheckResult, CheckSpec, Level, needs};
use crate::conformance::context::{
    Ctx, Expect, Finding, FreshVolume, Holds, Variant, VolumeAt, canary_intact, listing,
    plant_in_volume,
};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::plugin::PluginCall;

/// Canary files planted around (not in) the volumes dir, and what else is there.
struct Surroundings {
    root: PathBuf,
    canaries: Vec<PathBuf>,
}

impl Surroundings {
    /// The check's dir holds the volumes dir; canaries go beside it, in the
    /// check's dir, and in a sibling dir that a traversal would reach.
    fn plant(ctx: &Ctx) -> std::io::Result<Surroundings> {
        let sibling = ctx.dirs().make_dirs(Path::new("sibling"))?;
        let canaries = vec![
            ctx.dirs()
                .plant(ctx.dirs().dir(), "canary-beside-volumes")?,
            ctx.dirs().plant(&sibling, "canary-in-sibling")?,
        ];
        Ok(Surroundings {
            root: ctx.dirs().dir().to_path_buf(),
            canaries,
        })
    }

    /// Everything below the check's dir, outside the volumes dir.
    fn outside(&self, volumes: &Path) -> std::collections::BTreeSet<String> {
        let rel = volumes
            .strip_prefix(&self.root)
            .unwrap_or(volumes)
            .to_string_lossy()
            .into_owned();
        listing(&self.root)
            .into_iter()
            .filter(|p| p != &rel && !p.starts_with(&format!("{rel}/")))
            .collect()
    }
}

/// An entry of the test area's listing (relative to the check's dir) that lies
/// beside the volumes dir `area/volumes`, as [`around`](crate::conformance::context::around)
/// names it (`../x`); `None` elsewhere.
fn beside_volumes(entry: &str) -> Option<String> {
    entry
        .strip_prefix("area/")
        .filter(|rest| *rest != "volumes" && !rest.starts_with("volumes/"))
        .map(|rest| format!("../{rest}"))
}

/// The `input.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    NAME_TRAVERSAL,
    NAME_INJECTION,
    CAPACITY_EDGE,
    VOLUMES_DIR_SPACE,
];

pub(crate) const NAME_TRAVERSAL: CheckSpec = CheckSpec {
    id: "input.name-traversal",
    level: Level::Must,
    rule: "volume names such as `../../escape` and `a/b` create or remove nothing outside the volumes dir",
    why: "Volume names come from users. A plugin that builds paths from `DHV_VOLUME_NAME` lets `../../x` create or delete files anywhere on the node.",
    fix: "Build paths from `DHV_VOLUME_ID` (always a UUID), never from the name; if you must use the name, reject `/` and `..`.",
    samples: &["name-as-path"],
    run: scenario!(name_traversal),
};

async fn name_traversal(ctx: &Ctx) -> CheckResult {
    ctx.probes().require_create().await?;
    // The volumes dir sits two levels below the test area's top, so `../../`
    // lands inside the area where the change is seen.
    let volumes = ctx
        .dirs()
        .make_dirs(Path::new("area/volumes"))
        .map_err(|e| Finding::Skip(format!("cannot prepare the test area: {e}")))?;
    let around = Surroundings::plant(ctx)
        .map_err(|e| Finding::Skip(format!("cannot plant canaries: {e}")))?;
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let names = [
        format!("../../escape-{tag}"),
        "a/b".to_string(),
        format!("../escape-{tag}"),
    ];
    let mut notes = Vec::new();
    for name in &names {
        let mut req = ctx.request_in(&volumes);
        req.volume_name = name.clone();
        let before = around.outside(&volumes);
        // Either: refusing such a name is as good as treating it as data. A
        // create or delete that timed out is judged by its re-run alone.
        let call = ctx
            .steps()
            .create_unloaded(
                &req,
                Expect::Either,
                &format!("create with volume name {name:?}"),
            )
            .await?;
        let after_create = around.outside(&volumes);
        let step = format!("delete of volume {name:?}");
        let deleted = match &call.result {
            Ok(resp) => Some(
                ctx.steps()
                    .delete_unloaded(
                        &DeleteRequest::for_created(&req, &resp.path),
                        Expect::Success,
                        &step,
                    )
                    .await,
            ),
            Err(_) => None,
        };
        let after_delete = around.outside(&volumes);
        // What the plugin adds beside the volumes dir for every volume (a
        // metadata dir) is no traversal: delete.no-residue's to report.
        let added = ctx
            .probes()
            .leftovers(
                after_create
                    .difference(&before)
                    .map(|e| beside_volumes(e).unwrap_or_else(|| e.clone())),
            )
            .await;
        let (added, cited) = (added.own, added.cited);
        let removed: Vec<_> = before.difference(&after_delete).cloned().collect();
        if !added.is_empty()
            || !removed.is_empty()
            || around.canaries.iter().any(|c| !canary_intact(c))
        {
            return Err(Finding::Fail(format!(
                "with volume name {name:?}: expected nothing to change outside the volumes dir; \
                 created: [{}], removed: [{}] — the plugin uses the name as a path; use DHV_VOLUME_ID",
                added.join(", "),
                removed.join(", ")
            )));
        }
        if let Some(deleted) = deleted {
            ctx.steps().need(deleted?, &step).await?;
        }
        notes.push(match &call.result {
            Ok(_) => format!("name {name:?}: created and deleted inside the volumes dir"),
            Err(_) => format!("name {name:?}: refused"),
        });
        if !cited.is_empty() {
            notes.push(format!(
                "beside the volumes dir it added {}, as for every volume (not a traversal)",
                cited.join(", ")
            ));
        }
    }
    Ok(Finding::Pass(notes.join("; ")))
}

pub(crate) const NAME_INJECTION: CheckSpec = CheckSpec {
    id: "input.name-injection",
    level: Level::Must,
    rule: "volume names holding shell syntax run no command; create succeeds or fails cleanly",
    why: "Volume names come from users; a plugin that passes them through eval or unquoted into a shell runs the user's commands as the Nomad agent (often root).",
    fix: "Quote every variable (`\"$DHV_VOLUME_NAME\"`) and never eval input.",
    samples: &["eval-name"],
    run: scenario!(name_injection),
};

async fn name_injection(ctx: &Ctx) -> CheckResult {
    ctx.probes().require_create().await?;
    let marker = |n: u8| ctx.dirs().dir().join(format!("injected-{n}"));
    let names = [
        format!("x$(touch {})", marker(1).display()),
        format!("x`touch {}`", marker(2).display()),
        format!("x; touch {}", marker(3).display()),
        format!("x' \"; touch {} #", marker(4).display()),
        "two words\nand a newline".to_string(),
        "ünïcødé-名前-🚀".to_string(),
    ];
    let mut notes = Vec::new();
    for name in &names {
        let mut req = ctx.request();
        req.volume_name = name.clone();
        notes.push(
            ctx.steps()
                .create_cleanly(&req, &format!("name {name:?}"), Holds::DELETES)
                .await?,
        );
        if let Some(hit) = (1..=4).map(marker).find(|m| m.exists()) {
            return Err(Finding::Fail(format!(
                "with volume name {name:?}: expected no command to run; the marker {} appeared — the plugin \
                 evaluates the volume name as shell code (quote it: \"$DHV_VOLUME_NAME\", never eval it)",
                hit.display()
            )));
        }
    }
    Ok(Finding::Pass(format!(
        "no command ran; {}",
        notes.join("; ")
    )))
}

pub(crate) const CAPACITY_EDGE: CheckSpec = CheckSpec {
    id: "input.capacity-edge",
    level: Level::Should,
    rule: "capacity 0/0, min > max, min = 2^63-1, min = max off a MiB boundary, a range below 16 MiB and min above the free space each succeed with bytes in range, or fail cleanly; min alone (max 0: no maximum), below the default request's min, succeeds",
    why: "Capacities come from users: 0/0, min > max or 2^63-1 must not hang the plugin or leave half-made volumes, and a plugin that sizes volumes in whole units must still honour a range that is not one (or refuse it). A spec with `capacity_min` alone sends max 0, which means no maximum: a plugin that reads it as a limit refuses the most common capacity there is.",
    fix: "Validate the capacity first and fail with `{\"error\": \"...\"}` before making anything, or succeed with `bytes` between min and max (when max > 0); a failure after something was made must undo it. Treat max 0 as no maximum.",
    samples: &[],
    run: scenario!(capacity_edge),
};

/// A MiB, the unit plugins that size images round to.
const MIB: i64 = 1 << 20;

async fn capacity_edge(ctx: &Ctx) -> CheckResult {
    ctx.probes().require_create().await?;
    // Twice the free space of the volumes dir's filesystem, and a GiB more:
    // no plugin can provide it there, so it must refuse it (or not use
    // capacity at all) and leave nothing behind.
    let free = nix::sys::statvfs::statvfs(ctx.dirs().volumes())
        .map(|st| st.blocks_available() as i64 * st.fragment_size() as i64)
        .unwrap_or(0);
    let above_free = free.saturating_mul(2).saturating_add(1 << 30);
    let cases = [
        ("capacity 0/0", 0, 0),
        ("min > max", 20 * MIB, 10 * MIB),
        ("min = 2^63-1", i64::MAX, 0),
        (
            "min = max = 20.5 MiB",
            20 * MIB + MIB / 2,
            20 * MIB + MIB / 2,
        ),
        ("min 1 MiB, max 10 MiB", MIB, 10 * MIB),
        ("min 20 MiB + 1 byte alone", 20 * MIB + 1, 0),
        ("min above the free space", above_free, 0),
    ];
    // Max 0 is no maximum (a volume spec with `capacity_min` alone), and this
    // min is below the default request's, which the plugin met: a refusal
    // reads max 0 as a limit.
    let must_succeed = |label: &str| label == "min 20 MiB + 1 byte alone";
    // A plugin whose bytes miss the default request's range too is
    // create.bytes-in-range's finding: its bytes are not judged again here.
    let probe = ctx.probes().create_probe().await;
    let default_in_range = match &probe.call.result {
        Ok(resp) => probe.request.admits_bytes(resp.bytes),
        Err(_) => true,
    };
    let holds = match default_in_range {
        true => Holds::CAPACITY,
        false => Holds::NO_RESIDUE,
    };
    let mut notes = Vec::new();
    for (label, min, max) in cases {
        let mut req = ctx.request();
        req.capacity_min_bytes = min;
        req.capacity_max_bytes = max;
        let holds = match must_succeed(label) {
            true => holds.and_succeeds(),
            false => holds,
        };
        notes.push(ctx.steps().create_cleanly(&req, label, holds).await?);
    }
    if !default_in_range {
        notes.push(format!(
            "bytes not judged (the default request's are outside its range too: {})",
            super::create::BYTES_IN_RANGE.id
        ));
    }
    Ok(Finding::Pass(notes.join("; ")))
}

pub(crate) const VOLUMES_DIR_SPACE: CheckSpec = CheckSpec {
    id: "input.volumes-dir-space",
    level: Level::Must,
    rule: "in a volumes dir whose path holds a space (`.../host volumes`), create and delete work, the new volume is as one made in the default volumes dir (its mode, what it holds, bytes in range), delete leaves nothing of it (beyond what it leaves in the default dir), and nothing outside the dir changes",
    why: "The volumes dir is the operator's `host_volumes_dir` (or under the agent's `data_dir`), and a path with a space is a valid one. A plugin that leaves a path unquoted splits it in two: it makes or removes `.../host` and `volumes` in its working directory, not the volume.",
    fix: "Quote every expansion of a path in sh (`\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"`, `rm -rf -- \"$path\"`), and pass paths as single arguments in other languages (no shell strings).",
    samples: &[],
    run: scenario!(volumes_dir_space),
};

/// Creates and deletes in `check/space/host volumes`, run from a working dir
/// of the check's own (where the second word of the split path lands): both
/// must work, the new volume must be as the run's first (in the default
/// volumes dir) was, and nothing outside the volumes dir may change. Nothing
/// is named `check/space/host`, the split path's first word: a command given
/// the split path then fails (`df`, `stat` of a missing file) instead of
/// reading a neighbour, and what it makes there shows as made outside.
async fn volumes_dir_space(ctx: &Ctx) -> CheckResult {
    ctx.probes().require_create().await?;
    let prepare = |e: std::io::Error| Finding::Skip(format!("cannot prepare the test area: {e}"));
    let volumes = ctx
        .dirs()
        .make_dirs(Path::new("space/host volumes"))
        .map_err(prepare)?;
    let cwd = ctx.dirs().make_dirs(Path::new("cwd")).map_err(prepare)?;
    let there = ctx.variant(|o| o.cwd = Some(cwd.clone()));
    let around = Surroundings {
        root: ctx.dirs().dir().to_path_buf(),
        canaries: Vec::new(),
    };
    // What the plugin writes into its working dir under any name but the
    // split path's second word is process.cwd-independent's finding.
    let before = space_outside(&around, &volumes);
    let req = ctx.request_in(&volumes);
    let created = {
        let step = "create in a volumes dir whose path holds a space";
        not_hung(
            there.create_unloaded(&req, Expect::Either, step).await,
            step,
        )?
    };
    outside_unchanged(ctx, &around, &volumes, &before, "create").await?;
    let resp = match created.result {
        Ok(resp) => resp,
        Err(e) => {
            // Failing everywhere is create.succeeds's finding.
            if let Some(needs) = ctx.probes().failed_prerequisite(Operation::Create).await {
                return Err(Finding::Skip(needs));
            }
            return Err(Finding::Warn(format!(
                "expected create to work in a volumes dir whose path holds a space ({volumes:?}); \
                 it failed: {e} (it works in the default volumes dir: quote every path)"
            )));
        }
    };
    let volume = VolumeAt::before_delete(&resp.path);
    if !volume.is_block() && !Path::new(&resp.path).is_dir() {
        return Err(Finding::Warn(format!(
            "expected create in a volumes dir whose path holds a space to make its volume; \
             it answered path {:?}, which is not a directory",
            resp.path
        )));
    }
    as_in_the_default_dir(ctx, &req, &resp).await?;
    let canary = match volume.is_block() {
        true => None,
        false => Some(plant_in_volume(
            ctx,
            &resp.path,
            "create in a volumes dir whose path holds a space",
        )?),
    };
    // Create again (an agent restart): the same path, and the file kept.
    let again = {
        let step = "create again in a volumes dir whose path holds a space";
        not_hung(
            there.create_unloaded(&req, Expect::Either, step).await,
            step,
        )?
    };
    outside_unchanged(ctx, &around, &volumes, &before, "create again").await?;
    let lost = canary.as_ref().is_some_and(|c| !canary_intact(c));
    // A create again that misbehaves in the default volumes dir too is
    // create.idempotent's finding.
    let probe = ctx.probes().again_probe().await;
    let moves_there_too = match (&probe.first.result, probe.again.as_ref().map(|a| &a.result)) {
        (Ok(first), Some(Ok(again))) => first.path != again.path,
        _ => false,
    };
    if again.result.is_err() || moves_there_too {
        if let Some(needs) = ctx.probes().create_again_fails().await {
            return Err(Finding::Skip(needs));
        }
    }
    if moves_there_too && again.result.as_ref().is_ok_and(|r| r.path != resp.path) {
        return Err(Finding::Skip(needs(&super::create::IDEMPOTENT)));
    }
    match &again.result {
        Err(e) => {
            if let Some(needs) = ctx.probes().failed_prerequisite(Operation::Create).await {
                return Err(Finding::Skip(needs));
            }
            return Err(Finding::Warn(format!(
                "expected create again to work in a volumes dir whose path holds a space \
                 ({volumes:?}), as it does in the default one; it failed: {e}"
            )));
        }
        Ok(r) if r.path != resp.path || lost => {
            return Err(Finding::Warn(format!(
                "expected create again in a volumes dir whose path holds a space to return the \
                 same volume with its files, as it does in the default one; it answered {:?} \
                 (first {:?}){}",
                r.path,
                resp.path,
                if lost {
                    ", and the file written into the volume is gone"
                } else {
                    ""
                }
            )));
        }
        Ok(_) => {}
    }
    let delete = DeleteRequest::for_created(&req, &resp.path);
    let deleted = {
        let step = "delete in a volumes dir whose path holds a space";
        not_hung(
            there.delete_unloaded(&delete, Expect::Either, step).await,
            step,
        )?
    };
    outside_unchanged(ctx, &around, &volumes, &before, "delete").await?;
    if let Err(e) = deleted.result {
        // Failing everywhere is delete.succeeds's finding.
        if let Some(needs) = ctx.probes().failed_prerequisite(Operation::Delete).await {
            return Err(Finding::Skip(needs));
        }
        return Err(Finding::Warn(format!(
            "expected delete to work in a volumes dir whose path holds a space ({volumes:?}); \
             it failed: {e}"
        )));
    }
    if !volume.gone().await {
        return Err(Finding::Warn(format!(
            "expected delete in a volumes dir whose path holds a space to remove the volume; {}",
            volume.still_there()
        )));
    }
    // The dir was made empty for this check: all in it now is the volume's.
    // What every delete leaves, here and in the default dir, is
    // delete.no-residue's finding.
    let left = ctx.probes().left_since(&volumes, &BTreeSet::new()).await;
    if !left.own.is_empty() {
        return Err(Finding::Warn(format!(
            "expected delete in a volumes dir whose path holds a space to leave nothing of the \
             volume, as it does in the default volumes dir; it left {}{} (a removal given the \
             path unquoted removes `.../host` and a name in its working directory instead)",
            left.own.join(", "),
            left.citation()
        )));
    }
    gone_dir_as_plain(ctx, &there).await?;
    Ok(Finding::Pass(format!(
        "created, created again and deleted in {:?}, nothing outside it changed",
        volumes.file_name().unwrap_or_default()
    )))
}

/// `Ok` when a delete of a volume in a volumes dir with a space that does not
/// exist ends as one in a missing dir without a space does (Nomad sends a
/// delete for a volume whose dir is gone after a reboot on tmpfs, say). How
/// the plain one ends is delete.never-created's finding.
async fn gone_dir_as_plain(ctx: &Ctx, there: &Variant<'_>) -> Result<(), Finding> {
    let delete_in = |dir: &str| {
        let req = ctx.request_in(&ctx.dirs().dir().join(dir));
        let path = Path::new(&req.volumes_dir).join(&req.volume_id);
        DeleteRequest::for_created(&req, &path.to_string_lossy())
    };
    let step = "delete of a never-created volume, no volumes dir (`space/gone-volumes`)";
    let plain = not_hung(
        there
            .delete_unloaded(&delete_in("space/gone-volumes"), Expect::Either, step)
            .await,
        step,
    )?;
    let step = "delete of a never-created volume, no volumes dir (`space/gone volumes`)";
    let spaced = not_hung(
        there
            .delete_unloaded(&delete_in("space/gone volumes"), Expect::Either, step)
            .await,
        step,
    )?;
    match (plain.result, spaced.result) {
        (Ok(()), Err(e)) => Err(Finding::Warn(format!(
            "{step}: expected exit 0, as without the space; got: {e}"
        ))),
        _ => Ok(()),
    }
}

/// `Ok` when the volume made in the volumes dir with a space is as the run's
/// first, made with the same request in the default volumes dir: the same
/// mode and entries right after create, and bytes in range if those were.
/// A plugin that splits a path can skip a step (a `chmod`, a clean-up of the
/// new filesystem) or measure a neighbour instead of its image.
async fn as_in_the_default_dir(
    ctx: &Ctx,
    req: &CreateRequest,
    resp: &CreateResponse,
) -> Result<(), Finding> {
    let probe = ctx.probes().create_probe().await;
    let Ok(first) = &probe.call.result else {
        return Ok(());
    };
    if probe.request.admits_bytes(first.bytes) && !req.admits_bytes(resp.bytes) {
        return Err(Finding::Warn(format!(
            "expected create in a volumes dir whose path holds a space to report bytes within \
             the capacity asked for, as it does in the default volumes dir ({}); it reported {}",
            first.bytes, resp.bytes
        )));
    }
    let (Some(default), Some(here)) = (&probe.fresh, FreshVolume::at(Path::new(&resp.path))) else {
        return Ok(());
    };
    if *default != here {
        return Err(Finding::Warn(format!(
            "expected the new volume in a volumes dir whose path holds a space to be as one made \
             in the default volumes dir ({}); it is {}",
            default.describe(),
            here.describe()
        )));
    }
    Ok(())
}

/// What lies outside the volumes dir of input.volumes-dir-space that the
/// check judges: what the plugin writes into its working dir under any name
/// but the split path's second word (`volumes`) is process.cwd-independent's.
fn space_outside(around: &Surroundings, volumes: &Path) -> BTreeSet<String> {
    around
        .outside(volumes)
        .into_iter()
        .filter(|e| !e.starts_with("cwd/") || e == "cwd/volumes" || e.starts_with("cwd/volumes/"))
        .collect()
}

/// `Ok` when nothing outside the volumes dir changed since `before` but what
/// every volume adds beside the volumes dir (delete.no-residue's finding,
/// cited); else the finding.
async fn outside_unchanged(
    ctx: &Ctx,
    around: &Surroundings,
    volumes: &Path,
    before: &BTreeSet<String>,
    what: &str,
) -> Result<(), Finding> {
    let now = space_outside(around, volumes);
    // `space/x` lies beside the volumes dir `space/host volumes`: `../x` to it.
    let beside = |e: &String| match e.strip_prefix("space/") {
        Some(rest) if !rest.starts_with("host volumes") => format!("../{rest}"),
        _ => e.clone(),
    };
    let added = ctx
        .probes()
        .leftovers(now.difference(before).map(beside))
        .await
        .own;
    let removed: Vec<_> = before.difference(&now).cloned().collect();
    if added.is_empty() && removed.is_empty() {
        return Ok(());
    }
    Err(Finding::Fail(format!(
        "{what} in the volumes dir {volumes:?}: expected nothing to change outside it; created: [{}], \
         removed: [{}] (relative to the check's dir, `..` to the volumes dir; the plugin ran in `cwd`) \
         — an unquoted path is split at the space",
        added.join(", "),
        removed.join(", "),
    )))
}

/// The call made again alone, unless it overran its limit again: the same
/// call works in the default volumes dir (the check needs it to), so hanging
/// here is the space's doing.
fn not_hung<T>(call: PluginCall<T>, step: &str) -> Result<PluginCall<T>, Finding> {
    match call.timed_out() {
        true => Err(Finding::Warn(format!(
            "{step}: expected it to finish, as it does in the default volumes dir; it overran its \
             time limit, and again alone (an unquoted path split at the space can loop or wait \
             forever)"
        ))),
        false => Ok(call),
    }
}
