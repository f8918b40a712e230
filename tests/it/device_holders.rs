//! A loop device held by someone else than the plugin never fails the
//! plugin. On a crowded host another `dhv-conform` run (its `losetup --find`
//! probing devices), a backup agent or the harness itself can hold a loop
//! device while the plugin's delete detaches it: the delete is made again
//! once the holder lets go, or the check ends a skip, "inconclusive", naming
//! the holder by pid and command line. Needs root and loop devices: without
//! them each test says why and passes without running.

use crate::determinism_samples::difference;
use crate::samples;
use crate::util;

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

/// A test process (this one) that opens the volume's loop device and keeps
/// it open while the plugin deletes: `loop-ext4`'s delete fails ("cannot
/// detach the loop device of the volume") through no fault of its own, and
/// the check ends inconclusive, naming this process, never failing.
#[test]
fn a_loop_device_held_by_the_test_fails_no_check_and_is_named() {
    if let Some(why) = util::loop_devices_unusable() {
        util::skip(
            "a_loop_device_held_by_the_test_fails_no_check_and_is_named",
            &why,
        );
        return;
    }
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins/loop-ext4");
    let tmp = util::Scratch::new();
    let mut run = std::process::Command::new(util::bin())
        .arg("check")
        .arg(&plugin)
        .args(["--exact", "delete.succeeds", "--json", "-", "-q"])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Every loop device of the run is opened as soon as it is seen and held
    // until the run ends (no event tells when a device is attached: looked
    // for, bounded).
    let mut held: Vec<(std::path::PathBuf, std::fs::File)> = Vec::new();
    let ended = util::wait_for(Duration::from_secs(400), || {
        for dev in dhv_host::safe_fs::loops_backed_under(tmp.path()) {
            if !held.iter().any(|(d, _)| *d == dev.device) {
                if let Ok(file) = std::fs::File::open(&dev.device) {
                    held.push((dev.device, file));
                }
            }
        }
        run.try_wait().unwrap().is_some()
    });
    if !ended {
        let _ = run.kill();
    }
    let status = run.wait().unwrap();
    drop(held);
    let (mut stdout, mut stderr) = (String::new(), String::new());
    run.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(ended, "the run did not end in 400 s; stderr: {stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr: {stderr}"));
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "delete.succeeds")
        .expect("delete.succeeds ran");
    let message = check["message"].as_str().unwrap_or_default();
    println!("delete.succeeds: {}: {message}", check["status"]);
    assert_eq!(check["status"], "skip", "{message}");
    assert!(message.starts_with("inconclusive: "), "{message}");
    assert!(
        message.contains(&format!("PID {} (", std::process::id())),
        "the holder is not named: {message}"
    );
    assert!(message.contains("another program"), "{message}");
    let failed: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| format!("{}: {}", c["id"], c["message"]))
        .collect();
    assert!(failed.is_empty(), "failed: {failed:#?}");
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    // The run's end could not detach it either while it was held: it says
    // who held it, not "something holds it open".
    let kept = report["sandbox"]["kept"].to_string();
    assert!(
        kept.contains(&format!("held by PID {} (", std::process::id())),
        "the run's end does not name the holder: {kept}"
    );
}

/// Two runs on one host at once, with the loop-device samples: neither
/// run's verdicts move from its stored snapshot, though each run's plugin
/// attaches, probes and detaches loop devices beside the other's.
#[test]
#[ignore = "long: two whole loop-device sample runs at once (about two minutes); scripts/long-tests runs it"]
fn two_runs_at_once_keep_their_snapshots() {
    if let Some(why) = util::loop_devices_unusable() {
        util::skip("two_runs_at_once_keep_their_snapshots", &why);
        return;
    }
    let runs: Vec<_> = ["loop-ext4", "loop-block"]
        .into_iter()
        .map(|name| {
            std::thread::spawn(move || {
                let run = samples::run_sample(name, samples::scale(name));
                let got = samples::compared_snapshot_text(name, &run);
                (name, difference(&samples::stored_snapshot(name), &got))
            })
        })
        .collect();
    let differed: Vec<String> = runs
        .into_iter()
        .filter_map(|r| match r.join().unwrap() {
            (_, None) => None,
            (name, Some(diff)) => Some(format!("{name}:\n{diff}")),
        })
        .collect();
    assert!(
        differed.is_empty(),
        "snapshots differ:\n{}",
        differed.join("\n")
    );
}
