//! A cgroup (v2) per call, where the machine gives us one: the one record of
//! a plugin's descendants that they cannot shed without privileges. A daemon
//! can leave the plugin's process group and session, wipe its environment and
//! be re-parented twice; it stays in the cgroup its ancestor was started in,
//! or in a cgroup below it. (A root plugin can move out of it altogether: the
//! subreaper still sees such a daemon, see `sweep.rs`.)
//!
//! The leader is born in the call's cgroup (see `clone_spawn.rs`), so every
//! process it starts is born inside too. Call cgroups live in one cgroup of
//! the run's (see `cgroup_tree.rs`) and are reused: once a call's sweep has
//! emptied its cgroup (`cgroup.events` says unpopulated, no child cgroup is
//! left) it goes back to a pool, so that a call costs neither a `mkdir` nor
//! an `rmdir` of a cgroup (the latter waits on the kernel). The run's cgroup
//! and everything in it are removed when the process exits; a run that is
//! killed leaves them to the next run, which removes those of dead runs.
//! Without a writable cgroup2 hierarchy (containers, old kernels, no
//! privileges) the runner falls back to the subreaper alone. Where the
//! cgroup2 hierarchy offers no `pids` or `memory` controller (a hybrid host),
//! the call's limits are set in the v1 hierarchies instead (`cgroup_v1.rs`).

use std::fs;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::cgroup_tree as tree;
use super::cgroup_v1::{self as v1, Controller};

use crate::lock;

/// Set in the harness's environment (never a plugin's: theirs is cleared),
/// this turns the cgroups off, so that tests can hold the subreaper fallback
/// to the same promises on a machine that has cgroups.
pub const NO_CGROUP_VAR: &str = "DHV_CONFORM_NO_CGROUP";

/// The limits every call cgroup gets: `pids.max` and `memory.max` (on a
/// hybrid host, in its v1 dirs: `pids.max` and `memory.limit_in_bytes`). A
/// call that reaches one is the plugin's doing (a fork bomb, a leak), and is
/// said as such; the host and the harness keep their pids and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// The most processes and threads a call's cgroup may hold at once.
    pub pids_max: u64,
    /// The most memory (bytes) a call's cgroup may use; past it the kernel
    /// reclaims, then its OOM killer kills a process of the call.
    pub memory_max: u64,
}

impl CallLimits {
    /// 4096 processes: no plugin step needs more than a few dozen, and far
    /// below any host's pid space even with every check's calls in flight.
    pub const DEFAULT_PIDS_MAX: u64 = 4096;
    /// 4 GiB: more than a `mkfs` or a copy of a volume needs.
    pub const DEFAULT_MEMORY_MAX: u64 = 4 << 30;
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            pids_max: CallLimits::DEFAULT_PIDS_MAX,
            memory_max: CallLimits::DEFAULT_MEMORY_MAX,
        }
    }
}

/// The limits calls started from now on get (see [`CallLimits`]); by
/// default [`CallLimits::default`].
pub fn set_call_limits(limits: CallLimits) {
    *lock(&LIMITS) = limits;
}

static LIMITS: Mutex<CallLimits> = Mutex::new(CallLimits {
    pids_max: CallLimits::DEFAULT_PIDS_MAX,
    memory_max: CallLimits::DEFAULT_MEMORY_MAX,
});

/// The cgroup of this run, with the path below the cgroup2 mount that
/// `/proc/<pid>/cgroup` shows for processes inside it.
struct Run {
    dir: PathBuf,
    rel: String,
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
    pids: bool,
    memory: bool,
    /// The run's dirs in the v1 hierarchies of the controllers the cgroup2
    /// one does not offer (see `cgroup_v1`).
    v1: Vec<v1::RunDir>,
    /// This process's own cgroup, where it made the run's (see [`come_home`]),
    /// and its path as `/proc/self/cgroup` shows it.
    home: PathBuf,
    home_rel: String,
}

/// This run's cgroup, made once when first needed: `None` where cgroups
/// are not usable.
fn run() -> Option<&'static Run> {
    RUN.get_or_init(make_run).as_ref()
}

static RUN: OnceLock<Option<Run>> = OnceLock::new();

fn make_run() -> Option<Run> {
    if std::env::var_os(NO_CGROUP_VAR).is_some() {
        return None;
    }
    let (base, own) = own_cgroup()?;
    let name = tree::run_name()?;
    let dir = base.join(&name);
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
    tree::remove_dead_runs(&base);
    // SAFETY: registers a plain `extern "C"` function with no preconditions.
    unsafe { libc::atexit(remove_run_at_exit) };
    let rel = format!("{}/{name}", own.trim_end_matches('/'));
    let _own_procs = fs::File::open(base.join("cgroup.procs")).ok();
    let cpu_stat = fs::File::open(dir.join("cpu.stat")).ok();
    let pressure = fs::File::open(dir.join("cpu.pressure")).ok();
    // The run's cgroup holds no process of its own, so it may hand the
    // controllers to the call cgroups, one at a time (either may be missing).
    let enable = |controller: &str| {
        fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}")).is_ok()
    };
    let pids = enable("pids");
    let memory = enable("memory");
    if pids {
        // All calls together, however many run at once, keep to half the
        // host's pid space: the harness and the host keep the other half.
        if let Some(max) = super::procfs::read_capped("/proc/sys/kernel/pid_max", 64)
            .and_then(|t| String::from_utf8_lossy(&t).trim().parse::<u64>().ok())
        {
            let _ = fs::write(dir.join("pids.max"), (max / 2).max(1).to_string());
        }
    }
    // What the cgroup2 hierarchy does not offer, a v1 one may (a hybrid host).
    let v1: Vec<v1::RunDir> = [(pids, Controller::Pids), (memory, Controller::Memory)]
        .into_iter()
        .filter(|(offered, _)| !offered)
        .filter_map(|(_, controller)| v1::RunDir::make(controller, &name))
        .collect();
    watch_run(&dir, rel.clone());
    Some(Run {
        dir,
        rel,
        _own_procs,
        cpu_stat,
        pressure,
        pids,
        memory,
        v1,
        home: base,
        home_rel: own,
    })
}

/// What a plugin did to capture the harness (moved it, froze the run's
/// cgroup, traced it), the first time it was seen, for one run: each
/// [`Supervisor`](crate::exec::Supervisor) holds one, its clones share it.
/// What can be told apart is said to the run whose call did it (the call
/// cgroup the harness was moved into, or the tracer is in); what cannot (a
/// freeze of the cgroup every run of this process shares) to every run live
/// then. A run that starts later never sees it.
#[derive(Clone)]
pub(crate) struct Interruptions(Arc<Mutex<Option<String>>>);

impl Default for Interruptions {
    /// A record of its own, live (said what concerns every run) until its
    /// last clone is dropped.
    fn default() -> Self {
        let record = Arc::new(Mutex::new(None));
        let mut live = lock(&LIVE_RECORDS);
        live.retain(|r| r.strong_count() > 0);
        live.push(Arc::downgrade(&record));
        Interruptions(record)
    }
}

impl std::fmt::Debug for Interruptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Interruptions")
            .field(&*lock(&self.0))
            .finish()
    }
}

impl Interruptions {
    /// What a plugin did to capture the harness during this run, if it did
    /// (see [`come_home`], which this calls first, [`thaw_if_frozen`],
    /// [`untrace`]).
    pub(crate) fn get(&self) -> Option<String> {
        come_home();
        lock(&self.0).clone()
    }

    /// Says `what`, unless something was said already (the first capture is
    /// the one that counts).
    fn say(&self, what: &str) {
        lock(&self.0).get_or_insert_with(|| what.to_owned());
    }

    fn from(record: Arc<Mutex<Option<String>>>) -> Interruptions {
        Interruptions(record)
    }
}

type Record = std::sync::Weak<Mutex<Option<String>>>;

/// The records of every run of this process that is still live.
static LIVE_RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
/// The record of the run whose call last took each call cgroup (by number).
static OWNERS: Mutex<Vec<(u64, Record)>> = Mutex::new(Vec::new());

/// Says `what` to the run whose call took call cgroup `call`, or, when that
/// is not known (or the run is over), to every live run.
fn record(what: &str, call: Option<u64>) {
    record_in(&LIVE_RECORDS, &OWNERS, what, call);
}

/// [`record`] with the records given.
fn record_in(
    live: &Mutex<Vec<Record>>,
    owners: &Mutex<Vec<(u64, Record)>>,
    what: &str,
    call: Option<u64>,
) {
    let owner = call.and_then(|n| {
        let owners = lock(owners);
        owners.iter().find(|(m, _)| *m == n)?.1.upgrade()
    });
    let to: Vec<Interruptions> = match owner {
        Some(owner) => vec![Interruptions::from(owner)],
        None => lock(live)
            .iter()
            .filter_map(Record::upgrade)
            .map(Interruptions::from)
            .collect(),
    };
    for run in to {
        run.say(what);
    }
}

/// Makes `owner` the run of call cgroup `n`'s call (see [`record`]).
fn set_owner(n: u64, owner: &Interruptions) {
    set_owner_in(&OWNERS, n, owner);
}

/// [`set_owner`] with the records given.
fn set_owner_in(owners: &Mutex<Vec<(u64, Record)>>, n: u64, owner: &Interruptions) {
    let mut owners = lock(owners);
    owners.retain(|(m, r)| *m != n && r.strong_count() > 0);
    owners.push((n, Arc::downgrade(&owner.0)));
}

/// The number of the call cgroup `rel` (a path as `/proc/PID/cgroup` shows
/// it) is in or below, when it is one of the run's, whose path is `run_rel`.
fn call_number(rel: &str, run_rel: &str) -> Option<u64> {
    let below = rel.strip_prefix(run_rel)?.strip_prefix("/c")?;
    below.split('/').next()?.parse().ok()
}

/// Puts this process back in its own cgroups if a plugin moved it (a root
/// plugin may write the harness's pid into its call cgroup, or the run's,
/// or their v1 dirs): there a call's sweep, or the run's removal at exit,
/// would kill the harness with the plugin's processes. Called before every
/// kill of a cgroup and every sweep that finds something left, and at a
/// run's end; one small read of `/proc/self/cgroup` when nothing moved.
/// Whether it had to; the move is said as an interruption (see
/// [`Interruptions`]).
pub(crate) fn come_home() -> bool {
    // Never makes the run's cgroup (its making removes dead runs' cgroups,
    // which comes here): without one, no cgroup of ours holds the harness.
    let Some(run) = RUN.get().and_then(Option::as_ref) else {
        return false;
    };
    let Some(text) = super::procfs::read_capped("/proc/self/cgroup", v1::CGROUP_CAP) else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    let cgroup2 = text.lines().find_map(|l| l.strip_prefix("0::"));
    let homes = std::iter::once((
        cgroup2,
        "",
        run.home.as_path(),
        run.home_rel.as_str(),
        run.rel.as_str(),
    ))
    .chain(run.v1.iter().map(|d| {
        (
            v1::path_in(&text, d.controller),
            d.controller.name(),
            d.home.as_path(),
            d.home_rel.as_str(),
            d.rel.as_str(),
        )
    }));
    let mut moved = false;
    for (now, hierarchy, home, home_rel, run_rel) in homes {
        let Some(now) = now.filter(|now| *now != home_rel) else {
            continue;
        };
        // "0": the writer, all its threads with it.
        let back = fs::write(home.join("cgroup.procs"), "0");
        let space = if hierarchy.is_empty() { "" } else { " " };
        let what = match back {
            Ok(()) => format!(
                "it moved the harness into {hierarchy}{space}cgroup {now}; the harness moved itself back to {home_rel}"
            ),
            Err(e) => format!(
                "it moved the harness into {hierarchy}{space}cgroup {now}, and the harness could not move back: {e}"
            ),
        };
        record(&what, call_number(now, run_rel));
        moved = true;
    }
    moved
}

/// How often the run's cgroup is looked at for a freeze, and the harness for
/// a tracer.
const WATCH_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// Watches the run for the rest of the process's life (see
/// [`thaw_if_frozen`], [`untrace`]); a thread of its own, which ends when the
/// run's cgroup is gone.
fn watch_run(dir: &std::path::Path, rel: String) {
    let Ok(freeze) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("cgroup.freeze"))
    else {
        return;
    };
    let shown = dir.display().to_string();
    let watch = move || {
        loop {
            std::thread::sleep(WATCH_LOOK);
            if !thaw_if_frozen(&freeze, &shown) {
                return;
            }
            untrace(&rel);
        }
    };
    let _ = std::thread::Builder::new()
        .name("dhv-watch".into())
        .spawn(watch);
}

/// Thaws the run's cgroup if a plugin froze it (a root plugin may write 1
/// into its parent's `cgroup.freeze`): a call then started into a frozen
/// cgroup never gets to its exec, and the thread that cloned it waits for it
/// for good. One read of `cgroup.freeze`; the freeze is said as the run's
/// interruption of every live run (see [`Interruptions`]). False once the
/// cgroup is gone.
fn thaw_if_frozen(freeze: &fs::File, shown: &str) -> bool {
    match super::procfs::reread_small(freeze, |t| t.starts_with(b"1")) {
        Ok(true) => {
            let what = match std::io::Write::write_all(&mut &*freeze, b"0") {
                Ok(()) => format!("it froze the run's cgroup {shown}; the harness thawed it"),
                Err(e) => {
                    format!(
                        "it froze the run's cgroup {shown}, and the harness could not thaw it: {e}"
                    )
                }
            };
            // Every run of this process shares the run cgroup.
            record(&what, None);
            true
        }
        Ok(false) => true,
        Err(_) => false,
    }
}

/// Kills a process of the run's calls that traces the harness (a root plugin
/// may leave `strace -f -p $PPID` running): every system call of ours then
/// waits on it, and once a sweep stops it (SIGSTOP, to read its group) the
/// harness waits for good. Killed, the tracer lets go of us; it is said as
/// the interruption of the run whose call it is in (see [`Interruptions`]).
/// A tracer outside the run (a debugger the user attached) is left alone.
pub(crate) fn untrace(run_rel: &str) {
    let Some(tracer) = super::procfs::tracer() else {
        return;
    };
    let Some(rel) = super::procfs::cgroup_path(tracer) else {
        return;
    };
    if rel == run_rel || rel.starts_with(&format!("{run_rel}/")) {
        kill_tracer(tracer, None, call_number(&rel, run_rel));
    }
}

/// Kills `tracer`, a process of a call that traces the harness, and says so
/// as the interruption of `run` (the run of the call whose sweep found it),
/// else of the run of call cgroup `call`, else of every live run.
pub(crate) fn kill_tracer(tracer: i32, run: Option<&Interruptions>, call: Option<u64>) {
    let cmdline = super::procfs::cmdline(tracer);
    crate::exec::signal::signal_one(tracer, nix::sys::signal::Signal::SIGKILL);
    let what = format!(
        "it attached a tracer to the harness (pid {tracer}: {cmdline}); the harness killed it"
    );
    match run {
        Some(run) => run.say(&what),
        None => record(&what, call),
    }
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
    let own = super::procfs::read_capped("/proc/self/cgroup", v1::CGROUP_CAP)?;
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

/// Set once the kernel refused [`CallCgroup`]s (see [`CallCgroup::refused`]).
static REFUSED: AtomicBool = AtomicBool::new(false);
/// Set once a leader could not move itself into its v1 dirs (see
/// [`CallCgroup::v1_refused`]).
static V1_REFUSED: AtomicBool = AtomicBool::new(false);

/// One call cgroup, open: its directory (for `CLONE_INTO_CGROUP`), its
/// `cgroup.events` and its `cpu.pressure` (kept open: a `pread` regenerates
/// it).
#[derive(Debug)]
struct Slot {
    n: u64,
    dir: PathBuf,
    fd: OwnedFd,
    events: fs::File,
    pressure: Option<fs::File>,
    /// Its `cgroup.procs`, held open and never read: a birth into the
    /// cgroup checks that we may write that file, and the kernel makes its
    /// inode anew for every check (and evicts it after) unless someone
    /// holds it, as for our own cgroup's (see [`Run`]).
    _procs: Option<fs::File>,
    /// `cpu.pressure`'s total as the last call read it, once that call's
    /// sweep found the cgroup empty: an empty cgroup accrues no stall, so
    /// the next call starts from it without reading the file again (one
    /// read a call, not two). What a process that left on its own between
    /// that read and the sweep's look waited for a CPU in that moment is
    /// counted to the next call: microseconds, never a verdict.
    pressure_baseline: Option<std::time::Duration>,
    /// The limits written to it, and its `pids.events` and `memory.events`
    /// (held open, as `cgroup.events` is) where those controllers are on.
    limits: Option<CallLimits>,
    pids_events: Option<fs::File>,
    memory_events: Option<fs::File>,
    /// Its dirs in the v1 hierarchies of the run (see `cgroup_v1`).
    v1: v1::CallDirs,
}

impl Slot {
    fn new() -> Option<Slot> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = run()?.dir.join(format!("c{n}"));
        fs::create_dir(&dir).ok()?;
        let open = || -> std::io::Result<(OwnedFd, fs::File)> {
            use std::os::unix::fs::OpenOptionsExt;
            let fd = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY)
                .open(&dir)?;
            Ok((fd.into(), fs::File::open(dir.join("cgroup.events"))?))
        };
        match open() {
            Ok((fd, events)) => {
                let pressure = fs::File::open(dir.join("cpu.pressure")).ok();
                let _procs = fs::File::open(dir.join("cgroup.procs")).ok();
                let run = run()?;
                let pids_events = run
                    .pids
                    .then(|| fs::File::open(dir.join("pids.events")).ok())
                    .flatten();
                let memory_events = run
                    .memory
                    .then(|| fs::File::open(dir.join("memory.events")).ok())
                    .flatten();
                let v1 = match V1_REFUSED.load(Ordering::Relaxed) {
                    false => v1::CallDirs::make(&run.v1, n),
                    true => v1::CallDirs::default(),
                };
                Some(Slot {
                    n,
                    dir,
                    fd,
                    events,
                    pressure,
                    _procs,
                    pressure_baseline: None,
                    limits: None,
                    pids_events,
                    memory_events,
                    v1,
                })
            }
            Err(_) => {
                let _ = fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Nothing in it or below it, no child cgroup, not frozen: as new.
    fn is_clean(&self) -> bool {
        self.events() == Events::Empty && self.childless() && self.v1.is_clean()
    }

    /// Removes it, and its v1 dirs, with anything still in them (killed).
    fn remove(self) {
        tree::remove_tree(&self.dir);
        self.v1.remove();
    }

    /// What `cgroup.events` says now (one `pread`).
    fn events(&self) -> Events {
        use super::procfs::holds;
        super::procfs::reread_small(&self.events, |text| {
            if !holds(text, b"populated 0") {
                Events::Populated
            } else if holds(text, b"frozen 0") {
                Events::Empty
            } else {
                Events::EmptyFrozen
            }
        })
        // Unreadable counts as populated.
        .unwrap_or(Events::Populated)
    }

    /// No child cgroup: a cgroup directory's link count is 2 plus its child
    /// cgroups.
    fn childless(&self) -> bool {
        nix::sys::stat::fstat(&self.fd).is_ok_and(|m| m.st_nlink == 2)
    }

    /// Writes `limits` to its `pids.max` and `memory.max` unless they are
    /// there already (a pooled cgroup keeps them).
    fn limit(&mut self, limits: CallLimits) {
        if self.limits == Some(limits) {
            return;
        }
        if self.pids_events.is_some() {
            let _ = fs::write(self.dir.join("pids.max"), limits.pids_max.to_string());
        }
        if self.memory_events.is_some() {
            let _ = fs::write(self.dir.join("memory.max"), limits.memory_max.to_string());
        }
        self.v1.limit(limits);
        self.limits = Some(limits);
    }

    /// How often the call cgroup has refused a fork at `pids.max`, and how
    /// often the OOM killer acted in it (counts since it was made).
    fn limit_counts(&self) -> LimitCounts {
        let count = |file: &Option<fs::File>, keys: &[&str]| {
            file.as_ref()
                .and_then(|f| super::procfs::reread_small(f, |text| event_count(text, keys)).ok())
                .unwrap_or(0)
        };
        // A controller is the cgroup2 hierarchy's or a v1 one's, never both.
        LimitCounts {
            pids: count(&self.pids_events, &["max"]) + self.v1.count(Controller::Pids),
            oom_kills: count(&self.memory_events, &["oom_kill"])
                + self.v1.count(Controller::Memory),
        }
    }

    /// `cpu.pressure`'s `some total`.
    fn pressure_total(&self) -> Option<std::time::Duration> {
        let file = self.pressure.as_ref()?;
        super::procfs::reread_small(file, parse_pressure_total).ok()?
    }
}

/// A call cgroup's `cgroup.events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Events {
    /// A process is in it or below it (or the file could not be read).
    Populated,
    /// Nothing in it or below it, not frozen.
    Empty,
    /// Nothing in it, but frozen (by someone else: we never freeze one).
    EmptyFrozen,
}

/// Emptied call cgroups, ready for the next call.
static POOL: Mutex<Vec<Slot>> = Mutex::new(Vec::new());
/// The numbers of the call cgroups handed out and not back yet.
static LIVE: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// One call's cgroup: taken before the spawn, handed back (or removed)
/// after the sweep.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    slot: Option<Slot>,
    cleared: AtomicBool,
    /// The last look at `cgroup.events` ([`CallCgroup::pids`]) found it
    /// empty and not frozen: [`CallCgroup::clear`] need not read it again.
    seen_empty: AtomicBool,
    killed: AtomicBool,
    /// `cpu.pressure`'s total when the call took the cgroup.
    pressure_at_start: Option<std::time::Duration>,
    /// Its total at the call's last read ([`CallCgroup::cpu_wait`]): the
    /// next call's start.
    pressure_last: Mutex<Option<std::time::Duration>>,
    /// The limits in force, and the limit events counted before the call.
    limits: CallLimits,
    counts_at_start: LimitCounts,
}

/// What a call cgroup's `pids.events` and `memory.events` count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LimitCounts {
    /// Forks refused at `pids.max`.
    pids: u64,
    /// Processes the OOM killer killed at `memory.max`.
    oom_kills: u64,
}

/// The sum of the counts of `keys` in an events file's text (`max 3\n`).
pub(crate) fn event_count(text: &[u8], keys: &[&str]) -> u64 {
    let Ok(text) = std::str::from_utf8(text) else {
        return 0;
    };
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| keys.contains(k))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

/// What a call that reached its limits is told, in words; `None` when it
/// reached none.
fn limits_reached(
    limits: CallLimits,
    before: LimitCounts,
    now: LimitCounts,
    memory_v1: bool,
) -> Option<String> {
    let mut said = Vec::new();
    let forks = now.pids.saturating_sub(before.pids);
    if forks > 0 {
        said.push(format!(
            "the call reached its limit of {} processes (pids.max): {forks} fork{} refused (pids.events)",
            limits.pids_max,
            if forks == 1 { " was" } else { "s were" }
        ));
    }
    let kills = now.oom_kills.saturating_sub(before.oom_kills);
    if kills > 0 {
        // The files as they are named where the limit was set.
        let (limit, events) = match memory_v1 {
            false => ("memory.max", "memory.events"),
            true => ("memory.limit_in_bytes", "memory.oom_control"),
        };
        said.push(format!(
            "the call reached its memory limit of {} ({limit}): the kernel's OOM killer killed {kills} of its processes ({events})",
            bytes_text(limits.memory_max)
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// `4 GiB`, `512 MiB`, or bytes.
fn bytes_text(n: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

/// The `some total` of a `cpu.pressure` file's text.
fn parse_pressure_total(text: &[u8]) -> Option<std::time::Duration> {
    let text = std::str::from_utf8(text).ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    let total = some
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    Some(std::time::Duration::from_micros(total.parse().ok()?))
}

impl CallCgroup {
    /// An empty cgroup for one call, from the pool or new; `None` where
    /// cgroups are not usable.
    pub fn create(owner: &Interruptions) -> Option<CallCgroup> {
        if REFUSED.load(Ordering::Relaxed) {
            return None;
        }
        let pooled = lock(&POOL).pop();
        let mut slot = match pooled {
            Some(slot) if slot.is_clean() => slot,
            // Something moved into it while it waited (a plugin that knew its
            // name): it is emptied, and a fresh one is used.
            Some(dirty) => {
                dirty.remove();
                Slot::new()?
            }
            None => Slot::new()?,
        };
        lock(&LIVE).push(slot.n);
        set_owner(slot.n, owner);
        let limits = *lock(&LIMITS);
        slot.limit(limits);
        let counts_at_start = slot.limit_counts();
        let pressure_at_start = slot
            .pressure_baseline
            .take()
            .or_else(|| slot.pressure_total());
        Some(CallCgroup {
            slot: Some(slot),
            cleared: AtomicBool::new(false),
            seen_empty: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            pressure_at_start,
            pressure_last: Mutex::new(None),
            limits,
            counts_at_start,
        })
    }

    fn slot(&self) -> &Slot {
        self.slot
            .as_ref()
            .expect("a call cgroup's slot is taken only on drop")
    }

    /// The cgroup's directory, open, for the leader to be born in.
    pub fn fd(&self) -> &OwnedFd {
        &self.slot().fd
    }

    /// The kernel refused to start a process in a cgroup (`clone3` or
    /// `CLONE_INTO_CGROUP` missing, or filtered): no call of this process
    /// tries again.
    pub fn refused() {
        REFUSED.store(true, Ordering::Relaxed);
    }

    /// The live processes in the cgroup and below it (zombies have left it).
    /// One read of `cgroup.events` when it is empty: the usual case.
    pub fn pids(&self) -> Vec<i32> {
        let slot = self.slot();
        match slot.events() {
            Events::Empty => {
                self.seen_empty.store(true, Ordering::Relaxed);
                Vec::new()
            }
            Events::EmptyFrozen => Vec::new(),
            Events::Populated => {
                self.seen_empty.store(false, Ordering::Relaxed);
                tree::tree_pids(&slot.dir)
            }
        }
    }

    /// SIGKILLs everything in the cgroup and below it at once. A cgroup
    /// once killed is never reused: on some kernels (seen on 6.18) a process
    /// born into it by `CLONE_INTO_CGROUP` is then killed at birth (the
    /// fork compares the kill count of the parent's cgroup with the target's).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        tree::kill_tree(&self.slot().dir);
        // Empty unless a process left the cgroup2 one (as root may).
        self.slot().v1.kill();
    }

    /// The `cgroup.procs` of its v1 dirs, open, for the leader to write
    /// itself into before its exec (`-1` where there is none).
    pub fn v1_procs(&self) -> [libc::c_int; 2] {
        self.slot().v1.procs_fds()
    }

    /// The leader could not move itself into a v1 dir: no later call of this
    /// process gets v1 dirs (their limits would be written and never apply).
    pub fn v1_refused() {
        V1_REFUSED.store(true, Ordering::Relaxed);
    }

    /// How long, since it was taken, at least one process of the call was
    /// runnable but waiting for a CPU (`cpu.pressure`, `some total`, less its
    /// value when the call took the cgroup: a pooled one carries its past
    /// calls' totals): the host's share of the call's duration, not the
    /// plugin's. `None` without pressure stall information.
    pub fn cpu_wait(&self) -> Option<std::time::Duration> {
        let now = self.slot().pressure_total()?;
        *lock(&self.pressure_last) = Some(now);
        Some(now.saturating_sub(self.pressure_at_start?))
    }

    /// The limits the call reached since it took the cgroup, in words (see
    /// [`CallLimits`]); `None` when it reached none, or no controller is on.
    pub fn limits_reached(&self) -> Option<String> {
        let slot = self.slot();
        limits_reached(
            self.limits,
            self.counts_at_start,
            slot.limit_counts(),
            slot.memory_events.is_none() && slot.v1.has(Controller::Memory),
        )
    }

    /// Removes the cgroups a plugin made below the call's; true once nothing
    /// is in the call cgroup and nothing is below it (it may then be reused).
    /// Fails, and may be retried, while a process is still inside.
    pub fn clear(&self) -> bool {
        if self.cleared.load(Ordering::Relaxed) {
            return true;
        }
        let slot = self.slot();
        // Right after a look that found it empty (the sweep's first, cheap
        // test), only the child cgroups are left to check. Reuse is safe
        // either way: a pooled cgroup is checked again when it is taken.
        let seen_empty = self.seen_empty.swap(false, Ordering::Relaxed);
        let clean = (seen_empty && slot.childless())
            || slot.is_clean()
            || (tree::remove_below(&slot.dir) && slot.is_clean());
        self.cleared.store(clean, Ordering::Relaxed);
        clean
    }
}

/// Whether a process whose `/proc/<pid>/cgroup` path is `rel` is in the
/// cgroup of a live call other than `own` (that call's sweep claims it).
/// One of our call cgroups that no live call holds counts as outside.
pub(crate) fn in_other_live_call(rel: &str, own: Option<&CallCgroup>) -> bool {
    let Some(run) = run() else {
        return false;
    };
    let n = call_number(rel, &run.rel);
    let own = own.and_then(|c| c.slot.as_ref()).map(|s| s.n);
    n.is_some_and(|n| Some(n) != own && lock(&LIVE).contains(&n))
}

impl Drop for CallCgroup {
    /// Back to the pool when clean and never killed; a killed one is removed;
    /// otherwise its subtree is killed and
    /// removed now, and what still cannot go is left to the removal of the
    /// run's cgroup at exit (or to the next run).
    fn drop(&mut self) {
        let Some(mut slot) = self.slot.take() else {
            return;
        };
        lock(&LIVE).retain(|&n| n != slot.n);
        let clean = self.cleared.load(Ordering::Relaxed) || slot.is_clean();
        if clean && !self.killed.load(Ordering::Relaxed) {
            slot.pressure_baseline = lock(&self.pressure_last).take();
            lock(&POOL).push(slot);
        } else if clean && fs::remove_dir(&slot.dir).is_ok() {
            slot.v1.remove();
        } else {
            slot.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn limit_events_are_counted_and_said() {
        assert_eq!(event_count(b"max 3\n", &["max"]), 3);
        let memory = b"low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(event_count(memory, &["oom_kill"]), 1);
        let limits = CallLimits::default();
        let before = LimitCounts {
            pids: 5,
            oom_kills: 1,
        };
        assert_eq!(limits_reached(limits, before, before, false), None);
        let now = LimitCounts {
            pids: 7,
            oom_kills: 2,
        };
        let said = limits_reached(limits, before, now, false).unwrap();
        assert!(
            said.contains("4096 processes (pids.max): 2 forks were refused"),
            "{said}"
        );
        assert!(
            said.contains("memory limit of 4 GiB (memory.max)"),
            "{said}"
        );
        assert!(
            said.contains("killed 1 of its processes (memory.events)"),
            "{said}"
        );
        // Set through cgroup v1, the limit is named by v1's files.
        let said = limits_reached(limits, before, now, true).unwrap();
        assert!(
            said.contains("memory limit of 4 GiB (memory.limit_in_bytes)"),
            "{said}"
        );
        assert!(said.contains("(memory.oom_control)"), "{said}");
        assert!(said.contains("(pids.max)"), "{said}");
        assert_eq!(bytes_text(512 << 20), "512 MiB");
        assert_eq!(bytes_text(1000), "1000 bytes");
    }

    /// What a call did to the harness is said to its own run only; what no
    /// call can be told to have done, to every run live then; never to a run
    /// that starts later. The first capture said is the one kept.
    #[test]
    fn a_capture_is_said_to_the_runs_it_concerns_only() {
        // Records of this test's own, not the process's: other tests' runs
        // must not hear of these.
        let (live, owners) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
        let run = || {
            let record = Arc::new(Mutex::new(None));
            lock(&live).push(Arc::downgrade(&record));
            Interruptions(record)
        };
        let said = |run: &Interruptions| lock(&run.0).clone();
        let (a, b) = (run(), run());
        set_owner_in(&owners, 3, &a);
        record_in(&live, &owners, "moved into c3", Some(3));
        record_in(&live, &owners, "moved again", Some(3));
        assert_eq!(said(&a).as_deref(), Some("moved into c3"));
        assert_eq!(said(&b), None);
        // The call cgroup's run is over, or no call is known: every live run.
        let shared = a.clone();
        drop(a);
        record_in(&live, &owners, "traced", Some(4));
        assert_eq!(said(&b).as_deref(), Some("traced"));
        assert_eq!(said(&shared).as_deref(), Some("moved into c3"));
        drop(shared);
        let c = run();
        record_in(&live, &owners, "gone", Some(3));
        let later = run();
        assert_eq!(said(&c).as_deref(), Some("gone"));
        assert_eq!(said(&later), None);
    }

    #[test]
    fn a_cgroup_path_names_its_call() {
        let run = "/user.slice/dhv-conform-run-12-34";
        assert_eq!(call_number(&format!("{run}/c7"), run), Some(7));
        assert_eq!(call_number(&format!("{run}/c7/a/b"), run), Some(7));
        assert_eq!(call_number(run, run), None);
        assert_eq!(call_number(&format!("{run}/x7"), run), None);
        assert_eq!(call_number("/elsewhere/c7", run), None);
    }

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
