//! The CI gate (ci/gate.sh, the one script behind action.yml and the GitLab
//! template) run locally against the bundled plugins, as a plugin repository's CI
//! would run it.

use crate::util;

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
        summary.starts_with("earlier summary\n### dhv-conform gate: **conformant** (exit 0)\n"),
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

/// A must that failed is `non-conformant` in the outputs and the summary even when
/// the snapshot differs too; the exit code stays 3 (the snapshot's), as documented.
#[test]
fn a_must_failure_is_non_conformant_even_when_the_snapshot_differs() {
    let missing = util::Scratch::new();
    let snap = missing.path().join("conformance.snap");
    let g = gate("bad-version", &[("DHV_SNAPSHOT", snap.to_str().unwrap())]);
    assert_eq!(g.code, Some(3), "{}", g.stderr);
    let env = std::fs::read_to_string(g.reports.join("gate.env")).unwrap();
    assert!(env.contains("DHV_VERDICT=non-conformant\n"), "{env}");
    assert!(env.contains("DHV_EXIT_CODE=3\n"), "{env}");
    let summary = std::fs::read_to_string(&g.summary).unwrap();
    let headline = summary.lines().nth(1).unwrap_or_default();
    assert!(
        headline.contains("**non-conformant, and the snapshot is missing or differs** (exit 3)"),
        "{summary}"
    );
    assert!(
        g.stderr.contains("dhv-conform gate: non-conformant"),
        "{}",
        g.stderr
    );
}

/// Without a plugin the gate is a usage error (exit 2), and still leaves its
/// outputs and a summary that says why.
#[test]
fn the_gate_without_a_plugin_leaves_outputs_and_a_summary() {
    let g = gate("reference", &[("DHV_PLUGIN", "")]);
    assert_eq!(g.code, Some(2), "{}", g.stderr);
    let env = std::fs::read_to_string(g.reports.join("gate.env")).unwrap();
    assert!(env.contains("DHV_VERDICT=error\n"), "{env}");
    assert!(env.contains("DHV_EXIT_CODE=2\n"), "{env}");
    let summary = std::fs::read_to_string(&g.summary).unwrap();
    assert!(summary.contains("**error** (exit 2)"), "{summary}");
    assert!(summary.contains("set DHV_PLUGIN"), "{summary}");
}

/// Every shell step of the action is the script (tests/it/ci_github.rs runs them as
/// GitHub does); the GitLab template runs the same script, caches the build and
/// hands the outputs on as a dotenv report.
#[test]
fn the_action_and_the_template_run_the_script() {
    let action = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let runs: Vec<&str> = action
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("run:"))
        .collect();
    assert_eq!(
        runs,
        [
            r#"run: '"$GITHUB_ACTION_PATH/ci/gate.sh" revision'"#,
            r#"run: '"$GITHUB_ACTION_PATH/ci/gate.sh"'"#
        ]
    );
    assert!(action.contains("using: composite"));
    assert!(action.contains("actions/upload-artifact"));
    assert!(action.contains("actions/cache"));
    let gitlab = std::fs::read_to_string(repo().join("examples/gitlab-ci.yml")).unwrap();
    assert!(gitlab.contains("/ci/gate.sh"), "{gitlab}");
    assert!(gitlab.contains("junit: dhv-conform-reports/junit.xml"));
    assert!(gitlab.contains("dotenv: dhv-conform-reports/gate.env"));
    assert!(gitlab.contains(
        "cache:\n    key: dhv-conform-$DHV_CONFORM_REF\n    paths:\n      - .dhv-conform/\n"
    ));
    assert!(gitlab.contains("CARGO_HOME: $CI_PROJECT_DIR/.dhv-conform/cargo"));
    assert!(gitlab.contains("DHV_CACHE: $CI_PROJECT_DIR/.dhv-conform/cache"));
}

/// The README's workflow, the GitLab template and CHANGELOG.md name one release,
/// this crate's version: what a plugin repository pins is a release described.
#[test]
fn the_pins_and_the_changelog_name_this_release() {
    let version = env!("CARGO_PKG_VERSION");
    let read = |file: &str| std::fs::read_to_string(repo().join(file)).unwrap();
    let readme = read("README.md");
    assert!(
        readme.contains(&format!("uses: OWNER/dhv-conform@v{version} ")),
        "README pins another release"
    );
    assert_eq!(
        readme.matches("dhv-conform@v").count(),
        1,
        "one pin in README"
    );
    let gitlab = read("examples/gitlab-ci.yml");
    assert!(
        gitlab.contains(&format!("    DHV_CONFORM_REF: v{version}\n")),
        "{gitlab}"
    );
    assert!(gitlab.contains(&format!("[v{version}]")), "{gitlab}");
    let changelog = read("CHANGELOG.md");
    assert!(changelog.contains("## [Unreleased]"), "{changelog}");
    assert!(
        changelog.contains(&format!("## [{version}] - ")),
        "CHANGELOG.md has no entry for {version}"
    );
}

/// A GitLab job: the template's variables, GitLab's environment, no GitHub one. The
/// dotenv report holds the outputs, and a second job with the cache restored (the
/// same project dir) does not build the harness again.
#[test]
fn a_gitlab_job_writes_a_dotenv_report_and_reuses_the_cached_build() {
    let project = util::Scratch::new();
    let stub = project.path().join("stub");
    std::fs::create_dir(&stub).unwrap();
    let calls = project.path().join("cargo-calls.log");
    std::fs::write(
        stub.join("cargo"),
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ntarget=\nwhile [ $# -gt 0 ]; do [ \"$1\" = --target-dir ] && target=$2; shift; done\nmkdir -p \"$target/release\" && cp '{}' \"$target/release/dhv-conform\"\n",
            calls.display(),
            assert_cmd::cargo::cargo_bin("dhv-conform").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        stub.join("cargo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let tmp = project.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let dir = project.path().display().to_string();
    let job = |plugin: &str| {
        let out = Command::new("bash")
            .args(["-eo", "pipefail", "-c"])
            .arg(repo().join("ci/gate.sh"))
            .current_dir(project.path())
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", stub.display()))
            .env("TMPDIR", &tmp)
            .env("CI", "true")
            .env("GITLAB_CI", "true")
            .env("CI_PROJECT_DIR", &dir)
            .env("CI_JOB_NAME", "dhv-conform")
            .env("DHV_REPORTS", "dhv-conform-reports")
            .env("CARGO_HOME", format!("{dir}/.dhv-conform/cargo"))
            .env("DHV_CACHE", format!("{dir}/.dhv-conform/cache"))
            .env("DHV_PLUGIN", repo().join("sample-plugins").join(plugin))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let env = std::fs::read_to_string(project.path().join("dhv-conform-reports/gate.env"))
            .unwrap_or_else(|e| panic!("no dotenv report ({e}): {stderr}"));
        (out.status.code(), env, stderr)
    };
    let (code, env, stderr) = job("fails-on-existing-dir");
    assert_eq!(code, Some(1), "{stderr}");
    for line in [
        "DHV_VERDICT=non-conformant",
        "DHV_EXIT_CODE=1",
        "DHV_JUNIT=dhv-conform-reports/junit.xml",
        "DHV_JSON=dhv-conform-reports/report.json",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing:\n{env}");
    }
    let (code, env, stderr) = job("reference");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(env.lines().any(|l| l == "DHV_VERDICT=conformant"), "{env}");
    let builds = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(builds.lines().count(), 1, "{builds}");
    assert!(stderr.contains("using the cached harness"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "the gate left {left:?}");
}
