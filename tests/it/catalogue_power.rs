//! Checks made from the mutation campaign's survivors (docs/catalogue-power.md)
//! catch the slip each was made for, in a plugin that makes it, and the
//! correct plugin passes them: a volume made in a volumes dir with a space
//! that differs from one made in the default dir (input.volumes-dir-space),
//! a delete that retries a busy unmount forever (delete.in-use), a create
//! that reports success though its mount was refused (failure.mount-refused),
//! a compensating delete that exits 0 but leaves the files it found by the
//! volume's name (delete.auto-delete-safe), a delete that leaves the image
//! it named by a split path (input.volumes-dir-space), a delete that exits 0
//! though its removal was refused (failure.remove-refused), a create that
//! carries on, or gives up without undoing its mount, after a refused `chmod`
//! (failure.chmod-refused), a create that makes a sparse image past the
//! free space (input.capacity-edge), a create after a reboot that changes
//! what the volume's root holds and its mode (lifecycle.reboot).
//! The loop-ext4 ones need root and loop devices; where the machine has
//! neither, they say why and do not run.

use crate::util;

use std::time::Duration;

use serde_json::Value;

mod create;

/// The status and message of check `id` in `report`.
fn verdict<'a>(report: &'a Value, id: &str) -> (&'a str, &'a str) {
    let c = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report}"));
    (
        c["status"].as_str().unwrap(),
        c["message"].as_str().unwrap(),
    )
}

/// The status of check `id` when its rule is broken: a should warns, a must
/// fails (it never warns).
fn broken(report: &Value, id: &str) -> &'static str {
    let level = report["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["id"] == id))
        .and_then(|c| c["level"].as_str());
    match level {
        Some("must") => "fail",
        _ => "warn",
    }
}

/// Asserts that check `id` alone warns `plugin` with a message holding
/// `needle`, and passes the reference (which makes none of the slips).
fn warns_where_the_reference_passes(scratch: &util::Scratch, plugin: &str, id: &str, needle: &str) {
    let run =
        |p: &str| util::check::json_report(scratch, &[p, id, "--exact"], Duration::from_secs(120));
    let message = warns_where_correct_passes(run, plugin, &util::sample("reference"), id);
    assert!(message.contains(needle), "{message}");
}

/// Asserts that check `id`, in reports that `run` makes, warns `plugin` and
/// passes `correct`; the warning's message.
fn warns_where_correct_passes(
    run: impl Fn(&str) -> Value,
    plugin: &str,
    correct: &str,
    id: &str,
) -> String {
    let report = run(plugin);
    let (status, message) = verdict(&report, id);
    assert_eq!(status, broken(&report, id), "{message}");
    let message = message.to_owned();
    let report = run(correct);
    let (status, passed) = verdict(&report, id);
    assert_eq!(status, "pass", "{passed}");
    message
}

/// A directory plugin in sh: each volume is `$p`, `$DHV_VOLUMES_DIR/$DHV_VOLUME_ID`;
/// create runs `create` (its lines, tab-indented) and answers `$p` with bytes 0,
/// delete runs `delete`; any other operation exits 1.
fn dir_plugin(scratch: &util::Scratch, name: &str, create: &str, delete: &str) -> String {
    let head = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
"#;
    let answer = r#"	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
"#;
    let body = format!("{head}{create}\n{answer}delete) {delete} ;;\n*) exit 1 ;;\nesac\n");
    scratch.plugin(name, &body).to_string_lossy().into_owned()
}

/// A directory plugin that sets its volume's mode through an unquoted path:
/// in a volumes dir with a space the `chmod` misses (quietly), and the
/// volume keeps the umask's mode, unlike one made in the default dir.
#[test]
fn a_step_an_unquoted_path_skips_shows_in_the_volume() {
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "unquoted-chmod",
        r#"	mkdir -p -- "$p" || exit 1
	chmod 0700 $p 2>/dev/null"#,
        r#"rm -rf -- "$p""#,
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "input.volumes-dir-space",
        "(mode 0700, empty); it is mode 0755, empty",
    );
}

/// A plugin that keeps a note beside each volume named by the volume's
/// name: Nomad's compensating delete (empty name) exits 0 and leaves the
/// note for good. The check names it; the reference, which names all by the
/// id, passes.
#[test]
fn a_compensating_delete_that_leaves_a_file_named_by_the_name_warns() {
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "note-by-name",
        r#"	note="$DHV_VOLUMES_DIR/note-$DHV_VOLUME_NAME"
	mkdir -p -- "$p" && echo "$DHV_VOLUME_ID" > "$note" || exit 1"#,
        r#"note="$DHV_VOLUMES_DIR/note-$DHV_VOLUME_NAME"; rm -rf -- "$p" "$note""#,
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "delete.auto-delete-safe",
        "left the new volume's note-conformance-",
    );
}

/// What a test needs of the machine besides root.
enum Needs {
    /// Free loop devices and the tools that use them.
    LoopDevices,
    /// Plugin calls that can be refused system calls (a cgroup per call).
    Refusals,
}

/// Whether `test` cannot run here for want of one of `needs`: it then says
/// why ([`util::skip`]), and does not run.
fn cannot_run(test: &str, needs: &[Needs]) -> bool {
    let why = needs.iter().find_map(|need| match need {
        Needs::LoopDevices => util::loop_devices_unusable(),
        Needs::Refusals => (!dhv_host::exec::can_refuse()).then(|| {
            "system calls cannot be refused to a call here (no cgroup per call)".to_string()
        }),
    });
    match why {
        Some(why) => {
            util::skip(test, &why);
            true
        }
        None => false,
    }
}

/// loop-ext4 with one line changed (`from` → `to`), in `scratch`.
fn loop_ext4_with(scratch: &util::Scratch, name: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(util::sample("loop-ext4")).unwrap();
    assert_eq!(text.matches(from).count(), 1, "{from:?} in loop-ext4");
    let p = scratch.plugin(name, &text.replace(from, to));
    p.to_string_lossy().into_owned()
}

/// Runs the checks `ids` (whole ids) on `plugin`, every limit scaled by
/// `scale`, and asserts the run left no mount, loop device or process.
fn loop_report(scratch: &util::Scratch, plugin: &str, ids: &str, scale: &str) -> Value {
    loop_report_of(scratch, &[plugin, ids, "--exact", "--timeout-scale", scale])
}

/// `check ARGS` ([`loop_report`]'s, or a filter of its own), then the same
/// assertions.
fn loop_report_of(scratch: &util::Scratch, args: &[&str]) -> Value {
    let report = util::check::json_report(scratch, args, Duration::from_secs(300));
    let needle = scratch.path().to_string_lossy().into_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&needle), "mounts left: {mounts}");
    let loops = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    let loops = String::from_utf8_lossy(&loops.stdout);
    assert!(!loops.contains(&needle), "loop devices left: {loops}");
    report
}

/// A delete that answers a busy unmount by trying again forever hangs until
/// its limit, and again alone: delete.in-use warns; loop-ext4 itself fails
/// that delete cleanly, keeps the volume, and deletes it once the file is
/// closed. The limits are scaled down (a delete has 3 s), so the hang ends soon.
#[test]
fn a_delete_that_retries_a_busy_unmount_forever_is_warned() {
    if cannot_run(
        "a_delete_that_retries_a_busy_unmount_forever_is_warned",
        &[Needs::LoopDevices],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = loop_ext4_with(
        &scratch,
        "retries-unmount",
        r#"fail "cannot unmount the volume (is it in use?)""#,
        ":",
    );
    let report = loop_report(&scratch, &plugin, "delete.in-use", "0.05");
    let (status, message) = verdict(&report, "delete.in-use");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("expected it to end within its limit; it overran it, and again alone"),
        "{message}"
    );
    let report = loop_report(&scratch, &util::sample("loop-ext4"), "delete.in-use", "1");
    let (status, message) = verdict(&report, "delete.in-use");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("(a mount point), delete failed and kept it whole")
            && message.contains("with it closed, delete removed it"),
        "{message}"
    );
}

/// A delete that removes the image through an unquoted path, in a volumes
/// dir with a space, removes two other names and leaves the image:
/// input.volumes-dir-space names it; loop-ext4 itself leaves nothing.
#[test]
fn a_delete_that_splits_the_image_path_is_warned() {
    if cannot_run(
        "a_delete_that_splits_the_image_path_is_warned",
        &[Needs::LoopDevices],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = loop_ext4_with(
        &scratch,
        "unquoted-image",
        r#"if ! rm -f -- "$img" "$tmpimg"; then"#,
        r#"if ! rm -f -- $img "$tmpimg"; then"#,
    );
    let id = "input.volumes-dir-space";
    let run = |p: &str| loop_report(&scratch, p, id, "1");
    let message = warns_where_correct_passes(run, &plugin, &util::sample("loop-ext4"), id);
    assert!(
        message.contains(
            "to leave nothing of the volume, as it does in the default volumes dir; it left ."
        ) && message.contains(".img"),
        "{message}"
    );
}

/// The reference with one line changed (`from` → `to`), in `scratch`.
fn reference_with(scratch: &util::Scratch, name: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(util::sample("reference")).unwrap();
    assert_eq!(text.matches(from).count(), 1, "{from:?} in the reference");
    let p = scratch.plugin(name, &text.replace(from, to));
    p.to_string_lossy().into_owned()
}

/// A delete that does not check its `rm` exits 0 when the removal is
/// refused, and the volume stays for good: failure.remove-refused warns; the
/// reference fails that delete and removes the volume with the next.
#[test]
fn a_delete_that_ignores_a_refused_removal_is_warned() {
    if cannot_run(
        "a_delete_that_ignores_a_refused_removal_is_warned",
        &[Needs::Refusals],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = reference_with(
        &scratch,
        "ignores-rm",
        r#"fail "cannot remove the volume directory""#,
        ":",
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "failure.remove-refused",
        "delete with every removal of a file refused: expected it to fail, as the volume cannot \
         be removed, or to leave nothing of it; it exited 0, and ",
    );
}

/// A create that clears a leftover of its own through an unquoted path
/// removes the file named by the split path's first word, beside a volumes
/// dir with a space: input.volumes-dir-space fails it (an operator's file is
/// lost); the reference passes.
#[test]
fn an_unquoted_removal_that_takes_a_neighbour_fails() {
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "unquoted-rm-tmp",
        r#"	rm -f -- $DHV_VOLUMES_DIR/.tmp-$DHV_VOLUME_ID
	mkdir -p -m 0700 -- "$p" || exit 1"#,
        r#"rm -rf -- "$p" || exit 1"#,
    );
    let id = "input.volumes-dir-space";
    let run =
        |p: &str| util::check::json_report(&scratch, &[p, id, "--exact"], Duration::from_secs(120));
    let report = run(&plugin);
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains("space/host\" beside the volumes dir to stay as it was; it is gone"),
        "{message}"
    );
    let report = run(&util::sample("reference"));
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("also beside a file named by its first word"),
        "{message}"
    );
}

/// A delete that waits for its loop device to go without a bound hangs
/// while another process holds the device: delete.device-held warns (limits
/// scaled down, a delete has 6 s); loop-ext4 gives up after 10 s, fails
/// cleanly, and deletes the volume once the device is let go.
#[test]
fn a_delete_that_waits_for_a_held_loop_device_forever_is_warned() {
    if cannot_run(
        "a_delete_that_waits_for_a_held_loop_device_forever_is_warned",
        &[Needs::LoopDevices],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let id = "delete.device-held";
    let waits = loop_ext4_with(
        &scratch,
        "waits-for-detach",
        "\t\t\treturn 1\n\t\tfi\n\t\tif [ \"$tries\" -ge 2 ]",
        "\t\t\t:\n\t\tfi\n\t\tif [ \"$tries\" -ge 2 ]",
    );
    let report = loop_report(&scratch, &waits, id, "0.1");
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("is held open: expected it to end within its limit; it overran it"),
        "{message}"
    );
    let report = loop_report(&scratch, &util::sample("loop-ext4"), id, "1");
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("held open, delete failed (")
            && message.contains("cannot detach the loop device of the volume")
            && message.contains("once let go, the device was released"),
        "{message}"
    );
}
