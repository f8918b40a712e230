//! Snapshots are deterministic: every sample gives a byte-identical snapshot
//! (the normalised report with the declared variations pinned, the form
//! `reports.rs` compares) on every run, whether the machine is idle or its CPUs
//! are oversubscribed sixteen times over by a load generator inside the test
//! ([`util::Load`]: sixteen busy threads per core, bounded in time;
//! `DHV_DETERMINISM_LOAD` sets another number).
//! Every run is compared with the snapshot stored in `snapshots/`, never with
//! another run, so a sweep cannot pass by construction.
//!
//! `scripts/long-tests` (not `cargo test`: it is long) runs
//! [`snapshots_are_the_same_idle_and_loaded`]: the reference 10 times
//! idle and 5 times loaded, the slow-start (Python) plugin 3 times idle and 5 times
//! loaded, and every other sample once loaded (the loaded runs three samples
//! at a time, all under the one load). Each sample's idle run is
//! `reports::sample_<name>`'s, which compares the same snapshot text on every
//! `cargo test`; running it again here would only double the suite's longest
//! test. `scripts/determinism-samples` runs longer sweeps ([`full_sweep`]: every
//! sample, 10 and 5 runs unless told).
//!
//! "Idle" means no load of the test's own: each phase's wall time, the load
//! average at its start and end, and the threads runnable as each run ended
//! are printed, as a shared machine is never quite idle.

use crate::samples;
use crate::util;

use std::time::{Duration, Instant};

/// The 1-minute load average, for the record.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// Threads ready to run right now (`procs_running` in /proc/stat, this one
/// included): the 1-minute load average lags a phase of a few seconds, this
/// shows the oversubscription as each run ends.
fn procs_running() -> usize {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("procs_running "))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// How one sample's runs compared with its stored snapshot.
struct Tally {
    name: String,
    idle: (usize, usize),
    loaded: (usize, usize),
    /// The start of the diff of the first run that differed.
    first_diff: Option<String>,
    /// Per phase run: "idle" or "loaded", its wall time, the load average
    /// at its start and end, and the threads runnable as each run ended (mean).
    phases: Vec<String>,
}

/// The start of a unified diff of `got` against the stored `want`, or `None`
/// when they are the same (trailing blank lines aside, as insta stores them).
pub(crate) fn difference(want: &str, got: &str) -> Option<String> {
    let got = got.trim_end();
    if got == want {
        return None;
    }
    let diff = dhv_conform::report::diff(want, got, "stored snapshot", "this run");
    let head: Vec<&str> = diff.lines().take(24).collect();
    Some(head.join("\n"))
}

/// Keeps the whole report of a run that differed, for its cause: the
/// normalised snapshot leaves out what the calls printed (an error message's
/// reason is often only on the plugin's stderr). Returns where it is.
fn keep_report(name: &str, phase: &str, json: &serde_json::Value) -> String {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("determinism-{name}-{phase}.json"));
    let text = serde_json::to_string_pretty(json).unwrap_or_default();
    match std::fs::write(&path, text) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("not kept: {e}"),
    }
}

/// Busy threads per core in a loaded phase: 16x oversubscription, or
/// `DHV_DETERMINISM_LOAD` per core.
fn oversubscribed() -> usize {
    std::env::var("DHV_DETERMINISM_LOAD")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16)
}

/// Runs `name` `idle` times, then `loaded` times under [`util::Load`], comparing
/// each snapshot with the stored one.
fn sweep(name: &str, idle: usize, loaded: usize) -> Tally {
    let mut tally = Tally::new(name, idle, loaded);
    if idle > 0 {
        tally.phase(false, idle);
    }
    if loaded > 0 {
        // Bounded well past the longest sweep: the threads end on their own.
        let _load = util::Load::oversubscribed(Duration::from_secs(30 * 60), oversubscribed());
        tally.phase(true, loaded);
    }
    // As it comes: a long sweep that is stopped still says what it saw.
    println!("{}", tally.line());
    tally
}

/// Each sample's idle runs one after the other, then every loaded run under one
/// [`util::Load`], `workers` samples at a time: a sample's share of the CPUs is
/// set by the busy threads, which outnumber the samples' own processes, so
/// running a few side by side keeps each at least as oversubscribed and takes
/// a fraction of the time.
fn sweep_all(samples: &[(String, usize, usize)], workers: usize) -> Vec<Tally> {
    let mut tallies: Vec<Tally> = samples
        .iter()
        .map(|(name, idle, loaded)| {
            let mut tally = Tally::new(name, *idle, *loaded);
            if *idle > 0 {
                tally.phase(false, *idle);
            }
            tally
        })
        .collect();
    let queue = std::sync::Mutex::new(tallies.iter_mut().filter(|t| t.loaded.1 > 0));
    let _load = util::Load::oversubscribed(Duration::from_secs(30 * 60), oversubscribed());
    std::thread::scope(|scope| {
        for _ in 0..workers.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some(tally) = next else { break };
                    let runs = tally.loaded.1;
                    tally.phase(true, runs);
                    println!("{}", tally.line());
                }
            });
        }
    });
    tallies
}

impl Tally {
    fn new(name: &str, idle: usize, loaded: usize) -> Tally {
        Tally {
            name: name.to_owned(),
            idle: (0, idle),
            loaded: (0, loaded),
            first_diff: None,
            phases: Vec::new(),
        }
    }

    /// One run, compared with the stored snapshot.
    fn one(&mut self, under_load: bool) {
        let name = self.name.as_str();
        let expected = samples::stored_snapshot(name);
        let run = samples::run_sample(name, samples::scale(name));
        let diff = difference(&expected, &samples::compared_snapshot_text(name, &run));
        let (slot, phase) = match under_load {
            true => (&mut self.loaded, "loaded"),
            false => (&mut self.idle, "idle"),
        };
        slot.0 += usize::from(diff.is_none());
        if let (Some(diff), None) = (diff, &self.first_diff) {
            let kept = keep_report(name, phase, &run.json);
            self.first_diff = Some(format!("{phase} run (its report: {kept}):\n{diff}"));
        }
    }

    /// `runs` runs, idle or under load, with the phase's record.
    fn phase(&mut self, under_load: bool, runs: usize) {
        let (start, before) = (Instant::now(), load_average());
        let mut runnable = 0;
        for _ in 0..runs {
            self.one(under_load);
            runnable += procs_running();
        }
        self.phases.push(format!(
            "{} {:.0} s, load {before} -> {}, {:.1} runnable",
            if under_load { "loaded" } else { "idle" },
            start.elapsed().as_secs_f64(),
            load_average(),
            runnable as f64 / runs as f64
        ));
    }

    /// `<sample> idle x/y loaded x/y (<phases>)`.
    fn line(&self) -> String {
        format!(
            "{:<24} idle {}/{}  loaded {}/{}  ({})",
            self.name,
            self.idle.0,
            self.idle.1,
            self.loaded.0,
            self.loaded.1,
            self.phases.join("; ")
        )
    }
}

/// Prints the tallies and fails on any differing run.
fn assert_identical(tallies: &[Tally]) {
    println!("\nsummary:");
    for t in tallies {
        println!("{}", t.line());
    }
    let flaps: Vec<String> = tallies
        .iter()
        .filter_map(|t| Some(format!("{}: {}", t.name, t.first_diff.as_ref()?)))
        .collect();
    assert!(flaps.is_empty(), "snapshots differ:\n{}", flaps.join("\n"));
}

/// The samples that need root and loop devices.
const LOOP_SAMPLES: &[&str] = &[
    "loop-ext4",
    "loop-block",
    "mkfs-on-reboot",
    "mkfs-crash-window",
];

/// The samples a sweep covers: every sample but the declared races, and
/// loop-ext4 and loop-block where loop devices cannot be used.
fn swept() -> Vec<String> {
    let loop_unusable = util::loop_devices_unusable();
    if let Some(why) = &loop_unusable {
        util::skip("samples loop-ext4 and loop-block", why);
    }
    samples::all()
        .into_iter()
        .filter(|n| !samples::RACES.iter().any(|(race, _)| race == n))
        .filter(|n| !LOOP_SAMPLES.contains(&n.as_str()) || loop_unusable.is_none())
        .collect()
}

/// The samples swept many times by default, (name, idle runs, loaded runs): the
/// counts the project holds itself to for the conformant plugin and for one that
/// is merely slow to start (its loaded runs are the ones a host's load could
/// change). Every other sample gets one loaded run; its idle run is
/// `reports::sample_<name>`.
const DEEP: &[(&str, usize, usize)] = &[("reference", 10, 5), ("slow-start", 3, 5)];

#[test]
#[ignore = "long (determinism): minutes on a loaded 2-core machine; run by scripts/long-tests"]
fn snapshots_are_the_same_idle_and_loaded() {
    let started = Instant::now();
    let mut runs: Vec<(String, usize, usize)> = DEEP
        .iter()
        .map(|(n, i, l)| (n.to_string(), *i, *l))
        .collect();
    for name in swept() {
        if !DEEP.iter().any(|(deep, _, _)| *deep == name) {
            runs.push((name, 0, 1));
        }
    }
    let tallies = sweep_all(&runs, LOADED_WORKERS);
    println!("sweep: {:.0} s", started.elapsed().as_secs_f64());
    assert_identical(&tallies);
}

/// Samples run side by side in the loaded phase of the default sweep.
const LOADED_WORKERS: usize = 3;

/// The full sweep: `DHV_DETERMINISM_RUNS=<idle>,<loaded>` (default 10,5) for
/// every sample; `DHV_DETERMINISM_SAMPLES=a,b` for some only.
#[test]
#[ignore = "long: every sample 10 times idle and 5 times loaded; run by scripts/determinism-samples"]
fn full_sweep() {
    let runs = std::env::var("DHV_DETERMINISM_RUNS").unwrap_or_else(|_| "10,5".into());
    let (idle, loaded) = runs
        .split_once(',')
        .and_then(|(i, l)| Some((i.parse().ok()?, l.parse().ok()?)))
        .expect("DHV_DETERMINISM_RUNS is <idle>,<loaded>");
    let only = std::env::var("DHV_DETERMINISM_SAMPLES").ok();
    let started = Instant::now();
    let tallies: Vec<Tally> = swept()
        .into_iter()
        .filter(|n| only.as_deref().is_none_or(|o| o.split(',').any(|s| s == n)))
        .map(|n| sweep(&n, idle, loaded))
        .collect();
    println!("sweep: {:.0} s", started.elapsed().as_secs_f64());
    assert_identical(&tallies);
}

/// The comparison can fail: a stored snapshot with one byte changed, or one line
/// more, is a difference, and the diff names the line.
#[test]
fn a_changed_snapshot_is_a_difference() {
    let stored = samples::stored_snapshot("reference");
    assert!(
        stored.contains("\npassed: ") && stored.contains(" skip: "),
        "the stored snapshot counts the checks that passed and lists the others"
    );
    assert_eq!(difference(&stored, &format!("{stored}\n\n")), None);
    let flipped = stored.replacen(" skip", " warn", 1);
    assert_ne!(flipped, stored);
    let diff = difference(&stored, &flipped).expect("a flipped status differs");
    assert!(diff.contains("+") && diff.contains(" warn"), "{diff}");
    assert!(difference(&stored, &format!("{stored}\nextra line")).is_some());
}

/// The race list only shrinks, and it is empty: a sample that flaps is a bug to
/// find (or a variation to declare on its check, `CheckSpec::varies`), not one to leave
/// out.
#[test]
fn no_sample_is_left_out_as_a_race() {
    let listed: Vec<&str> = samples::RACES.iter().map(|(name, _)| *name).collect();
    assert!(listed.is_empty(), "samples left out as races: {listed:?}");
}

/// The load generator loads, and stops: its threads end when it is dropped.
#[test]
fn the_load_generator_stops() {
    let load = util::Load::start(Duration::from_secs(60));
    assert_eq!(
        load.threads.len(),
        2 * std::thread::available_parallelism().map_or(2, |n| n.get())
    );
    let started = Instant::now();
    drop(load);
    assert!(started.elapsed() < Duration::from_secs(5));
}
