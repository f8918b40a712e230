//! The volume measured, not its host: a volume's size is judged from a device
//! only when the volume is that device or a filesystem of its own. A bind
//! mount of a directory of the work filesystem has no size of its own, even
//! when that filesystem is a small loop-mounted ext4 whose device the bind
//! mount shows as its source.

use std::process::Command;

use crate::util;

/// Each volume a directory of a pool beside the volumes dir (on the work
/// filesystem), bind-mounted at the volume's path; no capacity claimed
/// (bytes 0).
const BIND_POOL: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
pool="$DHV_VOLUMES_DIR/../pool/$DHV_VOLUME_ID"
fail() { printf '{"error": "%s"}\n' "$1"; exit 1; }
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	if ! mountpoint -q -- "$p"; then
		mkdir -p -m 0700 -- "$pool" "$p" || fail "cannot make the volume"
		mount --bind -- "$pool" "$p" || fail "cannot bind the volume"
	fi
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete)
	if mountpoint -q -- "$p"; then umount -- "$p" || fail "cannot unmount the volume"; fi
	rm -rf -- "$p" "$pool" || fail "cannot remove the volume" ;;
*) exit 1 ;;
esac
"#;

/// Runs `program args`, which must succeed.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With the work dir on a 3 GiB loop-mounted ext4, a bind-mount plugin's
/// volume is judged by what it claims (nothing), not by the work
/// filesystem's device: input.capacity-edge passes 2^63-1 with bytes 0.
/// loop-ext4 there is still measured by its own device.
#[test]
fn a_bind_mount_on_a_loop_mounted_work_dir_is_not_measured_by_the_work_device() {
    const TEST: &str = "a_bind_mount_on_a_loop_mounted_work_dir_is_not_measured_by_the_work_device";
    if let Some(why) = util::loop_devices_unusable() {
        util::skip(TEST, &why);
        return;
    }
    if !util::in_private_mount_ns(TEST) {
        return;
    }
    let scratch = util::Scratch::new();
    let (image, work) = (scratch.path().join("work.img"), scratch.path().join("work"));
    std::fs::create_dir(&work).unwrap();
    std::fs::File::create(&image)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let (image, work) = (image.to_string_lossy(), work.to_string_lossy());
    run("mkfs.ext4", &["-q", "-F", &image]);
    run("mount", &["-o", "loop", "--", &image, &work]);
    let plugin = scratch.plugin("bind-pool", BIND_POOL);
    let plugin = plugin.to_string_lossy();
    let verdict = |plugin: &str, id: &str| {
        let report = util::check::json_report(
            &scratch,
            &[plugin, id, "--exact", "--work-dir", &work],
            util::check::RUN_LIMIT,
        );
        let check = &report["checks"][0];
        assert_eq!(check["id"], id, "{report}");
        (
            check["status"].as_str().unwrap().to_owned(),
            check["message"].as_str().unwrap().to_owned(),
        )
    };
    let (status, message) = verdict(&plugin, "input.capacity-edge");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("min = 2^63-1: created and deleted"),
        "{message}"
    );
    let (status, message) = verdict(&plugin, "volume.bytes-true");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("the volume is a bind mount with no size of its own"),
        "{message}"
    );
    let (status, message) = verdict(&util::sample("loop-ext4"), "volume.bytes-true");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("filesystem ext4 of ") && message.contains(" bytes on a block device of "),
        "{message}"
    );
    run("umount", &[&work]);
}
