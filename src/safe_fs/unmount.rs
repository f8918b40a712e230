//! Unmounting everything below a dir, deepest first, touching only mounts
//! that really are below it.
//!
//! A mount point is never unmounted by its path: the path is walked down
//! from the dir's own descriptor, one component at a time, following no
//! symlink, and the mount reached must carry the very id mountinfo listed.
//! Only then is it unmounted, through `/proc/self/fd/N`, so a plugin that
//! swaps a directory for a symlink to `/` cannot make us unmount anything
//! outside. A mount hidden under another one is reached once the one above
//! it is gone: the work goes in rounds until a round changes nothing.
//!
//! A mount still busy (a process has a file open in it) is detached lazily
//! (`MNT_DETACH`) as the last resort. That is safe here: the mount is taken
//! out of the tree at once, so nothing below the dir leads into it any more
//! and the removal that follows cannot reach its files; the files themselves
//! are not touched, and what was under the mount point is our own dir.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::fd;
use super::mountinfo::{self, Mount};

/// At most this many rounds: each unmounts one mount (then mountinfo is
/// read again, as what is reachable may have changed).
const MAX_ROUNDS: usize = 4096;

/// What [`unmount_under`] did.
#[derive(Debug, Default)]
#[must_use]
pub struct Unmounted {
    /// Mounts unmounted normally.
    pub unmounted: Vec<Mount>,
    /// Busy mounts detached lazily.
    pub detached: Vec<Mount>,
    /// Mounts still there, with the last error seen for each.
    pub failed: Vec<(Mount, String)>,
}

impl Unmounted {
    /// Every mount that was found, whatever became of it.
    pub fn all(&self) -> impl Iterator<Item = &Mount> {
        self.unmounted
            .iter()
            .chain(&self.detached)
            .chain(self.failed.iter().map(|(m, _)| m))
    }
}

/// Unmounts every mount at or below `dir` (which must exist), deepest first.
pub fn unmount_under(dir: &Path) -> io::Result<Unmounted> {
    let dir = fd::canonical_parent(dir);
    let root = fd::open_dir(&dir)?;
    let mut out = Unmounted::default();
    let mut errors: Vec<(u64, String)> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let mut mounts = mountinfo::select_under(mountinfo::read()?, &dir);
        if mounts.is_empty() {
            break;
        }
        // Deepest first; of mounts stacked on one point, the top one (listed
        // last) first.
        mounts.reverse();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.mount_point.components().count()));
        let mut progress = false;
        for m in mounts {
            match unmount_one(&root, &dir, &m) {
                Ok(Some(lazy)) => {
                    if lazy {
                        out.detached.push(m);
                    } else {
                        out.unmounted.push(m);
                    }
                    // A mount that was hidden under this one may be
                    // reachable now, and is deeper than the rest.
                    progress = true;
                    break;
                }
                Ok(None) => {}
                Err(e) => errors.push((m.id, e.to_string())),
            }
        }
        if !progress {
            break;
        }
    }
    for m in mountinfo::select_under(mountinfo::read()?, &dir) {
        let why = errors
            .iter()
            .rev()
            .find(|(id, _)| *id == m.id)
            .map(|(_, e)| e.clone())
            .unwrap_or_else(|| "not reachable from the dir without following a symlink".into());
        out.failed.push((m, why));
    }
    Ok(out)
}

/// Unmounts `m` if the walk from `root` reaches exactly it: `Some(lazy)` when
/// done, `None` when it is not reachable now (hidden, or moved away).
fn unmount_one(root: &OwnedFd, dir: &Path, m: &Mount) -> io::Result<Option<bool>> {
    let rel = m
        .mount_point
        .strip_prefix(dir)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // The mount point's parent, held open: it pins where the name is looked
    // up. (Holding the mount point itself open would make it busy.)
    let (parent, name) = match (rel.parent(), rel.file_name()) {
        (Some(up), Some(name)) => (fd::walk_beneath(root.as_fd(), up), name),
        _ => match (dir.parent(), dir.file_name()) {
            (Some(up), Some(name)) => (fd::open_dir(up), name),
            _ => return Ok(None),
        },
    };
    let parent = match parent {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let target = match fd::open_at(parent.as_fd(), name, libc::O_PATH) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let at = fd::locate(target.as_fd())?;
    drop(target);
    if at.mount_id.is_some_and(|id| id != m.id) {
        return Ok(None);
    }
    if at.mount_id.is_none() && at.mount_root != Some(true) {
        // No way to tell which mount this is: leave it rather than guess.
        return Ok(None);
    }
    let mut via = format!("/proc/self/fd/{}/", parent.as_raw_fd()).into_bytes();
    via.extend_from_slice(name.as_bytes());
    let via =
        std::ffi::CString::new(via).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // UMOUNT_NOFOLLOW: a symlink swapped in for the name since is not followed.
    let umount = |flags| {
        // SAFETY: a NUL-terminated path; umount2 only reads it.
        if unsafe { libc::umount2(via.as_ptr(), flags | libc::UMOUNT_NOFOLLOW) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    match umount(0) {
        Ok(()) => Ok(Some(false)),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            umount(libc::MNT_DETACH).map(|()| Some(true))
        }
        Err(e) => Err(e),
    }
}
