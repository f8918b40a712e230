//! The GitHub action (action.yml) run as GitHub runs it: its own steps, GitHub's
//! environment, `bash --noprofile --norc -eo pipefail`, not root (see
//! `github_runner`), against the bundled plugins.

use crate::github_runner;
use crate::util;

use github_runner::{Runner, parse};
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn action() -> github_runner::Action {
    parse(&std::fs::read_to_string(repo().join("action.yml")).unwrap())
}

fn plugin(name: &str) -> String {
    repo()
        .join("sample-plugins")
        .join(name)
        .display()
        .to_string()
}

/// Outputs, the summary's headline and its diff, the cache key and the artifact.
#[test]
fn a_github_run_writes_outputs_and_a_summary_that_tells_the_gates_result() {
    let scratch = util::Scratch::new();
    let runner = Runner::new(scratch.path());
    let snap = runner.workspace.join("conformance.snap");
    let run = runner.run(
        &action(),
        "conformance",
        &[
            ("plugin", &plugin("reference")),
            ("snapshot", snap.to_str().unwrap()),
        ],
    );
    assert_eq!(run.gate_code(), Some(3), "{}", run.stderr);
    assert_eq!(run.output("gate", "verdict"), "snapshot-differs");
    assert_eq!(run.output("gate", "exit-code"), "3");
    for (name, file) in [
        ("junit", "junit.xml"),
        ("json", "report.json"),
        ("markdown", "summary.md"),
    ] {
        let path = runner.workspace.join(run.output("gate", name));
        assert!(path.ends_with(file) && path.is_file(), "{name}: {path:?}");
    }
    let first = run.summary.lines().next().unwrap_or_default();
    assert!(
        first.contains("the snapshot is missing or differs") && first.contains("exit 3"),
        "{}",
        run.summary
    );
    assert!(!first.contains("conformant"), "{first}");
    assert!(
        run.summary.contains("```diff\n--- (none)\n"),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains("\n+verdict: conformant\n"),
        "{}",
        run.summary
    );
    // The report's own summary follows.
    assert!(run.summary.contains("is **conformant**"), "{}", run.summary);

    let cache = run.used("actions/cache@").expect("the cache step ran");
    let (lock, rev) = (run.output("rev", "lock"), run.output("rev", "revision"));
    assert!(lock.len() == 16 && rev.len() == 16, "{lock} {rev}");
    assert_eq!(cache["key"], format!("dhv-conform-Linux-X64-{lock}-{rev}"));
    assert!(cache["path"].contains("/runner-temp/dhv-conform-cache"));
    assert!(cache["path"].contains("~/.cargo/registry"));
    let upload = run.used("actions/upload-artifact@").expect("uploaded");
    assert_eq!(upload["name"], run.output("gate", "artifact-name"));
    assert!(
        upload["name"].starts_with("dhv-conform-conformance-reference-"),
        "{upload:?}"
    );
    assert_eq!(runner.builds(), 1, "{}", run.stderr);
}

/// A harness that fails to build still leaves the gate's outputs (verdict
/// `error`, exit code 4), a step summary that shows the build's error, and the
/// upload step runs.
#[test]
fn a_harness_that_fails_to_build_leaves_outputs_and_a_summary() {
    let scratch = util::Scratch::new();
    let runner = Runner::new(scratch.path());
    runner.break_build();
    let run = runner.run(&action(), "check", &[("plugin", &plugin("reference"))]);
    assert_eq!(run.gate_code(), Some(4), "{}", run.stderr);
    assert_eq!(run.output("gate", "verdict"), "error");
    assert_eq!(run.output("gate", "exit-code"), "4");
    assert!(!run.output("gate", "artifact-name").is_empty());
    let first = run.summary.lines().next().unwrap_or_default();
    assert!(first.contains("**error** (exit 4)"), "{}", run.summary);
    assert!(
        run.summary.contains("failed to build") && run.summary.contains("error[E0425]"),
        "{}",
        run.summary
    );
    assert!(run.used("actions/upload-artifact@").is_some());
}

/// Two jobs of a matrix (same job id, two plugins) upload under two names, and the
/// second, with the harness unchanged and its cache restored, compiles nothing.
#[test]
fn a_matrix_uploads_two_artifacts_and_a_warm_run_does_not_build() {
    let scratch = util::Scratch::new();
    let runner = Runner::new(scratch.path());
    let a = runner.run(&action(), "check", &[("plugin", &plugin("reference"))]);
    assert_eq!(a.gate_code(), Some(0), "{}", a.stderr);
    assert_eq!(a.output("gate", "verdict"), "conformant");
    assert_eq!(runner.builds(), 1, "the cold run builds");
    assert!(a.stderr.contains("building the harness"), "{}", a.stderr);
    assert!(
        a.stderr.contains("Compiling"),
        "progress is shown: {}",
        a.stderr
    );

    let b = runner.run(
        &action(),
        "check",
        &[("plugin", &plugin("fails-on-existing-dir"))],
    );
    assert_eq!(b.gate_code(), Some(1), "{}", b.stderr);
    assert_eq!(b.output("gate", "verdict"), "non-conformant");
    assert_eq!(runner.builds(), 1, "the warm run built again: {}", b.stderr);
    assert!(
        b.stderr.contains("using the cached harness"),
        "{}",
        b.stderr
    );
    let first = b.summary.lines().next().unwrap_or_default();
    assert!(first.contains("**non-conformant** (exit 1)"), "{first}");

    let names = [
        a.used("actions/upload-artifact@"),
        b.used("actions/upload-artifact@"),
    ]
    .map(|w| w.expect("uploaded")["name"].clone());
    assert_ne!(names[0], names[1]);
}

/// A snapshot blessed without `--strict` serves a strict gate: a warning exits 1
/// (non-conformant), not 3 (snapshot differs).
#[test]
fn strict_with_a_warning_exits_1_against_a_lenient_snapshot() {
    let scratch = util::Scratch::new();
    let runner = Runner::new(scratch.path());
    let snap = runner.workspace.join("conformance.snap");
    let bless = std::process::Command::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
        .args([
            "check",
            &plugin("non-semver-version"),
            "--quiet",
            "--bless",
            "--accept",
        ])
        .arg("--snapshot")
        .arg(&snap)
        .env("TMPDIR", runner.root.join("tmp"))
        .output()
        .unwrap();
    assert_eq!(bless.status.code(), Some(0), "{bless:?}");
    let run = runner.run(
        &action(),
        "check",
        &[
            ("plugin", &plugin("non-semver-version")),
            ("snapshot", snap.to_str().unwrap()),
            ("strict", "true"),
        ],
    );
    assert_eq!(run.gate_code(), Some(1), "{}", run.stderr);
    assert_eq!(run.output("gate", "verdict"), "non-conformant");
    assert!(run.summary.contains("`: matched."), "{}", run.summary);
}

/// `args` is data: one argument per line, a `*` and spaces kept, nothing globbed
/// (the workspace holds files a glob would match).
#[test]
fn args_are_taken_one_per_line_without_globbing() {
    let scratch = util::Scratch::new();
    let runner = Runner::new(scratch.path());
    std::fs::write(runner.workspace.join("a-file"), "").unwrap();
    let run = runner.run(
        &action(),
        "check",
        &[
            ("plugin", &plugin("reference")),
            ("args", "--node-name\nnode * one\n\n--timeout-scale\n2\n"),
        ],
    );
    assert_eq!(run.gate_code(), Some(0), "{run:?}");
    let json = std::fs::read_to_string(runner.workspace.join(run.output("gate", "json"))).unwrap();
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["node"]["name"], "node * one", "{json}");
    assert_eq!(report["options"]["timeout_scale"], 2.0, "{json}");
}

/// `sudo: "true"` runs the check (only the check) with `sudo -E`, then hands the
/// reports back to the runner's user. The stub `sudo` records and runs the command.
#[test]
fn sudo_runs_the_check_with_the_environment_kept() {
    let scratch = util::Scratch::new();
    let runner = Runner::new(scratch.path());
    let run = runner.run(
        &action(),
        "check",
        &[("plugin", &plugin("reference")), ("sudo", "true")],
    );
    assert_eq!(run.gate_code(), Some(0), "{run:?}");
    let calls = runner.sudo_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[0].starts_with("-E ") && calls[0].contains("/dhv-conform check "),
        "{calls:?}"
    );
    assert!(calls[1].starts_with("chown -R "), "{calls:?}");
}
