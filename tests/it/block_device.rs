//! Block-device volumes (docs/nomad-fidelity.md, section 8): a plugin that
//! returns a loop device, `/dev/loopN`, as HashiCorp's nomad-driver-virt
//! `mkblock` example does. Nomad saves that path as it is; the checks judge
//! such a volume by the device (its node persists; what a delete ends is the
//! device's hold on the volume's file). Needs root and loop devices: without
//! them each test says why and passes, except under CI, where it fails.

use crate::util;

use std::path::Path;
use std::process::Command as StdCommand;

use assert_cmd::Command;
use serde_json::Value;

/// Why loop devices cannot be used here, or `None`; under CI, a panic.
fn unusable(test: &str) -> Option<String> {
    let why = util::loop_devices_unusable()?;
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} cannot run under CI: {why}"
    );
    println!("SKIPPED {test}: {why}");
    Some(why)
}

fn attached_under(dir: &Path) -> Vec<String> {
    let out = StdCommand::new("losetup")
        .arg("-a")
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    let needle = dir.to_string_lossy();
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.contains(&*needle))
        .map(str::to_string)
        .collect()
}

/// Detaches, when dropped, every loop device attached to a file under the
/// dir: the test's own clean-up, should the harness fail to do it.
struct DetachOnDrop(std::path::PathBuf);

impl Drop for DetachOnDrop {
    fn drop(&mut self) {
        for line in attached_under(&self.0) {
            if let Some((dev, _)) = line.split_once(':') {
                let _ = StdCommand::new("losetup").args(["-d", dev]).status();
            }
        }
    }
}

fn check(plugin: &Path, tmp: &util::Scratch) -> (Option<i32>, Value) {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(plugin)
        .args(["--json", "-", "-q"])
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

fn status<'a>(report: &'a Value, id: &str) -> (&'a str, &'a str) {
    let c = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"));
    (
        c["status"].as_str().unwrap(),
        c["message"].as_str().unwrap(),
    )
}

/// The conformant loop-block sample: the device path is saved and restored
/// by the manager (lifecycle.restore: before, the manager refused the path
/// and the check failed at must level), accepted as a block device, and
/// deleted by detaching it.
#[test]
fn a_block_device_plugin_passes_restore_and_is_judged_by_its_device() {
    if unusable("a_block_device_plugin_passes_restore_and_is_judged_by_its_device").is_some() {
        return;
    }
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins/loop-block");
    let tmp = util::Scratch::new();
    let _guard = DetachOnDrop(tmp.path().to_path_buf());
    let (code, report) = check(&plugin, &tmp);
    assert_eq!(status(&report, "lifecycle.restore").0, "pass", "{report}");
    assert_eq!(
        status(&report, "create.path-in-volumes-dir"),
        ("pass", "a block device (a block-device volume)")
    );
    assert_eq!(
        status(&report, "delete.removes"),
        (
            "pass",
            "the block device no longer backs the volume (its node stays, as device nodes do)"
        )
    );
    assert_eq!(code, Some(0), "{report}");
    assert!(attached_under(tmp.path()).is_empty(), "loop devices left");
}

/// A block-device plugin whose delete removes the image but never detaches
/// the device: delete.removes fails, once, naming the device's file; the
/// residue check, which would name the same device, leaves it to it.
#[test]
fn a_device_still_attached_after_delete_is_one_finding() {
    if unusable("a_device_still_attached_after_delete_is_one_finding").is_some() {
        return;
    }
    let tmp = util::Scratch::new();
    let _guard = DetachOnDrop(tmp.path().to_path_buf());
    let plugin = tmp.plugin(
        "never-detaches",
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
img="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID.img"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	dev=$(losetup -j "$img" 2>/dev/null | cut -d: -f1 | head -n 1)
	if [ -z "$dev" ]; then
		[ -e "$img" ] || truncate -s 16M "$img" || exit 1
		dev=$(losetup -f --show "$img") || exit 1
	fi
	echo "{\"path\": \"$dev\"}" ;;
delete) rm -f "$img" ;;
*) exit 1 ;;
esac
"#,
    );
    let (code, report) = check(&plugin, &tmp);
    let (removes, message) = status(&report, "delete.removes");
    assert_eq!(removes, "fail", "{message}");
    assert!(
        message.contains("still backs the volume: it is attached to"),
        "{message}"
    );
    let (residue, why) = status(&report, "delete.no-residue");
    assert_eq!(residue, "skip", "{why}");
    assert!(why.starts_with("needs delete.removes"), "{why}");
    assert_eq!(code, Some(1));
    assert!(attached_under(tmp.path()).is_empty(), "loop devices left");
}

/// The harness's scan of loop devices (which the teardown detaches by, and
/// the leftover checks judge by) finds what `losetup -a` finds under a dir:
/// an image of some size and an image attached while empty (a device of
/// size 0, which `/proc/partitions` leaves out), and nothing once they are
/// detached; the quick scan of devices a volume can be on finds the first.
#[test]
fn the_loop_scan_finds_every_device_backed_under_a_dir_even_an_empty_one() {
    if unusable("the_loop_scan_finds_every_device_backed_under_a_dir_even_an_empty_one").is_some() {
        return;
    }
    let tmp = util::Scratch::new();
    let _guard = DetachOnDrop(tmp.path().to_path_buf());
    let root = tmp.path().canonicalize().unwrap();
    let sized = root.join("sized.img");
    std::fs::File::create(&sized)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let empty = root.join("empty.img");
    std::fs::File::create(&empty).unwrap();
    let a = dhv_host::safe_fs::attach(&sized, &root).expect("attach the sized image");
    let b = dhv_host::safe_fs::attach(&empty, &root).expect("attach the empty image");
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort_by(|x, y| x.device.cmp(&y.device));
    assert_eq!(dhv_host::safe_fs::loops_backed_under(&root), expected);
    let seen = attached_under(&root);
    assert_eq!(seen.len(), 2, "{seen:?}");
    // The quick scan, of devices a volume can be on, leaves out the empty one.
    assert_eq!(
        dhv_host::safe_fs::sized_loops_backed_under(&root),
        vec![a.clone()]
    );
    // A dir beside the images holds none of them.
    let beside = root.join("beside");
    std::fs::create_dir(&beside).unwrap();
    assert!(dhv_host::safe_fs::loops_backed_under(&beside).is_empty());
    for dev in [&a, &b] {
        dhv_host::safe_fs::detach_and_wait(dev, std::time::Duration::from_secs(10))
            .expect("detach");
    }
    assert!(dhv_host::safe_fs::loops_backed_under(&root).is_empty());
    assert!(attached_under(&root).is_empty());
}
