//! Unit tests of the tree removal: plain trees, symlinks, missing roots,
//! deep trees, immutable entries.
use super::*;
use std::fs;

#[test]
fn removes_a_plain_tree_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("run");
    fs::create_dir_all(root.join("a/b/c")).unwrap();
    fs::write(root.join("a/b/c/f"), "x").unwrap();
    fs::write(root.join("top"), "x").unwrap();
    let r = remove_tree(&root);
    assert!(r.removed, "{r:?}");
    assert!(r.errors.is_empty() && r.mount_points.is_empty());
    assert!(!root.exists());
}

#[test]
fn a_symlink_is_removed_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), "x").unwrap();
    let root = tmp.path().join("run");
    fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
    assert!(remove_tree(&root).removed);
    assert!(outside.join("keep").exists());
}

#[test]
fn a_missing_root_counts_as_removed() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(remove_tree(&tmp.path().join("nope")).removed);
}

#[test]
fn a_symlink_as_root_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), "x").unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let r = remove_tree(&link);
    assert!(!r.removed);
    assert!(outside.join("keep").exists());
}

/// Deeper than any fixed limit, and deeper than the descriptors a
/// process may hold at once: removed all the same.
#[test]
fn a_tree_20000_levels_deep_is_removed() {
    // On a tmpfs where there is one: 20,000 mkdirs cost a minute of disk
    // on a busy ext4.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let root = tmp.path().join("run");
    fs::create_dir(&root).unwrap();
    let mut cur = fd::open_dir(&root).unwrap();
    for _ in 0..20_000 {
        nix::sys::stat::mkdirat(&cur, "d", nix::sys::stat::Mode::from_bits_truncate(0o755))
            .unwrap();
        cur = fd::open_subdir(cur.as_fd(), OsStr::new("d")).unwrap();
    }
    drop(cur);
    let start = std::time::Instant::now();
    let r = remove_tree(&root);
    println!("removed 20000 levels in {:?}", start.elapsed());
    assert!(r.removed, "{r:?}");
    assert!(r.errors.is_empty(), "{r:?}");
    assert!(!root.exists());
}

/// `chattr +i` and `+a` files and dirs of the tree are removed; a file
/// with another hard link is left (it may be someone else's), and named.
#[test]
fn immutable_and_append_only_entries_are_removed() {
    if !nix::unistd::Uid::effective().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        println!("SKIPPED immutable_and_append_only_entries_are_removed: needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("run");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("i"), "x").unwrap();
    fs::write(root.join("sub/a"), "x").unwrap();
    let outside = tmp.path().join("outside");
    fs::write(&outside, "x").unwrap();
    fs::hard_link(&outside, root.join("linked")).unwrap();
    let chattr = |flag: &str, p: &Path| {
        let ok = std::process::Command::new("chattr")
            .arg(flag)
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "chattr {flag} {}", p.display());
    };
    chattr("+i", &root.join("i"));
    chattr("+a", &root.join("sub/a"));
    chattr("+i", &root.join("sub"));
    chattr("+i", &root.join("linked"));
    let r = remove_tree(&root);
    chattr("-i", &outside);
    assert!(!r.removed, "{r:?}");
    assert_eq!(r.unflagged, 2, "i, then sub/a in sub: {r:?}");
    assert_eq!(r.failures, 2, "the linked file, then its dir: {r:?}");
    assert!(r.errors[0].contains("linked"), "{r:?}");
    assert!(!root.join("sub").exists() && !root.join("i").exists());
    assert_eq!(fs::read_to_string(&outside).unwrap(), "x");
    fs::remove_file(root.join("linked")).unwrap();
    assert!(remove_tree(&root).removed);
}
