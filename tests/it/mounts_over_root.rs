//! A plugin that bind-mounts a dir of its own over the run's temp dir
//! (`sample-plugins/mounts-over-root`): the harness detaches the mount at
//! once, before any further call, `process.agent-untouched` fails naming it
//! (source → target), and the outside dir is left exactly as it was: no
//! check dir of the harness's, no file of a later plugin call in it. Runs
//! in a private mount namespace (`unshare -m`); without root it prints why
//! and does not run.

use std::fs;
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::report::{self, Status};

use crate::util;

/// The dir the sample mounts over the run's temp dir: beside it, in TMPDIR.
pub const OUTSIDE: &str = "mounts-over-root.outside";

#[test]
fn a_mount_over_the_runs_temp_dir_is_detached_at_once_and_named() {
    const NAME: &str = "a_mount_over_the_runs_temp_dir_is_detached_at_once_and_named";
    if !util::in_private_mount_ns(NAME) {
        return;
    }
    let tmp = util::Scratch::new();
    let outside = tmp.path().join(OUTSIDE);
    fs::create_dir(&outside).unwrap();
    util::plant_sentinels(&outside);
    let before = util::tree_digest(&outside);
    let table_before = fs::read_to_string("/proc/self/mountinfo").unwrap();

    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args([
            "check",
            &util::sample("mounts-over-root"),
            "--json",
            "-",
            "-q",
        ])
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report =
        report::from_json(&stdout).unwrap_or_else(|e| panic!("no report ({e}); stderr: {stderr}"));

    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {stderr}");
    let untouched = util::check::find(&report, "process.agent-untouched");
    assert_eq!(untouched.status, Status::Fail, "{}", untouched.message);
    let canonical = outside.canonicalize().unwrap();
    let named = format!(
        "{} → {}/dhv-conform-",
        canonical.display(),
        tmp.path().canonicalize().unwrap().display()
    );
    assert!(
        untouched.message.contains(&named) && untouched.message.contains("detached by the harness"),
        "the finding names the mount ({named}): {}",
        untouched.message
    );
    assert_eq!(
        util::tree_digest(&outside),
        before,
        "the outside dir is as it was"
    );
    let table_after = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert_eq!(table_after, table_before, "no mount left");
    let left: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [OUTSIDE], "nothing but the test's own dir left");
    fs::remove_dir_all(&outside).unwrap();
    let procs = util::processes_with_env_containing(&tmp.path().to_string_lossy());
    assert!(procs.is_empty(), "processes left behind: {procs:?}");
}

/// For the runs of `mounts-over-root` that made its outside dir themselves
/// (the snapshot's, the robustness sweep's): the dir in `tmp` holds only
/// the file the sample wrote there (nothing of the harness's, nothing of a
/// later call's), and is removed.
pub fn remove_outside_as_made(tmp: &std::path::Path) {
    let outside = tmp.join(OUTSIDE);
    if !outside.exists() {
        return;
    }
    let held: Vec<String> = fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(held, ["precious"], "{OUTSIDE} holds only the sample's file");
    assert_eq!(
        fs::read_to_string(outside.join("precious")).unwrap(),
        "precious: not the run's\n"
    );
    fs::remove_dir_all(&outside).unwrap();
}
