//! The harness changes nothing outside its sandbox, whatever the plugin put
//! in its way: a shared tree bind-mounted onto a volume keeps its submounts,
//! hard links planted under the harness's file names are never written
//! through, a check's dir pre-made as a symlink or a bind mount over the run's
//! temp dir receives nothing, the harness's own file in a bind mount a delete
//! left is removed, and immutable files and trees of any depth are removed.
//!
//! Tests that mount run again inside a private mount namespace (`unshare
//! -m`); those that need root fail under `CI` when they cannot run, and
//! elsewhere print why they did not.

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod area;
use area::Area;

/// Whether a root-only test can run here; under `CI` it must.
fn root_or_skip(test: &str) -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs root, and CI runs as root"
    );
    println!("SKIPPED {test}: needs root");
    false
}

/// Like [`util::in_private_mount_ns`], failing under `CI` where it cannot run.
fn in_ns(test: &str) -> bool {
    root_or_skip(test) && util::in_private_mount_ns(test)
}

/// The message of check `id` in `report`.
fn message<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report}"))["message"]
        .as_str()
        .unwrap()
}

fn run(cmd: &str) {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Item 1: a plugin `mount --rbind`s an outside tree that is `rshared`, with
/// a submount holding data, onto every volume, and never unmounts it. The
/// teardown's unmounts of the copies do not propagate: the outside submount
/// is still mounted, its data intact.
#[test]
fn unmounting_a_copy_of_a_shared_tree_leaves_the_original_mounted() {
    let test = "unmounting_a_copy_of_a_shared_tree_leaves_the_original_mounted";
    if !in_ns(test) {
        return;
    }
    let area = Area::new();
    let shared = area.scratch.path().join("shared");
    let sub = shared.join("sub");
    fs::create_dir_all(&sub).unwrap();
    let s = shared.display();
    run(&format!(
        "mount --bind {s} {s} && mount --make-rshared {s} && mount -t tmpfs precious {s}/sub"
    ));
    fs::write(sub.join("data"), "precious data\n").unwrap();
    let plugin = area.plugin(
        // Once per volume: a copy stacked on a peer of the tree would
        // propagate into the tree itself, and into every copy of it.
        &format!(
            "    mkdir -p \"$p\" || exit 1
    mountpoint -q \"$p\" || mount --rbind {s} \"$p\" >&2 || exit 1"
        ),
        "    exit 0",
    );
    // Every mount of a shared tree propagates to its peers: the checks that
    // mount many volumes at once, or again after a reboot, multiply them
    // past the run's time limit. The teardown is what is tested here.
    let (report, stderr) = area.check_with(
        &plugin,
        &[
            "--skip",
            "concurrency.",
            "--skip",
            "lifecycle.",
            "--skip",
            "input.",
        ],
    );
    let still = util::mounts_below(&shared);
    let data = fs::read_to_string(sub.join("data"));
    run(&format!("umount -R {s}"));
    assert!(
        still.contains(&sub),
        "the outside submount was unmounted; mounts under it: {still:?}; stderr: {stderr}"
    );
    assert_eq!(data.unwrap(), "precious data\n");
    assert!(
        message(&report, "delete.no-residue").contains("still mounted"),
        "{report}"
    );
    assert_eq!(report["sandbox"]["removed"], true, "{report}");
    area.assert_clean("shared tree");
}

/// Item 2: a plugin pre-makes the harness's canary and data file names in
/// each new volume as hard links to outside files. Nothing is written
/// through them, and the names that already existed are said.
#[test]
fn hard_links_under_the_harness_file_names_are_never_written_through() {
    let area = Area::new();
    let before = util::tree_digest(&area.outside());
    let plugin = area.plugin(
        "    mkdir -p \"$p\" || exit 1
    ln \"$outside/sentinel-0\" \"$p/.dhv-conform-canary\"
    ln \"$outside/sentinel-1\" \"$p/data\"",
        "    rm -rf \"$p\"",
    );
    let (report, stderr) = area.check(&plugin);
    assert_eq!(
        util::tree_digest(&area.outside()),
        before,
        "outside files changed; stderr: {stderr}"
    );
    let idempotent = message(&report, "create.idempotent");
    assert!(idempotent.contains("already exists"), "{idempotent}");
    let deleted = message(&report, "delete.succeeds");
    assert!(deleted.contains("data already exists"), "{deleted}");
    area.assert_clean("hard links");
}

/// Item 3: a plugin makes every check dir not yet made a symlink to an
/// outside dir. The harness writes nothing there: those checks fail, naming
/// the dir that already existed.
#[test]
fn a_check_dir_made_a_symlink_by_the_plugin_receives_nothing() {
    let area = Area::new();
    let before = util::tree_digest(&area.outside());
    let ids = dhv_conform::conformance::CATALOGUE
        .iter()
        .map(|c| c.id)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(ids.contains("delete.no-residue"), "{ids}");
    // `-n`: two calls at once must not make a link inside the outside dir
    // through the other's link (that would be the plugin's own write).
    let plugin = area.plugin(
        &format!(
            "    mkdir -p \"$p\" || exit 1
    root=$(dirname \"$(dirname \"$DHV_VOLUMES_DIR\")\")
    for c in {ids}; do [ -e \"$root/$c\" ] || ln -sn \"$outside\" \"$root/$c\" 2>/dev/null; done"
        ),
        "    rm -rf \"$p\"",
    );
    // One check at a time: with every check started at once, their dirs can
    // all exist before the plugin's first create plants a link.
    let (report, stderr) = area.check_with(&plugin, &["--test-threads", "1"]);
    assert_eq!(
        util::tree_digest(&area.outside()),
        before,
        "written outside; stderr: {stderr}"
    );
    let pre_made: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["message"].as_str())
        .filter(|m| m.contains("the check's own dir") && m.contains("already exists"))
        .collect();
    assert!(!pre_made.is_empty(), "{report}");
    assert_eq!(report["sandbox"]["removed"], true, "{report}");
    area.assert_clean("symlinked check dirs");
}

/// Item 3: a plugin bind-mounts an outside dir over the run's temp dir at its
/// first create. The checks' dirs are still made in the run's own temp dir:
/// the outside dir receives nothing, and the temp dir is gone afterwards.
#[test]
fn a_bind_mount_over_the_run_temp_dir_receives_nothing() {
    let test = "a_bind_mount_over_the_run_temp_dir_receives_nothing";
    if !in_ns(test) {
        return;
    }
    let area = Area::new();
    let before = util::tree_digest(&area.outside());
    // Plain mkdir: a volumes dir the plugin cannot see makes it fail, so
    // whatever appears outside is the harness's doing.
    let plugin = area.plugin(
        "    root=$(dirname \"$(dirname \"$DHV_VOLUMES_DIR\")\")
    if mkdir \"$log/covered\" 2>/dev/null; then mount --bind \"$outside\" \"$root\" >&2; fi
    mkdir \"$p\" || exit 1",
        "    rm -rf \"$p\"",
    );
    let (report, stderr) = area.check(&plugin);
    assert!(area.log().join("covered").exists(), "the plugin never ran");
    assert_eq!(
        util::tree_digest(&area.outside()),
        before,
        "written outside; stderr: {stderr}"
    );
    assert_eq!(report["sandbox"]["removed"], true, "{report}");
    area.assert_clean("bind mount over the temp dir");
}

/// A plugin that, at its first create, bind-mounts an outside dir over the
/// dir of lifecycle.restore, which the run made before that check's probe:
/// the manager the check then opens keeps its state in the check's own dir,
/// reached through the harness's descriptor, not by a path the mount now
/// covers. The outside dir receives nothing (it got the manager's
/// `state/state.json` before).
#[test]
fn a_mount_over_a_check_dir_receives_no_manager_state() {
    let test = "a_mount_over_a_check_dir_receives_no_manager_state";
    if !in_ns(test) {
        return;
    }
    let area = Area::new();
    let before = util::tree_digest(&area.outside());
    let plugin = area.plugin(
        "    check=$(dirname \"$(dirname \"$DHV_VOLUMES_DIR\")\")/lifecycle.restore
    mkdir \"$p\" || exit 1
    if [ -d \"$check\" ] && mkdir \"$log/covered\" 2>/dev/null; then mount --bind \"$outside\" \"$check\" >&2; fi",
        "    rm -rf \"$p\"",
    );
    let (report, stderr) = area.check_with(&plugin, &["lifecycle.restore", "--exact"]);
    assert!(
        area.log().join("covered").exists(),
        "the plugin never covered the check's dir"
    );
    assert_eq!(
        util::tree_digest(&area.outside()),
        before,
        "written outside; stderr: {stderr}"
    );
    assert_eq!(report["sandbox"]["removed"], true, "{report}");
    area.assert_clean("bind mount over a check's dir");
}

/// Item 4: a plugin whose every volume is a bind mount of an outside dir,
/// and whose delete forgets to unmount. The harness's own files written in
/// those volumes are removed before it unmounts: the outside dir is as it
/// was, no `data` file left in it.
#[test]
fn the_harness_files_in_a_bind_mount_left_by_a_delete_are_removed() {
    let test = "the_harness_files_in_a_bind_mount_left_by_a_delete_are_removed";
    if !in_ns(test) {
        return;
    }
    let area = Area::new();
    let before = util::tree_digest(&area.outside());
    let plugin = area.plugin(
        "    mkdir -p \"$p\" || exit 1
    mountpoint -q \"$p\" || mount --bind \"$outside\" \"$p\" >&2 || exit 1",
        "    exit 0",
    );
    let (report, stderr) = area.check(&plugin);
    assert_eq!(
        util::tree_digest(&area.outside()),
        before,
        "the harness's files were left outside; stderr: {stderr}"
    );
    assert!(
        message(&report, "delete.no-residue").contains("still mounted"),
        "{report}"
    );
    area.assert_clean("forgetful delete");
}

/// Item 10: a plugin leaves immutable and append-only files beside its
/// volumes, and a tree 20,000 levels deep: the teardown removes them all.
#[test]
fn immutable_files_and_a_20000_deep_tree_are_removed() {
    if !root_or_skip("immutable_files_and_a_20000_deep_tree_are_removed") {
        return;
    }
    // A tmpfs where there is one: 20,000 mkdirs cost a minute of a busy disk.
    let shm = Path::new("/dev/shm");
    let area = if shm.is_dir() {
        Area::in_dir(shm)
    } else {
        Area::new()
    };
    let deep = "d/".repeat(20_000);
    let plugin = area.plugin(
        &format!(
            "    mkdir -p \"$p\" || exit 1
    if mkdir \"$log/deep\" 2>/dev/null; then mkdir -p \"$DHV_VOLUMES_DIR/../deep/{deep}\"; fi
    touch \"$DHV_VOLUMES_DIR/../i-$DHV_VOLUME_ID\" \"$DHV_VOLUMES_DIR/../a-$DHV_VOLUME_ID\"
    chattr +i \"$DHV_VOLUMES_DIR/../i-$DHV_VOLUME_ID\"
    chattr +a \"$DHV_VOLUMES_DIR/../a-$DHV_VOLUME_ID\""
        ),
        "    rm -rf \"$p\"",
    );
    let (report, stderr) = area.check(&plugin);
    assert!(area.log().join("deep").exists(), "the plugin never ran");
    assert_eq!(
        report["sandbox"]["removed"], true,
        "{}; stderr: {stderr}",
        report["sandbox"]
    );
    area.assert_clean("immutable files, deep tree");
}

/// Item 10: what the removal must leave (an immutable file with another
/// hard link, which may be someone else's) is named in the report, on the
/// terminal and by `delete.no-residue`, which warns: it runs last, once the
/// run's end is cleared, so the terminal's line for it says what the report
/// says (nothing rewrites a verdict after it was told).
#[test]
fn what_cannot_be_removed_is_named_by_delete_no_residue() {
    if !root_or_skip("what_cannot_be_removed_is_named_by_delete_no_residue") {
        return;
    }
    let area = Area::new();
    let plugin = area.plugin(
        "    mkdir -p \"$p\" || exit 1
    if mkdir \"$log/linked\" 2>/dev/null; then
        ln \"$outside/sentinel-2\" \"$DHV_VOLUMES_DIR/../linked\" && chattr +i \"$outside/sentinel-2\"
    fi",
        "    rm -rf \"$p\"",
    );
    let (report, stderr, told) = area.check_told(&plugin, &[]);
    run(&format!(
        "chattr -i {}/sentinel-2",
        area.outside().display()
    ));
    let left: Vec<PathBuf> = fs::read_dir(area.tmp())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    for dir in &left {
        assert!(dhv_host::safe_fs::remove_tree(dir).removed);
    }
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(report["sandbox"]["removed"], false, "{report}");
    let kept = report["sandbox"]["kept"].to_string();
    assert!(kept.contains("linked"), "{kept}");
    assert!(
        stderr.contains("NOT removed") && stderr.contains("linked"),
        "{stderr}"
    );
    let residue = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "delete.no-residue")
        .unwrap();
    assert_eq!(residue["status"], "warn", "{residue}");
    let text = residue["message"].as_str().unwrap();
    assert!(
        text.contains("could not remove") && text.contains("linked"),
        "{text}"
    );
    let lines: Vec<&str> = told
        .lines()
        .filter(|l| l.starts_with("test ") && l.contains(" ... "))
        .collect();
    assert_eq!(
        lines.last(),
        Some(&"test delete.no-residue ... warn"),
        "the last check told, as the report has it: {told}"
    );
    assert_eq!(
        report["summary"]["warned"],
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "warn")
            .count(),
        "{}",
        report["summary"]
    );
    area.assert_clean("unremovable file");
}

/// Item 3: a plugin mounts a decoy over `TMPDIR` holding a dir of the run's
/// temp dir name, with a file in it. The teardown removes the run's own temp
/// dir (through the descriptors it holds), not the decoy's: the decoy keeps
/// its file, and once the decoy is gone the real temp dir is gone too.
#[test]
fn a_decoy_over_tmpdir_loses_nothing_and_the_real_temp_dir_goes() {
    let test = "a_decoy_over_tmpdir_loses_nothing_and_the_real_temp_dir_goes";
    if !in_ns(test) {
        return;
    }
    let area = Area::new();
    let decoy = area.scratch.path().join("decoy");
    fs::create_dir(&decoy).unwrap();
    let plugin = area.plugin(
        "    root=$(dirname \"$(dirname \"$DHV_VOLUMES_DIR\")\")
    if mkdir \"$log/decoy\" 2>/dev/null; then
        mkdir -p \"$outside/../decoy/$(basename \"$root\")\" &&
        echo keep > \"$outside/../decoy/$(basename \"$root\")/keep\" &&
        mount --bind \"$outside/../decoy\" \"$(dirname \"$root\")\" >&2
    fi
    mkdir -p \"$p\" || exit 1",
        "    rm -rf \"$p\"",
    );
    let (report, stderr) = area.check(&plugin);
    assert!(area.log().join("decoy").exists(), "the plugin never ran");
    let kept: Vec<PathBuf> = fs::read_dir(&decoy)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("keep"))
        .collect();
    run(&format!("umount {}", area.tmp().display()));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        fs::read_to_string(&kept[0]).unwrap_or_default(),
        "keep\n",
        "the decoy lost its file; stderr: {stderr}"
    );
    assert_eq!(report["sandbox"]["removed"], true, "{report}");
    area.assert_clean("decoy over TMPDIR");
}
