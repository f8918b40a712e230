//! Limits per call through cgroup v1, where the cgroup2 hierarchy does not
//! offer the `pids` or `memory` controller: a hybrid host (systemd's default
//! on many distributions, and CI's machines) mounts those controllers as v1
//! hierarchies (`/sys/fs/cgroup/pids`, `/sys/fs/cgroup/memory`) and leaves
//! its cgroup2 mount without controllers. The call cgroups of `cgroup.rs`
//! still track and kill a call's processes; the v1 dirs made here only bound
//! them.
//!
//! In each such hierarchy the run makes a dir beside this process's own
//! (`dhv-conform-run-<pid>-<start>`, named as the cgroup2 one, so that later
//! runs and `clean` tell a dead run's from a live one's the same way), and
//! every call cgroup gets a child there (`c<n>`, pooled with it). v1 has no
//! `CLONE_INTO_CGROUP`: the call's leader moves itself in before its exec
//! (it writes `0` to the `cgroup.procs` this opened, see `clone_spawn.rs`),
//! so the plugin and all it starts run inside from their first instruction.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::cgroup_limits::{CallLimits, event_count};
use super::cgroup_tree as tree;
use super::procfs::{CGROUP_CAP, controller_path};

/// A v1 controller that bounds a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    /// `pids.max`, refusals counted in `pids.events`.
    Pids,
    /// `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` where swap
    /// is accounted), OOM kills counted in `memory.oom_control`.
    Memory,
}

impl Controller {
    /// Its name, as hierarchies and `/proc/PID/cgroup` name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }

    /// The file that counts the times the limit was reached, and its key.
    fn events(self) -> (&'static str, &'static str) {
        match self {
            Controller::Pids => ("pids.events", "max"),
            Controller::Memory => ("memory.oom_control", "oom_kill"),
        }
    }
}

/// Where this process sits in the v1 hierarchy of `controller`: the dir of
/// its own cgroup there, when that hierarchy is mounted (read-write) and
/// this process's cgroup lies below the mount's root.
pub(crate) fn own_dir(controller: Controller) -> Option<(PathBuf, String)> {
    let mountinfo = super::procfs::read_capped("/proc/self/mountinfo", MOUNTINFO_CAP)?;
    let own = super::procfs::read_capped("/proc/self/cgroup", CGROUP_CAP)?;
    let own = String::from_utf8_lossy(&own);
    let dir = own_dir_in(
        &String::from_utf8_lossy(&mountinfo),
        &own,
        controller.name(),
    )?;
    Some((dir, path_in(&own, controller)?.to_owned()))
}

/// The path of `controller`'s hierarchy in a `/proc/PID/cgroup` text.
pub(crate) fn path_in(text: &str, controller: Controller) -> Option<&str> {
    controller_path(text, controller.name())
}

/// The most of `/proc/self/mountinfo` read to find a v1 hierarchy: the
/// cgroup mounts come early (the host mounts them at boot); a plugin that
/// made many mounts of its own pushes nothing before them.
pub(crate) const MOUNTINFO_CAP: usize = 1 << 20;

/// [`own_dir`] from the texts of `/proc/self/mountinfo` and
/// `/proc/self/cgroup`.
fn own_dir_in(mountinfo: &str, own: &str, controller: &str) -> Option<PathBuf> {
    let rel = controller_path(own, controller)?;
    let (root, point) = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split(' ');
        let (kind, _, options) = (right.next()?, right.next()?, right.next()?);
        let fields: Vec<&str> = left.split(' ').collect();
        // The mount's own options (a read-only bind of a read-write
        // hierarchy shows `ro` there) and the hierarchy's controllers.
        let writable = fields.get(5)?.split(',').any(|o| o == "rw");
        let ours = kind == "cgroup" && options.split(',').any(|o| o == controller);
        (ours && writable).then(|| Some((*fields.get(3)?, *fields.get(4)?)))?
    })?;
    // The mount shows the hierarchy from `root` down (a container's view).
    let below = match root {
        "/" => rel,
        root => {
            let rest = rel.strip_prefix(root)?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            rest
        }
    };
    Some(Path::new(point).join(below.trim_start_matches('/')))
}

/// The run's dir in one v1 hierarchy.
#[derive(Debug)]
pub(crate) struct RunDir {
    pub controller: Controller,
    /// Made in this process's own cgroup of that hierarchy.
    pub dir: PathBuf,
    /// Its path as `/proc/PID/cgroup` shows it.
    pub rel: String,
    /// This process's own cgroup there (see `cgroup_capture::come_home`), and its
    /// path as `/proc/self/cgroup` shows it.
    pub home: PathBuf,
    pub home_rel: String,
}

impl RunDir {
    /// Makes the run's dir `name` in `controller`'s hierarchy, where this
    /// process may move processes into a dir it made (root, mostly); a pids
    /// one holds at most `pids_budget` tasks (see `cgroup_run`).
    pub(crate) fn make(
        controller: Controller,
        name: &str,
        pids_budget: Option<u64>,
    ) -> Option<RunDir> {
        let (base, home_rel) = own_dir(controller)?;
        let dir = base.join(name);
        fs::create_dir(&dir).ok()?;
        let usable = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .is_ok()
            && fs::metadata(dir.join(controller.events().0)).is_ok();
        if !usable {
            let _ = fs::remove_dir(&dir);
            return None;
        }
        tree::remove_dead_runs(&base);
        if controller == Controller::Pids {
            // As the cgroup2 run's `pids.max`.
            super::cgroup_run::set_run_pids_max(&dir, pids_budget);
        }
        Some(RunDir {
            controller,
            dir,
            rel: format!("{}/{name}", home_rel.trim_end_matches('/')),
            home: base,
            home_rel,
        })
    }
}

/// Removes the dirs that dead runs left in every v1 hierarchy this process
/// sits in (with what is still in them, killed); a live run's are never
/// touched.
pub(crate) fn remove_dead_runs() {
    for controller in [Controller::Pids, Controller::Memory] {
        if let Some((base, _)) = own_dir(controller) {
            tree::remove_dead_runs(&base);
        }
    }
}

/// Moves `pid` (a process of a call, to be killed) back into this process's
/// own cgroup of the v1 `freezer` hierarchy when a plugin put it in another
/// one (as root may): a process frozen there does not act on SIGKILL until
/// it is thawed, so the harness would wait for a killed leader for good.
/// Moved into a cgroup that is not frozen, it thaws and dies of the kill
/// it has pending. The plugin's freezer cgroup itself (which may be someone
/// else's) is left as it is. Whether it was moved.
pub(crate) fn free_from_freezer(pid: i32) -> bool {
    let Some(text) = super::procfs::read_capped(format!("/proc/{pid}/cgroup"), CGROUP_CAP) else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    let Some(theirs) = controller_path(&text, "freezer") else {
        return false;
    };
    let Some((home, ours)) = FREEZER_HOME.get_or_init(own_freezer).as_ref() else {
        return false;
    };
    if theirs == ours {
        return false;
    }
    fs::write(home.join("cgroup.procs"), pid.to_string()).is_ok()
}

/// This process's own cgroup of the v1 `freezer` hierarchy (its dir, and its
/// path as `/proc/self/cgroup` shows it), found once: where a process of a
/// call is moved to be thawed (see [`free_from_freezer`]).
static FREEZER_HOME: std::sync::OnceLock<Option<(PathBuf, String)>> = std::sync::OnceLock::new();

fn own_freezer() -> Option<(PathBuf, String)> {
    let mountinfo = super::procfs::read_capped("/proc/self/mountinfo", MOUNTINFO_CAP)?;
    let own = super::procfs::read_capped("/proc/self/cgroup", CGROUP_CAP)?;
    let own = String::from_utf8_lossy(&own);
    let dir = own_dir_in(&String::from_utf8_lossy(&mountinfo), &own, "freezer")?;
    Some((dir, controller_path(&own, "freezer")?.to_owned()))
}

/// One call's dir in one v1 hierarchy: its `cgroup.procs` open for the
/// leader to write itself into, and the file that counts the limit reached,
/// held open.
#[derive(Debug)]
struct CallDir {
    controller: Controller,
    dir: PathBuf,
    procs: fs::File,
    events: fs::File,
}

/// A call cgroup's dirs in the v1 hierarchies (none, one or both).
#[derive(Debug, Default)]
pub(crate) struct CallDirs(Vec<CallDir>);

impl CallDirs {
    /// The dirs `c<n>` in each of `runs`; those that cannot be made are left
    /// out (the call runs without that limit).
    pub(crate) fn make(runs: &[RunDir], n: u64) -> CallDirs {
        let one = |run: &RunDir| -> Option<CallDir> {
            let dir = run.dir.join(format!("c{n}"));
            fs::create_dir(&dir).ok()?;
            let open = || -> std::io::Result<(fs::File, fs::File)> {
                let procs = fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))?;
                let events = fs::File::open(dir.join(run.controller.events().0))?;
                Ok((procs, events))
            };
            match open() {
                Ok((procs, events)) => Some(CallDir {
                    controller: run.controller,
                    dir,
                    procs,
                    events,
                }),
                Err(_) => {
                    let _ = fs::remove_dir(&dir);
                    None
                }
            }
        };
        CallDirs(runs.iter().filter_map(one).collect())
    }

    /// The `cgroup.procs` descriptors the leader writes itself into, `-1`
    /// where there is none.
    pub(crate) fn procs_fds(&self) -> [libc::c_int; 2] {
        let mut fds = [-1; 2];
        for (slot, d) in fds.iter_mut().zip(&self.0) {
            *slot = d.procs.as_raw_fd();
        }
        fds
    }

    /// Whether the memory limit is v1's (for the words that name it).
    pub(crate) fn has(&self, controller: Controller) -> bool {
        self.0.iter().any(|d| d.controller == controller)
    }

    /// Writes `limits` to each dir.
    pub(crate) fn limit(&self, limits: CallLimits) {
        for d in &self.0 {
            match d.controller {
                Controller::Pids => {
                    let _ = fs::write(d.dir.join("pids.max"), limits.pids_max.to_string());
                }
                Controller::Memory => limit_memory(&d.dir, limits.memory_max),
            }
        }
    }

    /// How often `controller`'s limit was reached in its dir (since it was
    /// made): forks refused, or processes the OOM killer killed.
    pub(crate) fn count(&self, controller: Controller) -> u64 {
        let key = controller.events().1;
        self.0
            .iter()
            .filter(|d| d.controller == controller)
            .filter_map(|d| {
                super::procfs::reread_small(&d.events, |text| event_count(text, &[key])).ok()
            })
            .sum()
    }

    /// Nothing in any of them, and no dir below them.
    pub(crate) fn is_clean(&self) -> bool {
        self.0.iter().all(|d| {
            fs::metadata(&d.dir).is_ok_and(|m| m.nlink() == 2)
                && fs::read(d.dir.join("cgroup.procs")).is_ok_and(|t| t.is_empty())
        })
    }

    /// SIGKILLs whatever is in them or below them.
    pub(crate) fn kill(&self) {
        for d in &self.0 {
            tree::kill_tree(&d.dir);
        }
    }

    /// Removes them, with anything below them (killed first).
    pub(crate) fn remove(self) {
        for d in self.0 {
            tree::remove_tree(&d.dir);
        }
    }
}

/// `memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes` (memory and
/// swap together) where the kernel accounts swap: without it a call past its
/// limit would go on in swap. The kernel wants the first at most the second
/// at every moment: lowering writes the first first, raising the second.
fn limit_memory(dir: &Path, bytes: u64) {
    let (mem, memsw) = (
        dir.join("memory.limit_in_bytes"),
        dir.join("memory.memsw.limit_in_bytes"),
    );
    let bytes = bytes.to_string();
    let first = fs::write(&mem, &bytes);
    if memsw.exists() {
        let _ = fs::write(&memsw, &bytes);
        if first.is_err() {
            let _ = fs::write(&mem, &bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 /lxc/box /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_own_dir_is_found_in_the_hierarchy_of_its_controller() {
        let own = "9:name=systemd:/\n8:pids:/lxc/box/job\n4:memory:/api/34c8\n\
                   2:cpu,cpuacct:/\n0::/\n";
        assert_eq!(
            own_dir_in(MOUNTINFO, own, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/api/34c8"))
        );
        // The mount shows the hierarchy from its root down.
        assert_eq!(
            own_dir_in(MOUNTINFO, own, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids/job"))
        );
        assert_eq!(
            own_dir_in(MOUNTINFO, own, "cpu"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"))
        );
        // Outside the mount's root, or no such hierarchy: none.
        let outside = "8:pids:/other\n";
        assert_eq!(own_dir_in(MOUNTINFO, outside, "pids"), None);
        let prefix_only = "8:pids:/lxc/boxer\n";
        assert_eq!(own_dir_in(MOUNTINFO, prefix_only, "pids"), None);
        assert_eq!(own_dir_in(MOUNTINFO, own, "freezer"), None);
        // A read-only mount cannot take a run's dir.
        let ro = MOUNTINFO.replace("/memory rw,", "/memory ro,");
        assert_eq!(own_dir_in(&ro, own, "memory"), None);
    }
}
