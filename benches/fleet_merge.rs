//! `dhv-conform report merge` at fleet scale: 10,000 node reports.
//!
//! Two real node reports are made first, by running the release binary's `check`
//! on `sample-plugins/reference` (conformant) and `sample-plugins/needs-home`
//! (non-conformant). From them 10,000 node reports are generated in a temp dir
//! (removed at the end): each its own node name, every 100th node non-conformant,
//! every 40th on another build of the plugin (another sha256). Each is a full
//! report with every invocation, as a node writes it (about 260 KiB).
//!
//! Then the binary merges them, as a user would run it, and the bench prints the
//! wall time and the merge process's peak RSS (GNU time's `%M`; see [`merge`]) for:
//! - 10,000 reports to JSON + Markdown (the target: under 10 s);
//! - the same with JUnit too (one testsuite per node);
//! - 1,000 reports to JSON + Markdown: against the 10,000 run, the memory that grows
//!   with the number of nodes (the matrix, and the output text it renders to).
//!
//! The reports are read from the page cache (they were just written): the figure is
//! the merge's own cost, not the disk's.
//!
//! Run: `cargo bench --bench fleet_merge` (about 3 GB of temp files for a minute).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NODES: usize = 10_000;
const SMALL: usize = 1_000;
const NON_CONFORMANT_EVERY: usize = 100;
const OLD_BUILD_EVERY: usize = 40;
const TEMPLATE_NODE: &str = "TEMPLATE-NODE";

fn main() {
    let bin = Path::new(env!("CARGO_BIN_EXE_dhv-conform"));
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins");
    let tmp = tempfile::Builder::new()
        .prefix("dhv-fleet-bench-")
        .tempdir()
        .expect("temp dir");
    let good = seed(bin, &samples.join("reference"), tmp.path(), "good.json");
    let bad = seed(bin, &samples.join("needs-home"), tmp.path(), "bad.json");

    let reports = tmp.path().join("reports");
    fs::create_dir(&reports).unwrap();
    let started = Instant::now();
    let files = generate(&reports, &good, &bad);
    let bytes: u64 = files.iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    println!(
        "generated {NODES} node reports, {:.2} GB, in {:.1} s",
        bytes as f64 / 1e9,
        started.elapsed().as_secs_f64()
    );

    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let outputs = |junit: bool| {
        let mut args = vec![
            "--json".to_owned(),
            out.join("fleet.json").display().to_string(),
            "--markdown".to_owned(),
            out.join("fleet.md").display().to_string(),
        ];
        if junit {
            args.push("--junit".to_owned());
            args.push(out.join("fleet.xml").display().to_string());
        }
        args
    };
    let dir_arg = [reports.display().to_string()];
    let run = merge(bin, &dir_arg, &outputs(false), &out);
    let target = if run.wall < Duration::from_secs(10) {
        "met"
    } else {
        "MISSED"
    };
    let fleet: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("fleet.json")).unwrap()).unwrap();
    assert_eq!(fleet["summary"]["nodes"], NODES);
    assert_eq!(
        fleet["summary"]["non_conformant"],
        NODES / NON_CONFORMANT_EVERY
    );
    report(&format!("{NODES} reports → JSON + Markdown"), run, &out);
    let run = merge(bin, &dir_arg, &outputs(true), &out);
    report(
        &format!("{NODES} reports → JSON + Markdown + JUnit"),
        run,
        &out,
    );
    let small: Vec<String> = files[..SMALL]
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let run = merge(bin, &small, &outputs(false), &out);
    report(&format!("{SMALL} reports → JSON + Markdown"), run, &out);
    println!("target: {NODES} reports merged in under 10 s: {target}");
}

/// Runs `check PLUGIN` once for a real node report with a placeholder node name.
fn seed(bin: &Path, plugin: &Path, dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    let status = Command::new(bin)
        .arg("check")
        .arg(plugin)
        .args(["--quiet", "--node-name", TEMPLATE_NODE, "--json"])
        .arg(&path)
        .env("TMPDIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run check");
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "check {plugin:?}: {status}"
    );
    fs::read_to_string(path).unwrap()
}

/// Writes the node reports; returns their paths in name order.
fn generate(dir: &Path, good: &str, bad: &str) -> Vec<PathBuf> {
    let sha = |text: &str| -> String {
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        value["plugin"]["sha256"].as_str().unwrap().to_owned()
    };
    let good_sha = sha(good);
    let old_build = good.replace(&good_sha, &"0".repeat(good_sha.len()));
    let placeholder = format!("\"name\": \"{TEMPLATE_NODE}\"");
    (0..NODES)
        .map(|i| {
            let seed = if i % NON_CONFORMANT_EVERY == 7 {
                bad
            } else if i % OLD_BUILD_EVERY == 3 {
                &old_build
            } else {
                good
            };
            let text = seed.replacen(&placeholder, &format!("\"name\": \"client-{i:05}\""), 1);
            let path = dir.join(format!("client-{i:05}.json"));
            fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

struct Run {
    wall: Duration,
    max_rss_kib: i64,
}

/// Runs `report merge INPUTS OUTPUTS` (into `out`, emptied first) under GNU time for
/// its peak RSS.
///
/// Not `wait4` on a child of this process: Linux carries the high-water RSS of the mm a
/// process `exec`s from into its `ru_maxrss`, so a child spawned from this (large) bench
/// process reports at least the bench's own peak. GNU time forks from a tiny process.
fn merge(bin: &Path, inputs: &[String], outputs: &[String], out: &Path) -> Run {
    for entry in fs::read_dir(out).unwrap() {
        fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let measured = out.with_extension("time");
    let started = Instant::now();
    let status = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&measured)
        .arg(bin)
        .args(["report", "merge"])
        .args(inputs)
        .args(outputs)
        .stdout(Stdio::null())
        .status()
        .expect("run the merge under /usr/bin/time (GNU time)");
    let wall = started.elapsed();
    // Every 100th node is non-conformant: exit 1.
    assert_eq!(status.code(), Some(1), "merge exit status");
    // GNU time puts "Command exited with non-zero status 1" before the figure.
    let text = fs::read_to_string(&measured).unwrap();
    let last = text.lines().last().unwrap_or_default().trim();
    Run {
        wall,
        max_rss_kib: last
            .parse()
            .unwrap_or_else(|_| panic!("GNU time said {text:?}")),
    }
}

fn report(what: &str, run: Run, out: &Path) {
    let size = |name: &str| {
        fs::metadata(out.join(name)).map_or(String::new(), |m| {
            format!(" {name} {:.1} MB", m.len() as f64 / 1e6)
        })
    };
    println!(
        "{what}: wall {:.2} s, peak RSS {:.1} MiB;{}{}{}",
        run.wall.as_secs_f64(),
        run.max_rss_kib as f64 / 1024.0,
        size("fleet.json"),
        size("fleet.md"),
        size("fleet.xml"),
    );
}
