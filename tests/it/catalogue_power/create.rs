//! The catalogue's power over creates: each check made for a create's slip (a
//! refused mount or chmod ignored or mishandled, a clean-up split by a space, a
//! volumes dir it needs made, a file in the way taken or cleared, a sparse
//! image past the free space, a reboot that changes the volume, a failed create
//! that removes an existing one) catches it, and the correct plugin passes.

use super::*;

/// With every mount refused, a create that ignores the failed mount reports
/// a plain directory as the volume: failure.mount-refused warns; one that
/// forgets to remove its image leaves it, failure.clean's finding, which
/// failure.mount-refused names rather than warns again (one cause, one
/// finding); loop-ext4 fails cleanly and then creates the volume mounted.
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
    let report = loop_report_of(
        &scratch,
        &[&keeps_image, "failure.", "--timeout-scale", "1"],
    );
    let (status, message) = verdict(&report, "failure.mount-refused");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("cannot mount the image), and what it left is failure.clean's finding"),
        "{message}"
    );
    let (status, message) = verdict(&report, "failure.clean");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains("failure.mount-refused (create with every mount refused): failed (")
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
/// filesystem's root mode, which failure.chmod-refused warns; forgetting
/// that it mounted leaves the mount and its loop device, failure.clean's
/// finding, which failure.chmod-refused names rather than warns again.
/// loop-ext4 itself fails cleanly, then makes the volume.
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
    let report = loop_report_of(
        &scratch,
        &[&forgets_mount, "failure.", "--timeout-scale", "1"],
    );
    let (status, message) = verdict(&report, id);
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("and what it left is failure.clean's finding"),
        "{message}"
    );
    let (status, message) = verdict(&report, "failure.clean");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains("failure.chmod-refused (")
            && message.contains(" (mounted)")
            && message.contains(" loop devices attached: /dev/loop"),
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
