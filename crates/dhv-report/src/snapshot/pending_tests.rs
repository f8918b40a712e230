//! The snapshot files' own tests: writing, and the pending files a review decides.

use super::*;
use crate::sample;
use crate::snapshot::{Normalised, SnapshotOutcome, compare, normalise};
use crate::{Redactions, Report};
use std::fs;

fn current(report: &Report) -> String {
    normalise(report, &Redactions::for_report(report), |_| None)
}

fn both(report: &Report) -> Normalised {
    Normalised::of(report, &Redactions::for_report(report), |_| None)
}

fn stored(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("plugin.snap");
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn bless_then_compare_matches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.snap");
    let report = sample::report(false);
    bless(&path, &current(&report)).unwrap();
    assert_eq!(
        compare(&path, &both(&report)).unwrap(),
        SnapshotOutcome::Matched
    );
    assert_eq!(
        fs::read_dir(path.parent().unwrap()).unwrap().count(),
        1,
        "no temp file left"
    );
}

#[test]
fn bless_replaces_an_existing_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = stored(&dir, "old\nlonger than the new text\n");
    bless(&path, "new\n").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
}

#[test]
fn blessed_snapshot_is_not_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.snap");
    bless(&path, "x\n").unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode();
    assert_ne!(mode & 0o044, 0, "mode {mode:o}");
}

#[test]
fn bless_error_names_the_file_and_action() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    fs::write(&blocker, "").unwrap();
    let path = blocker.join("plugin.snap");
    let err = bless(&path, "x\n").unwrap_err();
    assert!(matches!(err, SnapshotError::Write { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("cannot write snapshot"), "{text}");
    assert!(text.contains("plugin.snap"), "{text}");
    let missing = dir.path().join("no-such-dir/plugin.snap");
    assert!(bless(&missing, "x\n").is_err());
    assert!(!missing.parent().unwrap().exists(), "no dir is made");
}

/// A pending snapshot is found from its snapshot, from itself and from its
/// directory (which may hold other `.new` files), accepted over the snapshot
/// (a symlink's target written, the link kept) or rejected.
#[test]
fn pending_snapshots_are_found_accepted_and_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let report = sample::report(false);
    let text = current(&report);
    let target = dir.path().join("target.snap");
    fs::write(&target, "old\n").unwrap();
    let path = dir.path().join("plugin.snap");
    std::os::unix::fs::symlink("target.snap", &path).unwrap();
    assert_eq!(find_pending(&path).unwrap(), []);
    write_pending(&path, &text).unwrap();
    fs::write(dir.path().join("notes.txt.new"), "not a snapshot\n").unwrap();
    let want = Pending {
        snapshot: path.clone(),
        pending: pending_path(&path),
    };
    assert_eq!(want.pending, dir.path().join("plugin.snap.new"));
    assert_eq!(find_pending(&path).unwrap(), std::slice::from_ref(&want));
    assert_eq!(
        find_pending(&want.pending).unwrap(),
        std::slice::from_ref(&want)
    );
    assert_eq!(
        find_pending(dir.path()).unwrap(),
        std::slice::from_ref(&want)
    );
    assert_eq!(want.stored().unwrap().as_deref(), Some("old\n"));
    assert_eq!(want.proposed().unwrap(), text);
    accept(&want).unwrap();
    assert!(fs::symlink_metadata(&path).unwrap().is_symlink());
    assert_eq!(fs::read_to_string(&target).unwrap(), text);
    assert!(!want.pending.exists());
    assert_eq!(find_pending(dir.path()).unwrap(), []);

    write_pending(&path, "proposed\n").unwrap();
    reject(&want).unwrap();
    assert!(!want.pending.exists());
    assert_eq!(fs::read_to_string(&target).unwrap(), text);

    let nowhere = dir.path().join("nowhere.snap");
    let err = find_pending(&nowhere).unwrap_err();
    assert!(matches!(err, SnapshotError::NoSnapshot { .. }), "{err:?}");
    assert!(err.to_string().contains("nowhere.snap.new"), "{err}");
}
