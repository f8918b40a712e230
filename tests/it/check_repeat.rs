//! `check --repeat N` and `--until-fail`: rounds of the selected checks, each
//! fresh; a check that failed in any round fails and says in how many.

use crate::util;

use std::time::Duration;

use assert_cmd::Command;

#[test]
fn a_check_that_fails_in_every_round_says_so() {
    let tmp = util::Scratch::new();
    let report = util::check::json_report(
        &tmp,
        &[
            &util::sample("fails-on-existing-dir"),
            "create.idempotent",
            "--exact",
            "--repeat",
            "2",
        ],
        Duration::from_secs(120),
    );
    let check = &report["checks"][0];
    assert_eq!(check["id"], "create.idempotent", "{report}");
    assert_eq!(check["status"], "fail", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(message.ends_with("failed 2/2 rounds"), "{message}");
}

#[test]
fn until_fail_stops_at_the_first_failing_round() {
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args([
            "check",
            &util::sample("fails-on-existing-dir"),
            "create.idempotent",
            "--exact",
            "--until-fail",
        ])
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("round 1"), "{stdout}");
    assert!(!stdout.contains("round 2"), "{stdout}");
}

#[test]
fn repeat_zero_is_a_usage_error() {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["check", "mkdir", "--repeat", "0"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--repeat must be at least 1"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
