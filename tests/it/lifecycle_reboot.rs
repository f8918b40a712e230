//! `lifecycle.reboot`: after a node reboot (mounts and loop devices gone) the
//! client's creates find every volume with its files. `loop-ext4` mounts its
//! images again and passes; `mkfs-on-reboot` formats them again and is not
//! conformant-without-warning; a tmpfs plugin loses its files by nature, and
//! the finding says so rather than blaming it.
//!
//! Needs root and loop devices, and runs in a private mount namespace: without
//! them it prints why and passes, except under `CI`, where it fails.

use crate::util;

use std::path::Path;
use std::time::Duration;

/// Why this test cannot run here; under `CI` that is a failure.
fn unusable(test: &str) -> bool {
    let Some(why) = util::loop_devices_unusable() else {
        return false;
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} cannot run under CI: {why}"
    );
    println!("SKIPPED {test}: {why}");
    true
}

/// `lifecycle.reboot` alone on `plugin`: its status and message, once the
/// run left nothing behind.
fn reboot_verdict(plugin: &Path) -> (String, String) {
    let tmp = util::Scratch::new();
    let report = util::check::json_report(
        &tmp,
        &[plugin.to_str().unwrap(), "lifecycle.reboot", "--exact"],
        Duration::from_secs(240),
    );
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "lifecycle.reboot")
        .unwrap_or_else(|| panic!("no lifecycle.reboot in {report}"));
    util::check::assert_left_nothing(&tmp);
    assert!(
        util::mounts_below(tmp.path()).is_empty(),
        "mounts left below {}",
        tmp.path().display()
    );
    (
        check["status"].as_str().unwrap().to_owned(),
        check["message"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn loop_ext4_mounts_its_volumes_again_after_a_reboot() {
    let test = "loop_ext4_mounts_its_volumes_again_after_a_reboot";
    if unusable(test) || !util::in_private_mount_ns(test) {
        return;
    }
    let (status, message) = reboot_verdict(Path::new(&util::sample("loop-ext4")));
    assert_eq!(status, "pass", "{message}");
    assert!(message.contains("mounts and loop devices"), "{message}");
}

#[test]
fn a_plugin_that_formats_again_after_a_reboot_warns() {
    let test = "a_plugin_that_formats_again_after_a_reboot_warns";
    if unusable(test) || !util::in_private_mount_ns(test) {
        return;
    }
    let (status, message) = reboot_verdict(Path::new(&util::sample("mkfs-on-reboot")));
    assert_eq!(status, "warn", "{message}");
    assert!(message.contains("lost its files"), "{message}");
}

#[test]
fn a_tmpfs_volume_loses_its_files_by_nature_not_by_fault() {
    let test = "a_tmpfs_volume_loses_its_files_by_nature_not_by_fault";
    if unusable(test) || !util::in_private_mount_ns(test) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin(
        "tmpfs",
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
case $1 in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
    p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
    mkdir -p "$p" || exit 1
    mountpoint -q "$p" || mount -t tmpfs -o size=1m tmpfs "$p" >&2 || exit 1
    printf '{"path": "%s"}\n' "$p" ;;
delete)
    p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
    while mountpoint -q "$p"; do umount "$p" >&2 || exit 1; done
    rm -rf --one-file-system "$p" || exit 1 ;;
*) exit 1 ;;
esac
"#,
    );
    let (status, message) = reboot_verdict(&plugin);
    assert_eq!(status, "pass", "{message}");
    assert!(message.contains("tmpfs mounts"), "{message}");
    assert!(message.contains("by nature"), "{message}");
}
