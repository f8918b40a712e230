//! Removal never crosses a mount; mounts below a dir are unmounted deepest
//! first, and only those. Each test runs again inside a private mount
//! namespace (`unshare -m`), so its mounts are nobody else's business and
//! vanish with it; without root it prints why and does not run.

use crate::util;

use std::fs;

use dhv_host::safe_fs;

#[test]
fn removal_keeps_out_of_a_bind_mount_and_says_the_dir_was_not_removed() {
    if !util::in_private_mount_ns(
        "removal_keeps_out_of_a_bind_mount_and_says_the_dir_was_not_removed",
    ) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    util::plant_sentinels(outside.path());
    let before = util::tree_digest(outside.path());
    let run = tempfile::tempdir().unwrap();
    let vol = run.path().join("check/volumes/v1");
    fs::create_dir_all(&vol).unwrap();
    fs::write(run.path().join("check/ours"), "x").unwrap();
    util::bind_mount(outside.path(), &vol);

    let removal = safe_fs::remove_tree(run.path());
    assert!(
        !removal.removed,
        "the dir cannot be removed while a mount is in it"
    );
    assert_eq!(removal.mount_points, std::slice::from_ref(&vol));
    assert!(!run.path().join("check/ours").exists(), "our own files go");
    assert_eq!(
        util::tree_digest(outside.path()),
        before,
        "outside untouched"
    );

    let done = safe_fs::unmount_under(run.path()).unwrap();
    assert_eq!(done.unmounted.len(), 1, "{done:?}");
    assert!(done.failed.is_empty(), "{done:?}");
    assert!(util::mounts_below(run.path()).is_empty());
    let removal = safe_fs::remove_tree(run.path());
    assert!(removal.removed, "{removal:?}");
    assert_eq!(
        util::tree_digest(outside.path()),
        before,
        "outside untouched"
    );
}

#[test]
fn nested_and_stacked_mounts_are_unmounted_deepest_first() {
    if !util::in_private_mount_ns("nested_and_stacked_mounts_are_unmounted_deepest_first") {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    util::plant_sentinels(outside.path());
    let before = util::tree_digest(outside.path());
    let run = tempfile::tempdir().unwrap();
    let a = run.path().join("a");
    fs::create_dir_all(&a).unwrap();
    util::bind_mount(outside.path(), &a);
    // Nested inside the first mount, and a second mount stacked on the first.
    util::bind_mount(&outside.path().join("a"), &a.join("a/b"));
    util::bind_mount(outside.path(), &a);
    assert_eq!(
        util::mounts_below(run.path()).len(),
        3,
        "{:?}",
        util::mounts_below(run.path())
    );

    let done = safe_fs::unmount_under(run.path()).unwrap();
    assert!(done.failed.is_empty(), "{done:?}");
    assert_eq!(done.all().count(), 3);
    assert!(util::mounts_below(run.path()).is_empty());
    assert!(safe_fs::remove_tree(run.path()).removed);
    assert_eq!(util::tree_digest(outside.path()), before);
}

/// A symlink in the tree that leads to a mount outside leads neither the
/// unmount nor the removal there; a mount whose dir was renamed is still found.
#[test]
fn a_symlink_to_a_mount_outside_is_not_followed() {
    if !util::in_private_mount_ns("a_symlink_to_a_mount_outside_is_not_followed") {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    util::plant_sentinels(outside.path());
    let before = util::tree_digest(outside.path());
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere_vol = elsewhere.path().join("vol");
    fs::create_dir(&elsewhere_vol).unwrap();
    util::bind_mount(outside.path(), &elsewhere_vol);

    let run = tempfile::tempdir().unwrap();
    fs::create_dir_all(run.path().join("d/vol")).unwrap();
    util::bind_mount(outside.path(), &run.path().join("d/vol"));
    fs::rename(run.path().join("d"), run.path().join("d-moved")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), run.path().join("d")).unwrap();

    let done = safe_fs::unmount_under(run.path()).unwrap();
    assert_eq!(done.unmounted.len(), 1, "{done:?}");
    assert_eq!(
        done.unmounted[0].mount_point,
        run.path().join("d-moved/vol")
    );
    assert_eq!(
        util::mounts_below(elsewhere.path()),
        std::slice::from_ref(&elsewhere_vol)
    );
    assert!(safe_fs::remove_tree(run.path()).removed);
    assert_eq!(util::tree_digest(outside.path()), before);
    let done = safe_fs::unmount_under(elsewhere.path()).unwrap();
    assert_eq!(done.unmounted.len(), 1, "{done:?}");
}

/// A call refused mounts (`Call::refuse_mounts`) cannot mount, by
/// `mount(2)` or the new mount API, nor can anything it starts; the same
/// call without the refusal mounts (so the refusal is what stopped it).
#[test]
fn a_call_refused_mounts_cannot_mount() {
    if !util::in_private_mount_ns("a_call_refused_mounts_cannot_mount") {
        return;
    }
    use dhv_host::exec::Call;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("m");
    fs::create_dir(&target).unwrap();
    // `mount` from a child shell: what the plugin starts inherits the filter.
    let script = format!(
        "sh -c 'mount -t tmpfs dhv-refused {0}'; echo \"status $?\"",
        target.display()
    );
    let call = |refuse: bool| {
        util::runtime()
            .block_on(
                Call::new("/bin/sh")
                    .arg("-c")
                    .arg(&script)
                    .env(vec![(
                        "PATH".into(),
                        "/usr/sbin:/usr/bin:/sbin:/bin".into(),
                    )])
                    .refuse_mounts(refuse)
                    .run(),
            )
            .unwrap()
    };
    let refused = call(true);
    let out = String::from_utf8_lossy(&refused.stdout);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        out.contains("status ") && !out.contains("status 0"),
        "{out} {err}"
    );
    assert!(err.to_lowercase().contains("permission denied"), "{err}");
    assert!(util::mounts_below(dir.path()).is_empty());
    let allowed = call(false);
    let out = String::from_utf8_lossy(&allowed.stdout);
    assert!(out.contains("status 0"), "{out}");
    assert_eq!(util::mounts_below(dir.path()), vec![target.clone()]);
    let unmounted = dhv_host::safe_fs::unmount_under(dir.path()).unwrap();
    assert!(util::mounts_below(dir.path()).is_empty(), "{unmounted:?}");
}

/// The filler's mounts go to the end of the table when made again (after a
/// volume's mount, as a busy node's do), and none outlives it.
#[test]
fn the_mount_filler_follows_every_mount_made_before_it_and_leaves_none() {
    if !util::in_private_mount_ns(
        "the_mount_filler_follows_every_mount_made_before_it_and_leaves_none",
    ) {
        return;
    }
    let run = tempfile::tempdir().unwrap();
    let (fill, vol) = (run.path().join("fill"), run.path().join("vol"));
    fs::create_dir(&fill).unwrap();
    fs::create_dir(&vol).unwrap();
    let before = safe_fs::mountinfo::read().unwrap().len();
    let mut filler = safe_fs::MountFiller::new(&fill, 300).unwrap();
    assert_eq!(safe_fs::mountinfo::read().unwrap().len(), before + 300);
    util::bind_mount(&fill.join("0000"), &vol);
    filler.renew().unwrap();
    let table = safe_fs::mountinfo::read().unwrap();
    let at = table.iter().position(|m| m.mount_point == vol).unwrap();
    let after = table[at + 1..]
        .iter()
        .filter(|m| m.mount_point.starts_with(&fill))
        .count();
    assert_eq!(after, 300, "every filler follows the volume's mount");
    drop(filler);
    let table = safe_fs::mountinfo::read().unwrap();
    assert!(table.iter().all(|m| !m.mount_point.starts_with(&fill)));
    assert_eq!(fs::read_dir(&fill).unwrap().count(), 0, "its dirs go too");
    let out = std::process::Command::new("umount")
        .arg(&vol)
        .output()
        .unwrap();
    assert!(out.status.success(), "umount {}", vol.display());
}

/// A plugin that tests "mounted?" as `mount | grep -q` under `pipefail` reads
/// "no" for a mounted volume once the table is a node's, and mounts it again:
/// `concurrency.same-volume` finds it in every run (its rounds on an existing
/// volume have 1000 mounts after the volume's); the same plugin testing with
/// `mountpoint -q` passes.
#[test]
fn a_mounted_test_through_a_pipe_is_found_with_a_node_sized_mount_table() {
    if !util::in_private_mount_ns(
        "a_mounted_test_through_a_pipe_is_found_with_a_node_sized_mount_table",
    ) {
        return;
    }
    let s = util::Scratch::new();
    let body = |mounted: &str| {
        format!(
            "#!/bin/bash\nset -o pipefail\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
             p=$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\n\
             case $1 in\n\
             fingerprint) echo '{{\"version\": \"1.0.0\"}}' ;;\n\
             create)\n  mkdir -p \"$DHV_VOLUMES_DIR\" && exec 9>>\"$DHV_VOLUMES_DIR/.lock\" && flock 9 || exit 1\n  \
             mkdir -p \"$p\" || exit 1\n  \
             if ! {mounted}; then mount -t tmpfs -o size=1m vol \"$p\" >&2 || exit 1; fi\n  \
             echo \"{{\\\"path\\\": \\\"$p\\\", \\\"bytes\\\": 0}}\" ;;\n\
             delete)\n  [ -d \"$DHV_VOLUMES_DIR\" ] || exit 0\n  exec 9>>\"$DHV_VOLUMES_DIR/.lock\" && flock 9 || exit 1\n  \
             while mountpoint -q \"$p\"; do umount \"$p\" || exit 1; done\n  rm -rf \"$p\" ;;\n\
             *) exit 1 ;;\n\
             esac\n"
        )
    };
    let piped = s.plugin("piped", &body("mount | grep -q \" $p \""));
    let direct = s.plugin("direct", &body("mountpoint -q \"$p\""));
    for run in 0..2 {
        let (status, message) = same_volume(&piped);
        assert_eq!(status, "warn", "run {run}: {message}");
        assert!(message.contains("behind 1000 other mounts"), "{message}");
        let (status, message) = same_volume(&direct);
        assert_eq!(status, "pass", "run {run}: {message}");
        assert!(message.contains("behind 1000 other mounts"), "{message}");
    }
}

/// `concurrency.same-volume`'s status and message for `plugin`.
fn same_volume(plugin: &std::path::Path) -> (String, String) {
    let (status, message) = util::check::only(plugin, "concurrency.same-volume");
    (status.to_string(), message)
}

/// A guard detaches a mount over a guarded dir at its next look (over the
/// root and over a dir made in it, the one hidden under the other), names
/// each (source → target), and leaves a mount inside a guarded dir (where a
/// volume is mounted) alone; the outside dir is as it was.
#[test]
fn a_mount_over_a_guarded_dir_is_detached_at_the_next_look_and_one_inside_is_left() {
    if !util::in_private_mount_ns(
        "a_mount_over_a_guarded_dir_is_detached_at_the_next_look_and_one_inside_is_left",
    ) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    util::plant_sentinels(outside.path());
    let before = util::tree_digest(outside.path());
    let base = tempfile::tempdir().unwrap();
    let guard = safe_fs::MountGuard::new();
    let root = safe_fs::HeldDir::make_temp_in(base.path(), "run-")
        .unwrap()
        .guarded_by(&guard);
    let check = root.make_subdir("check".as_ref()).unwrap();
    let volumes = check.make_subdir("volumes".as_ref()).unwrap();
    let vol = volumes.canonical().join("v1");
    fs::create_dir(&vol).unwrap();
    util::bind_mount(outside.path(), &vol);
    util::bind_mount(outside.path(), check.path());
    util::bind_mount(outside.path(), root.path());

    guard.look();
    let undone = guard.undone();
    let source = outside.path().canonicalize().unwrap();
    for target in [root.canonical(), check.canonical()] {
        let named = format!("{} → {}", source.display(), target.display());
        assert!(
            undone
                .iter()
                .any(|u| u.contains(&named) && u.contains("detached")),
            "{named} in {undone:?}"
        );
    }
    assert_eq!(undone.len(), 2, "{undone:?}");
    assert_eq!(util::mounts_below(root.path()), std::slice::from_ref(&vol));
    assert_eq!(
        util::tree_digest(outside.path()),
        before,
        "outside as it was"
    );

    let done = safe_fs::unmount_under_held(&root).unwrap();
    assert!(done.failed.is_empty(), "{done:?}");
    assert!(safe_fs::remove_held(&root).removed);
    assert_eq!(
        util::tree_digest(outside.path()),
        before,
        "outside as it was"
    );
}
