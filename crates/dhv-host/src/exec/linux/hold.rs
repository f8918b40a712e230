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

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;

use super::hold_filter::filter;
use super::hold_notice::{Notice, Waiting, continue_call, pending, receive_notice};
use crate::exec::rendezvous::{Arrival, MAX_CHANGES, Seat, SeenSlot};
use crate::exec::{AtChanges, Change, HoldPoint};

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
    seat: Option<Seat>,
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
    let mut answering = Answering {
        watch,
        seat,
        seen,
        kill,
        scope,
        killed: false,
    };
    let mut waiting = false;
    loop {
        tokio::select! {
            ready = fd.readable() => {
                let Ok(mut guard) = ready else { return };
                loop {
                    let listener = fd.get_ref().as_fd();
                    match pending(listener) {
                        Waiting::HungUp => return,
                        Waiting::None => {
                            guard.clear_ready();
                            break;
                        }
                        Waiting::One => {}
                    }
                    let Some(notice) = receive_notice(listener) else { continue };
                    waiting |= answering.answer(fd.get_ref(), notice);
                }
            }
            _ = async { rendezvous.as_ref()?.until_released().await; Some(()) }, if waiting => waiting = false,
        }
    }
}

/// One call's notifications being answered: what is watched, and what has
/// been done so far.
struct Answering<K> {
    watch: AtChanges,
    seat: Option<Seat>,
    seen: SeenSlot,
    kill: K,
    /// The watch's scope, as /proc names paths.
    scope: PathBuf,
    /// The call was killed at its change: whatever follows runs on.
    killed: bool,
}

impl<K: Fn()> Answering<K> {
    /// Answers one notification of `listener`: a change under the watch's
    /// scope is recorded, then held, or the call killed, as the watch says;
    /// anything else runs on. Whether the call is now held.
    fn answer(&mut self, listener: &OwnedFd, notice: Notice) -> bool {
        let fd = listener.as_fd();
        // A burst is held at a change of state, never at a fork.
        let passing = self.killed
            || self.seat.as_ref().is_some_and(Seat::arrived)
            || (self.seat.is_some() && notice.starts_a_process());
        let made = matches!(
            self.watch,
            AtChanges::RecordOutside(_) | AtChanges::RecordMade(_)
        );
        let path = match (passing, made) {
            (true, _) => None,
            (false, true) => notice.made_path(fd),
            // A process start is a step wherever its program is: named by it
            // (its kind names no path, so it is in scope whatever this says).
            (false, false) => notice.path(fd).or_else(|| notice.program(fd)),
        };
        let counts = match &self.watch {
            // A name it makes, and can be read, elsewhere.
            AtChanges::RecordOutside(_) => {
                path.as_deref().is_some_and(|p| !p.starts_with(&self.scope))
            }
            // A name it makes, and can be read, under the scope.
            AtChanges::RecordMade(_) => path.as_deref().is_some_and(|p| p.starts_with(&self.scope)),
            _ => notice.in_scope(path.as_deref(), &self.scope),
        };
        if passing || !counts {
            continue_call(fd, notice.id());
            return false;
        }
        let change = Change {
            syscall: notice.name(),
            path,
        };
        let count = {
            let mut seen = crate::sync::lock(&self.seen);
            if seen.changes.len() < MAX_CHANGES {
                seen.changes.push(change.clone());
            }
            seen.changes.len()
        };
        match (&self.watch, self.seat.as_mut()) {
            (AtChanges::KillAt(_, n), _) if count == *n => {
                crate::sync::lock(&self.seen).killed = true;
                self.killed = true;
                // Not answered: it dies waiting, before it runs.
                (self.kill)();
                false
            }
            (AtChanges::Hold(_), Some(seat)) => hold(seat, &self.seen, listener, &notice, change),
            _ => {
                continue_call(fd, notice.id());
                false
            }
        }
    }
}

/// Holds the notified call at its `change` until the burst is let go, or lets
/// it run when the burst was let go already. Whether it is held.
fn hold(
    seat: &mut Seat,
    seen: &SeenSlot,
    listener: &OwnedFd,
    notice: &Notice,
    change: Change,
) -> bool {
    let Ok(dup) = listener.try_clone() else {
        continue_call(listener.as_fd(), notice.id());
        return false;
    };
    crate::sync::lock(seen).held = Some(HoldPoint {
        syscall: change.syscall,
        path: change.path,
        released: None,
        together: 0,
        of: seat.of(),
        waited: None,
    });
    let held = HeldCall {
        listener: dup,
        id: notice.id(),
    };
    match seat.arrive(held, seen.clone()) {
        Arrival::Held => true,
        // The burst was let go before this call got here: it was not held.
        Arrival::Pass(call) => {
            crate::sync::lock(seen).held = None;
            call.release();
            false
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

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
