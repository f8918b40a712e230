//! A held call's notifications: polled, received and let run on, and what
//! each system call names, read from its caller's memory.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use super::hold_filter::{KINDS, STARTS_A_PROCESS};

/// One notification: a system call of the call's processes, stopped until
/// answered.
#[derive(Debug)]
pub(crate) struct Notice {
    id: u64,
    pid: u32,
    nr: libc::c_long,
    args: [u64; 6],
}

/// Whether a notification is waiting on `listener` (or it hung up: every
/// process under the filter is gone).
pub(crate) enum Waiting {
    One,
    None,
    HungUp,
}

/// Polls `listener` without waiting.
pub(crate) fn pending(listener: BorrowedFd<'_>) -> Waiting {
    let mut p = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n <= 0 {
        return Waiting::None;
    }
    if p.revents & libc::POLLIN != 0 {
        Waiting::One
    } else if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Waiting::HungUp
    } else {
        Waiting::None
    }
}

/// Receives one notification (call only when [`pending`] says one waits);
/// `None` when its caller died first.
pub(crate) fn receive_notice(listener: BorrowedFd<'_>) -> Option<Notice> {
    // SAFETY: all-zero is the input RECV wants.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: a listener descriptor and a struct of the size the ioctl names.
    let rc = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
    (rc == 0).then_some(Notice {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr as libc::c_long,
        args: n.data.args,
    })
}

/// Lets the system call `id` run on (or does nothing when its caller died).
pub(crate) fn continue_call(listener: BorrowedFd<'_>, id: u64) {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: a listener descriptor and a filled response.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
}

/// Whether notification `id` still waits (its caller is alive, in the call).
fn still_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: a listener descriptor and a u64 id.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

impl Notice {
    /// Its id, to answer it.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The system call's name.
    pub(crate) fn name(&self) -> &'static str {
        KINDS
            .iter()
            .find(|k| k.nr == self.nr)
            .map_or("a system call", |k| k.name)
    }

    /// What it names, read from the caller (`None` for a call that names no
    /// path, or when it cannot be read), checked to be still waiting so that
    /// a reused pid's memory is never taken for the caller's.
    pub(crate) fn path(&self, listener: BorrowedFd<'_>) -> Option<PathBuf> {
        let kind = KINDS.iter().find(|k| k.nr == self.nr)?;
        let (arg, dirfd) = kind.path?;
        self.path_at(listener, arg, dirfd)
    }

    /// The name it makes (a directory, a file opened with `O_CREAT`, a
    /// link, a node, a rename's target), read as [`path`](Self::path)
    /// reads; `None` for a call that makes no name.
    pub(crate) fn made_path(&self, listener: BorrowedFd<'_>) -> Option<PathBuf> {
        match self.name() {
            "rename" => self.path_at(listener, 1, None),
            "renameat" | "renameat2" => self.path_at(listener, 3, Some(2)),
            "mkdir" | "mkdirat" | "creat" | "symlink" | "symlinkat" | "link" | "linkat"
            | "mknod" | "mknodat" | "open" | "openat" => self.path(listener),
            _ => None,
        }
    }

    /// The path in argument `arg`, relative to the dir fd in argument
    /// `dirfd` (or the caller's working dir), checked as [`path`](Self::path) checks it.
    fn path_at(
        &self,
        listener: BorrowedFd<'_>,
        arg: usize,
        dirfd: Option<usize>,
    ) -> Option<PathBuf> {
        let name = read_string(self.pid, self.args[arg])?;
        let name = PathBuf::from(OsString::from_vec(name));
        let path = if name.is_absolute() {
            name
        } else {
            let base = match dirfd.map(|i| self.args[i] as i32) {
                Some(fd) if fd != libc::AT_FDCWD => format!("/proc/{}/fd/{fd}", self.pid),
                _ => format!("/proc/{}/cwd", self.pid),
            };
            std::fs::read_link(base).ok()?.join(name)
        };
        still_valid(listener, self.id).then_some(path)
    }

    /// The program a process start names, read as [`path`](Self::path)
    /// reads (relative to the caller's working dir); `None` for any other
    /// call.
    pub(crate) fn program(&self, listener: BorrowedFd<'_>) -> Option<PathBuf> {
        match self.starts_a_process() {
            true => self.path_at(listener, 0, None),
            false => None,
        }
    }

    /// Whether it starts a process rather than changing state.
    pub(crate) fn starts_a_process(&self) -> bool {
        self.name() == STARTS_A_PROCESS
    }

    /// Whether it changes what `scope` holds: a path below it, or a mount or
    /// loop device (node-wide state). A path that cannot be read counts.
    pub(crate) fn in_scope(&self, path: Option<&Path>, scope: &Path) -> bool {
        let names_path = KINDS
            .iter()
            .find(|k| k.nr == self.nr)
            .is_some_and(|k| k.path.is_some());
        match (names_path, path) {
            (false, _) => true,
            (true, Some(p)) => p.starts_with(scope),
            (true, None) => true,
        }
    }
}

/// A NUL-terminated string at `addr` in process `pid`'s memory, at most a
/// path's length, read page by page (a read across an unmapped page fails).
fn read_string(pid: u32, addr: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < libc::PATH_MAX as usize {
        let to_page_end = 4096 - (at % 4096) as usize;
        let mut buf = vec![0u8; to_page_end];
        let n = mem.read_at(&mut buf, at).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some(out);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    None
}
