//! An interrupted run tells the truth: the checks a signal cut short are
//! `skip` with the reason `interrupted` (never failed), the reports asked
//! for are written whole and name the signal, no `FAILED` line is printed,
//! and the exit is 128 + the signal.

use crate::util;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{bin, sample, wait_for};

/// A conformant plugin (the reference sample) whose creates take 2 s and
/// say they started by a file in `log`.
fn slow_reference(scratch: &util::Scratch) -> std::path::PathBuf {
    let log = scratch.path().join("log");
    fs::create_dir(&log).unwrap();
    let body = format!(
        r#"#!/bin/sh
if [ "$1" = create ]; then : > "{log}/started-$DHV_VOLUME_ID"; /bin/sleep 2; fi
exec {reference} "$@"
"#,
        log = log.display(),
        reference = sample("reference"),
    );
    scratch.plugin("slow-reference", &body)
}

fn interrupt_while_creates_run(signal: Signal) {
    let scratch = util::Scratch::new();
    let plugin = slow_reference(&scratch);
    let tmp = util::Scratch::new();
    let (json, junit, markdown) = (
        scratch.path().join("report.json"),
        scratch.path().join("report.xml"),
        scratch.path().join("report.md"),
    );
    let child = Command::new(bin())
        .arg("check")
        .arg(&plugin)
        .arg("--json")
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .arg("--markdown")
        .arg(&markdown)
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = wait_for(Duration::from_secs(60), || {
        fs::read_dir(scratch.path().join("log"))
            .unwrap()
            .next()
            .is_some()
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = output_bounded(child, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(started, "no create started within 60 s: {stderr}");
    assert_eq!(
        out.status.code(),
        Some(128 + signal as i32),
        "{signal}: {stderr}"
    );
    assert!(!stdout.contains("FAILED"), "{signal}: {stdout}");
    assert!(!stdout.contains("... warn"), "{signal}: {stdout}");
    assert!(
        stdout.contains(&format!("test result: interrupted by {signal}")),
        "{stdout}"
    );

    let report: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["interrupted"], signal.as_str(), "{report}");
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(
        checks.len(),
        dhv_conform::conformance::CATALOGUE.len(),
        "the report is not whole"
    );
    let judged: Vec<_> = checks
        .iter()
        .filter(|c| c["status"] == "fail" || c["status"] == "warn")
        .map(|c| format!("{} {}: {}", c["id"], c["status"], c["message"]))
        .collect();
    assert!(
        judged.is_empty(),
        "{signal}: cut short, yet judged: {judged:?}"
    );
    let cut_short = checks
        .iter()
        .filter(|c| c["status"] == "skip" && c["message"] == "interrupted")
        .count();
    assert!(cut_short > 0, "{signal}: no check skipped as interrupted");

    let xml = fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(&format!(
            r#"<property name="interrupted" value="{signal}"/>"#
        )),
        "{xml}"
    );
    let md = fs::read_to_string(&markdown).unwrap();
    assert!(md.contains(&format!("Interrupted by {signal}")), "{md}");
    util::check::assert_left_nothing(&tmp);
}

/// The child's output, once it exits within `limit`; killed and failed if not.
fn output_bounded(child: std::process::Child, limit: Duration) -> std::process::Output {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            let _ = rx.recv();
            panic!("dhv-conform did not end within {limit:?} of the signal");
        }
    }
}

#[test]
fn sigint_skips_the_checks_it_cuts_short_and_writes_whole_reports() {
    interrupt_while_creates_run(Signal::SIGINT);
}

#[test]
fn sigterm_skips_the_checks_it_cuts_short_and_writes_whole_reports() {
    interrupt_while_creates_run(Signal::SIGTERM);
}
