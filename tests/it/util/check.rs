//! `dhv-conform check ARGS` as the check tests run it: a scratch TMPDIR per
//! run, and every run shown to leave nothing in it (no temp dir, no process).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::report::{self, Report};

use super::{Scratch, repo};

/// Longest any single run may take before the test calls it hung.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The path of a bundled fixture, as `--fixture` takes it.
pub fn fixture(name: &str) -> String {
    repo()
        .join("fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// What a run printed and how it ended.
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The `--json -` report on stdout; stdout must hold nothing else.
    pub fn report(&self) -> Report {
        report::from_json(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON report ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// The ids of the checks in the report.
    pub fn ids(&self) -> BTreeSet<String> {
        self.report().checks.into_iter().map(|c| c.id).collect()
    }
}

/// `dhv-conform check ARGS`, with a scratch TMPDIR.
pub struct Check {
    pub cmd: Command,
    pub tmp: Scratch,
}

pub fn check<I, S>(args: I) -> Check
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let tmp = Scratch::new();
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.arg("check")
        .args(args)
        .env("TMPDIR", tmp.path())
        .env_remove("NO_COLOR")
        .env_remove("CI")
        .timeout(RUN_LIMIT);
    Check { cmd, tmp }
}

impl Check {
    /// Sets an environment variable of the run.
    pub fn env(mut self, key: &str, value: &str) -> Check {
        self.cmd.env(key, value);
        self
    }

    /// Runs it, and proves the run left no temp file and no process behind.
    pub fn run(mut self) -> Out {
        let out = self.cmd.output().unwrap();
        assert_left_nothing(&self.tmp);
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// No temp file in the run's TMPDIR, no process that names it.
pub fn assert_left_nothing(tmp: &Scratch) {
    let left: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temp files left behind: {left:?}");
    let procs = super::processes_with_env_containing(&tmp.path().to_string_lossy());
    assert!(procs.is_empty(), "processes left behind: {procs:?}");
}

/// The find-or-fail helper for a check in a report.
pub fn find<'a>(report: &'a Report, id: &str) -> &'a report::CheckResult {
    report
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no {id} in the report"))
}

/// `dhv-conform check ARGS --json - -q` with `scratch` as its TMPDIR, bounded
/// by `limit`: the report, once no process is left that names the scratch dir.
pub fn json_report(scratch: &Scratch, args: &[&str], limit: Duration) -> serde_json::Value {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .args(args)
        .args(["--json", "-", "-q"])
        .env("TMPDIR", scratch.path())
        .timeout(limit)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let procs = super::processes_with_env_containing(&scratch.path().to_string_lossy());
    assert!(procs.is_empty(), "processes left behind: {procs:?}");
    report
}

/// `check PLUGIN --json - volume.` (the `volume.*` checks), expected to exit
/// 0: its report.
pub fn volume_report(plugin: &std::path::Path) -> Report {
    let out = check([
        plugin.as_os_str(),
        "--json".as_ref(),
        "-".as_ref(),
        "volume.".as_ref(),
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.report()
}

/// A check's status and message in a report; a check missing from it fails
/// the test.
pub fn status_of(report: &Report, id: &str) -> (report::Status, String) {
    let c = report
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("{id} not in the report"));
    (c.status, c.message.clone())
}

/// Check `id` alone on `plugin` (`check PLUGIN --exact ID --json - -q`): its
/// status and message.
pub fn only(plugin: &std::path::Path, id: &str) -> (report::Status, String) {
    let out = check([
        plugin.as_os_str(),
        "--exact".as_ref(),
        id.as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
        "-q".as_ref(),
    ])
    .run();
    status_of(&out.report(), id)
}
