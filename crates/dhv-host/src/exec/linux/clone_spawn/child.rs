//! The clone's child, from its birth to `execve`: each step makes raw,
//! async-signal-safe system calls on what the parent prepared, and nothing
//! else (no allocation, no lock: it runs on our memory, in our thread's stead,
//! until it executes). A failed step ends it with its errno.

use super::{Child, KernelSigaction, raw_sigaction};

impl Child<'_> {
    /// The child's steps, then `execve`; returns only on failure, with errno.
    ///
    /// # Safety
    /// Only in the child of the clone.
    pub(super) unsafe fn exec(&mut self) -> libc::c_int {
        // SAFETY: we are the clone's child, as each step requires.
        unsafe {
            self.enter_v1_dirs();
            if let Err(errno) = self.own_session_and_stdio() {
                return errno;
            }
            self.close_inherited();
            if let Err(errno) = self.cwd_and_filters() {
                return errno;
            }
            // The plugin's time starts here (vDSO: no system call, no lock).
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut self.exec_at);
            self.execute()
        }
    }

    /// First, before any descriptor moves: into the call's v1 dirs ("0" is
    /// the writer), so that the plugin and all it starts are bounded there
    /// from their first instruction. Memory is charged to the v1 dir from the
    /// exec on (until then the child shares ours, which stays charged where
    /// we are).
    ///
    /// # Safety
    /// Only in the child of the clone.
    unsafe fn enter_v1_dirs(&mut self) {
        for &fd in &self.fds.v1_procs {
            // SAFETY: a write of one byte from a static to a descriptor the
            // parent opened for us.
            if fd >= 0 && unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
                self.v1_failed = 1;
            }
        }
    }

    /// A session of its own, every signal at its default, and the call's stdio.
    ///
    /// # Safety
    /// Only in the child of the clone.
    unsafe fn own_session_and_stdio(&self) -> Result<(), libc::c_int> {
        // SAFETY: raw system calls on values prepared by the parent.
        unsafe {
            // A session of its own: no controlling terminal, so nothing the
            // plugin does reaches the user's (no /dev/tty, no TIOCSTI, no
            // taking the foreground), and its group is its pid as before.
            if libc::setsid() < 0 {
                return Err(errno());
            }
            for &sig in self.reset {
                raw_sigaction(sig, Some(&KernelSigaction::default()), None);
            }
            let f = self.fds;
            if libc::dup2(f.stdin, 0) < 0
                || libc::dup2(f.stdout, 1) < 0
                || libc::dup2(f.stderr, 2) < 0
            {
                return Err(errno());
            }
        }
        Ok(())
    }

    /// Our descriptors are close-on-exec, but until the exec the child holds
    /// a reference to each: on a loaded host that can last long enough for
    /// another check to find a file it just closed still open (a volume that
    /// cannot be unmounted). Closed now, but for the one the hold's listener
    /// goes out by.
    ///
    /// # Safety
    /// Only in the child of the clone.
    unsafe fn close_inherited(&self) {
        // SAFETY: `hand_over`, when not null, is the parent's, alive while it
        // waits for us; `close_from_3_but` makes raw system calls only.
        unsafe {
            let keep = match self.hand_over.is_null() {
                true => None,
                false => Some((*self.hand_over).sock),
            };
            close_from_3_but(keep);
        }
    }

    /// The working dir, the seccomp filter, then the hold filter.
    ///
    /// # Safety
    /// Only in the child of the clone.
    unsafe fn cwd_and_filters(&self) -> Result<(), libc::c_int> {
        // SAFETY: raw system calls on values prepared by the parent, which
        // stay valid while it waits for us.
        unsafe {
            if !self.cwd.is_null() && libc::chdir(self.cwd) != 0 {
                return Err(errno());
            }
            if !self.filter.is_null() {
                let failed = super::super::seccomp::install(self.filter);
                if failed != 0 {
                    return Err(failed);
                }
            }
            // Last before the exec: from here on the child's own changes
            // would be held too (it makes none).
            if !self.hand_over.is_null() {
                (*self.hand_over).install_and_send();
            }
        }
        Ok(())
    }

    /// No signal blocked, then the program; returns only on failure, with errno.
    ///
    /// # Safety
    /// Only in the child of the clone.
    unsafe fn execute(&self) -> libc::c_int {
        // SAFETY: raw system calls on values prepared by the parent.
        unsafe {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            // `execveat`, which the watch filter lets through: it watches
            // `execve` (the plugin's own starts) and would hold this one
            // while we wait for it (CLONE_VFORK).
            libc::syscall(
                libc::SYS_execveat,
                libc::AT_FDCWD,
                self.path,
                self.argv,
                self.envp,
                0,
            );
            errno()
        }
    }
}

/// The errno of the last failed system call.
fn errno() -> libc::c_int {
    // SAFETY: __errno_location points to this thread's errno, valid to
    // read for the thread's life; the child runs on the parent thread's
    // memory and TLS (CLONE_VM), which CLONE_VFORK holds still meanwhile.
    unsafe { *libc::__errno_location() }
}

/// Closes every descriptor from 3 up but `keep`, where the kernel can
/// (`close_range`, Linux 5.9; elsewhere close-on-exec does it at the exec).
///
/// # Safety
/// Only in the clone's child: async-signal-safe system calls.
unsafe fn close_from_3_but(keep: Option<libc::c_int>) {
    let close = |first: libc::c_uint, last: libc::c_uint| {
        if first <= last {
            // SAFETY: close_range takes plain numbers; a failure leaves the
            // descriptors to close-on-exec.
            unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
        }
    };
    match keep {
        Some(fd) if fd >= 3 => {
            close(3, fd as libc::c_uint - 1);
            close(fd as libc::c_uint + 1, libc::c_uint::MAX);
        }
        _ => close(3, libc::c_uint::MAX),
    }
}
