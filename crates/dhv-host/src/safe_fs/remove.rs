//! Removing a tree without ever leaving its file system.
//!
//! The walk opens each next directory relative to the one it is in, without
//! following symlinks, so a path swapped under it cannot lead it elsewhere. A
//! directory on another device, or on another mount of the same device (a
//! bind mount), or the root of any mount, is never entered: it is kept, and
//! named in the result.
//!
//! It goes to any depth and holds one descriptor at a time: the way down is
//! kept as names and identities (device, inode), and the way back up is
//! `..`, checked to be the very dir it came from. Files and dirs a plugin
//! made immutable or append-only (`chattr +i`, `+a`) have those flags
//! cleared when they stand in the way, if they are the tree's own (a file
//! with other hard links may be someone else's: it is left, and named).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::fd::{self, Where};
use super::held::{FileId, HeldDir};
use super::mountinfo;

/// At most this many lines of what could not be removed; the count says
/// how many more.
const MAX_ERRORS: usize = 20;

/// `FS_IMMUTABLE_FL` and `FS_APPEND_FL` (linux/fs.h).
const STUCK_FLAGS: libc::c_long = 0x10 | 0x20;

/// What [`remove_tree`] did.
#[derive(Debug, Default)]
#[must_use]
pub struct Removal {
    /// The tree's root is gone.
    pub removed: bool,
    /// Directories not entered because they are on another file system or
    /// are a mount point: everything below them is untouched.
    pub mount_points: Vec<PathBuf>,
    /// What could not be removed, and why (one line each, capped; the last
    /// line counts the rest).
    pub errors: Vec<String>,
    /// How many entries could not be removed, all told.
    pub failures: usize,
    /// Immutable or append-only flags cleared on the tree's own files.
    pub unflagged: usize,
}

impl Removal {
    fn error(&mut self, path: &Path, e: impl std::fmt::Display) {
        self.failures += 1;
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(format!("{}: {e}", path.display()));
        }
    }

    /// Ends the count of errors beyond the cap.
    fn close(&mut self) {
        if self.failures > self.errors.len() {
            self.errors.push(format!(
                "and {} more entries that could not be removed",
                self.failures - self.errors.len()
            ));
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
    let parent = match (root.parent(), root.file_name()) {
        (Some(up), Some(name)) => fd::open_dir(up).map(|p| (p, name.to_os_string())),
        _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
    };
    match parent {
        Ok((parent, name)) => remove_from(dir, parent.as_fd(), &name, root, &mut out),
        Err(e) => out.error(root, e),
    }
    out.close();
    out
}

/// Removes the held dir `root` and everything in it on its own mount,
/// through its descriptors only: a mount or a symlink put over its path
/// since it was made changes nothing (`removed` is true only when the dir
/// that was made is gone from where it was made).
pub fn remove_held(root: &HeldDir) -> Removal {
    let mut out = Removal::default();
    match root.fd().try_clone_to_owned() {
        Ok(dir) => {
            let (parent, name) = root.parent();
            remove_from(dir, parent, name, root.canonical(), &mut out);
        }
        Err(e) => out.error(root.path(), e),
    }
    out.close();
    out
}

/// Empties the held dir `root` of everything on its own mount but the
/// entries named `spare` (at its top), through its descriptors only; `root`
/// itself stays. `removed` is true when nothing else is left in it.
pub fn empty_held(root: &HeldDir, spare: &[&OsStr]) -> Removal {
    let mut out = Removal::default();
    let path = root.canonical();
    let known: Vec<PathBuf> = mountinfo::mounts_under(path)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|m| m != path)
        .collect();
    let opened = root.fd().try_clone_to_owned();
    match (opened, fd::locate(root.fd()), FileId::of(root.fd())) {
        (Ok(dir), Ok(at), Ok(id)) => {
            let home = Home { at, known: &known };
            let whole = walk(dir, id, path, home, spare, &mut out);
            out.removed = whole && out.failures == 0 && out.mount_points.is_empty();
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => out.error(path, e),
    }
    out.close();
    out
}

/// Empties `dir` (named `name` in `parent`, at `path`), then removes it
/// from `parent` if the name there is still `dir`.
fn remove_from(dir: OwnedFd, parent: BorrowedFd<'_>, name: &OsStr, path: &Path, out: &mut Removal) {
    let known: Vec<PathBuf> = mountinfo::mounts_under(path)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_point)
        .collect();
    let (at, id) = match (fd::locate(dir.as_fd()), FileId::of(dir.as_fd())) {
        (Ok(at), Ok(id)) => (at, id),
        (Err(e), _) | (_, Err(e)) => return out.error(path, e),
    };
    let home = Home { at, known: &known };
    if !walk(dir, id, path, home, &[], out) {
        return;
    }
    match FileId::at(parent, name) {
        Ok((now, _)) if now == id => {}
        Ok(_) => {
            return out.error(
                path,
                "its name now leads to something else (moved or covered): left",
            );
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return out.error(path, "moved away: left");
        }
        Err(e) => return out.error(path, e),
    }
    match remove_entry(parent, name, true, false, out) {
        Ok(()) => out.removed = true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => out.removed = true,
        Err(e) => out.error(path, e),
    }
}

/// One dir on the way down: its name in the one above, its identity, and
/// the subdirs of it still to visit.
struct Frame {
    name: OsString,
    id: FileId,
    pending: Vec<OsString>,
}

/// `root/a/b/…` for messages; a deep one keeps its first and last names.
fn describe(root: &Path, stack: &[Frame], last: Option<&OsStr>) -> PathBuf {
    let names: Vec<&OsStr> = stack
        .iter()
        .skip(1)
        .map(|f| f.name.as_os_str())
        .chain(last)
        .collect();
    let mut out = root.to_path_buf();
    if names.len() <= 12 {
        out.extend(names);
    } else {
        out.extend(&names[..4]);
        out.push(format!("…({} levels)…", names.len() - 8));
        out.extend(&names[names.len() - 4..]);
    }
    out
}

/// Empties the tree below the open dir `root`, depth first, one descriptor
/// at a time. `false` when it had to stop: a dir on the way back up was not
/// the one it came down from.
fn walk(
    root: OwnedFd,
    root_id: FileId,
    root_path: &Path,
    home: Home<'_>,
    spare: &[&OsStr],
    out: &mut Removal,
) -> bool {
    let deepest_known = home
        .known
        .iter()
        .filter_map(|k| k.strip_prefix(root_path).ok())
        .map(|k| k.components().count())
        .max()
        .unwrap_or(0);
    let mut walk = Descent {
        root_path,
        home,
        deepest_known,
        cur: root,
        stack: vec![Frame {
            name: OsString::new(),
            id: root_id,
            pending: Vec::new(),
        }],
        out,
    };
    fill(
        walk.cur.as_fd(),
        &mut walk.stack,
        root_path,
        spare,
        walk.out,
    );
    loop {
        let top = walk.stack.last_mut().expect("the root's frame stays");
        match top.pending.pop() {
            Some(name) => walk.enter(name),
            None if walk.stack.len() == 1 => return true,
            None => {
                if !walk.leave() {
                    return false;
                }
            }
        }
    }
}

/// Where [`walk`] is: the open dir `cur`, and the frames of the dirs from the
/// root down to it.
struct Descent<'a> {
    root_path: &'a Path,
    home: Home<'a>,
    /// How deep below the root the deepest known mount point is.
    deepest_known: usize,
    cur: OwnedFd,
    stack: Vec<Frame>,
    out: &'a mut Removal,
}

impl Descent<'_> {
    /// Goes down into the subdir `name` of the current dir, to empty it, unless
    /// it is gone, cannot be opened, or is a mount point (left, and listed).
    fn enter(&mut self, name: OsString) {
        let (root_path, stack) = (self.root_path, &self.stack);
        let sub = match fd::open_subdir(self.cur.as_fd(), &name) {
            Ok(sub) => sub,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                self.out.error(&describe(root_path, stack, Some(&name)), e);
                return;
            }
        };
        let (w, id) = match (fd::locate(sub.as_fd()), FileId::of(sub.as_fd())) {
            (Ok(w), Ok(id)) => (w, id),
            (Err(e), _) | (_, Err(e)) => {
                self.out.error(&describe(root_path, stack, Some(&name)), e);
                return;
            }
        };
        let listed = stack.len() <= self.deepest_known && {
            let mut path = root_path.to_path_buf();
            path.extend(stack.iter().skip(1).map(|f| f.name.as_os_str()));
            path.push(&name);
            self.home.known.contains(&path)
        };
        if !same_mount(w, self.home) || listed {
            self.out
                .mount_points
                .push(describe(root_path, stack, Some(&name)));
            return;
        }
        self.stack.push(Frame {
            name,
            id,
            pending: Vec::new(),
        });
        self.cur = sub;
        fill(self.cur.as_fd(), &mut self.stack, root_path, &[], self.out);
    }

    /// Goes back up from the current dir, emptied, and removes it. `false`
    /// when the dir above is not the one it came down from.
    fn leave(&mut self) -> bool {
        let root_path = self.root_path;
        let done = self.stack.pop().expect("more than the root's frame");
        let up = fd::open_at(
            self.cur.as_fd(),
            OsStr::new(".."),
            libc::O_RDONLY | libc::O_DIRECTORY,
        );
        let back = self.stack.last().expect("the root's frame stays").id;
        match up.and_then(|up| Ok((FileId::of(up.as_fd())?, up))) {
            Ok((id, up)) if id == back => self.cur = up,
            Ok(_) | Err(_) => {
                let path = describe(root_path, &self.stack, Some(&done.name));
                self.out.error(
                    &path,
                    "moved while it was being removed: the removal stopped",
                );
                return false;
            }
        }
        if let Err(e) = remove_entry(self.cur.as_fd(), &done.name, true, true, self.out) {
            self.out
                .error(&describe(root_path, &self.stack, Some(&done.name)), e);
        }
        true
    }
}

/// Removes what is not a dir from the open dir `dir` (the top of `stack`)
/// and lists its subdirs there, to visit; the names in `spare` are left.
fn fill(
    dir: BorrowedFd<'_>,
    stack: &mut [Frame],
    root_path: &Path,
    spare: &[&OsStr],
    out: &mut Removal,
) {
    let names = match fd::entries(dir) {
        Ok(names) => names,
        Err(e) => return out.error(&describe(root_path, stack, None), e),
    };
    let names = names
        .into_iter()
        .filter(|n| !spare.contains(&n.as_os_str()));
    let mut pending = Vec::new();
    for name in names {
        match fd::kind_at(dir, &name) {
            Ok(libc::S_IFDIR) => pending.push(name),
            // A file, symlink, FIFO...: unlinking removes only the name, never
            // what a symlink points to; a file that is a bind-mount point is
            // refused by the kernel (EBUSY) and reported.
            Ok(_) => {
                if let Err(e) = remove_entry(dir, &name, false, true, out) {
                    out.error(&describe(root_path, stack, Some(&name)), e);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => out.error(&describe(root_path, stack, Some(&name)), e),
        }
    }
    if let Some(top) = stack.last_mut() {
        top.pending = pending;
    }
}

/// Whether a dir found to be `w` is on the same mount as the tree's root,
/// and not a mount root.
fn same_mount(w: Where, home: Home<'_>) -> bool {
    w.dev == home.at.dev && w.mount_id == home.at.mount_id && w.mount_root != Some(true)
}

/// Unlinks `name` from `dir`. Refused for an immutable or append-only flag
/// (EPERM), the flags are cleared (on `dir` itself when `dir_is_ours`, and
/// on the entry when it is a dir or a file with no other hard link) and the
/// unlink tried once more.
fn remove_entry(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    is_dir: bool,
    dir_is_ours: bool,
    out: &mut Removal,
) -> io::Result<()> {
    match fd::unlink_at(dir, name, is_dir) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            let mut cleared = dir_is_ours && unstick(dir);
            cleared |= fd::kind_at(dir, name)
                .ok()
                .filter(|k| matches!(*k, libc::S_IFREG | libc::S_IFDIR))
                .and_then(|_| {
                    fd::open_at(
                        dir,
                        name,
                        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
                    )
                    .ok()
                })
                .is_some_and(|f| unstick(f.as_fd()));
            if !cleared {
                return Err(e);
            }
            out.unflagged += 1;
            fd::unlink_at(dir, name, is_dir)
        }
        done => done,
    }
}

/// Clears the immutable and append-only flags of the open `f` (a dir, or a
/// regular file with one link); whether it had any.
fn unstick(f: BorrowedFd<'_>) -> bool {
    let Ok(st) = nix::sys::stat::fstat(f) else {
        return false;
    };
    let kind = st.st_mode & libc::S_IFMT;
    if !(kind == libc::S_IFDIR || (kind == libc::S_IFREG && st.st_nlink == 1)) {
        return false;
    }
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes the flags (an int) into `flags`, which
    // is larger; the descriptor is open for the call.
    if unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) } < 0 {
        return false;
    }
    if flags & STUCK_FLAGS == 0 {
        return false;
    }
    flags &= !STUCK_FLAGS;
    // SAFETY: FS_IOC_SETFLAGS reads the flags from `flags`.
    unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_SETFLAGS, &flags) == 0 }
}

#[cfg(test)]
#[path = "remove_tests.rs"]
mod tests;
