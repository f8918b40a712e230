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
//!
//! It also measures what held races cost (issue 49): every call of this
//! build's runs held at its first change of state (`held_ms` in the JSON
//! report: from its change to its burst's release) and the longest held
//! call. A burst is let go as soon as no call of it can still arrive, so no
//! held call of the reference's run should last over [`HELD_BOUND`]: one that
//! does waited on something other than its siblings.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Issue 39's bound on the planned run's wall time against the run before it.
const BOUND: f64 = 1.25;

/// Issue 49's bound on a held call of the reference's run, start to end.
const HELD_BOUND: Duration = Duration::from_secs(1);

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
        "{:<14} {:>12} {:>12} {:>8} {:>7} {:>12} {:>12}",
        "sample", "this build", "baseline", "ratio", "held", "longest wait", "longest call"
    );
    let mut worst: Option<f64> = None;
    let mut held_met = true;
    let report = std::env::temp_dir().join(format!("dhv-bench-wall-{}.json", std::process::id()));
    for name in samples.split(',').filter(|n| !n.is_empty()) {
        let plugin = root.join("sample-plugins").join(name);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut held: Vec<Held> = Vec::new();
        for _ in 0..runs {
            ours.push(wall(&this, &plugin, Some(&report)));
            held.extend(held_calls(&report));
            if let Some(base) = &baseline {
                theirs.push(wall(base, &plugin, None));
            }
        }
        let _ = std::fs::remove_file(&report);
        let longest_wait = held.iter().map(|h| h.waited).max().unwrap_or_default();
        let longest_call = held.iter().map(|h| h.call).max().unwrap_or_default();
        if name == "reference" {
            held_met &= longest_call <= HELD_BOUND;
        }
        let ours = median(&mut ours);
        let theirs = (!theirs.is_empty()).then(|| median(&mut theirs));
        let ratio = theirs.map(|t| ours.as_secs_f64() / t.as_secs_f64());
        if let Some(r) = ratio {
            worst = Some(worst.map_or(r, |w: f64| w.max(r)));
        }
        println!(
            "{name:<14} {:>11.2}s {:>12} {:>8} {:>7} {:>10.0}ms {:>10.0}ms",
            ours.as_secs_f64(),
            theirs.map_or("-".into(), |t| format!("{:.2}s", t.as_secs_f64())),
            ratio.map_or("-".into(), |r| format!("{r:.2}x")),
            held.len(),
            longest_wait.as_secs_f64() * 1e3,
            longest_call.as_secs_f64() * 1e3,
        );
    }
    println!("load average {} at the end", load_average());
    println!(
        "no held call of the reference's runs over {HELD_BOUND:?}: {}",
        common::met(held_met)
    );
    if let Some(worst) = worst {
        println!(
            "worst ratio {worst:.2}x (bound {BOUND}x): {}",
            common::met(worst <= BOUND)
        );
    }
}

/// One held call of a run: how long it was held, and how long it lasted.
struct Held {
    waited: Duration,
    call: Duration,
}

/// Every held call in the JSON report at `path` (each check shows at most
/// 20 calls: a sample of the held ones).
fn held_calls(path: &Path) -> Vec<Held> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(report) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let ms = |v: &serde_json::Value| Duration::from_secs_f64(v.as_f64().unwrap_or(0.0) / 1e3);
    report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["invocations"].as_array().into_iter().flatten())
        .filter(|i| !i["held_ms"].is_null())
        .map(|i| Held {
            waited: ms(&i["held_ms"]),
            call: ms(&i["duration_ms"]),
        })
        .collect()
}

/// The wall time of one default run of `plugin` by `binary` (its verdict does
/// not matter here, only that it ran to its end), its JSON report written to
/// `json` when given.
fn wall(binary: &Path, plugin: &Path, json: Option<&Path>) -> Duration {
    let start = Instant::now();
    let mut command = Command::new(binary);
    command.arg("check").arg(plugin);
    if let Some(json) = json {
        command.arg("--json").arg(json);
    }
    let status = command
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
