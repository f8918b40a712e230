//! Mounts put over the harness's own dirs, undone at once ([`MountGuard`]).
//!
//! A root plugin can bind-mount a dir of its choosing over the run's temp
//! dir, a check's dir or a volumes dir. What the harness makes there goes
//! through its descriptors ([`HeldDir`](super::HeldDir)) and is not
//! redirected; but every later plugin call is handed those dirs by path, and
//! would write into whatever was mounted over them. A guard knows the dirs
//! it guards (each held dir made from a guarded one is guarded too) and
//! watches the mount table: `/proc/self/mounts` signals `POLLPRI` when it
//! changed since the last look, so a look costs one `poll` when nothing
//! changed. On a change, a mount whose mount point is a guarded dir itself
//! (not one below it: volumes are mounted inside a volumes dir) is made
//! private and detached lazily (`MNT_DETACH`), reached from the dir it was
//! made in and verified to be the very mount listed, and kept in words
//! (source → target) for whoever made the guard ([`MountGuard::undone`]).
//!
//! The guard looks when it is asked ([`MountGuard::look`], before and after
//! every plugin call) and, from a thread of its own, as soon as the kernel
//! signals a change, so a mount made in the middle of a call is not left
//! there for the calls running beside it.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::mountinfo::{self, Mount};

/// Watches the mount table for mounts over the dirs it guards and undoes
/// them (see the module docs). Cheap to clone; clones share it.
#[derive(Clone)]
pub struct MountGuard(Arc<Inner>);

struct Inner {
    /// The guarded dirs.
    dirs: Mutex<Vec<Guarded>>,
    /// `/proc/self/mounts`, polled by [`MountGuard::look`]; one look at a
    /// time also sweeps one at a time.
    table: Mutex<Option<OwnedFd>>,
    /// Tells the watching thread to stop (an eventfd), when it runs.
    stop: Option<OwnedFd>,
    /// What was undone, in words, in order.
    undone: Mutex<Vec<String>>,
}

/// One guarded dir: its canonical path (as mountinfo names a mount point),
/// and the dir it was made in with its name there, where a mount on it is
/// reached whatever covers its path.
#[derive(Clone)]
struct Guarded {
    canonical: PathBuf,
    parent: Arc<OwnedFd>,
    name: OsString,
}

impl Default for MountGuard {
    fn default() -> Self {
        MountGuard::new()
    }
}

impl std::fmt::Debug for MountGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountGuard")
            .field("dirs", &crate::sync::lock(&self.0.dirs).len())
            .field("undone", &*crate::sync::lock(&self.0.undone))
            .finish()
    }
}

impl MountGuard {
    /// A guard of no dir yet, with a thread that looks at each change of
    /// the mount table (none when one cannot be started: then it looks only
    /// when asked).
    pub fn new() -> MountGuard {
        let table = open_table().ok();
        let watcher = open_table().ok().zip(new_eventfd().ok());
        let stop = watcher.as_ref().and_then(|(_, stop)| stop.try_clone().ok());
        let guard = MountGuard(Arc::new(Inner {
            dirs: Mutex::new(Vec::new()),
            table: Mutex::new(table),
            stop,
            undone: Mutex::new(Vec::new()),
        }));
        if let Some((table, stop)) = watcher {
            let weak = Arc::downgrade(&guard.0);
            // A failed start leaves the looks made when asked.
            let _ = std::thread::Builder::new()
                .name("dhv-mount-guard".into())
                .stack_size(128 << 10)
                .spawn(move || watch(&weak, &table, &stop));
        }
        guard
    }

    /// Guards the dir `canonical` (made in `parent` as `name`).
    pub(super) fn guard(&self, canonical: &Path, parent: &Arc<OwnedFd>, name: &OsString) {
        crate::sync::lock(&self.0.dirs).push(Guarded {
            canonical: canonical.to_path_buf(),
            parent: parent.clone(),
            name: name.clone(),
        });
    }

    /// Whether the mount table changed since the last look (one `poll`), and
    /// if it did, every mount over a guarded dir undone and said. Call
    /// before and after each plugin call.
    pub fn look(&self) {
        let table = crate::sync::lock(&self.0.table);
        let changed = table.as_ref().is_none_or(|fd| changed(fd.as_fd(), 0));
        if changed {
            self.0.sweep();
        }
    }

    /// What was undone so far, in words, in order.
    pub fn undone(&self) -> Vec<String> {
        crate::sync::lock(&self.0.undone).clone()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
            unsafe { libc::write(stop.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }
}

impl Inner {
    /// Undoes every mount over a guarded dir, topmost first, in rounds (a
    /// mount stacked under another is reached once the top one is gone).
    fn sweep(&self) {
        let dirs = crate::sync::lock(&self.dirs).clone();
        if dirs.is_empty() {
            return;
        }
        let dirs: std::collections::HashMap<&Path, &Guarded> =
            dirs.iter().map(|d| (d.canonical.as_path(), d)).collect();
        for _ in 0..64 {
            let Ok(mounts) = mountinfo::read() else {
                return;
            };
            let mut progress = false;
            for m in mounts.iter().rev() {
                let Some(dir) = dirs.get(m.mount_point.as_path()) else {
                    continue;
                };
                let what = format!("{} → {}", source_of(m, &mounts), m.mount_point.display());
                let said = match super::unmount::detach_on(dir.parent.as_fd(), &dir.name, m) {
                    Ok(true) => {
                        progress = true;
                        format!(
                            "a mount over the harness's own dir, {what}, detached by the \
                             harness before any further call"
                        )
                    }
                    // Hidden under another one: the next round.
                    Ok(false) => continue,
                    Err(e) => format!(
                        "a mount over the harness's own dir, {what}, which the harness could \
                         not detach: {e}"
                    ),
                };
                crate::sync::lock(&self.undone).push(said);
            }
            if !progress {
                return;
            }
        }
    }
}

/// The thread's loop: a sweep at each change of the mount table, until the
/// guard is dropped.
fn watch(guard: &Weak<Inner>, table: &OwnedFd, stop: &OwnedFd) {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: table.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds in a live array; -1 waits for an event.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents & (libc::POLLPRI | libc::POLLERR) != 0 {
            let Some(inner) = guard.upgrade() else {
                return;
            };
            // One sweep at a time (a look may be sweeping).
            let _one = crate::sync::lock(&inner.table);
            inner.sweep();
        }
    }
}

/// Whether the mount table `fd` (`/proc/self/mounts`) changed since it was
/// last polled, waiting up to `ms`.
fn changed(fd: BorrowedFd<'_>, ms: libc::c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    // An error tells nothing: look.
    n < 0 || pfd.revents & (libc::POLLPRI | libc::POLLERR) != 0
}

fn open_table() -> io::Result<OwnedFd> {
    let file = std::fs::File::open("/proc/self/mounts")?;
    let fd = OwnedFd::from(file);
    // Polled from now on: the table as it is now is the one seen.
    changed(fd.as_fd(), 0);
    Ok(fd)
}

fn new_eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just returned by eventfd, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Where the mount `m` shows its files from: for a bind mount, the path of
/// that dir as another mount of the same file system shows it (outside the
/// guarded dirs' mount point); else its source and file system type.
fn source_of(m: &Mount, all: &[Mount]) -> String {
    let seen = all
        .iter()
        .filter(|n| n.id != m.id && n.device == m.device && m.root.starts_with(&n.root))
        .filter(|n| !n.mount_point.starts_with(&m.mount_point))
        .max_by_key(|n| n.root.as_os_str().len());
    match seen.and_then(|n| Some(n.mount_point.join(m.root.strip_prefix(&n.root).ok()?))) {
        Some(path) => path.display().to_string(),
        None if m.root == Path::new("/") => format!("{} ({})", m.source, m.fstype),
        None => format!("{} of {} ({})", m.root.display(), m.source, m.fstype),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_mount_is_named_by_the_path_it_shows() {
        let all = mountinfo::parse(
            "22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n\
             35 22 0:33 / /tmp rw - tmpfs tmpfs rw\n\
             90 35 0:33 /outside /tmp/run rw - tmpfs tmpfs rw\n\
             91 35 0:40 / /tmp/run2 rw - tmpfs none rw\n\
             92 35 8:1 /srv/x /tmp/run3 rw - ext4 /dev/sda1 rw\n",
        );
        assert_eq!(source_of(&all[2], &all), "/tmp/outside");
        assert_eq!(source_of(&all[3], &all), "none (tmpfs)");
        assert_eq!(source_of(&all[4], &all), "/srv/x");
    }

    #[test]
    fn a_look_with_nothing_changed_is_one_poll_and_undoes_nothing() {
        let guard = MountGuard::new();
        let tmp = tempfile::tempdir().unwrap();
        let parent = Arc::new(super::super::fd::open_dir(tmp.path()).unwrap());
        guard.guard(tmp.path(), &parent, &OsString::from("x"));
        guard.look();
        assert!(guard.undone().is_empty());
    }
}
