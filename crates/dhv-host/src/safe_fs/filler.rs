//! A node-sized mount table for a run that has a mount namespace of its own
//! ([`MountFiller`]): hundreds of small, empty tmpfs mounts in a dir of the
//! harness's, made after the mounts a check races, so that a plugin reading
//! the table (`mount | grep -q`, a parse of `/proc/self/mounts`) reads it as
//! long as on a busy node, where its volume's line is followed by others.
//!
//! Never in the host's namespace: only where the process's mount namespace
//! is not init's, and the mount holding the dir propagates to no peer (a
//! shared mount would copy every filler into the namespaces it is shared
//! with). Every filler is unmounted when the filler is dropped.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// The mount source every filler shows (`mount` prints it first).
const SOURCE: &str = "dhv-conform-filler";

/// Whether mounts made below `dir` stay in this process's own mount
/// namespace: `Err` says why not (the host's namespace, a shared mount).
pub fn private_namespace(dir: &Path) -> Result<(), String> {
    if !own_namespace() {
        return Err("no mount namespace of its own: run it under `unshare -m`".into());
    }
    let mounts =
        super::mountinfo::read().map_err(|e| format!("the mount table cannot be read: {e}"))?;
    // The mount holding `dir`: the last (topmost) with the longest mount point.
    let holding = mounts
        .iter()
        .filter(|m| dir.starts_with(&m.mount_point))
        .fold(None::<&super::mountinfo::Mount>, |best, m| match best {
            Some(b) if b.mount_point.as_os_str().len() > m.mount_point.as_os_str().len() => best,
            _ => Some(m),
        });
    let Some(holding) = holding else {
        return Err(format!("no mount holds {}", dir.display()));
    };
    if holding.shared {
        return Err(format!(
            "the mount at {} is shared with other namespaces (mount it private: `unshare -m --propagation private`)",
            holding.mount_point.display()
        ));
    }
    Ok(())
}

/// Whether this process's mount namespace was made below the processes that
/// started it: some ancestor (the host's init, or the shell that ran
/// `unshare -m`) is in another. An ancestor whose namespace cannot be read
/// (init, seen from a container) tells nothing; none readable and different:
/// not ours to fill.
fn own_namespace() -> bool {
    let ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    let Some(own) = ns(std::process::id()) else {
        return false;
    };
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command's closing parenthesis: state, then the parent's id.
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(1)?.parse().ok()
    };
    let mut pid = std::process::id();
    // Bounded: a chain of processes ends at init (or at 0 for its parent).
    for _ in 0..4096 {
        match parent(pid) {
            Some(p) if p > 0 => pid = p,
            _ => return false,
        }
        if ns(pid).is_some_and(|other| other != own) {
            return true;
        }
    }
    false
}

/// `count` empty tmpfs mounts below a dir of the harness's, unmounted when
/// dropped.
#[derive(Debug)]
pub struct MountFiller {
    points: Vec<PathBuf>,
    mounted: Vec<bool>,
}

impl MountFiller {
    /// Makes `count` dirs below `dir` (which must be the harness's own, new;
    /// best a path through its descriptor, [`HeldDir::through_fd`](super::HeldDir::through_fd),
    /// which no mount over its path redirects) and mounts a tmpfs on each.
    /// Refused outside a private namespace ([`private_namespace`]).
    pub fn new(dir: &Path, count: usize) -> io::Result<MountFiller> {
        // Where it is, as mountinfo names it (a path through a descriptor
        // names the dir itself).
        private_namespace(&std::fs::canonicalize(dir)?).map_err(io::Error::other)?;
        let mut points = Vec::with_capacity(count);
        for i in 0..count {
            let p = dir.join(format!("{i:04}"));
            std::fs::create_dir(&p)?;
            points.push(p);
        }
        let mut filler = MountFiller {
            mounted: vec![false; points.len()],
            points,
        };
        filler.mount_all()?;
        Ok(filler)
    }

    /// How many mounts it holds.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Unmounts every filler and mounts it again: a new mount goes to the
    /// end of the table, so the fillers then follow every mount made since.
    pub fn renew(&mut self) -> io::Result<()> {
        self.unmount_all();
        self.mount_all()
    }

    fn mount_all(&mut self) -> io::Result<()> {
        let source = CString::new(SOURCE).expect("no NUL");
        let fstype = CString::new("tmpfs").expect("no NUL");
        let data = CString::new("size=4k,nr_inodes=16,mode=0755").expect("no NUL");
        for (p, mounted) in self.points.iter().zip(self.mounted.iter_mut()) {
            if *mounted {
                continue;
            }
            let target = CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            // SAFETY: NUL-terminated strings that outlive the call.
            let rc = unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    data.as_ptr().cast(),
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            *mounted = true;
        }
        Ok(())
    }

    fn unmount_all(&mut self) {
        for (p, mounted) in self.points.iter().zip(self.mounted.iter_mut()) {
            if !*mounted {
                continue;
            }
            let Ok(target) = CString::new(p.as_os_str().as_bytes()) else {
                continue;
            };
            // SAFETY: a NUL-terminated path; umount2 only reads it. Lazy: a
            // plugin's process inside one (it has no business there) does
            // not keep the filler.
            let rc =
                unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) };
            if rc == 0 {
                *mounted = false;
            }
        }
    }
}

impl Drop for MountFiller {
    fn drop(&mut self) {
        self.unmount_all();
        for p in &self.points {
            let _ = std::fs::remove_dir(p);
        }
    }
}
