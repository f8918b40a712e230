//! What a reboot or a killed call leaves in the kernel. `lifecycle.reboot`: a
//! node reboot takes away every mount and loop device, then the Nomad client
//! calls create for every volume at start; a plugin must find its volumes
//! again, data and all, from what a reboot leaves: the files on disk.
//! `lifecycle.stale-loop`: a call killed between `losetup` and `mount` leaves
//! a loop device attached to the image; delete must not leave it behind.

use crate::contract::Operation;
use std::path::{Path, PathBuf};

use super::lifecycle_stale_loop::{attach_stale, loops_left_after_detach};
use super::{CheckSpec, FindingResult, Level, Needs, join_all};
use crate::conformance::context::{
    Ctx, Expect, Finding, VolumeAt, canary_bytes, canary_intact, plant_in_volume,
};

/// How many volumes the reboot takes down at once.
const VOLUMES: usize = 3;

/// What the simulated reboot took away.
pub(super) struct TakenAway {
    mounts: usize,
    loops: usize,
    /// The volume paths that were tmpfs mounts: their data goes by nature.
    tmpfs: Vec<String>,
}

/// How long a detached loop device may take to be cleared by the kernel (the
/// bound every check that waits for a detach uses).
use crate::conformance::context::LOOP_RELEASE as DETACH_BOUND;
use crate::conformance::host::Host;
use crate::contract::{CreateRequest, CreateResponse};
use crate::plugin::PluginCall;

/// Takes away what a reboot takes away below the check's sandbox: every
/// mount (deepest first), then every loop device backed by a file there.
/// Nothing is deleted and no process is killed.
pub(super) fn take_away(ctx: &Ctx, paths: &[String]) -> Result<TakenAway, Finding> {
    let dir = ctx.dirs().dir();
    let unmounted = ctx
        .host()
        .unmount_under(dir)
        .map_err(|e| Finding::Skip(format!("cannot list the mounts to take away: {e}")))?;
    if let Some((m, why)) = unmounted.failed.first() {
        return Err(Finding::Skip(format!(
            "inconclusive: the harness could not unmount {m}: {why}"
        )));
    }
    let tmpfs = unmounted
        .all()
        .filter(|m| m.fstype == "tmpfs")
        .filter(|m| paths.iter().any(|p| Path::new(p) == m.mount_point))
        .map(|m| m.mount_point.display().to_string())
        .collect();
    let loops = ctx.host().loops_backed_under(dir);
    for dev in &loops {
        // As a reboot: gone, not merely marked to go once let go.
        ctx.host().detach_loop(dev, DETACH_BOUND).map_err(|e| {
            Finding::Skip(format!(
                "inconclusive: the harness could not detach {dev}: {e}"
            ))
        })?;
    }
    Ok(TakenAway {
        mounts: unmounted.all().count(),
        loops: loops.len(),
        tmpfs,
    })
}

pub(crate) const REBOOT: CheckSpec = CheckSpec {
    id: "lifecycle.reboot",
    level: Level::Should,
    rule: "after creates that hold files, a reboot takes away every mount and loop device the plugin made (nothing is deleted); create again for every volume at once (client start) keeps paths and files (no name gone from a volume's root, its mode as it was), then each deletes cleanly",
    why: "A node reboot takes every mount and loop device away, and the Nomad client calls create for every volume when it starts. A plugin that formats again what it finds unmounted wipes every volume of the node; `lifecycle.restore` cannot see it, as the mounts are still up there. A volume that a tmpfs backs loses its files by nature: the finding says so rather than blaming the plugin.",
    fix: "In create, tell a volume that exists but is not mounted (its image or data is on disk) from one never made: mount it again (attaching its image anew), and format only an image that was never complete.",
    varies: None,
    samples: &["mkfs-on-reboot"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(reboot),
};

/// After creates that hold files, what a reboot takes away is taken away
/// (mounts, loop devices); create again for every volume at once gives the same
/// paths with their files, then each deletes cleanly.
async fn reboot(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    if let Some(needs) = ctx.prereqs().create_again_fails().await {
        return Err(Finding::Skip(needs));
    }
    let volumes = BeforeReboot::create(ctx).await?;
    let paths: Vec<String> = volumes.made.iter().map(|m| m.path.clone()).collect();
    let taken = take_away(ctx, &paths)?;
    // At client start: create for every volume, all at once.
    let again = join_all(volumes.made.iter().map(|m| async {
        ctx.calls()
            .create(
                &m.req,
                Expect::Success,
                "create after the reboot (client start)",
            )
            .await
            .into_call()
    }))
    .await;
    let mut found = volumes.found_again(ctx, &again, &taken);
    found
        .problems
        .extend(delete_after(ctx, &volumes.made, &again).await);
    found.verdict(&taken)
}

/// A volume created before the reboot, with the file planted in it.
struct Made {
    req: CreateRequest,
    path: String,
    canary: PathBuf,
}

impl Made {
    /// The volume's path after the reboot: the one create at client start
    /// answered, else the one before.
    fn path_now<'a>(&'a self, again: &'a PluginCall<CreateResponse>) -> &'a str {
        again
            .result
            .as_ref()
            .map_or(self.path.as_str(), |r| r.path.as_str())
    }
}

/// The volumes of lifecycle.reboot as they were before the reboot.
struct BeforeReboot {
    made: Vec<Made>,
    /// What each directory volume's root holds, and its mode, with the canary in.
    roots: Vec<Option<Root>>,
    /// A block-device volume is known by the image behind its loop device:
    /// after a reboot the same image may come back as another /dev/loopN.
    at: Vec<VolumeAt>,
}

/// What create at client start found: problems, and the volumes (`#n`)
/// whose files went by nature (a tmpfs, or `ephemeral = true`).
struct Found {
    problems: Vec<String>,
    by_nature: Vec<String>,
    ephemeral: bool,
}

impl BeforeReboot {
    /// Creates [`VOLUMES`] volumes, each holding a file.
    async fn create(ctx: &Ctx) -> Result<Self, Finding> {
        let mut made = Vec::new();
        for i in 0..VOLUMES {
            let req = ctx.request();
            let step = format!("create of volume #{} before the reboot", i + 1);
            let resp = ctx.steps().create_ok(&req, &step).await?;
            let canary = plant_in_volume(ctx, &resp.path, &step)?;
            made.push(Made {
                req,
                path: resp.path,
                canary,
            });
        }
        let roots = made
            .iter()
            .map(|m| Root::look(ctx.host(), Path::new(&m.path)))
            .collect();
        let at = made
            .iter()
            .map(|m| VolumeAt::before_delete(ctx, &m.path))
            .collect();
        Ok(BeforeReboot { made, roots, at })
    }

    /// Judges what each create at client start (`again`) found: the volume
    /// at its path (or its image behind a loop device), with its files and
    /// its root as it was.
    fn found_again(
        &self,
        ctx: &Ctx,
        again: &[PluginCall<CreateResponse>],
        taken: &TakenAway,
    ) -> Found {
        let mut found = Found {
            problems: Vec::new(),
            by_nature: Vec::new(),
            // `ephemeral = true` in the plugin's config: lost by design, as a tmpfs.
            ephemeral: ctx.claims().ephemeral,
        };
        for (i, (made, call)) in self.made.iter().zip(again).enumerate() {
            let (n, path, canary) = (i + 1, &made.path, &made.canary);
            let block = self.at[i].backing().filter(|_| self.at[i].is_block());
            let same_image = |new: &str| {
                block.is_some_and(|b| ctx.host().loop_backing(Path::new(new)).as_ref() == Some(b))
            };
            match &call.result {
                Err(e) => found
                    .problems
                    .push(format!("volume #{n}: create failed: {e}")),
                Ok(resp) if resp.path != *path && !same_image(&resp.path) => found.problems.push(
                    format!("volume #{n} moved from {path:?} to {:?}", resp.path),
                ),
                Ok(resp)
                    if block.is_some()
                        && ctx
                            .host()
                            .has_marker(Path::new(&resp.path), &canary_bytes(canary)) => {}
                Ok(_) if block.is_none() && canary_intact(ctx.host(), canary) => {
                    let now = Root::look(ctx.host(), Path::new(path));
                    if let Some(change) = self.roots[i]
                        .as_ref()
                        .zip(now.as_ref())
                        .and_then(|(b, a)| b.changed_to(a))
                    {
                        found
                            .problems
                            .push(format!("volume #{n}: create after the reboot {change}"));
                    }
                }
                Ok(_) if taken.tmpfs.contains(path) || found.ephemeral => {
                    found.by_nature.push(format!("#{n}"))
                }
                Ok(_) => found.problems.push(format!(
                    "volume #{n} lost its files (the file written before the reboot is gone)"
                )),
            }
        }
        found
    }
}

/// Deletes every volume at once after the reboot; the problems: a delete
/// that exited 0 and left its volume.
async fn delete_after(
    ctx: &Ctx,
    made: &[Made],
    again: &[PluginCall<CreateResponse>],
) -> Vec<String> {
    // Measured before the deletes: once a delete detached a loop device, a
    // neighbour's create may attach the same device to a file of its own, and
    // a device looked at only then would be that neighbour's volume.
    let before: Vec<VolumeAt> = made
        .iter()
        .zip(again)
        .map(|(m, call)| VolumeAt::before_delete(ctx, m.path_now(call)))
        .collect();
    let deletes = join_all(made.iter().zip(again).map(|(m, call)| {
        ctx.calls().delete(
            &m.req,
            m.path_now(call),
            Expect::Success,
            "delete after the reboot",
        )
    }))
    .await;
    let mut problems = Vec::new();
    for (((m, call), deleted), at) in made.iter().zip(again).zip(&deletes).zip(&before) {
        let now = m.path_now(call);
        if deleted.ok() && !at.gone().await {
            problems.push(format!("the delete after the reboot left {now:?}"));
        }
    }
    problems
}

impl Found {
    /// The verdict, after a reboot that took away `taken`.
    fn verdict(&self, taken: &TakenAway) -> FindingResult {
        let (problems, by_nature) = (&self.problems, &self.by_nature);
        // No counts: how many loop devices are still attached once the mounts
        // are gone depends on how soon the kernel let them go.
        let what = match (taken.mounts, taken.loops) {
            (0, 0) => "nothing (the plugin made no mount and no loop device)",
            _ => "the plugin's mounts and loop devices",
        };
        if !problems.is_empty() {
            return Err(Finding::Fail(format!(
                "expected create at client start, after a reboot took away {what}, to find every \
                 volume at its path with its files (Nomad calls create for every volume when the \
                 client starts); {}. Tell a volume that exists but is not mounted from one never \
                 made (its image or data is on disk): mount it again as it is, never format it again \
                 nor change what it holds",
                problems.join("; ")
            )));
        }
        let note = match by_nature.is_empty() {
            true => String::new(),
            false if self.ephemeral => format!(
                "; volume(s) {} lost their files, as the config's `ephemeral = true` says they do",
                by_nature.join(", ")
            ),
            false => format!(
                "; volume(s) {} are tmpfs mounts: their files go with a reboot by nature, not by \
                 the plugin's doing",
                by_nature.join(", ")
            ),
        };
        let kept = match by_nature.is_empty() {
            true => " with their files",
            false => "",
        };
        Ok(Finding::Pass(format!(
            "a reboot took away {what}; create at client start found {VOLUMES} volumes at their \
             paths{kept}, and each deleted cleanly{note}"
        )))
    }
}

/// A directory volume's root as a task sees it: its mode and the names it holds.
struct Root {
    mode: u32,
    names: Vec<std::ffi::OsString>,
}

impl Root {
    /// The root at `path`, never through a link (`None` for a block device,
    /// or what cannot be listed).
    fn look(host: &dyn Host, path: &Path) -> Option<Root> {
        if host.is_block_device(path) {
            return None;
        }
        let list = host.list_dir(path).ok()?;
        Some(Root {
            mode: list.mode,
            names: list.names,
        })
    }

    /// What the create after the reboot changed of the root, in words: the
    /// names it removed, and its mode. Names it added are not judged (a
    /// plugin that checks the filesystem on mount may get a `lost+found` back).
    fn changed_to(&self, now: &Root) -> Option<String> {
        let removed: Vec<String> = self
            .names
            .iter()
            .filter(|n| !now.names.contains(n))
            .map(|n| format!("{:?}", n.to_string_lossy()))
            .collect();
        let mut changes = Vec::new();
        if !removed.is_empty() {
            changes.push(format!("removed {} from its root", removed.join(", ")));
        }
        if self.mode != now.mode {
            changes.push(format!(
                "changed its root's mode from {:04o} to {:04o}",
                self.mode, now.mode
            ));
        }
        (!changes.is_empty()).then(|| changes.join(" and "))
    }
}

pub(crate) const STALE_LOOP: CheckSpec = CheckSpec {
    id: "lifecycle.stale-loop",
    level: Level::Should,
    rule: "when a loop device is attached to a volume's image besides the plugin's own (as a call killed between `losetup` and `mount` leaves one), delete succeeds and leaves no loop device on the image",
    why: "A create or delete killed part way (a timeout, an agent restart) can leave a loop device attached to the volume's image. A delete that detaches only the device it mounted leaves that one behind for good: it keeps the removed image's space in use, and a node has only a few loop devices.",
    fix: "In delete, after unmounting, detach every loop device attached to the image (`losetup -j IMAGE`, then `losetup -d` each), and wait until none is left before removing the image.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(stale_loop),
};

/// A volume whose image has a second loop device attached (as a killed call
/// leaves) is deleted with no device left on the image.
async fn stale_loop(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    ctx.prereqs().require_create().await?;
    let dir = ctx.dirs().dir().to_path_buf();
    // The devices a volume's image can be on: one of size 0 holds none.
    let before = ctx.host().sized_loops_backed_under(&dir);
    let (req, path) = ctx
        .steps()
        .one_volume("create of the volume a loop device is left on")
        .await?;
    let stale = attach_stale(ctx, &req, &path, &before).await?;
    let step = "delete with a stale loop device on the image";
    ctx.steps().delete_ok(&req, &path, step).await?;
    let left = loops_left_after_detach(ctx.host(), &dir, &before).await;
    if !left.is_empty() {
        // No device names: they are the kernel's choice, not the plugin's.
        let which = match left.iter().any(|d| d.device == stale.device) {
            true => "the device left attached before the delete",
            false => "a device it attached itself",
        };
        return Err(Finding::Fail(format!(
            "expected delete to leave no loop device on the volume's image; with a second device \
             attached to it beforehand (as a call killed between `losetup` and `mount` leaves), \
             it left {which} attached (the harness detached it)"
        )));
    }
    Ok(Finding::Pass(
        "with a second loop device left attached to the image, delete detached it too".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::Root;

    fn root(mode: u32, names: &[&str]) -> Root {
        Root {
            mode,
            names: names.iter().map(Into::into).collect(),
        }
    }

    #[test]
    fn a_root_change_names_what_went_and_the_mode_not_what_came() {
        let before = root(0o755, &[".dhv-conform-canary", "lost+found"]);
        assert_eq!(
            before.changed_to(&root(0o755, &[".dhv-conform-canary", "lost+found"])),
            None
        );
        // A fsck on mount may bring a lost+found back: not a change.
        let lean = root(0o700, &[".dhv-conform-canary"]);
        assert_eq!(
            lean.changed_to(&root(0o700, &[".dhv-conform-canary", "lost+found"])),
            None
        );
        assert_eq!(
            before
                .changed_to(&root(0o700, &[".dhv-conform-canary"]))
                .as_deref(),
            Some(
                "removed \"lost+found\" from its root and changed its root's mode from 0755 to 0700"
            )
        );
        assert_eq!(
            lean.changed_to(&root(0o2770, &[".dhv-conform-canary"]))
                .as_deref(),
            Some("changed its root's mode from 0700 to 2770")
        );
    }
}
