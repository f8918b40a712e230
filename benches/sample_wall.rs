//! The default run's wall time on the samples, this build against another,
//! side by side: `dhv-conform check sample-plugins/<name>` as a user runs it,
//! the two binaries taking turns (A, B, A, B, ...) so that a change in the
//! machine's load falls on both alike.
//!
//! ```text
//! cargo bench --bench sample_wall                                  # this build alone, 3 runs
//! DHV_BENCH_BASELINE=/path/to/old/dhv-conform cargo bench --bench sample_wall -- 5
//! DHV_BENCH_SAMPLES=reference,loop-ext4 cargo bench --bench sample_wall
//! ```
//!
//! The goal (issue 39, docs/performance.md): the planned run (checks that
//! need the host to themselves run one at a time, races held at their first
//! change of state, kill points at the plugin's own steps) keeps the default
//! run within 1.25x of the wall time before it, on reference, loop-block,
//! slow-start and loop-ext4 (the loop samples need root and loop devices).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Issue 39's bound on the planned run's wall time against the run before it.
const BOUND: f64 = 1.25;

fn main() {
    let runs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(3)
        .max(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let this = PathBuf::from(env!("CARGO_BIN_EXE_dhv-conform"));
    let baseline = std::env::var_os("DHV_BENCH_BASELINE").map(PathBuf::from);
    let samples = std::env::var("DHV_BENCH_SAMPLES")
        .unwrap_or_else(|_| "reference,loop-block,slow-start,loop-ext4".into());
    println!(
        "{runs} run(s) each, load average {} at the start",
        load_average()
    );
    println!(
        "{:<14} {:>12} {:>12} {:>8}",
        "sample", "this build", "baseline", "ratio"
    );
    let mut worst: Option<f64> = None;
    for name in samples.split(',').filter(|n| !n.is_empty()) {
        let plugin = root.join("sample-plugins").join(name);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            ours.push(wall(&this, &plugin));
            if let Some(base) = &baseline {
                theirs.push(wall(base, &plugin));
            }
        }
        let ours = median(&mut ours);
        let theirs = (!theirs.is_empty()).then(|| median(&mut theirs));
        let ratio = theirs.map(|t| ours.as_secs_f64() / t.as_secs_f64());
        if let Some(r) = ratio {
            worst = Some(worst.map_or(r, |w: f64| w.max(r)));
        }
        println!(
            "{name:<14} {:>11.2}s {:>12} {:>8}",
            ours.as_secs_f64(),
            theirs.map_or("-".into(), |t| format!("{:.2}s", t.as_secs_f64())),
            ratio.map_or("-".into(), |r| format!("{r:.2}x"))
        );
    }
    println!("load average {} at the end", load_average());
    if let Some(worst) = worst {
        println!(
            "worst ratio {worst:.2}x (bound {BOUND}x): {}",
            common::met(worst <= BOUND)
        );
    }
}

/// The wall time of one default run of `plugin` by `binary` (its verdict does
/// not matter here, only that it ran to its end).
fn wall(binary: &Path, plugin: &Path) -> Duration {
    let start = Instant::now();
    let status = Command::new(binary)
        .arg("check")
        .arg(plugin)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let took = start.elapsed();
    match status {
        Ok(s) if s.code().is_some_and(|c| c <= 4) => took,
        other => panic!("{} check {}: {other:?}", binary.display(), plugin.display()),
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}
