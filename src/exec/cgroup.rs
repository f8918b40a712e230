//! A cgroup (v2) per call, where the machine gives us one: the one record of
//! a plugin's descendants that they cannot shed. A daemon can leave the
//! plugin's process group and session, wipe its environment and be re-parented
//! twice; it stays in the cgroup its ancestor was started in.
//!
//! The leader is born in the call's cgroup (see `clone_spawn.rs`), so every
//! process it starts is born inside too. Without a writable cgroup2 hierarchy (containers, old kernels,
//! no privileges) the runner falls back to the subreaper alone.

use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::procfs::parse_pids;

/// Where this process's own cgroup is, when it can hold call cgroups. Found
/// once: it is a fact about the process.
fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(find_base).as_deref()
}

/// Set in the harness's environment (never a plugin's: theirs is cleared),
/// this turns the cgroups off, so that tests can hold the subreaper fallback
/// to the same promises on a machine that has cgroups.
pub const NO_CGROUP_VAR: &str = "DHV_CONFORM_NO_CGROUP";

fn find_base() -> Option<PathBuf> {
    if std::env::var_os(NO_CGROUP_VAR).is_some() {
        return None;
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Field 5 is the mount point; the file system type follows " - ".
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split(' ').next()? == "cgroup2")
            .then(|| left.split(' ').nth(4).map(PathBuf::from))?
    })?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = mount.join(rel.trim_start_matches('/'));
    // Only where we may make a child and move a process into it.
    let probe = dir.join(format!("dhv-conform-{}-probe", std::process::id()));
    fs::create_dir(&probe).ok()?;
    let usable = fs::OpenOptions::new()
        .write(true)
        .open(probe.join("cgroup.procs"))
        .is_ok();
    let _ = fs::remove_dir(&probe);
    if usable {
        remove_stale(&dir);
    }
    usable.then_some(dir)
}

/// Removes the empty call cgroups of runs that ended without removing them
/// (a process killed mid-call, or exiting while a killed call was being
/// reaped). Only empty cgroups can be removed, so nothing live is touched.
fn remove_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("dhv-conform-")) else {
            continue;
        };
        let owner = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// Set once the kernel refused [`CallCgroup`]s (see [`CallCgroup::refused`]).
static REFUSED: AtomicBool = AtomicBool::new(false);

/// One call's cgroup: made before the spawn, removed after the sweep.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    dir: PathBuf,
    removed: AtomicBool,
}

impl CallCgroup {
    /// A fresh, empty cgroup for one call and its directory, open, for the
    /// leader to be born in; `None` where cgroups are not usable.
    pub fn create() -> Option<(CallCgroup, OwnedFd)> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        if REFUSED.load(Ordering::Relaxed) {
            return None;
        }
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = base()?.join(format!("dhv-conform-{}-{n}", std::process::id()));
        fs::create_dir(&dir).ok()?;
        let cgroup = CallCgroup {
            dir,
            removed: AtomicBool::new(false),
        };
        use std::os::unix::fs::OpenOptionsExt;
        let fd = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&cgroup.dir)
            .ok()?;
        Some((cgroup, fd.into()))
    }

    /// The kernel refused to start a process in a cgroup (`clone3` or
    /// `CLONE_INTO_CGROUP` missing, or filtered): no call of this process
    /// tries again.
    pub fn refused() {
        REFUSED.store(true, Ordering::Relaxed);
    }

    /// The live processes in the cgroup (zombies have left it).
    pub fn pids(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        if let Ok(text) = fs::read(self.dir.join("cgroup.procs")) {
            parse_pids(&text, &mut pids);
        }
        pids
    }

    /// SIGKILLs everything in the cgroup at once, including processes that
    /// are forking right now (`cgroup.kill`, Linux 5.14); before that kernel,
    /// each process listed.
    pub fn kill(&self) {
        let killed = fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        if killed.is_err() {
            for pid in self.pids() {
                super::signal::signal_one(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }

    /// How long, so far, at least one process of the call was runnable but
    /// waiting for a CPU (`cpu.pressure`, `some total`): the host's share of
    /// the call's duration, not the plugin's. `None` without pressure stall
    /// information.
    pub fn cpu_wait(&self) -> Option<std::time::Duration> {
        let text = fs::read_to_string(self.dir.join("cpu.pressure")).ok()?;
        let some = text.lines().find(|l| l.starts_with("some "))?;
        let total = some
            .split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?;
        Some(std::time::Duration::from_micros(total.parse().ok()?))
    }

    /// Removes the cgroup; fails (and may be retried) while a process is
    /// still in it.
    pub fn remove(&self) -> bool {
        if self.removed.load(Ordering::Relaxed) {
            return true;
        }
        let gone = match fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        self.removed.store(gone, Ordering::Relaxed);
        gone
    }
}

impl Drop for CallCgroup {
    /// A call that never started, or whose sweep gave up, must not leave an
    /// empty cgroup behind; one still holding a process stays (and says so by
    /// being there).
    fn drop(&mut self) {
        self.remove();
    }
}
