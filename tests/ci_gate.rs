//! The CI gate (ci/gate.sh, the one script behind action.yml and the GitLab
//! template) run locally against the bundled plugins, as a plugin repository's CI
//! would run it.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Gate {
    code: Option<i32>,
    stderr: String,
    reports: PathBuf,
    summary: PathBuf,
    _work: util::Scratch,
}

/// Runs the gate on `plugin` with the harness just built, in a scratch workspace.
fn gate(plugin: &str, extra: &[(&str, &str)]) -> Gate {
    let work = util::Scratch::new();
    let tmp = work.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let summary = work.path().join("step-summary.md");
    std::fs::write(&summary, "earlier summary\n").unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("ci/gate.sh"))
        .current_dir(work.path())
        .env("DHV_CONFORM", assert_cmd::cargo::cargo_bin("dhv-conform"))
        .env("DHV_PLUGIN", repo().join("sample-plugins").join(plugin))
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("TMPDIR", &tmp)
        .env("CI", "true")
        .env_remove("DHV_SNAPSHOT")
        .env_remove("DHV_STRICT")
        .env_remove("DHV_ARGS")
        .env_remove("DHV_REPORTS");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "the gate left {left:?}");
    Gate {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        reports: work.path().join("dhv-conform-reports"),
        summary,
        _work: work,
    }
}

#[test]
fn the_gate_passes_the_reference_plugin_and_writes_every_report() {
    let g = gate("reference", &[]);
    assert_eq!(g.code, Some(0), "{}", g.stderr);
    for file in ["junit.xml", "summary.md", "report.json", "report.html"] {
        assert!(
            g.reports.join(file).is_file(),
            "{file} missing: {}",
            g.stderr
        );
    }
    let summary = std::fs::read_to_string(&g.summary).unwrap();
    assert!(
        summary.starts_with("earlier summary\n**dhv-conform**: "),
        "{summary}"
    );
    assert!(summary.contains("is **conformant**"), "{summary}");
    assert!(
        g.stderr.contains("dhv-conform gate: conformant"),
        "{}",
        g.stderr
    );
}

#[test]
fn the_gate_fails_a_broken_plugin_with_its_exit_code() {
    let g = gate("fails-on-existing-dir", &[]);
    assert_eq!(g.code, Some(1), "{}", g.stderr);
    let summary = std::fs::read_to_string(&g.summary).unwrap();
    assert!(summary.contains("non-conformant"), "{summary}");
    assert!(g.reports.join("junit.xml").is_file());

    let strict = gate("non-semver-version", &[("DHV_STRICT", "true")]);
    assert_eq!(strict.code, Some(1), "{}", strict.stderr);
}

/// Under CI a missing snapshot is reported (exit 3), never written.
#[test]
fn the_gate_holds_the_snapshot() {
    let missing = util::Scratch::new();
    let snap = missing.path().join("conformance.snap");
    let g = gate("reference", &[("DHV_SNAPSHOT", snap.to_str().unwrap())]);
    assert_eq!(g.code, Some(3), "{}", g.stderr);
    assert!(!snap.exists());
    assert!(
        g.stderr.contains("the snapshot is missing or differs"),
        "{}",
        g.stderr
    );
}

/// The action's only shell step is the script, so the test above covers it; the
/// GitLab template runs the same script.
#[test]
fn the_action_and_the_template_run_the_script() {
    let action = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let runs: Vec<&str> = action
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("run:"))
        .collect();
    assert_eq!(runs, [r#"run: '"$GITHUB_ACTION_PATH/ci/gate.sh"'"#]);
    assert!(action.contains("using: composite"));
    assert!(action.contains("actions/upload-artifact"));
    let gitlab = std::fs::read_to_string(repo().join("examples/gitlab-ci.yml")).unwrap();
    assert!(gitlab.contains("/ci/gate.sh"), "{gitlab}");
    assert!(gitlab.contains("junit: dhv-conform-reports/junit.xml"));
}
