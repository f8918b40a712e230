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
        Needs::Refusals => (!dhv_conform::exec::can_refuse()).then(|| {
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
    let report = util::check::json_report(
        scratch,
        &[plugin, ids, "--exact", "--timeout-scale", scale],
        Duration::from_secs(300),
    );
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

/// With every mount refused, a create that ignores the failed mount reports
/// a plain directory as the volume, and one that forgets to remove its
/// image leaves it: failure.mount-refused warns both; loop-ext4 fails
/// cleanly and then creates the volume mounted.
#[test]
fn a_create_that_ignores_a_refused_mount_is_warned() {
    if cannot_run(
        "a_create_that_ignores_a_refused_mount_is_warned",
        &[Needs::LoopDevices, Needs::Refusals],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let ignores = loop_ext4_with(
        &scratch,
        "ignores-mount",
        r#"create_failed "cannot mount the image""#,
        ":",
    );
    let report = loop_report(&scratch, &ignores, "failure.mount-refused", "1");
    let (status, message) = verdict(&report, "failure.mount-refused");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("it reported success with a volume that is not a mount point at"),
        "{message}"
    );
    let keeps_image = loop_ext4_with(
        &scratch,
        "keeps-image",
        "\t\trm -f -- \"$img\" \"$tmpimg\"\n\tfi\n\tif [ \"$path_existed\" = no ]",
        "\t\t:\n\tfi\n\tif [ \"$path_existed\" = no ]",
    );
    let report = loop_report(&scratch, &keeps_image, "failure.mount-refused", "1");
    let (status, message) = verdict(&report, "failure.mount-refused");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("cannot mount the image), and left in the volumes dir: .")
            && message.contains(".img"),
        "{message}"
    );
    let report = loop_report(
        &scratch,
        &util::sample("loop-ext4"),
        "failure.mount-refused",
        "1",
    );
    let (status, message) = verdict(&report, "failure.mount-refused");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("left nothing; then create made the volume as the default"),
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

/// A directory plugin that sets its volume's mode with a `chmod` whose
/// failure it ignores reports success with a volume open to every user when
/// mode changes are refused: failure.chmod-refused warns, naming both modes;
/// the reference (`mkdir -m 0700`, no `chmod`) passes.
#[test]
fn a_create_that_ignores_a_refused_chmod_is_warned() {
    if cannot_run(
        "a_create_that_ignores_a_refused_chmod_is_warned",
        &[Needs::Refusals],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "chmod-unchecked",
        r#"	umask 022
	mkdir -p -- "$p" || exit 1
	chmod 0700 -- "$p" 2>/dev/null"#,
        r#"rm -rf -- "$p" || exit 1"#,
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "failure.chmod-refused",
        "it reported success with a volume that is mode 0755, empty, where the default create's \
         is mode 0700, empty",
    );
}

/// loop-ext4 with its failure path after the mount broken two ways, and
/// mode changes refused: carrying on after the refused `chmod` leaves the
/// filesystem's root mode, and forgetting that it mounted leaves the mount
/// and its loop device; failure.chmod-refused warns both. loop-ext4 itself
/// fails cleanly, then makes the volume.
#[test]
fn a_create_that_mishandles_a_refused_chmod_after_its_mount_is_warned() {
    if cannot_run(
        "a_create_that_mishandles_a_refused_chmod_after_its_mount_is_warned",
        &[Needs::LoopDevices, Needs::Refusals],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let id = "failure.chmod-refused";
    let carries_on = loop_ext4_with(
        &scratch,
        "chmod-ignored",
        r#"create_failed "cannot set the mode of the volume""#,
        ":",
    );
    let report = loop_report(&scratch, &carries_on, id, "1");
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("is mode 0755, empty, where the default create's is mode 0700, empty"),
        "{message}"
    );
    let forgets_mount = loop_ext4_with(&scratch, "forgets-mount", "\tmounted_here=yes\n", "");
    let report = loop_report(&scratch, &forgets_mount, id, "1");
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("(mounted); loop devices attached: /dev/loop"),
        "{message}"
    );
    let report = loop_report(&scratch, &util::sample("loop-ext4"), id, "1");
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("create failed (") && message.contains("left nothing; then create made"),
        "{message}"
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

/// loop-ext4 whose failed create removes its image through an unquoted
/// path leaves the image when a create fails (every mount refused) in a
/// volumes dir with a space, though not in one without: input.volumes-dir-space
/// fails it (a must); loop-ext4 leaves nothing in either.
#[test]
fn a_failed_create_that_splits_its_clean_up_is_warned() {
    if cannot_run(
        "a_failed_create_that_splits_its_clean_up_is_warned",
        &[Needs::LoopDevices, Needs::Refusals],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = loop_ext4_with(
        &scratch,
        "unquoted-clean-up",
        "\t\trm -f -- \"$img\" \"$tmpimg\"\n\tfi\n\tif [ \"$path_existed\" = no ]",
        "\t\trm -f -- $img \"$tmpimg\"\n\tfi\n\tif [ \"$path_existed\" = no ]",
    );
    let id = "input.volumes-dir-space";
    let run = |p: &str| loop_report(&scratch, p, id, "1");
    let message = warns_where_correct_passes(run, &plugin, &util::sample("loop-ext4"), id);
    assert!(
        message.contains("with every mount refused failed, and left .")
            && message
                .contains(".img; in a volumes dir without a space the same create leaves nothing"),
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

/// A plugin whose create makes only the volume's own directory fails on a
/// new node, where Nomad has not made the volumes dir:
/// create.volumes-dir-missing warns; the reference (`mkdir -p`) passes.
#[test]
fn a_create_that_needs_the_volumes_dir_made_is_warned() {
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "mkdir-without-p",
        r#"	[ -d "$p" ] || mkdir -m 0700 -- "$p" || { echo '{"error": "cannot make the volume"}'; exit 1; }"#,
        r#"rm -rf -- "$p" || exit 1"#,
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "create.volumes-dir-missing",
        "create with no volumes dir yet: expected it to make the volumes dir",
    );
}

/// A create that takes any name at the volume's path for its volume (`[ -e ]`
/// where `[ -d ]` is meant) answers with a regular file: create.file-in-the-way
/// warns; the reference, whose `mkdir -p` fails there, passes.
#[test]
fn a_create_that_takes_a_file_for_its_volume_is_warned() {
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "exists-not-dir",
        r#"	[ -e "$p" ] || mkdir -p -m 0700 -- "$p" || { echo '{"error": "cannot make the volume"}'; exit 1; }"#,
        r#"rm -rf -- "$p" || exit 1"#,
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "create.file-in-the-way",
        "which is the harness's regular file: Nomad would hand a file to the task",
    );
}

/// A create that clears whatever is at its volume's path away to make its
/// directory destroys a file it did not make: create.file-in-the-way warns.
#[test]
fn a_create_that_clears_a_file_away_for_its_volume_is_warned() {
    let scratch = util::Scratch::new();
    let plugin = dir_plugin(
        &scratch,
        "clears-the-way",
        r#"	[ -d "$p" ] || rm -f -- "$p"
	mkdir -p -m 0700 -- "$p" || { echo '{"error": "cannot make the volume"}'; exit 1; }"#,
        r#"rm -rf -- "$p" || exit 1"#,
    );
    warns_where_the_reference_passes(
        &scratch,
        &plugin,
        "create.file-in-the-way",
        "to be left as it was; create exited 0 after removing or changing it",
    );
}

/// Without its free-space test, a create asking for more than the volumes
/// dir's filesystem holds makes a sparse image that large and mounts it:
/// input.capacity-edge warns that the storage cannot hold the volume; the
/// same holds for a create_failed that goes on after its clean-up (the
/// free-space refusal then carries on into the same image). loop-ext4
/// refuses the request.
#[test]
fn a_create_past_the_free_space_is_warned() {
    if cannot_run(
        "a_create_past_the_free_space_is_warned",
        &[Needs::LoopDevices],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let id = "input.capacity-edge";
    let needle = "create made a loop device's image larger than its filesystem can hold";
    for (name, from, to) in [
        (
            "no-free-space-test",
            r#"create_failed "not enough free space for a $size byte volume""#,
            ":",
        ),
        ("goes-on-after-failing", "\n\tfail \"$1\"\n}", "\n\t:\n}"),
    ] {
        let plugin = loop_ext4_with(&scratch, name, from, to);
        let report = loop_report(&scratch, &plugin, id, "1");
        let (status, message) = verdict(&report, id);
        assert_eq!(status, "warn", "{name}: {message}");
        assert!(
            message.contains(&format!("min above the free space: expected the volume to be storage that can hold it; {needle}")),
            "{name}: {message}"
        );
    }
    let report = loop_report(&scratch, &util::sample("loop-ext4"), id, "1");
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("min above the free space: refused cleanly"),
        "{message}"
    );
}

/// A create that clears a fresh filesystem's lost+found only when the volume
/// holds more than it (the test negated) keeps it on the first create and
/// removes it, and makes the root 0700, at the create after a reboot:
/// lifecycle.reboot warns that the volume changed; loop-ext4 passes.
#[test]
fn a_create_after_a_reboot_that_changes_the_volume_is_warned() {
    if cannot_run(
        "a_create_after_a_reboot_that_changes_the_volume_is_warned",
        &[Needs::LoopDevices],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = loop_ext4_with(
        &scratch,
        "lost-found-negated",
        r#"if [ "$(ls -A -- "$path")" = "lost+found" ] && rmdir"#,
        r#"if ! [ "$(ls -A -- "$path")" = "lost+found" ] && rmdir"#,
    );
    let id = "lifecycle.reboot";
    let run = |p: &str| loop_report(&scratch, p, id, "1");
    let message = warns_where_correct_passes(run, &plugin, &util::sample("loop-ext4"), id);
    assert!(
        message.contains(
            "volume #1: create after the reboot removed \"lost+found\" from its root and changed \
             its root's mode from 0755 to 0700"
        ),
        "{message}"
    );
}

/// After a reboot, a create again with every mount refused fails; a clean-up
/// that takes the volume's image for the call's own (it removes it whether
/// or not the call made it) loses the volume's data: failure.mount-refused
/// warns. One that tests the mount point through an unquoted path takes it
/// for its own in a volumes dir with a space only, and removes it:
/// input.volumes-dir-space fails that (a must), and failure.mount-refused passes it.
/// loop-ext4 keeps the volume in both dirs.
#[test]
fn a_failed_create_that_removes_an_existing_volume_is_warned() {
    if cannot_run(
        "a_failed_create_that_removes_an_existing_volume_is_warned",
        &[Needs::LoopDevices, Needs::Refusals],
    ) {
        return;
    }
    let scratch = util::Scratch::new();
    let mount = "failure.mount-refused";
    let space = "input.volumes-dir-space";
    let takes_image = loop_ext4_with(
        &scratch,
        "takes-image",
        "\tif [ \"$img_existed\" = no ]; then\n\t\tdetach_stale",
        "\tif :; then\n\t\tdetach_stale",
    );
    let report = loop_report(&scratch, &takes_image, mount, "1");
    let (status, message) = verdict(&report, mount);
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains(
            "create again after a reboot, with every mount refused: expected it to fail and keep \
             the volume, which exists"
        ) && message.contains(".img"),
        "{message}"
    );
    let unquoted = loop_ext4_with(
        &scratch,
        "unquoted-mount-point-test",
        r#"if [ -e "$path" ]; then path_existed=yes"#,
        r#"if [ -e $path ]; then path_existed=yes"#,
    );
    let report = loop_report(&scratch, &unquoted, space, "1");
    let (status, message) = verdict(&report, space);
    assert_eq!(status, broken(&report, space), "{message}");
    assert!(
        message.contains("after a reboot, a create again in")
            && message.contains("in a volumes dir without a space the same create keeps it"),
        "{message}"
    );
    let report = loop_report(&scratch, &unquoted, mount, "1");
    let (status, message) = verdict(&report, mount);
    assert_eq!(status, "pass", "{message}");
    for id in [mount, space] {
        let report = loop_report(&scratch, &util::sample("loop-ext4"), id, "1");
        let (status, message) = verdict(&report, id);
        assert_eq!(status, "pass", "{id}: {message}");
        assert!(
            message.contains("after a reboot, a create again")
                && message.contains("failed and removed nothing of the volume"),
            "{id}: {message}"
        );
    }
}
