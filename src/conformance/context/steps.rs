//! Scenario steps several checks share ([`Steps`], reached as
//! [`Ctx::steps`]): a call that must succeed ([`Steps::need`]), create a
//! volume to delete, create a volume that must then be deleted cleanly, plant
//! a canary in a volume; and the calls re-run alone after a timeout
//! ([`alone`](super::alone)). Each is made of [`Calls`]' own calls.

use std::path::{Path, PathBuf};

use std::collections::BTreeSet;
use std::sync::Arc;

use super::attempt::{Made, When};
use super::create_cleanly::CreateUnderTest;
use super::repeat::Answer;
use super::{Calls, Ctx, Expect, Finding, Prereqs, Residue, listing};
use crate::conformance::host::{Host, LoopDevice};
use crate::contract::{CreateRequest, CreateResponse};

/// Writes a canary into a volume, or fails the check saying the path is
/// unusable. A path that resolves outside the run's sandbox gets nothing
/// written: the check is skipped, saying so.
pub(crate) fn plant_in_volume(ctx: &Ctx, path: &str, step: &str) -> Result<PathBuf, Finding> {
    ctx.dirs().plant(Path::new(path), ".dhv-conform-canary").map_err(|e| {
        let outside = e
            .get_ref()
            .is_some_and(|inner| inner.is::<super::sandbox::OutsideSandbox>());
        if outside {
            Finding::Skip(format!("{step}: the volume's `path` {path:?}: {e}"))
        } else if e.kind() == std::io::ErrorKind::AlreadyExists {
            // A new volume holding the harness's own file name: made by the
            // plugin (a hard link to a file elsewhere would have been
            // written through). Nothing was written.
            Finding::Fail(format!(
                "{step}: expected a new volume at `path` {path:?} not to hold the harness's canary file; {e}"
            ))
        } else {
            Finding::Fail(format!(
                "{step}: expected a writable directory at `path` {path:?}; writing a file there failed: {e}"
            ))
        }
    })
}

/// What a volume is before its delete, to tell afterwards whether it is
/// gone: a path that must no longer exist, or a block device, whose node
/// persists (device nodes do) but must no longer back the volume.
#[derive(Debug, Clone)]
pub(crate) struct VolumeAt {
    /// Where it is looked at.
    host: Arc<dyn Host>,
    path: String,
    block: bool,
    /// For a loop device: the file it is attached to.
    backing: Option<PathBuf>,
}

impl VolumeAt {
    /// Takes note of the volume at `path` now (on the check's host), before
    /// its delete.
    pub fn before_delete(ctx: &Ctx, path: &str) -> VolumeAt {
        let p = Path::new(path);
        let host = &ctx.calls.shared.host;
        let root = ctx.dirs().run_root();
        let root = host.canonical(root).unwrap_or_else(|_| root.to_path_buf());
        VolumeAt {
            path: path.to_string(),
            block: host.is_block_device(p),
            // A loop device attached to a file of another harness run's by
            // now was let go before this delete, and its number taken by
            // that run: it backs no volume of this one, and waiting for
            // another run to let it go would blame the plugin for it.
            backing: host
                .loop_backing(p)
                .filter(|file| !of_another_run(file, &root)),
            host: host.clone(),
        }
    }

    /// Whether the volume is gone. A loop device is released by the kernel
    /// once its last opener (udev's probe, say) lets go, so its detach is
    /// waited for, within a bound.
    pub async fn gone(&self) -> bool {
        if !self.block {
            return !self.host.exists(Path::new(&self.path));
        }
        let Some(before) = &self.backing else {
            // Another kind of block device: its node stays; nothing more to tell.
            return true;
        };
        let deadline = std::time::Instant::now() + LOOP_RELEASE;
        loop {
            if self.host.loop_backing(Path::new(&self.path)).as_ref() != Some(before) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                // Told to go, and only held by an opener (the plugin's calls
                // are over: not one of its processes): the delete did its
                // part, the kernel clears it at the last close.
                return self.host.loop_detach_deferred(Path::new(&self.path));
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// What is still there when the volume is not gone, in words.
    pub fn still_there(&self) -> String {
        match &self.backing {
            Some(file) if self.block => format!(
                "block device {:?} still backs the volume: it is attached to {}",
                self.path,
                file.display()
            ),
            _ => format!("{:?} still exists", self.path),
        }
    }

    /// Whether the volume is a block device.
    pub fn is_block(&self) -> bool {
        self.block
    }

    /// The file behind it, for a loop device (when it was measured).
    pub fn backing(&self) -> Option<&PathBuf> {
        self.backing.as_ref()
    }
}

/// Whether `file` lies in another harness run's temp dir (a
/// `dhv-conform-*` dir that is not `our_root`, this run's).
fn of_another_run(file: &Path, our_root: &Path) -> bool {
    !file.starts_with(our_root)
        && file
            .ancestors()
            .filter_map(Path::file_name)
            .any(|name| name.to_string_lossy().starts_with("dhv-conform-"))
}

/// How long a loop device a delete detached may take to be released. A
/// `losetup -d` while any other process has the device open (another
/// `losetup -j` reads every attached device's status through its node) only
/// marks it, and the kernel clears it on the last close, from a work queue:
/// on a loaded host that can take seconds. Only a delete that really left the
/// device attached waits this long.
pub(crate) const LOOP_RELEASE: std::time::Duration = std::time::Duration::from_secs(10);

/// The devices of `devices` still attached to their files once each had
/// [`LOOP_RELEASE`] to be let go (the kernel clears a deferred detach from a
/// work queue, on a loaded host seconds after the last close).
pub(crate) async fn still_attached(host: &dyn Host, devices: &[LoopDevice]) -> Vec<LoopDevice> {
    let deadline = std::time::Instant::now() + LOOP_RELEASE;
    loop {
        let still: Vec<_> = devices
            .iter()
            .filter(|d| host.loop_attached(d))
            .cloned()
            .collect();
        if still.is_empty() {
            return still;
        }
        if std::time::Instant::now() >= deadline {
            // One told to go and only held by an opener is let go of (see
            // `VolumeAt::gone`).
            return still
                .into_iter()
                .filter(|d| !host.loop_detach_deferred(&d.device))
                .collect();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The mounts at or below `dir` (a volumes dir after its volumes were
/// deleted: each one a delete left behind), for the checks to name.
pub(crate) fn mounts_left(host: &dyn Host, dir: &Path) -> Vec<String> {
    host.mounts_under(dir)
        .unwrap_or_default()
        .iter()
        .map(|m| m.to_string())
        .collect()
}

/// The loop devices attached to files at or below `dir` (a check's dir after
/// its volumes were deleted: each one a delete left behind), for the checks
/// to name.
pub(crate) fn loops_left(host: &dyn Host, dir: &Path) -> Vec<String> {
    host.loops_backed_under(dir)
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// What [`Steps::create_cleanly`] holds a successful create to, besides a
/// delete that succeeds.
#[derive(Clone, Copy)]
pub(crate) struct Holds {
    /// Nothing of the volume is left in the volumes dir after its delete.
    pub no_residue: bool,
    /// The `bytes` it reports (when > 0) lie within the request's capacity
    /// range: for the checks whose subject is the capacity (for the default
    /// request that is `create.bytes-in-range`'s finding).
    pub bytes_in_range: bool,
    /// The create must succeed: a clean refusal is a warning, not a pass
    /// (for a request the plugin has no reason to refuse once it made the
    /// default volume).
    pub succeeds: bool,
    /// The storage behind the volume can hold it: not a loop device's
    /// sparse image on a filesystem with less room than the volume's size
    /// ([`VolumeFacts::is_overcommitted`]).
    pub backed: bool,
}

impl Holds {
    /// A delete that succeeds, and nothing more.
    pub const DELETES: Holds = Holds {
        no_residue: false,
        bytes_in_range: false,
        succeeds: false,
        backed: false,
    };
    /// And nothing of the volume left after its delete, its `bytes` within
    /// the capacity asked for, and storage behind it that can hold it.
    pub const CAPACITY: Holds = Holds {
        no_residue: true,
        bytes_in_range: true,
        succeeds: false,
        backed: true,
    };

    /// The same, and the create must succeed.
    pub const fn and_succeeds(self) -> Holds {
        Holds {
            succeeds: true,
            ..self
        }
    }
}

/// The steps a check composes of its calls ([`Ctx::steps`]).
#[derive(Clone, Copy)]
pub(crate) struct Steps<'a> {
    pub(super) calls: &'a Calls,
}

impl<'a> Steps<'a> {
    /// Creates, expecting success: the response, or the finding for this
    /// step (see [`need`](Self::need)).
    pub async fn create_ok(
        self,
        req: &CreateRequest,
        step: &str,
    ) -> Result<CreateResponse, Finding> {
        let call = self.calls.create(req, Expect::Success, step).await;
        self.need(call, step).await
    }

    /// Deletes, expecting success; `Err` is the finding for this step.
    pub async fn delete_ok(
        self,
        req: &CreateRequest,
        path: &str,
        step: &str,
    ) -> Result<(), Finding> {
        let call = self.calls.delete(req, path, Expect::Success, step).await;
        self.need(call, step).await
    }

    /// A call's value, or the finding its failure makes: a skip naming the
    /// prerequisite when that prerequisite itself did not pass, else this
    /// check's failure (unless it failed by chance in a bystander, see
    /// [`repeat`](super::repeat): the check then goes on from the call made
    /// again alone, found by the attempt of `made`).
    pub async fn need<T: Answer>(self, made: Made<T>, step: &str) -> Result<T, Finding> {
        let id = made.attempt().id;
        let call = made.into_call();
        let e = match call.result {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        if let Some(needs) = self.prereqs().failed_prerequisite(call.operation).await {
            return Err(Finding::Skip(needs));
        }
        match self.calls.raced::<T>(id, When::Needed).await {
            // It failed by chance: the check goes on from the call made
            // again alone.
            Some(value) => Ok(value),
            None => Err(Finding::Fail(format!(
                "{step}: expected {} to succeed; got: {e}",
                call.operation
            ))),
        }
    }

    /// The run's probes and prerequisites.
    pub(super) fn prereqs(self) -> Prereqs<'a> {
        self.calls.prereqs()
    }

    /// Creates one volume for a check that deletes it: its request and path.
    pub async fn one_volume(self, step: &str) -> Result<(CreateRequest, String), Finding> {
        self.prereqs().require_create().await?;
        let req = self.calls.request();
        let resp = self.create_ok(&req, step).await?;
        Ok((req, resp.path))
    }

    /// Creates `req`, which may succeed or fail (the rule of the checks that
    /// use it); a success must then be deleted (and hold to `holds`); a failure must be clean (nothing new in the volumes dir, no
    /// process left). A call that timed out is judged by its re-run alone
    /// (inconclusive when that times out too). Returns a note on what happened.
    pub async fn create_cleanly(
        self,
        req: &CreateRequest,
        label: &str,
        holds: Holds,
    ) -> Result<String, Finding> {
        let host = &*self.calls.shared.host;
        let before = listing(host, Path::new(&req.volumes_dir));
        // Either: these requests may be refused; how is judged below. A
        // create that timed out is judged by its re-run alone.
        let step = format!("create with {label}");
        let call = self.create_unloaded(req, Expect::Either, &step).await?;
        let create = CreateUnderTest {
            req,
            label,
            holds,
            before: &before,
        };
        match &call.result {
            Ok(resp) => self.created_then_deleted(create, resp).await,
            Err(e) => self.failed_create(create, &call, e).await,
        }
    }
}

impl Prereqs<'_> {
    /// What is in `dir` now and was not in `before`, split by cause (see
    /// [`leftovers`](Self::leftovers)).
    pub async fn left_since(&self, dir: &Path, before: &BTreeSet<String>) -> Residue {
        let new = listing(&*self.run.host, dir)
            .difference(before)
            .cloned()
            .collect::<Vec<_>>();
        self.leftovers(new).await
    }
}

#[cfg(test)]
mod tests {
    use super::of_another_run;
    use std::path::Path;

    /// A file in another run's temp dir is that run's; one in ours, or
    /// anywhere else (a plugin's own image dir), is not.
    #[test]
    fn a_file_of_another_run_is_told_from_ours() {
        let ours = Path::new("/tmp/dhv-test-a/dhv-conform-Um1UUh");
        let theirs = Path::new("/tmp/dhv-test-b/dhv-conform-eiyVbD/lifecycle.reboot/volumes/x.img");
        assert!(of_another_run(theirs, ours));
        assert!(!of_another_run(
            &ours.join("concurrency.delete/volumes/x.img"),
            ours
        ));
        assert!(!of_another_run(Path::new("/var/lib/plugin/x.img"), ours));
    }
}
