//! The cgroup of this run: made once, when a call first needs one, beside
//! this process's own cgroup (`dhv-conform-run-<pid>-<start>`, see
//! `cgroup_tree.rs`), with the `pids` and `memory` controllers handed to the
//! call cgroups below it (or v1 dirs of its own where the cgroup2 hierarchy
//! offers neither, see `cgroup_v1.rs`). It is removed at exit with
//! everything in it; a run that was killed leaves it to the next run, or to
//! `dhv-conform clean` ([`remove_dead_run_cgroups`]). Its `cpu.stat` and
//! `cpu.pressure` say what all calls used of the CPUs ([`run_cpu`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::cgroup_capture::{self as capture, Home};
use super::cgroup_limits::pids_budget;
use super::cgroup_tree as tree;
use super::cgroup_v1::{self as v1, Controller};

/// Set in the harness's environment (never a plugin's: theirs is cleared),
/// this turns the cgroups off, so that tests can hold the subreaper fallback
/// to the same promises on a machine that has cgroups.
pub const NO_CGROUP_VAR: &str = "DHV_CONFORM_NO_CGROUP";

/// The cgroup of this run, with the path below the cgroup2 mount that
/// `/proc/<pid>/cgroup` shows for processes inside it.
pub(super) struct Run {
    pub dir: PathBuf,
    pub rel: String,
    /// Our own cgroup's `cgroup.procs`, held open: a birth in a call cgroup
    /// checks that we may write the file of the cgroup common to us and the
    /// call's (ours), and the kernel makes that file's inode anew for every
    /// check (and evicts it after) unless someone holds it open.
    _own_procs: Option<fs::File>,
    /// The run cgroup's `cpu.stat` and `cpu.pressure`, held open for
    /// [`run_cpu`]: what every call of the run has used of the CPUs, and
    /// waited for them.
    cpu_stat: Option<fs::File>,
    pressure: Option<fs::File>,
    /// The `pids` and `memory` controllers are on for the call cgroups
    /// (where the hierarchy offers them: a cgroup2 mount of a hybrid
    /// setup has none).
    pub pids: bool,
    pub memory: bool,
    /// The run's dirs in the v1 hierarchies of the controllers the cgroup2
    /// one does not offer (see `cgroup_v1`).
    pub v1: Vec<v1::RunDir>,
    /// The most tasks the calls may hold, all together, when a cgroup above
    /// the harness caps them (see `cgroup_limits::pids_budget`): no call's
    /// `pids.max` is above it, nor the run's.
    pub pids_budget: Option<u64>,
}

/// This run's cgroup, made once when first needed: `None` where cgroups
/// are not usable.
pub(super) fn run() -> Option<&'static Run> {
    RUN.get_or_init(make_run).as_ref()
}

static RUN: OnceLock<Option<Run>> = OnceLock::new();

fn make_run() -> Option<Run> {
    if std::env::var_os(NO_CGROUP_VAR).is_some() {
        return None;
    }
    let (base, own) = own_cgroup()?;
    let name = tree::run_name()?;
    let dir = make_run_dir(&base, &name)?;
    tree::remove_dead_runs(&base);
    // SAFETY: registers a plain `extern "C"` function with no preconditions.
    unsafe { libc::atexit(remove_run_at_exit) };
    let rel = format!("{}/{name}", own.trim_end_matches('/'));
    let _own_procs = fs::File::open(base.join("cgroup.procs")).ok();
    let cpu_stat = fs::File::open(dir.join("cpu.stat")).ok();
    let pressure = fs::File::open(dir.join("cpu.pressure")).ok();
    // Read before the run's cgroups hold anything: what the harness's own
    // cgroups leave, in every hierarchy where the pids controller caps it.
    let v1_pids = v1::own_dir(Controller::Pids).map(|(dir, _)| dir);
    let ancestry: Vec<PathBuf> = std::iter::once(&base)
        .chain(&v1_pids)
        .flat_map(|dir| tree::ancestry(dir))
        .collect();
    let pids_budget = pids_budget(ancestry.iter().map(PathBuf::as_path));
    let (pids, memory) = hand_controllers(&dir, pids_budget);
    // What the cgroup2 hierarchy does not offer, a v1 one may (a hybrid host).
    let v1: Vec<v1::RunDir> = [(pids, Controller::Pids), (memory, Controller::Memory)]
        .into_iter()
        .filter(|(offered, _)| !offered)
        .filter_map(|(_, controller)| v1::RunDir::make(controller, &name, pids_budget))
        .collect();
    capture::watch_run(&dir, rel.clone());
    set_homes(base, own, &rel, &v1);
    Some(Run {
        dir,
        rel,
        _own_procs,
        cpu_stat,
        pressure,
        pids,
        memory,
        v1,
        pids_budget,
    })
}

/// Makes the run's cgroup `name` beside ours (in `base`), where we may move a
/// process into a cgroup we made.
fn make_run_dir(base: &Path, name: &str) -> Option<PathBuf> {
    let dir = base.join(name);
    fs::create_dir(&dir).ok()?;
    // Only where we may move a process into a cgroup we made.
    let usable = fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .is_ok();
    if !usable {
        let _ = fs::remove_dir(&dir);
        return None;
    }
    Some(dir)
}

/// Hands the `pids` and `memory` controllers to the call cgroups below the
/// run's `dir`, with the run's share of the host's pids (at most
/// `pids_budget`): whether each is on.
fn hand_controllers(dir: &Path, pids_budget: Option<u64>) -> (bool, bool) {
    // The run's cgroup holds no process of its own, so it may hand the
    // controllers to the call cgroups, one at a time (either may be missing).
    let enable = |controller: &str| {
        fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}")).is_ok()
    };
    let pids = enable("pids");
    let memory = enable("memory");
    if pids {
        set_run_pids_max(dir, pids_budget);
    }
    (pids, memory)
}

/// The run's `pids.max` (in `dir`, cgroup2's or a v1 one's): all calls
/// together, however many run at once, keep to half the host's pid space
/// (the harness and the host keep the other half), and to `pids_budget`.
pub(super) fn set_run_pids_max(dir: &Path, pids_budget: Option<u64>) {
    let half = super::procfs::read_capped("/proc/sys/kernel/pid_max", 64)
        .and_then(|t| String::from_utf8_lossy(&t).trim().parse::<u64>().ok())
        .map(|max| (max / 2).max(1));
    if let Some(max) = half.into_iter().chain(pids_budget).min() {
        let _ = fs::write(dir.join("pids.max"), max.to_string());
    }
}

/// Where the harness goes back to should a plugin move it: our cgroup
/// (`own`, in `base`) and our dirs in the v1 hierarchies the run uses.
fn set_homes(base: PathBuf, own: String, rel: &str, v1: &[v1::RunDir]) {
    // Set last: the removal of dead runs must not come home to a run not
    // yet made.
    let homes = std::iter::once(Home {
        hierarchy: "",
        dir: base,
        rel: own,
        run_rel: rel.to_owned(),
    })
    .chain(v1.iter().map(|d| Home {
        hierarchy: d.controller.name(),
        dir: d.home.clone(),
        rel: d.home_rel.clone(),
        run_rel: d.rel.clone(),
    }))
    .collect();
    capture::set_homes(homes);
}

/// The CPU time every call of this run has used so far (its cgroup's
/// `cpu.stat` `usage_usec`, the call cgroups below it included), and the
/// time they have waited for a CPU (its `cpu.pressure` `some total`, `None`
/// without pressure information); `None` without a run cgroup. (It makes
/// the run's cgroup if no call has yet, so that two readings always come
/// from the same counters.)
pub(crate) fn run_cpu() -> Option<(std::time::Duration, Option<std::time::Duration>)> {
    let run = run()?;
    let used = super::procfs::reread_small(run.cpu_stat.as_ref()?, parse_usage).ok()??;
    let waited = run
        .pressure
        .as_ref()
        .and_then(|file| super::procfs::reread_small(file, parse_pressure_total).ok()?);
    Some((used, waited))
}

/// The `usage_usec` of a `cpu.stat` file's text.
fn parse_usage(text: &[u8]) -> Option<std::time::Duration> {
    let text = std::str::from_utf8(text).ok()?;
    let usage = text.lines().find_map(|l| l.strip_prefix("usage_usec "))?;
    Some(std::time::Duration::from_micros(usage.trim().parse().ok()?))
}

/// Removes the cgroups that dead runs left beside this process's own (a run
/// killed outright leaves its cgroup), with whatever is still in them; a live
/// run's are never touched. `dhv-conform clean` calls it; every run does it
/// when it makes its own.
pub fn remove_dead_run_cgroups() {
    if std::env::var_os(NO_CGROUP_VAR).is_some() {
        return;
    }
    if let Some((base, _)) = own_cgroup() {
        tree::remove_dead_runs(&base);
    }
    // A dead run's v1 dirs, where it made some, whether or not this
    // process has a cgroup2 hierarchy.
    v1::remove_dead_runs();
}

/// The dir of this process's cgroup (cgroup2), and its path below the mount.
fn own_cgroup() -> Option<(PathBuf, String)> {
    // Capped: a plugin (as root) may leave the host many mounts, and the
    // cgroup mounts come early (a line cut short lacks its type: skipped).
    let mountinfo = super::procfs::read_capped("/proc/self/mountinfo", v1::MOUNTINFO_CAP)?;
    let mountinfo = String::from_utf8_lossy(&mountinfo);
    // Field 5 is the mount point; the file system type follows " - ".
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split(' ').next()? == "cgroup2")
            .then(|| left.split(' ').nth(4).map(PathBuf::from))?
    })?;
    let own = super::procfs::read_capped("/proc/self/cgroup", super::procfs::CGROUP_CAP)?;
    let own = String::from_utf8_lossy(&own);
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let base = mount.join(own.trim_start_matches('/'));
    Some((base, own.to_owned()))
}

/// At exit, the run's cgroup goes, with anything still in it (killed).
extern "C" fn remove_run_at_exit() {
    let owner = tree::run_name();
    let _ = std::panic::catch_unwind(|| {
        if let Some(run) = run() {
            // No spare cgroup is made below the run's while it goes.
            super::cgroup_pool::stop();
            // A forked child that exits must not remove its parent's cgroups.
            if run.dir.file_name().and_then(|n| n.to_str()) == owner.as_deref() {
                tree::remove_tree(&run.dir);
                // Emptied by the removal above: the same processes.
                for v1_run in &run.v1 {
                    tree::remove_tree(&v1_run.dir);
                }
            }
        }
    });
}

/// The `some total` of a `cpu.pressure` file's text.
pub(super) fn parse_pressure_total(text: &[u8]) -> Option<std::time::Duration> {
    let text = std::str::from_utf8(text).ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    let total = some
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    Some(std::time::Duration::from_micros(total.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_usage_and_the_stall_are_read_off_their_files() {
        let stat = b"usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n\
                     nr_periods 0\n";
        assert_eq!(parse_usage(stat), Some(Duration::from_micros(1_234_567)));
        assert_eq!(parse_usage(b"user_usec 1\n"), None);
        assert_eq!(parse_usage(b"usage_usec many\n"), None);
        let pressure = b"some avg10=0.00 avg60=0.00 avg300=0.00 total=3336976101\n\
                         full avg10=0.00 avg60=0.00 avg300=0.00 total=12\n";
        assert_eq!(
            parse_pressure_total(pressure),
            Some(Duration::from_micros(3_336_976_101))
        );
    }
}
