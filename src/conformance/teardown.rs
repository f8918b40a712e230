//! The run's lifecycle around its checks: the temp dir every sandbox lives
//! in, and the teardown that leaves nothing behind and destroys nothing that
//! is not ours (the signals that interrupt a run are [`super::interrupt`]'s).
//!
//! Every ending goes the same way, only the first step differs:
//! 1. on SIGINT, SIGTERM or SIGHUP: no check starts any more, and the run's
//!    supervisor is cancelled (every running plugin call is killed); then the
//!    plugin's delete is sent for every volume still alive ([`LiveVolumes`]),
//!    all at once, each with its own limit, the whole within
//!    [`TEARDOWN_DEADLINE`]. A second signal cuts the deletes short;
//! 2. every mount still below the temp dir is listed (a delete left it: the
//!    terminal and the report name it), then unmounted, deepest first
//!    ([`crate::safe_fs::unmount_under`]);
//! 3. the temp dir is removed without ever crossing into another mount
//!    ([`crate::safe_fs::remove_tree`]), and whether it is gone is told as
//!    it is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::context::LOOP_RELEASE;
use super::interrupt::Signals;
use super::live::{LiveVolumes, join_all};
use crate::contract::DeleteRequest;
use crate::plugin::{CallOptions, PluginSource, Timeouts};

/// How long the deletes of an interrupted run may take, all together.
pub const TEARDOWN_DEADLINE: Duration = Duration::from_secs(90);

/// What the teardown needs of the run it ends, handed in by the engine so the
/// teardown depends on none of the checks' machinery.
pub(crate) struct RunEnd<'a> {
    /// The volumes still alive.
    pub live: &'a LiveVolumes,
    /// The plugin to delete them with.
    pub target: &'a PluginSource,
    /// Its limits for those deletes.
    pub timeouts: Timeouts,
    /// The run's temp dir, held.
    pub root: &'a crate::safe_fs::HeldDir,
    /// The files the harness wrote that are not removed yet.
    pub planted: &'a super::context::Planted,
    /// The name of the run's owner file in its temp dir: a trial removal of
    /// what the run left ([`clear`]) spares it, as the run still owns the dir.
    pub owner_file: &'static str,
    /// What the deletes' processes run through: the run's host's transport.
    pub transport: std::sync::Arc<dyn crate::plugin::transport::Transport>,
}

/// What the teardown did, told as it is.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Teardown {
    /// The run's temp dir.
    pub temp_dir: PathBuf,
    /// It is gone.
    pub removed: bool,
    /// Deletes sent for volumes still alive (after an interrupt).
    pub deletes: usize,
    /// Of those, the ones that failed or were cut short.
    pub deletes_failed: usize,
    /// A second signal skipped (what was left of) the deletes.
    pub deletes_skipped: bool,
    /// Mounts found below the temp dir after the plugin's deletes: each one
    /// a delete left behind.
    pub mounts_found: Vec<String>,
    /// Mounts that are still there (could not be unmounted).
    pub mounts_left: Vec<String>,
    /// Loop devices attached to files below the temp dir after the plugin's
    /// deletes (and the unmounts): each one a delete left behind.
    pub loops_found: Vec<String>,
    /// Dirs the removal did not enter because they are mount points.
    pub kept: Vec<String>,
    /// `--keep`: the temp dir was left in place on request (mounts below it
    /// were still unmounted), so reproduce lines can be pasted as printed.
    pub kept_on_request: bool,
    /// What else could not be removed.
    pub errors: Vec<String>,
    /// Of `errors`, the loop devices still attached only because a process
    /// that is not the plugin's holds them (another `dhv-conform` run,
    /// another program, the harness), each named with its holders: no
    /// finding about the plugin.
    pub held_elsewhere: Vec<String>,
}

impl Teardown {
    /// What the report tells of it.
    pub fn outcome(&self) -> crate::report::SandboxOutcome {
        let mut kept = self.mounts_left.clone();
        kept.extend(
            self.kept
                .iter()
                .map(|k| format!("mount point {k} (not crossed)")),
        );
        kept.extend(self.errors.iter().cloned());
        if self.kept_on_request {
            kept.push(format!("{} (--keep)", self.temp_dir.display()));
        }
        crate::report::SandboxOutcome {
            removed: self.removed,
            mounts_left: self.mounts_found.clone(),
            loops_left: self.loops_found.clone(),
            kept,
        }
    }

    /// What the run's end left that no removal could take: mounts still
    /// there, mount points not crossed, what could not be removed. Empty for
    /// a temp dir kept on request (nothing was tried).
    pub fn left(&self) -> Vec<String> {
        if self.kept_on_request {
            return Vec::new();
        }
        let mut left = self.mounts_left.clone();
        left.extend(
            self.kept
                .iter()
                .map(|k| format!("mount point {k} (not crossed)")),
        );
        left.extend(self.errors.iter().cloned());
        left
    }

    /// This teardown, the last, after `cleared` ([`clear`]) let go of the
    /// run's volumes, mounts and loop devices: what each found is told once,
    /// in the order found.
    pub(crate) fn after(mut self, cleared: Teardown) -> Teardown {
        let once = |first: Vec<String>, then: Vec<String>| {
            let mut all = first;
            all.extend(
                then.into_iter()
                    .filter(|m| !all.contains(m))
                    .collect::<Vec<_>>(),
            );
            all
        };
        self.deletes += cleared.deletes;
        self.deletes_failed += cleared.deletes_failed;
        self.deletes_skipped |= cleared.deletes_skipped;
        self.mounts_found = once(cleared.mounts_found, std::mem::take(&mut self.mounts_found));
        self.loops_found = once(cleared.loops_found, std::mem::take(&mut self.loops_found));
        self
    }

    /// One line for the terminal: what was done and whether the temp dir is gone.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.deletes > 0 {
            parts.push(format!(
                "{} delete(s) sent for volumes still alive, {} failed",
                self.deletes, self.deletes_failed
            ));
        }
        if self.deletes_skipped {
            parts.push("deletes cut short by a second signal".to_string());
        }
        if !self.mounts_found.is_empty() {
            // A few on the terminal; the report lists them all.
            let shown: Vec<&str> = self
                .mounts_found
                .iter()
                .take(3)
                .map(String::as_str)
                .collect();
            let more = match self.mounts_found.len() - shown.len() {
                0 => String::new(),
                n => format!(" and {n} more (all in the report)"),
            };
            parts.push(format!(
                "{} mount(s) left by the plugin, unmounted by the harness: {}{more}",
                self.mounts_found.len(),
                shown.join(", ")
            ));
        }
        if !self.loops_found.is_empty() {
            parts.push(format!(
                "{} loop device(s) left attached by the plugin, detached by the harness: {}",
                self.loops_found.len(),
                self.loops_found.join(", ")
            ));
        }
        if self.removed {
            parts.push(format!("temp dir {} removed", self.temp_dir.display()));
        } else if self.kept_on_request {
            parts.push(format!(
                "temp dir {} kept (--keep); remove it when done",
                self.temp_dir.display()
            ));
        } else {
            let mut why = self.mounts_left.clone();
            why.extend(self.kept.iter().map(|k| format!("mount point {k}")));
            why.extend(self.errors.iter().take(3).cloned());
            parts.push(format!(
                "temp dir {} NOT removed (nothing was removed across a mount): {}",
                self.temp_dir.display(),
                why.join("; ")
            ));
        }
        parts.join("; ")
    }
}

/// Deletes every volume still alive, all at once: the probes' volumes,
/// volumes whose delete hung, and after an interrupt whatever the checks
/// had not deleted yet.
async fn delete_live(run: &RunEnd<'_>, signals: &Signals, out: &mut Teardown) {
    let live: Vec<DeleteRequest> = run
        .live
        .all()
        .into_iter()
        .map(|req| teardown_request(req, run.root.path()))
        .collect();
    if live.is_empty() {
        return;
    }
    let supervisor = signals.teardown_supervisor();
    let mut opts = CallOptions::new(run.timeouts).under(supervisor.clone());
    opts.transport = Some(run.transport.clone());
    let plugin = run.target.open(&opts);
    let calls = live.iter().map(|req| {
        let plugin = plugin.clone();
        async move { plugin.delete(req).await.ok() }
    });
    let results = match tokio::time::timeout(TEARDOWN_DEADLINE, join_all(calls)).await {
        Ok(results) => results,
        Err(_) => {
            // The deadline passed: the calls still running are killed.
            supervisor.cancel();
            vec![false; live.len()]
        }
    };
    out.deletes = live.len();
    out.deletes_failed = results.iter().filter(|ok| !**ok).count();
    out.deletes_skipped = supervisor.is_cancelled();
    for (req, ok) in live.iter().zip(&results) {
        if *ok {
            run.live.deleted(&req.volumes_dir, &req.volume_id);
        }
    }
}

/// The teardown's delete of a live volume, sent on the harness's own behalf:
/// never with a path that could lead a plugin's delete to data that is not
/// the run's. `DHV_CREATED_PATH` stays what create returned when that is
/// strictly inside the volumes dir (itself inside the run's temp dir), a
/// loop device backed by a file of the run's temp dir, or empty (a create cut
/// short: no path yet); any other path (a dir elsewhere, the volumes dir or a
/// parent of it, another device) is replaced by the volume's own
/// `<volumes_dir>/<id>`, which a plugin that keys its files by the volume id
/// still finds, and a naive `rm -rf` of it cannot leave the run's temp dir.
fn teardown_request(mut req: DeleteRequest, root: &Path) -> DeleteRequest {
    let path = Path::new(&req.created_path);
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let ours = req.created_path.is_empty()
        || crate::manager::strictly_inside(&req.created_path, Path::new(&req.volumes_dir))
        || crate::safe_fs::loop_backing(path).is_some_and(|b| b.starts_with(&root));
    if !ours {
        req.created_path = crate::manager::own_path(Path::new(&req.volumes_dir), &req.volume_id);
    }
    req
}

/// Ends the run: the deletes of the volumes still alive; then the mounts
/// left below the temp dir are named and unmounted, and the temp dir is
/// removed without crossing a mount.
pub(crate) fn finish(
    rt: &tokio::runtime::Runtime,
    run: &RunEnd<'_>,
    signals: &Signals,
    keep: bool,
) -> Teardown {
    let mut out = rt.block_on(deletes_and_own_files(run, signals));
    remove_root(run.root, &mut out, keep);
    out
}

/// The part every ending starts with: the deletes of the volumes still
/// alive, then the harness's own files, by name, while every mount a delete
/// left is still there to reach them through (once it is unmounted, a file
/// the harness wrote into a bind mount of outside data could not be reached).
async fn deletes_and_own_files(run: &RunEnd<'_>, signals: &Signals) -> Teardown {
    let mut out = Teardown {
        temp_dir: run.root.path().to_path_buf(),
        ..Teardown::default()
    };
    delete_live(run, signals, &mut out).await;
    out.errors.extend(
        run.planted
            .remove(None)
            .into_iter()
            .map(|e| format!("{e} (written by the harness, left)")),
    );
    out
}

/// Clears the run's end for the check whose question is what the whole run
/// left ([`Needs::RunEnd`](crate::report::Needs::RunEnd)), once every other
/// check has finished: the deletes of the volumes still alive, the
/// harness's own files, the mounts below the temp dir unmounted and the loop
/// devices backed by its files detached, then (unless `keep`) a trial
/// removal of everything in it but its owner file. What it did and what it
/// could not remove, as a teardown tells it; the temp dir itself stays, for
/// [`finish`], which adds what it finds to this ([`Teardown::after`]).
pub(crate) fn clear(
    rt: &tokio::runtime::Handle,
    run: &RunEnd<'_>,
    signals: &Signals,
    keep: bool,
) -> Teardown {
    let mut out = rt.block_on(deletes_and_own_files(run, signals));
    record_unmounts(crate::safe_fs::unmount_under_held(run.root), &mut out);
    detach_loops(run.root.path(), &mut out);
    if keep {
        out.kept_on_request = true;
        return out;
    }
    let spare = [std::ffi::OsStr::new(run.owner_file)];
    record_removal(crate::safe_fs::empty_held(run.root, &spare), &mut out);
    out
}

/// Unmounts what plugins left below `root` and detaches the loop devices
/// they left attached to its files, then removes it unless `keep`.
fn remove_root(held: &crate::safe_fs::HeldDir, out: &mut Teardown, keep: bool) {
    let root = held.path();
    record_unmounts(crate::safe_fs::unmount_under_held(held), out);
    detach_loops(root, out);
    if keep {
        out.kept_on_request = true;
        return;
    }
    record_removal(crate::safe_fs::remove_held(held), out);
}

/// Removes a dir of the harness's that no one holds (a killed run's, or the
/// scratch dir of `init`) with the teardown's care: unmount what plugins left
/// below it, detach their loop devices, then remove it without crossing a
/// mount. What it did, as a teardown says it.
pub(crate) fn remove_unheld(root: &Path) -> Teardown {
    let mut out = Teardown {
        temp_dir: root.to_path_buf(),
        ..Teardown::default()
    };
    remove_leftover_root(root, &mut out);
    out
}

/// The same for the dir of a run that was killed outright, which no one
/// holds any more: by its path, with the same care.
fn remove_leftover_root(root: &Path, out: &mut Teardown) {
    record_unmounts(crate::safe_fs::unmount_under(root), out);
    detach_loops(root, out);
    record_removal(crate::safe_fs::remove_tree(root), out);
}

fn record_unmounts(result: std::io::Result<crate::safe_fs::Unmounted>, out: &mut Teardown) {
    match result {
        Ok(done) => {
            out.mounts_found = done.all().map(|m| m.to_string()).collect();
            out.mounts_left = done
                .failed
                .iter()
                .map(|(m, why)| format!("{} still mounted ({why})", m.mount_point.display()))
                .collect();
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => out
            .errors
            .push(format!("cannot list the mounts below it: {e}")),
    }
}

/// After the unmounts, which let go of the devices they used. A device that
/// another process holds open at that moment (a `losetup -a` anywhere reads
/// every device through its node) is only marked to detach: the run waits,
/// bounded, until the kernel has let each one go, so that what the report
/// calls detached is detached.
fn detach_loops(root: &Path, out: &mut Teardown) {
    let mut detached = Vec::new();
    for dev in crate::safe_fs::loops_backed_under(root) {
        out.loops_found.push(dev.to_string());
        match crate::safe_fs::detach(&dev) {
            Ok(()) => detached.push(dev),
            Err(e) => out.errors.push(format!("{dev} still attached ({e})")),
        }
    }
    let deadline = std::time::Instant::now() + LOOP_RELEASE;
    for dev in detached {
        let Err(e) = crate::safe_fs::wait_detached(&dev, deadline) else {
            continue;
        };
        // Held by no process of the plugin's (its calls are over and swept):
        // another run's probe, another program. Waited for, bounded, as a
        // delete held so is (see `context::held`), then named.
        let Ok(device) = crate::exec::HeldDevice::at(&dev.device, Some(&dev.backing_file)) else {
            out.errors.push(format!("{dev} {e}"));
            continue;
        };
        let devices = [device];
        let (holders, _) = crate::exec::device_holders(&devices);
        let elsewhere = !holders.is_empty() && !holders.iter().any(|h| h.is_this_runs());
        if elsewhere {
            crate::exec::wait_let_go(&devices, |h| !h.is_this_runs(), HELD_ELSEWHERE_BOUND);
            let again = std::time::Instant::now() + LOOP_RELEASE;
            match crate::safe_fs::wait_detached(&dev, again) {
                Ok(()) => continue,
                Err(e) => {
                    out.held_elsewhere.push(format!("{dev} {e}"));
                    out.errors.push(format!("{dev} {e}"));
                }
            }
        } else {
            out.errors.push(format!("{dev} {e}"));
        }
    }
}

/// How long the run's end waits for a process that is not the plugin's to
/// let go of a loop device the harness detached.
const HELD_ELSEWHERE_BOUND: Duration = Duration::from_secs(20);

fn record_removal(removal: crate::safe_fs::Removal, out: &mut Teardown) {
    out.removed = removal.removed;
    out.kept = removal
        .mount_points
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    out.errors.extend(removal.errors);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(volumes_dir: &Path, created_path: &str) -> DeleteRequest {
        DeleteRequest {
            volumes_dir: volumes_dir.to_string_lossy().into_owned(),
            created_path: created_path.to_string(),
            volume_id: "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10".into(),
            plugin_dir: String::new(),
            node_pool: "default".into(),
            namespace: "default".into(),
            volume_name: "v".into(),
            node_id: String::new(),
            parameters: None,
        }
    }

    /// The teardown keeps a created path only where a delete of it cannot
    /// reach data outside the run: anything else becomes the volume's own.
    #[test]
    fn teardown_deletes_never_carry_a_path_outside_the_run() {
        let root = tempfile::tempdir().unwrap();
        let vd = root.path().join("check/volumes");
        let own = vd.join("0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10");
        let own = own.to_string_lossy();
        let inside = vd.join("x").to_string_lossy().into_owned();
        for (given, sent) in [
            (inside.as_str(), inside.as_str()),
            ("", ""),
            ("/etc", &*own),
            ("/", &*own),
            (&*vd.to_string_lossy(), &*own),
            ("relative", &*own),
            ("/dev/null", &*own),
        ] {
            let req = teardown_request(live(&vd, given), root.path());
            assert_eq!(req.created_path, sent, "{given}");
        }
    }
}
