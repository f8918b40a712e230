//! Removing a tree without ever leaving its file system.
//!
//! The walk holds a descriptor for every directory it is in and opens each
//! next one relative to it without following symlinks, so a path swapped
//! under it cannot lead it elsewhere. A directory on another device, or on
//! another mount of the same device (a bind mount), or the root of any mount,
//! is never entered: it is kept, and named in the result.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use super::fd::{self, Where};
use super::mountinfo;

/// How deep the walk goes; one descriptor stays open per level. Deeper
/// trees are left (and said so) rather than exhausting descriptors.
const MAX_DEPTH: usize = 400;

/// What [`remove_tree`] did.
#[derive(Debug, Default)]
#[must_use]
pub struct Removal {
    /// The tree's root is gone.
    pub removed: bool,
    /// Directories not entered because they are on another file system or
    /// are a mount point: everything below them is untouched.
    pub mount_points: Vec<PathBuf>,
    /// What could not be removed, and why (one line each, capped).
    pub errors: Vec<String>,
}

impl Removal {
    fn error(&mut self, path: &Path, e: impl std::fmt::Display) {
        if self.errors.len() < 20 {
            self.errors.push(format!("{}: {e}", path.display()));
        }
    }
}

/// The tree's root: where it lives, and the mount points mountinfo lists
/// below it (a second opinion for kernels whose statx has no mount id).
#[derive(Clone, Copy)]
struct Home<'a> {
    at: Where,
    known: &'a [PathBuf],
}

/// Removes the directory `root` and everything in it that is on the same
/// mount as `root` itself. A missing `root` counts as removed.
pub fn remove_tree(root: &Path) -> Removal {
    let mut out = Removal::default();
    // Paths are compared with mountinfo's, which are canonical.
    let root = &fd::canonical_parent(root);
    let dir = match fd::open_dir(root) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            out.removed = true;
            return out;
        }
        Err(e) => {
            out.error(root, e);
            return out;
        }
    };
    let known: Vec<PathBuf> = mountinfo::mounts_under(root)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_point)
        .collect();
    let home = match fd::locate(dir.as_fd()) {
        Ok(at) => Home { at, known: &known },
        Err(e) => {
            out.error(root, e);
            return out;
        }
    };
    clear(dir.as_fd(), root, home, 0, &mut out);
    drop(dir);
    match std::fs::remove_dir(root) {
        Ok(()) => out.removed = true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => out.removed = true,
        Err(e) => out.error(root, e),
    }
    out
}

/// Whether the dir at `path`, found to be `w`, is on the same mount as the
/// tree's root, and not a mount root.
fn same_mount(path: &Path, w: Where, home: Home<'_>) -> bool {
    w.dev == home.at.dev
        && w.mount_id == home.at.mount_id
        && w.mount_root != Some(true)
        && !home.known.iter().any(|k| k == path)
}

/// Empties the open dir `dir` (at `path`, for messages) of everything on
/// the root's mount.
fn clear(dir: BorrowedFd<'_>, path: &Path, home: Home<'_>, depth: usize, out: &mut Removal) {
    let names = match fd::entries(dir) {
        Ok(names) => names,
        Err(e) => return out.error(path, e),
    };
    for name in names {
        let child = path.join(&name);
        match fd::kind_at(dir, &name) {
            Ok(libc::S_IFDIR) => remove_dir(dir, &name, &child, home, depth, out),
            // A file, symlink, FIFO...: unlinking removes only the name, never
            // what a symlink points to; a file that is a bind-mount point is
            // refused by the kernel (EBUSY) and reported.
            Ok(_) => {
                if let Err(e) = fd::unlink_at(dir, &name, false) {
                    out.error(&child, e);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => out.error(&child, e),
        }
    }
}

fn remove_dir(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    path: &Path,
    home: Home<'_>,
    depth: usize,
    out: &mut Removal,
) {
    if depth >= MAX_DEPTH {
        return out.error(path, format!("more than {MAX_DEPTH} levels deep; left"));
    }
    let sub = match fd::open_subdir(parent, name) {
        Ok(sub) => sub,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => return out.error(path, e),
    };
    match fd::locate(sub.as_fd()) {
        Ok(w) if same_mount(path, w, home) => {}
        Ok(_) => {
            out.mount_points.push(path.to_path_buf());
            return;
        }
        Err(e) => return out.error(path, e),
    }
    clear(sub.as_fd(), path, home, depth + 1, out);
    drop(sub);
    if let Err(e) = fd::unlink_at(parent, name, true) {
        out.error(path, e);
    }
}

#[cfg(test)]
mod tests {
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
}
