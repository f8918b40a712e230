//! Holding a call at its first change of state: the Linux side of
//! [`Rendezvous`](crate::exec::Rendezvous).
//!
//! The clone's child installs, just before it executes the plugin, a seccomp
//! filter that turns every system call that can change shared state (making,
//! renaming, linking or removing a name; `open` with `O_CREAT`; a mount; the
//! loop-device ioctls) into a user notification, and hands the listener to
//! us over a socket. The plugin and all it starts inherit the filter. Our side
//! ([`serve`]) answers each notification: the first one that touches the
//! rendezvous' scope (the check's own dirs; every mount and loop ioctl) is
//! held until the rendezvous releases it, every other one continues at once
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the kernel then runs the call as if
//! no filter were there, so a held plugin sees nothing but a pause).
//!
//! Where any of it is missing (another architecture, an old kernel, a
//! listener already installed above us), the call runs unheld and says so
//! ([`HoldPoint`](crate::exec::HoldPoint) absent).

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::seccomp::{jump, stmt};
use crate::exec::rendezvous::{Arrival, MAX_CHANGES, Seat, SeenSlot};
use crate::exec::{AtChanges, Change, HoldPoint};

/// `AUDIT_ARCH_X86_64`.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

/// The offset of the low word of argument `i` in `struct seccomp_data`.
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

/// The loop-device ioctls that change the node's devices: `LOOP_SET_FD`,
/// `LOOP_CLR_FD`, `LOOP_CONFIGURE`, `LOOP_CTL_ADD`, `LOOP_CTL_REMOVE`,
/// `LOOP_CTL_GET_FREE` (which may add one).
const LOOP_IOCTLS: [u32; 6] = [0x4C00, 0x4C01, 0x4C0A, 0x4C80, 0x4C81, 0x4C82];

/// What a held system call changes, and which argument names it.
#[derive(Debug, Clone, Copy)]
struct Kind {
    nr: libc::c_long,
    name: &'static str,
    /// The argument holding the path, and the one holding its dir fd (for
    /// the `*at` calls); `None`: the call is in scope whatever it names.
    path: Option<(usize, Option<usize>)>,
}

/// Elsewhere nothing is held (there is no clone to install the filter).
#[cfg(not(target_arch = "x86_64"))]
const KINDS: &[Kind] = &[];

/// Every system call that notifies, and how to read what it names. `open`
/// and `openat` notify only with `O_CREAT`, `ioctl` only for the loop
/// ioctls (tested in the filter itself).
#[cfg(target_arch = "x86_64")]
const KINDS: &[Kind] = &[
    Kind {
        nr: libc::SYS_mkdir,
        name: "mkdir",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_mkdirat,
        name: "mkdirat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_creat,
        name: "creat",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_rename,
        name: "rename",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_renameat,
        name: "renameat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_renameat2,
        name: "renameat2",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_unlink,
        name: "unlink",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_unlinkat,
        name: "unlinkat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_rmdir,
        name: "rmdir",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_symlink,
        name: "symlink",
        path: Some((1, None)),
    },
    Kind {
        nr: libc::SYS_symlinkat,
        name: "symlinkat",
        path: Some((2, Some(1))),
    },
    Kind {
        nr: libc::SYS_link,
        name: "link",
        path: Some((1, None)),
    },
    Kind {
        nr: libc::SYS_linkat,
        name: "linkat",
        path: Some((3, Some(2))),
    },
    Kind {
        nr: libc::SYS_mknod,
        name: "mknod",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_mknodat,
        name: "mknodat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_truncate,
        name: "truncate",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_mount,
        name: "mount",
        path: None,
    },
    Kind {
        nr: libc::SYS_umount2,
        name: "umount2",
        path: None,
    },
    Kind {
        nr: libc::SYS_open,
        name: "open",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_openat,
        name: "openat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_ioctl,
        name: "ioctl",
        path: None,
    },
    // Starting a program: a crash point (the state before a `mkfs` runs, say),
    // never a hold. The exec, not the fork: a fork waits for us in the
    // process that forks, where a signal the shell handles (its SIGCHLD)
    // arriving before we have received the notification would fail the fork
    // with EINTR; the child that executes has no children to signal it. The
    // clone's child starts the plugin itself with `execveat`, which is not
    // watched (it would wait for us while we wait for it).
    Kind {
        nr: libc::SYS_execve,
        name: STARTS_A_PROCESS,
        path: None,
    },
];

/// The name of the calls that start a program.
const STARTS_A_PROCESS: &str = "execve";

/// Where a jump of the program goes before it is laid out.
#[derive(Clone, Copy)]
enum To {
    Next,
    Allow,
    Notify,
}

/// Elsewhere: allow everything (never installed: [`can_hold`] is false).
#[cfg(not(target_arch = "x86_64"))]
fn program(_starts: bool) -> Vec<libc::sock_filter> {
    vec![stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW)]
}

/// The program, laid out: other architectures and other calls are allowed;
/// the calls of [`KINDS`] notify (open/openat with `O_CREAT`, ioctl with a
/// loop request), those that start a program (`execve`) only with `starts` (a crash
/// point, never a hold: a burst's calls start programs without a round trip to us).
#[cfg(target_arch = "x86_64")]
fn program(starts: bool) -> Vec<libc::sock_filter> {
    const LOAD_WORD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    // (instruction, jump-if-true, jump-if-false), targets symbolic.
    let mut ops: Vec<(libc::sock_filter, To, To)> = Vec::new();
    let load = |k| (stmt(LOAD_WORD, k), To::Next, To::Next);
    let eq = |k| (jump(libc::BPF_JEQ, k, 0, 0), To::Notify, To::Next);
    ops.push(load(ARCH_OFFSET));
    ops.push((jump(libc::BPF_JEQ, ARCH, 0, 0), To::Next, To::Allow));
    ops.push(load(NR_OFFSET));
    let plain = KINDS
        .iter()
        .filter(|k| ![libc::SYS_open, libc::SYS_openat, libc::SYS_ioctl].contains(&k.nr))
        .filter(|k| starts || k.name != STARTS_A_PROCESS);
    for k in plain {
        ops.push(eq(k.nr as u32));
    }
    // open and openat: only with O_CREAT (a flag of their 2nd / 3rd argument).
    for (nr, flags) in [(libc::SYS_open, 1), (libc::SYS_openat, 2)] {
        // Not this call: skip its two tests.
        ops.push((jump(libc::BPF_JEQ, nr as u32, 0, 2), To::Next, To::Next));
        ops.push(load(arg_low(flags)));
        ops.push((
            jump(libc::BPF_JSET, libc::O_CREAT as u32, 0, 0),
            To::Notify,
            To::Allow,
        ));
    }
    ops.push((
        jump(libc::BPF_JEQ, libc::SYS_ioctl as u32, 0, 0),
        To::Next,
        To::Allow,
    ));
    ops.push(load(arg_low(1)));
    for req in LOOP_IOCTLS {
        ops.push(eq(req));
    }
    let allow = ops.len();
    let notify = allow + 1;
    let mut p: Vec<libc::sock_filter> = ops
        .iter()
        .enumerate()
        .map(|(at, &(mut insn, t, f))| {
            let offset = |to: To, keep: u8| match to {
                To::Next => keep,
                To::Allow => (allow - at - 1) as u8,
                To::Notify => (notify - at - 1) as u8,
            };
            insn.jt = offset(t, insn.jt);
            insn.jf = offset(f, insn.jf);
            insn
        })
        .collect();
    p.push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_USER_NOTIF,
    ));
    p
}

/// The watch filter (with process starts, or not), in the form `seccomp(2)`
/// takes; built once, kept for the life of the process (the clone's child
/// reads it after the fork).
pub(crate) fn filter(starts: bool) -> &'static libc::sock_fprog {
    struct Prog(libc::sock_fprog);
    // SAFETY: the program it points to is never freed nor written again.
    unsafe impl Send for Prog {}
    // SAFETY: as for Send: shared readers see a program that no one writes
    // after it is built (the OnceLock publishes it once).
    unsafe impl Sync for Prog {}
    static BUILT: [OnceLock<(Vec<libc::sock_filter>, Prog)>; 2] = [const { OnceLock::new() }; 2];
    &BUILT[usize::from(starts)]
        .get_or_init(|| {
            let p = program(starts);
            let prog = libc::sock_fprog {
                len: p.len() as u16,
                filter: p.as_ptr().cast_mut(),
            };
            (p, Prog(prog))
        })
        .1
        .0
}

/// A socket pair for the listener's hand-over: the child sends on the first,
/// we receive on the second. Both close-on-exec.
pub(crate) fn hand_over_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid two-element array; the fds are owned from here on.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: socketpair just returned these two fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What the child needs to send its listener: a message prepared by the
/// parent (the child shares its memory until it executes), into which it
/// writes the descriptor.
#[repr(C)]
pub(crate) struct HandOver {
    /// The filter to install.
    prog: *const libc::sock_fprog,
    /// Our end of the socket pair the listener is sent over.
    pub(super) sock: libc::c_int,
    iov: libc::iovec,
    byte: u8,
    /// Room for one `cmsghdr` and one descriptor, aligned as the kernel wants.
    control: [u64; 4],
    msg: libc::msghdr,
}

impl HandOver {
    /// A message on `sock`, made in place (it points into itself: boxed), for
    /// the filter that notifies process starts too or not (`starts`).
    pub(crate) fn new(sock: BorrowedFd<'_>, starts: bool) -> Box<HandOver> {
        // SAFETY: all-zero is a valid value of every field (plain C data).
        let mut h: Box<HandOver> = Box::new(unsafe { std::mem::zeroed() });
        h.prog = filter(starts);
        h.sock = sock.as_raw_fd();
        h.iov = libc::iovec {
            iov_base: (&mut h.byte as *mut u8).cast(),
            iov_len: 1,
        };
        h.msg.msg_iov = &mut h.iov;
        h.msg.msg_iovlen = 1;
        h.msg.msg_control = h.control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic.
        h.msg.msg_controllen = unsafe { libc::CMSG_SPACE(4) } as usize;
        // SAFETY: the control buffer is large enough for one header and an int.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h.msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        }
        h
    }

    /// In the clone's child: installs the hold filter with a listener and
    /// sends the listener. Any failure leaves the call unheld (nothing is
    /// sent), never failed.
    ///
    /// # Safety
    /// Only in the clone's child, before it executes: async-signal-safe
    /// system calls on memory the parent prepared.
    pub(crate) unsafe fn install_and_send(&mut self) {
        // SAFETY: raw system calls; the filter and the message outlive them.
        unsafe {
            let prog = self.prog;
            // Once we have received a notification, only a fatal signal may
            // end the wait for our answer (Linux 5.19): otherwise a signal
            // the plugin handles without SA_RESTART (a shell's SIGCHLD)
            // would fail the waiting call with EINTR, which a fork or a
            // mkdir never returns on its own.
            let killable = libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
            let set = |flags: libc::c_ulong| {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | flags,
                    prog,
                )
            };
            let mut fd = set(killable);
            if fd < 0 && *libc::__errno_location() == libc::EACCES {
                // Without CAP_SYS_ADMIN the kernel wants no_new_privs first.
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return;
                }
                fd = set(killable);
            }
            if fd < 0 && *libc::__errno_location() == libc::EINVAL {
                // An older kernel: the wait stays interruptible.
                fd = set(0);
            }
            if fd < 0 {
                return;
            }
            let c = libc::CMSG_FIRSTHDR(&self.msg);
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd as i32);
            libc::sendmsg(self.sock, &self.msg, libc::MSG_NOSIGNAL);
            libc::close(fd as i32);
        }
    }
}

/// Receives the listener the child sent on `sock`, if it sent one.
pub(crate) fn receive(sock: &OwnedFd) -> Option<OwnedFd> {
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 4];
    // SAFETY: all-zero is a valid msghdr; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: a valid socket and message; the child sent before it executed,
    // and we resume only after that (CLONE_VFORK): nothing to wait for.
    let n = unsafe {
        libc::recvmsg(
            sock.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n <= 0 {
        return None;
    }
    // SAFETY: the kernel filled the control buffer; the header is checked.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}

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
pub(crate) enum Pending {
    One,
    None,
    HungUp,
}

/// Polls `listener` without waiting.
pub(crate) fn pending(listener: BorrowedFd<'_>) -> Pending {
    let mut p = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n <= 0 {
        return Pending::None;
    }
    if p.revents & libc::POLLIN != 0 {
        Pending::One
    } else if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Pending::HungUp
    } else {
        Pending::None
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

/// A call held at its change: answered when the burst is let go.
pub(crate) struct HeldCall {
    listener: OwnedFd,
    id: u64,
}

impl HeldCall {
    /// Lets the held system call run on.
    pub(crate) fn release(self) {
        continue_call(self.listener.as_fd(), self.id);
    }
}

/// Whether calls can be held here: the kernel has user notifications (and,
/// from the same release on, lets a notification continue), and the clone
/// that installs the filter exists.
pub(crate) fn can_hold() -> bool {
    if cfg!(not(target_arch = "x86_64")) {
        return false;
    }
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
            .is_ok_and(|a| a.split_whitespace().any(|w| w == "user_notif"))
    })
}

/// Answers the notifications of one call's `listener` until every process
/// under its filter is gone, as `watch` says (see [`AtChanges`]): each change
/// under its scope is recorded in `seen`; the first is held until the burst
/// is let go, or the `n`th kills the call (`kill`) before it runs; every
/// other notification runs on at once.
pub(crate) async fn serve(
    listener: OwnedFd,
    watch: AtChanges,
    mut seat: Option<Seat>,
    seen: SeenSlot,
    kill: impl Fn(),
) {
    use tokio::io::unix::AsyncFd;
    // SAFETY: the AsyncFd owns the descriptor for its whole life.
    let Ok(fd) =
        (unsafe { AsyncFd::register_with_interest(listener, tokio::io::Interest::READABLE) })
    else {
        return;
    };
    let rendezvous = match &watch {
        AtChanges::Hold(r) => Some(r.clone()),
        _ => None,
    };
    // The paths the calls name are read through /proc: compare like with like.
    let scope =
        std::fs::canonicalize(watch.scope()).unwrap_or_else(|_| watch.scope().to_path_buf());
    let mut waiting = false;
    let mut killed = false;
    loop {
        tokio::select! {
            ready = fd.readable() => {
                let Ok(mut guard) = ready else { return };
                loop {
                    let listener = fd.get_ref().as_fd();
                    match pending(listener) {
                        Pending::HungUp => return,
                        Pending::None => {
                            guard.clear_ready();
                            break;
                        }
                        Pending::One => {}
                    }
                    let Some(notice) = receive_notice(listener) else { continue };
                    // A burst is held at a change of state, never at a fork.
                    let passing = killed
                        || seat.as_ref().is_some_and(Seat::arrived)
                        || (seat.is_some() && notice.starts_a_process());
                    let outside = matches!(watch, AtChanges::RecordOutside(_));
                    let path = match (passing, outside) {
                        (true, _) => None,
                        (false, true) => notice.made_path(listener),
                        (false, false) => notice.path(listener),
                    };
                    let counts = match outside {
                        // A name it makes, and can be read, elsewhere.
                        true => path.as_deref().is_some_and(|p| !p.starts_with(&scope)),
                        false => notice.in_scope(path.as_deref(), &scope),
                    };
                    if passing || !counts {
                        continue_call(listener, notice.id());
                        continue;
                    }
                    let change = Change { syscall: notice.name(), path };
                    let count = {
                        let mut seen = crate::lock(&seen);
                        if seen.changes.len() < MAX_CHANGES {
                            seen.changes.push(change.clone());
                        }
                        seen.changes.len()
                    };
                    match (&watch, seat.as_mut()) {
                        (AtChanges::KillAt(_, n), _) if count == *n => {
                            crate::lock(&seen).killed = true;
                            killed = true;
                            // Not answered: it dies waiting, before it runs.
                            kill();
                        }
                        (AtChanges::Hold(_), Some(seat)) => {
                            let Ok(dup) = fd.get_ref().try_clone() else {
                                continue_call(listener, notice.id());
                                continue;
                            };
                            crate::lock(&seen).held = Some(HoldPoint {
                                syscall: change.syscall,
                                path: change.path,
                                released: None,
                                together: 0,
                                of: seat.of(),
                            });
                            let held = HeldCall { listener: dup, id: notice.id() };
                            match seat.arrive(held, seen.clone()) {
                                Arrival::Held => waiting = true,
                                // The burst was let go before this call got
                                // here: it was not held.
                                Arrival::Pass(call) => {
                                    crate::lock(&seen).held = None;
                                    call.release();
                                }
                            }
                        }
                        _ => continue_call(listener, notice.id()),
                    }
                }
            }
            _ = async { rendezvous.as_ref()?.until_released().await; Some(()) }, if waiting => waiting = false,
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Runs the program on a call as the kernel does: the answer it gives.
    fn answer(p: &[libc::sock_filter], nr: libc::c_long, args: [u32; 3]) -> u32 {
        super::super::seccomp::run(p, |offset| match offset {
            NR_OFFSET => nr as u32,
            ARCH_OFFSET => ARCH,
            o if o == arg_low(0) => args[0],
            o if o == arg_low(1) => args[1],
            o if o == arg_low(2) => args[2],
            other => panic!("load of offset {other}"),
        })
    }

    #[test]
    fn changes_of_state_notify_and_nothing_else_does() {
        const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
        const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
        let p = program(true);
        let creat = libc::O_CREAT as u32 | libc::O_WRONLY as u32;
        let cases: &[(libc::c_long, [u32; 3], u32)] = &[
            (libc::SYS_mkdir, [0, 0, 0], NOTIFY),
            (libc::SYS_mkdirat, [0, 0, 0], NOTIFY),
            (libc::SYS_renameat2, [0, 0, 0], NOTIFY),
            (libc::SYS_unlinkat, [0, 0, 0x200], NOTIFY),
            (libc::SYS_mount, [0, 0, 0], NOTIFY),
            (libc::SYS_openat, [0, 0, creat], NOTIFY),
            (libc::SYS_openat, [0, 0, libc::O_RDONLY as u32], ALLOW),
            (libc::SYS_open, [0, creat, 0], NOTIFY),
            (libc::SYS_open, [0, libc::O_RDWR as u32, 0], ALLOW),
            (libc::SYS_ioctl, [3, 0x4C82, 0], NOTIFY),
            (libc::SYS_ioctl, [3, 0x5401, 0], ALLOW),
            (libc::SYS_read, [0, 0, 0], ALLOW),
            (libc::SYS_stat, [0, 0, 0], ALLOW),
            (libc::SYS_execve, [0, 0, 0], NOTIFY),
            (libc::SYS_execveat, [0, 0, 0], ALLOW),
            (libc::SYS_clone3, [0, 0, 0], ALLOW),
            (libc::SYS_vfork, [0, 0, 0], ALLOW),
        ];
        for &(nr, args, want) in cases {
            assert_eq!(answer(&p, nr, args), want, "call {nr} {args:?}");
        }
    }

    #[test]
    fn a_listener_is_handed_over_and_received() {
        let (send, recv) = hand_over_pair().unwrap();
        let h = HandOver::new(std::os::fd::AsFd::as_fd(&send), true);
        // Stand in for the listener with any descriptor: the message is the same.
        let file = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: the message is ours; the descriptor is open.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h.msg);
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), file.as_raw_fd());
            assert_eq!(libc::sendmsg(h.sock, &h.msg, 0), 1);
        }
        let got = receive(&recv).expect("a descriptor");
        assert_ne!(got.as_raw_fd(), file.as_raw_fd());
        assert!(receive(&recv).is_none(), "one message only");
    }
}
