//! The HTML report of a 10,000-call run: how long the page takes to make, and how long
//! a browser takes to open it.
//!
//! The report is synthetic but shaped like a real one: 500 checks of 20 calls each (the
//! most a check keeps), every call with a start, a Nomad-sized environment, stdout and
//! stderr excerpts of a few hundred bytes (one in ten with control characters and markup
//! to escape) and its reproduce line; three operations with their calls made alone.
//! The bench prints, as medians of five runs:
//! - `report::to_html` on the model (the target: well under 2 s);
//! - `dhv-conform report html REPORT.json -o PAGE` through the binary (read, parse,
//!   render, write);
//! - when `chromium` is on the PATH, headless Chromium opening the page and taking a
//!   screenshot of it (parse, style, layout, paint), less the same for an empty page
//!   (the browser's own start-up): the time to render it.
//!
//! Run: `cargo bench --bench html_render`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dhv_conform::report::{
    self, CheckResult, Invocation, Level, PluginInfo, Report, RunOptions, Status, TimingProfile,
};

const CHECKS: usize = 500;
const CALLS_PER_CHECK: usize = 20;
const RUNS: usize = 5;

fn main() {
    let report = synthetic();
    let calls: usize = report.checks.iter().map(|c| c.invocations.len()).sum();
    let tmp = tempfile::Builder::new()
        .prefix("dhv-html-bench-")
        .tempdir()
        .expect("temp dir");
    let json = tmp.path().join("report.json");
    fs::write(&json, report::to_json(&report)).unwrap();
    let page = tmp.path().join("page.html");

    let render = median(|| {
        let started = Instant::now();
        let html = report::to_html(&report);
        let took = started.elapsed();
        std::hint::black_box(html.len());
        took
    });
    let html = report::to_html(&report);
    // Kept for a look in a browser (target/ is the build's own scratch).
    let kept = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
    fs::create_dir_all(&kept).unwrap();
    fs::write(kept.join("html_render-10000.html"), &html).unwrap();
    println!(
        "{calls} calls: report JSON {:.1} MB, page {:.1} MB",
        fs::metadata(&json).unwrap().len() as f64 / 1e6,
        html.len() as f64 / 1e6
    );
    println!("to_html: {:.0} ms", ms(render));

    let bin = Path::new(env!("CARGO_BIN_EXE_dhv-conform"));
    let cli = median(|| {
        let started = Instant::now();
        let status = Command::new(bin)
            .args(["report", "html"])
            .arg(&json)
            .arg("-o")
            .arg(&page)
            .status()
            .unwrap();
        assert!(status.success());
        started.elapsed()
    });
    println!("dhv-conform report html: {:.0} ms", ms(cli));

    match which("chromium") {
        Some(browser) => {
            let empty = tmp.path().join("empty.html");
            fs::write(&empty, "<!doctype html><title>empty</title>").unwrap();
            let profile = tmp.path().join("profile");
            let shot = tmp.path().join("shot.png");
            let open = |file: &Path| {
                median(|| {
                    let started = Instant::now();
                    let status = Command::new(&browser)
                        .args(["--headless", "--no-sandbox", "--disable-gpu"])
                        .arg("--window-size=1280,1000")
                        .arg(format!("--screenshot={}", shot.display()))
                        .arg(format!("--user-data-dir={}", profile.display()))
                        .arg(format!("file://{}", file.display()))
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .unwrap();
                    assert!(status.success());
                    started.elapsed()
                })
            };
            let base = open(&empty);
            let full = open(&page);
            println!(
                "chromium --screenshot: {:.0} ms, of which start-up (an empty page) {:.0} ms: \
                 the page renders in {:.0} ms",
                ms(full),
                ms(base),
                ms(full.saturating_sub(base))
            );
        }
        None => println!("chromium is not installed: the browser's render time is not measured"),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut run: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS).map(|_| run()).collect();
    times.sort();
    times[RUNS / 2]
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A report of `CHECKS` × `CALLS_PER_CHECK` calls, overlapping as a parallel run's do.
fn synthetic() -> Report {
    let env: Vec<String> = [
        "DHV_OPERATION=create",
        "DHV_VOLUMES_DIR=/tmp/dhv-conform-AbC123/check/volumes",
        "DHV_PLUGIN_DIR=/opt/nomad/plugins",
        "DHV_NODE_POOL=default",
        "DHV_NAMESPACE=default",
        "DHV_VOLUME_NAME=conformance-0b9c8f6e",
        "DHV_VOLUME_ID=0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69",
        "DHV_CAPACITY_MIN_BYTES=50000000",
        "DHV_CAPACITY_MAX_BYTES=100000000",
        "DHV_NODE_ID=e5bbaef5-3909-4ee5-8c0e-ac1b75ac3eb3",
        "DHV_PARAMETERS=null",
    ]
    .map(String::from)
    .to_vec();
    let reproduce = format!(
        "env -i {} /opt/nomad/plugins/example create </dev/null",
        env.join(" ")
    );
    let ops = ["fingerprint", "create", "delete"];
    let checks = (0..CHECKS)
        .map(|c| {
            let invocations = (0..CALLS_PER_CHECK)
                .map(|i| {
                    let n = c * CALLS_PER_CHECK + i;
                    let hostile = n % 10 == 0;
                    Invocation {
                        operation: ops[n % 3].to_owned(),
                        env: env.clone(),
                        exit_code: Some(if n % 97 == 0 { 1 } else { 0 }),
                        started_ms: Some((c * 7) as f64 + i as f64 * 3.5),
                        duration_ms: 2.0 + (n % 40) as f64 * 0.7,
                        stdout: "{\"path\": \"/tmp/dhv-conform-AbC123/check/volumes/0b9c8f6e\", \"bytes\": 0}\n"
                            .repeat(3),
                        stderr: if hostile {
                            "\u{1b}[31merror\u{1b}[0m </script><!-- \u{202E}txt.exe \0 \u{FFFD}\n".repeat(4)
                        } else {
                            "example: volume ready at /tmp/dhv-conform-AbC123/check/volumes/0b9c8f6e\n"
                                .repeat(3)
                        },
                        reproduce: reproduce.clone(),
                        in_flight: Some(if i % 5 == 0 { 1 } else { 4 }),
                        ..Invocation::default()
                    }
                })
                .collect();
            CheckResult {
                id: format!("group{}.check-{c:03}", c % 9),
                group: format!("group{}", c % 9),
                level: Level::Must,
                status: if c % 50 == 0 { Status::Fail } else { Status::Pass },
                message: format!("check {c}: what was expected and what happened"),
                duration_ms: 80,
                invocations,
                unpinned: None,
                needs: None,
                phase: None,
            }
        })
        .collect();
    let timing = ops
        .iter()
        .map(|op| TimingProfile {
            operation: (*op).to_owned(),
            count: CHECKS * CALLS_PER_CHECK / 3,
            p50_ms: 9.0,
            p95_ms: 25.0,
            max_ms: 30.0,
            limit_ms: if *op == "fingerprint" {
                1000.0
            } else {
                60_000.0
            },
            alone_ms: (0..200).map(|i| 2.0 + i as f64 * 0.1).collect(),
        })
        .collect();
    Report::new(
        "nomad-1.10",
        PluginInfo {
            path: "/opt/nomad/plugins/example".into(),
            ..PluginInfo::default()
        },
        RunOptions::default(),
        checks,
        timing,
    )
}
