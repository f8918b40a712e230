//! `sample-plugins/loop-ext4` — a plugin in the style real ones take (ext4 images,
//! loop-mounted) — passes every must-level check, and the run leaves no mount,
//! loop device, process or temp dir behind. Needs root and loop devices: where
//! the machine has neither, the test prints why and passes without running.

use crate::util;

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

/// `check PLUGIN ARGS --json - -q` with TMPDIR in `tmp`, bounded by `secs`:
/// how it ended (stderr is asserted on too) and its JSON report.
fn check_json(
    plugin: &Path,
    args: &[&str],
    tmp: &util::Scratch,
    secs: u64,
) -> (std::process::Output, serde_json::Value) {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(plugin)
        .args(args)
        .args(["--json", "-", "-q"])
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(secs))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

#[test]
fn loop_ext4_passes_every_must_check_and_leaves_nothing() {
    if let Some(why) = util::loop_devices_unusable() {
        util::skip("loop-ext4", &why);
        return;
    }
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins/loop-ext4");
    let tmp = util::Scratch::new();
    let (out, report) = check_json(&plugin, &[], &tmp, 600);
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

/// Detaches, when dropped, every loop device attached to a file under the
/// dir: the test's own clean-up, should the harness fail to do it.
struct DetachOnDrop(String);

impl Drop for DetachOnDrop {
    fn drop(&mut self) {
        for line in mentions("losetup", &["-a"], &self.0) {
            if let Some((dev, _)) = line.split_once(':') {
                let _ = StdCommand::new("losetup").args(["-d", dev]).status();
            }
        }
    }
}

/// A plugin whose delete removes the volume's image but never detaches the
/// loop device it attached: `delete.no-residue` names the device, the report
/// lists it, and the run's end detaches it.
#[test]
fn a_loop_device_left_attached_is_named_and_detached() {
    if let Some(why) = util::loop_devices_unusable() {
        util::skip("a_loop_device_left_attached_is_named_and_detached", &why);
        return;
    }
    let tmp = util::Scratch::new();
    let needle = tmp.path().to_string_lossy().into_owned();
    let _guard = DetachOnDrop(needle.clone());
    let plugin = tmp.plugin(
        "attach-and-forget",
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	if [ ! -e "$p/img" ]; then
		mkdir -p -- "$p" && truncate -s 4M "$p/img" && losetup -f "$p/img" >&2 || exit 1
	fi
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete) rm -rf -- "$p" ;;
*) exit 1 ;;
esac
"#,
    );
    let (out, report) = check_json(&plugin, &["delete.no-residue", "--exact"], &tmp, 120);
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "delete.no-residue")
        .unwrap();
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["message"]
            .as_str()
            .unwrap()
            .contains("still attached: /dev/loop"),
        "{check}"
    );
    let loops_left = report["sandbox"]["loops_left"].as_array().unwrap();
    assert!(!loops_left.is_empty(), "{}", report["sandbox"]);
    assert_eq!(report["sandbox"]["removed"], true, "{}", report["sandbox"]);
    assert!(
        mentions("losetup", &["-a"], &needle).is_empty(),
        "loop devices left attached"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("left attached by the plugin, detached by the harness"),
        "{stderr}"
    );
}
