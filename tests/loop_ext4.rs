//! `sample-plugins/loop-ext4` — a plugin in the style real ones take (ext4 images,
//! loop-mounted) — passes every must-level check, and the run leaves no mount,
//! loop device, process or temp dir behind. Needs root and loop devices: where
//! the machine has neither, the test prints why and passes without running.

mod util;

use std::path::Path;
use std::process::Command as StdCommand;

use assert_cmd::Command;

fn mentions(cmd: &str, args: &[&str], needle: &str) -> Vec<String> {
    let out = StdCommand::new(cmd)
        .args(args)
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn loop_ext4_passes_every_must_check_and_leaves_nothing() {
    if let Some(why) = util::loop_devices_unusable() {
        println!("SKIPPED loop-ext4: {why}");
        return;
    }
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins/loop-ext4");
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["check", plugin.to_str().unwrap(), "--json", "-", "-q"])
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let failed: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| format!("{}: {}", c["id"], c["message"]))
        .collect();
    assert!(failed.is_empty(), "must-level failures: {failed:#?}");
    assert_eq!(out.status.code(), Some(0));
    let needle = tmp.path().to_string_lossy().into_owned();
    assert!(mentions("mount", &[], &needle).is_empty(), "mounts left");
    assert!(
        mentions("losetup", &["-a"], &needle).is_empty(),
        "loop devices left"
    );
    assert!(
        util::processes_with_env_containing(&needle).is_empty(),
        "processes left"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
}
