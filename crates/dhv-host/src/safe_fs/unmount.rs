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
//! Before a mount is unmounted it is made private (`MS_PRIVATE`, on it and
//! every mount of the tree, top down): a plugin that bind-mounted a shared
//! tree (`mount --rbind`, with systemd's default `shared` propagation) made
//! its copies peers of the originals, and unmounting a peer's submount
//! would unmount the original's too, taking its data out from under its
//! owner. A private mount propagates nothing. Only mounts below the dir are
//! changed: the mount it sits on keeps its propagation.
//!
//! A mount still busy (a process has a file open in it) is detached lazily
//! (`MNT_DETACH`) as the last resort. That is safe here: the mount is taken
//! out of the tree at once, so nothing below the dir leads into it any more
//! and the removal that follows cannot reach its files; the files themselves
//! are not touched, and what was under the mount point is our own dir.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::fd;
use super::held::HeldDir;
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
    let parent = match (dir.parent(), dir.file_name()) {
        (Some(up), Some(name)) => Some((fd::open_dir(up)?, name.to_os_string())),
        _ => None,
    };
    let top = parent.as_ref().map(|(p, n)| (p.as_fd(), n.as_os_str()));
    unmount_from(&root, top, &dir)
}

/// Unmounts every mount at or below the held dir `dir`, deepest first,
/// each reached from its descriptor (or, for a mount on the dir itself, from
/// the dir it was made in): a mount put over its path changes nothing.
pub fn unmount_under_held(dir: &HeldDir) -> io::Result<Unmounted> {
    let root = dir.fd().try_clone_to_owned()?;
    unmount_from(&root, Some(dir.parent()), dir.canonical())
}

/// Where a mount at the dir itself is reached: the dir it is in, and its name.
type Top<'a> = Option<(BorrowedFd<'a>, &'a OsStr)>;

fn unmount_from(root: &OwnedFd, top: Top<'_>, dir: &Path) -> io::Result<Unmounted> {
    let mut out = Unmounted::default();
    let mut errors: Vec<(u64, String)> = Vec::new();
    let mut private: HashSet<u64> = HashSet::new();
    for _ in 0..MAX_ROUNDS {
        let mut mounts = mountinfo::select_under(mountinfo::read()?, dir);
        if mounts.is_empty() {
            break;
        }
        // Top down (mountinfo order: a mount after the one it sits on), so
        // a mount's parent is private before the mount is unmounted.
        for m in &mounts {
            if !private.contains(&m.id) {
                match make_private(root, top, dir, m) {
                    Ok(true) => {
                        private.insert(m.id);
                    }
                    Ok(false) => {}
                    Err(e) => errors.push((m.id, format!("cannot make it private: {e}"))),
                }
            }
        }
        // Deepest first; of mounts stacked on one point, the top one (listed
        // last) first. Only a private one: unmounting a shared one could
        // unmount its peers' submounts.
        mounts.reverse();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.mount_point.components().count()));
        let mut progress = false;
        for m in mounts.into_iter().filter(|m| private.contains(&m.id)) {
            match unmount_one(root, top, dir, &m) {
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
    for m in mountinfo::select_under(mountinfo::read()?, dir) {
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

/// The dir holding `m`'s mount point, reached from `root` without following
/// a symlink, and the mount point's name in it; `None` when not reachable.
fn reach<'a>(
    root: &OwnedFd,
    top: Top<'a>,
    dir: &Path,
    m: &'a Mount,
) -> io::Result<Option<(OwnedFd, &'a OsStr)>> {
    let rel = m
        .mount_point
        .strip_prefix(dir)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // The mount point's parent, held open: it pins where the name is looked
    // up. (Holding the mount point itself open would make it busy.)
    let (parent, name) = match (rel.parent(), rel.file_name()) {
        (Some(up), Some(name)) => (fd::walk_beneath(root.as_fd(), up), name),
        _ => match top {
            Some((up, name)) => (up.try_clone_to_owned(), name),
            None => return Ok(None),
        },
    };
    match parent {
        Ok(p) => Ok(Some((p, name))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The mount point `name` in `parent`, opened (`O_PATH`, no symlink
/// followed), if it is the root of the very mount `m`.
fn verified(parent: &OwnedFd, name: &OsStr, m: &Mount) -> io::Result<Option<OwnedFd>> {
    let target = match fd::open_at(parent.as_fd(), name, libc::O_PATH) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let at = fd::locate(target.as_fd())?;
    if at.mount_id.is_some_and(|id| id != m.id) {
        return Ok(None);
    }
    if at.mount_id.is_none() && at.mount_root != Some(true) {
        // No way to tell which mount this is: leave it rather than guess.
        return Ok(None);
    }
    Ok(Some(target))
}

/// Makes `m` and every mount below it private, reached and verified as for
/// an unmount; whether it was (`false`: not reachable now).
fn make_private(root: &OwnedFd, top: Top<'_>, dir: &Path, m: &Mount) -> io::Result<bool> {
    let Some((parent, name)) = reach(root, top, dir, m)? else {
        return Ok(false);
    };
    let Some(target) = verified(&parent, name, m)? else {
        return Ok(false);
    };
    private_at(&target).map(|()| true)
}

/// Makes the mount whose root `target` is open on private, recursively,
/// through that descriptor (the very mount root that was verified).
fn private_at(target: &OwnedFd) -> io::Result<()> {
    let via = std::ffi::CString::new(format!("/proc/self/fd/{}", target.as_raw_fd()))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: NUL-terminated path; the other pointers may be null for a
    // propagation change, which reads nothing else.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            via.as_ptr(),
            std::ptr::null(),
            libc::MS_PRIVATE | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unmounts `m` if the walk from `root` reaches exactly it: `Some(lazy)` when
/// done, `None` when it is not reachable now (hidden, or moved away).
fn unmount_one(root: &OwnedFd, top: Top<'_>, dir: &Path, m: &Mount) -> io::Result<Option<bool>> {
    let Some((parent, name)) = reach(root, top, dir, m)? else {
        return Ok(None);
    };
    match verified(&parent, name, m)? {
        Some(target) => drop(target),
        None => return Ok(None),
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

/// Detaches the mount `m` on `name` in `parent` (a guarded dir, reached from
/// the dir it was made in: a mount over an ancestor's path changes nothing),
/// made private first (its copies of a shared tree then take no original's
/// mount with them), lazily (`MNT_DETACH`: a process of the plugin's inside
/// it does not keep it). `false` when the mount reached there is not `m` (it
/// is hidden under another one, or gone).
pub(super) fn detach_on(parent: BorrowedFd<'_>, name: &OsStr, m: &Mount) -> io::Result<bool> {
    let parent = parent.try_clone_to_owned()?;
    let Some(target) = verified(&parent, name, m)? else {
        return Ok(false);
    };
    private_at(&target)?;
    drop(target);
    let mut at = format!("/proc/self/fd/{}/", parent.as_raw_fd()).into_bytes();
    at.extend_from_slice(name.as_bytes());
    let at =
        std::ffi::CString::new(at).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path; umount2 only reads it. UMOUNT_NOFOLLOW:
    // a symlink swapped in for the name since is not followed.
    if unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) } == 0 {
        Ok(true)
    } else {
        Err(io::Error::last_os_error())
    }
}
