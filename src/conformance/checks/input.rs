//! `input.*`: hostile volume names and capacities. The name and parameters come
//! from whoever may submit a volume spec: a plugin must treat them as data.

use crate::contract::Operation;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::input_surroundings::Surroundings;
use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Expect, Finding, Holds, canary_intact};
use crate::conformance::host::Host;
use crate::contract::DeleteRequest;

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
    super::input_space::VOLUMES_DIR_SPACE,
];

pub(crate) const NAME_TRAVERSAL: CheckSpec = CheckSpec {
    id: "input.name-traversal",
    level: Level::Must,
    rule: "volume names such as `../../escape` (climbing every level up to the filesystem root) and `a/b` create or remove nothing outside the volumes dir",
    why: "Volume names come from users. A plugin that builds paths from `DHV_VOLUME_NAME` lets `../../x` create or delete files anywhere on the node.",
    fix: "Build paths from `DHV_VOLUME_ID` (always a UUID), never from the name; if you must use the name, reject `/` and `..`.",
    varies: None,
    samples: &["name-as-path"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(name_traversal),
};

async fn name_traversal(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let area = TraversalArea::set_up(ctx)?;
    let mut notes = Vec::new();
    let mut deep_outcomes = BTreeSet::new();
    for (n, name) in area.names().iter().enumerate() {
        let (outcome, cited) = area.try_name(ctx, name).await?;
        // The first three by name; the deeper ones (how many depends on
        // where the run's temp dir is) in one clause.
        match n < 3 {
            true => notes.push(format!("name {name:?}: {outcome}")),
            false => {
                deep_outcomes.insert(outcome);
            }
        }
        if !cited.is_empty() {
            notes.push(format!(
                "beside the volumes dir it added {}, as for every volume (not a traversal)",
                cited.join(", ")
            ));
        }
    }
    if !deep_outcomes.is_empty() {
        let outcomes: Vec<String> = deep_outcomes.into_iter().collect();
        notes.push(format!(
            "names climbing every level up to the root: {}",
            outcomes.join(" or ")
        ));
    }
    Ok(Finding::Pass(notes.join("; ")))
}

/// Where input.name-traversal tries its names: a volumes dir with canaries
/// around it, a tag for what a name may make above the check's dir, and the
/// dirs above it.
struct TraversalArea {
    volumes: PathBuf,
    around: Surroundings,
    /// `escape-` and the tag: the last part of every climbing name.
    escape: String,
    /// The check's dir's ancestors, where a climbing name can land.
    above: Vec<PathBuf>,
}

/// What lay outside the volumes dir before a name's create, after it, and
/// after its delete.
struct Outside {
    before: BTreeSet<String>,
    after_create: BTreeSet<String>,
    after_delete: BTreeSet<String>,
}

impl TraversalArea {
    fn set_up(ctx: &Ctx) -> Result<Self, Finding> {
        // The volumes dir sits two levels below the test area's top, so `../../`
        // lands inside the area where the change is seen.
        let volumes = ctx
            .dirs()
            .make_dirs(Path::new("area/volumes"))
            .map_err(super::unprepared)?;
        let around = Surroundings::plant(ctx)
            .map_err(|e| Finding::Skip(format!("cannot plant canaries: {e}")))?;
        let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let above: Vec<PathBuf> = ctx
            .dirs()
            .dir()
            .ancestors()
            .skip(1)
            .map(Path::to_path_buf)
            .collect();
        Ok(TraversalArea {
            volumes,
            around,
            escape: format!("escape-{tag}"),
            above,
        })
    }

    /// The names tried, in order. Every depth up to the root and one more (a
    /// prefix the plugin puts before the name can absorb one `..`): what
    /// lands above the check's dir is found by its tag in each dir on the
    /// way up.
    fn names(&self) -> Vec<String> {
        let escape = &self.escape;
        let levels = self.volumes.components().count();
        let deeper: Vec<String> = (3..=levels + 1)
            .map(|d| format!("{}{escape}", "../".repeat(d)))
            .collect();
        [
            format!("../../{escape}"),
            "a/b".to_string(),
            format!("../{escape}"),
        ]
        .into_iter()
        .chain(deeper)
        .collect()
    }

    /// A create and delete of a volume named `name`, which must change
    /// nothing outside the volumes dir. How it ended, and what it added
    /// beside the volumes dir as for every volume.
    async fn try_name(&self, ctx: &Ctx, name: &str) -> Result<(String, Vec<String>), Finding> {
        let mut req = ctx.request_in(&self.volumes);
        req.volume_name = name.to_string();
        let before = self.around.outside(ctx.host(), &self.volumes);
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
        let after_create = self.around.outside(ctx.host(), &self.volumes);
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
        let outside = Outside {
            before,
            after_create,
            after_delete: self.around.outside(ctx.host(), &self.volumes),
        };
        let cited = self.nothing_outside(ctx, name, &outside).await?;
        if let Some(deleted) = deleted {
            ctx.steps().need(deleted?, &step).await?;
        }
        let outcome = match &call.result {
            Ok(_) => "created and deleted inside the volumes dir".to_string(),
            Err(e) => refusal(&call, e),
        };
        Ok((outcome, cited))
    }

    /// `Ok` with what was added beside the volumes dir as for every volume,
    /// when the create and delete of `name` changed nothing else outside the
    /// volumes dir, kept the canaries, and made nothing above the check's dir.
    async fn nothing_outside(
        &self,
        ctx: &Ctx,
        name: &str,
        outside: &Outside,
    ) -> Result<Vec<String>, Finding> {
        // What the plugin adds beside the volumes dir for every volume (a
        // metadata dir) is no traversal: delete.no-residue's to report.
        let added = ctx
            .prereqs()
            .leftovers(
                outside
                    .after_create
                    .difference(&outside.before)
                    .map(|e| beside_volumes(e).unwrap_or_else(|| e.clone())),
            )
            .await;
        let (added, cited) = (added.own, added.cited);
        let removed: Vec<_> = outside
            .before
            .difference(&outside.after_delete)
            .cloned()
            .collect();
        if !added.is_empty()
            || !removed.is_empty()
            || self
                .around
                .canaries
                .iter()
                .any(|c| !canary_intact(ctx.host(), c))
        {
            return Err(Finding::Fail(format!(
                "with volume name {name:?}: expected nothing to change outside the volumes dir; \
                 created: [{}], removed: [{}] — the plugin uses the name as a path; use DHV_VOLUME_ID",
                added.join(", "),
                removed.join(", ")
            )));
        }
        let landed = tagged_in(ctx.host(), &self.above, &self.escape);
        if !landed.is_empty() {
            return Err(Finding::Fail(format!(
                "with volume name {name:?}: expected nothing to be made outside the volumes dir; \
                 found {} — the plugin uses the name as a path; use DHV_VOLUME_ID",
                landed
                    .iter()
                    .map(|p| format!("{:?}", p.display().to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(cited)
    }
}

/// Entries of `dirs` (not below them) whose name holds `tag`.
fn tagged_in(host: &dyn Host, dirs: &[PathBuf], tag: &str) -> Vec<PathBuf> {
    dirs.iter()
        .filter_map(|d| Some((d, host.dir_names(d, usize::MAX).ok()?)))
        .flat_map(|(d, names)| names.into_iter().map(move |n| d.join(n)))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(tag))
        })
        .collect()
}

/// How a failed create of a hostile name ended, in words that say only what
/// happened: `refused` for a non-zero exit; an exit 0 whose answer Nomad
/// cannot decode is said as such (Nomad counts it as a failed create).
fn refusal<T>(call: &crate::plugin::PluginCall<T>, e: &crate::plugin::PluginError) -> String {
    match call.exited_zero() {
        true => format!("exited 0 with an answer Nomad cannot decode ({e})"),
        false => "refused".to_string(),
    }
}

pub(crate) const NAME_INJECTION: CheckSpec = CheckSpec {
    id: "input.name-injection",
    level: Level::Must,
    rule: "volume names holding shell syntax run no command; create succeeds or fails cleanly",
    why: "Volume names come from users; a plugin that passes them through eval or unquoted into a shell runs the user's commands as the Nomad agent (often root).",
    fix: "Quote every variable (`\"$DHV_VOLUME_NAME\"`) and never eval input.",
    varies: None,
    samples: &["eval-name"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(name_injection),
};

async fn name_injection(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let marker = |n: u8| ctx.dirs().dir().join(format!("injected-{n}"));
    let names = [
        format!("x$(touch {})", marker(1).display()),
        format!("x`touch {}`", marker(2).display()),
        format!("x; touch {}", marker(3).display()),
        format!("x' \"; touch {} #", marker(4).display()),
        // Out of every quoting context a shell plugin may put it in: single
        // quotes, double quotes, a command substitution inside either, a
        // line of its own.
        format!("x'; touch {}; '", marker(5).display()),
        format!("x\"; touch {}; \"", marker(6).display()),
        format!("x'$(touch {})'", marker(7).display()),
        format!("x\ntouch {}\n", marker(8).display()),
        format!("x'`touch {}`'", marker(9).display()),
        "two words\nand a newline".to_string(),
        "ünïcødé-名前-🚀".to_string(),
    ];
    let mut notes = Vec::new();
    for name in &names {
        let mut req = ctx.request();
        req.volume_name = name.clone();
        let judged = ctx
            .steps()
            .create_cleanly(&req, &format!("name {name:?}"), Holds::DELETES)
            .await;
        // A command that ran is the finding, whatever else the create did.
        if let Some(hit) = (1..=9).map(marker).find(|m| ctx.host().exists(m)) {
            return Err(Finding::Fail(format!(
                "with volume name {name:?}: expected no command to run; the marker {} appeared — the plugin \
                 evaluates the volume name as shell code (quote it: \"$DHV_VOLUME_NAME\", never eval it)",
                hit.display()
            )));
        }
        notes.push(judged?);
    }
    Ok(Finding::Pass(format!(
        "no command ran; {}",
        notes.join("; ")
    )))
}

pub(crate) const CAPACITY_EDGE: CheckSpec = CheckSpec {
    id: "input.capacity-edge",
    level: Level::Should,
    rule: "capacity 0/0, min > max, min = 2^63-1, min = max off a MiB boundary, a range below 16 MiB and min above the free space each succeed with bytes in range (on storage that can hold them: no loop device's sparse image past its filesystem's room), or fail cleanly; min alone (max 0: no maximum), below the default request's min, succeeds",
    why: "Capacities come from users: 0/0, min > max or 2^63-1 must not hang the plugin or leave half-made volumes, and a plugin that sizes volumes in whole units must still honour a range that is not one (or refuse it). A spec with `capacity_min` alone sends max 0, which means no maximum: a plugin that reads it as a limit refuses the most common capacity there is. A sparse image larger than the free space of its filesystem promises storage that is not there: the volume's writes fail (its ext4 turns read-only) once that filesystem fills, long before the capacity Nomad records.",
    fix: "Validate the capacity first and fail with `{\"error\": \"...\"}` before making anything, or succeed with `bytes` between min and max (when max > 0); a failure after something was made must undo it. Treat max 0 as no maximum. An image on a loop device must fit where it lies: test the free space before making it, or allocate it whole (`fallocate -l`).",
    varies: None,
    samples: &[],
    needs: Needs::OwnStorage,
    subject: Some(Operation::Create),
    run: scenario!(capacity_edge),
};

/// A MiB, the unit plugins that size images round to.
const MIB: i64 = 1 << 20;

async fn capacity_edge(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    // Twice the free space of the volumes dir's filesystem, and a GiB more:
    // no plugin can provide it there, so it must refuse it (or not use
    // capacity at all) and leave nothing behind.
    let free = ctx
        .host()
        .space(ctx.dirs().volumes())
        .map(|s| s.available as i64)
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
    let probe = ctx.prereqs().create_probe().await;
    let default_in_range = match &probe.call.result {
        Ok(resp) => probe.request.admits_bytes(resp.bytes),
        Err(_) => true,
    };
    let holds = Holds {
        bytes_in_range: default_in_range,
        ..Holds::CAPACITY
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
