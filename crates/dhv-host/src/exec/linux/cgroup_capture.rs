//! What a plugin does to capture the harness, and how the harness gets free:
//! a root plugin may move the harness's process into a cgroup of its call's
//! (where a sweep would kill it), freeze the run's cgroup (where a call then
//! never gets to its exec) or trace the harness (where every system call of
//! ours waits on it). [`come_home`] moves the harness back to the cgroups it
//! had when it made the run's ([`set_homes`]), a thread of the run's
//! ([`watch_run`]) thaws and untraces it, and each capture is said once to
//! the run it concerns ([`Interruptions`]). This knows the run's cgroups only
//! by the paths it is given, so the trees (`cgroup_tree.rs`), the v1 dirs
//! (`cgroup_v1.rs`) and the run (`cgroup_run.rs`) may all come home through
//! it.

use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use crate::sync::lock;

/// What a plugin did to capture the harness (moved it, froze the run's
/// cgroup, traced it), the first time it was seen, for one run: each
/// [`Supervisor`](crate::exec::Supervisor) holds one, its clones share it.
/// What can be told apart is said to the run whose call did it (the call
/// cgroup the harness was moved into, or the tracer is in); what cannot (a
/// freeze of the cgroup every run of this process shares) to every run live
/// then. A run that starts later never sees it. One made
/// [`for_a_call`](Self::for_a_call) also keeps what was said to it as that
/// call's own doing ([`by_this_call`](Self::by_this_call)).
#[derive(Clone)]
pub(crate) struct Interruptions {
    run: Arc<Mutex<Option<String>>>,
    call: Option<Arc<Mutex<Option<String>>>>,
}

impl Default for Interruptions {
    /// A record of its own, live (said what concerns every run) until its
    /// last clone is dropped.
    fn default() -> Self {
        let record = Arc::new(Mutex::new(None));
        let mut live = lock(&LIVE_RECORDS);
        live.retain(|r| r.strong_count() > 0);
        live.push(Arc::downgrade(&record));
        Interruptions::from(record)
    }
}

impl std::fmt::Debug for Interruptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Interruptions")
            .field(&*lock(&self.run))
            .finish()
    }
}

impl Interruptions {
    /// What a plugin did to capture the harness during this run, if it did
    /// (see [`come_home`], which this calls first, [`thaw_if_frozen`],
    /// [`untrace`]).
    pub(crate) fn get(&self) -> Option<String> {
        come_home();
        lock(&self.run).clone()
    }

    /// The same run's record, for one call: what is said to it is said to
    /// the run, and kept as the call's own doing too.
    pub(crate) fn for_a_call(&self) -> Interruptions {
        Interruptions {
            run: self.run.clone(),
            call: Some(Arc::new(Mutex::new(None))),
        }
    }

    /// What was said to this call's record (see
    /// [`for_a_call`](Self::for_a_call)): what its plugin was seen doing to
    /// capture the harness, the first time. `None` for a run's record.
    pub(crate) fn by_this_call(&self) -> Option<String> {
        lock(self.call.as_deref()?).clone()
    }

    /// Says `what`, unless something was said already (the first capture is
    /// the one that counts), to the run and to the call it is for.
    fn say(&self, what: &str) {
        for record in std::iter::once(&self.run).chain(&self.call) {
            lock(record).get_or_insert_with(|| what.to_owned());
        }
    }

    fn from(record: Arc<Mutex<Option<String>>>) -> Interruptions {
        Interruptions {
            run: record,
            call: None,
        }
    }
}

type Record = std::sync::Weak<Mutex<Option<String>>>;

/// Whose a call cgroup is: its run's record and its call's (see
/// [`Interruptions::for_a_call`]).
type Owner = (Record, Option<Record>);

/// The records of every run of this process that is still live.
static LIVE_RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
/// The record of the run whose call last took each call cgroup (by number).
static OWNERS: Mutex<Vec<(u64, Owner)>> = Mutex::new(Vec::new());

/// Says `what` to the run whose call took call cgroup `call`, or, when that
/// is not known (or the run is over), to every live run.
fn record(what: &str, call: Option<u64>) {
    record_in(&LIVE_RECORDS, &OWNERS, what, call);
}

/// [`record`] with the records given.
fn record_in(
    live: &Mutex<Vec<Record>>,
    owners: &Mutex<Vec<(u64, Owner)>>,
    what: &str,
    call: Option<u64>,
) {
    let owner = call.and_then(|n| {
        let owners = lock(owners);
        let (run, call) = &owners.iter().find(|(m, _)| *m == n)?.1;
        Some(Interruptions {
            run: run.upgrade()?,
            call: call.as_ref().and_then(Record::upgrade),
        })
    });
    let to: Vec<Interruptions> = match owner {
        Some(owner) => vec![owner],
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
pub(super) fn set_owner(n: u64, owner: &Interruptions) {
    set_owner_in(&OWNERS, n, owner);
}

/// [`set_owner`] with the records given.
fn set_owner_in(owners: &Mutex<Vec<(u64, Owner)>>, n: u64, owner: &Interruptions) {
    let mut owners = lock(owners);
    owners.retain(|(m, (r, _))| *m != n && r.strong_count() > 0);
    let call = owner.call.as_ref().map(Arc::downgrade);
    owners.push((n, (Arc::downgrade(&owner.run), call)));
}

/// The number of the call cgroup `rel` (a path as `/proc/PID/cgroup` shows
/// it) is in or below, when it is one of the run's, whose path is `run_rel`.
pub(super) fn call_number(rel: &str, run_rel: &str) -> Option<u64> {
    let below = rel.strip_prefix(run_rel)?.strip_prefix("/c")?;
    below.split('/').next()?.parse().ok()
}

/// One hierarchy this process had a cgroup in when it made the run's: the
/// place [`come_home`] moves it back to.
#[derive(Debug)]
pub(super) struct Home {
    /// The v1 controller that names the hierarchy in `/proc/self/cgroup`,
    /// or `""` for the cgroup2 one.
    pub hierarchy: &'static str,
    /// This process's own cgroup there, and its path as `/proc/self/cgroup`
    /// shows it.
    pub dir: PathBuf,
    pub rel: String,
    /// The run's cgroup there, as `/proc/self/cgroup` shows it.
    pub run_rel: String,
}

/// Where this process came from, set once the run's cgroup is made.
static HOMES: OnceLock<Vec<Home>> = OnceLock::new();

/// Records where [`come_home`] moves this process back to: the cgroup2
/// home first, then the v1 ones. Once a process; later calls change nothing.
pub(super) fn set_homes(homes: Vec<Home>) {
    let _ = HOMES.set(homes);
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
    // Set only once the run's cgroup is made (its making removes dead runs'
    // cgroups, which comes here): without one, no cgroup of ours holds the
    // harness.
    let Some(homes) = HOMES.get() else {
        return false;
    };
    let Some(text) = super::procfs::read_capped("/proc/self/cgroup", super::procfs::CGROUP_CAP)
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    let mut moved = false;
    for home in homes {
        let now = match home.hierarchy {
            "" => text.lines().find_map(|l| l.strip_prefix("0::")),
            controller => super::procfs::controller_path(&text, controller),
        };
        let Some(now) = now.filter(|now| *now != home.rel) else {
            continue;
        };
        let (hierarchy, home_rel, run_rel) = (home.hierarchy, home.rel.as_str(), &home.run_rel);
        // "0": the writer, all its threads with it.
        let back = fs::write(home.dir.join("cgroup.procs"), "0");
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
pub(super) fn watch_run(dir: &std::path::Path, rel: String) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            Interruptions::from(record)
        };
        let said = |run: &Interruptions| lock(&run.run).clone();
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

    /// What a call's cgroup was used for is said to that call as its own
    /// doing, and to its run; another call of the run hears nothing of it;
    /// once the call is over, its run still hears it.
    #[test]
    fn a_capture_through_a_calls_cgroup_is_that_calls_doing() {
        let (live, owners) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
        let record = Arc::new(Mutex::new(None));
        lock(&live).push(Arc::downgrade(&record));
        let run = Interruptions::from(record);
        let (first, second) = (run.for_a_call(), run.for_a_call());
        set_owner_in(&owners, 1, &first);
        set_owner_in(&owners, 2, &second);
        record_in(&live, &owners, "moved into c1", Some(1));
        assert_eq!(first.by_this_call().as_deref(), Some("moved into c1"));
        assert_eq!(second.by_this_call(), None);
        assert_eq!(run.by_this_call(), None);
        assert_eq!(lock(&run.run).as_deref(), Some("moved into c1"));
        drop(second);
        record_in(&live, &owners, "moved into c2", Some(2));
        assert_eq!(lock(&run.run).as_deref(), Some("moved into c1"));
        // The call is over: its run's record is still the one told.
        let other = Interruptions::from(Arc::new(Mutex::new(None)));
        lock(&live).push(Arc::downgrade(&other.run));
        record_in(&live, &owners, "traced from c2", Some(2));
        assert_eq!(lock(&other.run).as_deref(), None);
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
}
