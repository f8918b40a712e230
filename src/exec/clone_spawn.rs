//! Starting a leader directly in its call's cgroup: `clone3` with
//! `CLONE_INTO_CGROUP` (Linux 5.7), which `posix_spawn` cannot do.
//!
//! Why not move the leader in after `posix_spawn`: the plugin would already
//! be running (and could fork out of reach first), and moving a process
//! between cgroups waits for an RCU grace period (half a millisecond and more
//! per call); a process born in the cgroup costs neither.
//!
//! The clone has `fork` semantics (a copy-on-write copy of our memory), with
//! `CLONE_VFORK` so that we resume only once the child has executed the plugin
//! or failed. The child makes async-signal-safe system calls only, and
//! reports a failure's errno through a close-on-exec pipe.

use std::ffi::CString;
use std::io::Error;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The descriptors the child puts in place (all above 2, all close-on-exec).
#[derive(Clone, Copy)]
pub(crate) struct ChildFds {
    pub stdin: libc::c_int,
    pub stdout: libc::c_int,
    pub stderr: libc::c_int,
    /// The call's cgroup directory.
    pub cgroup: libc::c_int,
}

/// `fd`, moved to a number above 2 if it is one of 0, 1, 2 (our own stdio can
/// be closed), so that the child's `dup2` onto 0..2 never clobbers a source.
pub(crate) fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a fresh descriptor or -1.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// The kernel's `struct clone_args` (version 2, with `cgroup`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct sigaction`, as `rt_sigaction` takes it: the handler
/// first (all a query needs), all zero for `SIG_DFL`. One spare word keeps it
/// at least as large as every architecture's layout.
#[derive(Default)]
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
    spare: u64,
}

/// `rt_sigaction` itself: unlike libc's wrapper it also reaches the signals
/// libc reserves for itself (32, 33), which may be ignored here and must not
/// stay ignored in a plugin. Async-signal-safe.
fn raw_sigaction(
    sig: libc::c_int,
    new: Option<&KernelSigaction>,
    old: Option<&mut KernelSigaction>,
) -> bool {
    let new = new.map_or(std::ptr::null(), |n| n as *const KernelSigaction);
    let old = old.map_or(std::ptr::null_mut(), |o| o as *mut KernelSigaction);
    // SAFETY: both pointers are null or point to structures large enough for
    // the kernel's; the mask size is the kernel's (64 signals).
    unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, new, old, 8usize) == 0 }
}

/// The signals not at their default disposition (ignored, or caught by a
/// handler of ours), for the child to reset. Found here, so that the child,
/// which holds a copy of every descriptor of ours until it executes (and
/// keeps a file being written "busy" meanwhile), makes as few calls as it can.
fn non_default_signals() -> Vec<libc::c_int> {
    (1..65)
        .filter(|&sig| sig != libc::SIGKILL && sig != libc::SIGSTOP)
        .filter(|&sig| {
            let mut old = KernelSigaction::default();
            raw_sigaction(sig, None, Some(&mut old)) && old.handler != libc::SIG_DFL
        })
        .collect()
}

/// Why [`clone_spawn`] failed.
pub(crate) enum CloneFailure {
    /// `clone3` itself failed: `ENOSYS`, `EINVAL`, `EPERM` and the like where
    /// it or `CLONE_INTO_CGROUP` is refused (old kernel, seccomp).
    Clone(Error),
    /// The child could not set up or execute the program (`ENOENT`,
    /// `EACCES`, `ENOEXEC`, ...), as `posix_spawn` reports it.
    Child(Error),
}

/// Starts `path` in the cgroup `fds.cgroup`, in a new process group, with the
/// given stdio and working dir, every signal at its default and none blocked.
pub(crate) fn clone_spawn(
    path: &CString,
    argv: &[*mut libc::c_char],
    envp: &[*mut libc::c_char],
    cwd: Option<&CString>,
    fds: ChildFds,
) -> Result<i32, CloneFailure> {
    let reset = non_default_signals();
    let mut report = [0 as libc::c_int; 2];
    // SAFETY: a valid two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(CloneFailure::Child(Error::last_os_error()));
    }
    // SAFETY: pipe2 just returned these two fresh descriptors.
    let (report_r, report_w) = unsafe {
        (
            OwnedFd::from_raw_fd(report[0]),
            OwnedFd::from_raw_fd(report[1]),
        )
    };
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP | libc::CLONE_VFORK as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: fds.cgroup as u64,
        ..CloneArgs::default()
    };
    let child = Child {
        path: path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.map_or(std::ptr::null(), |c| c.as_ptr()),
        fds,
        reset: &reset,
        report: report_w.as_raw_fd(),
    };
    // SAFETY: every signal is blocked around the clone, so no handler of ours
    // runs in the child before it resets them. The child runs `Child::exec`
    // on its copy of our memory and never returns from it.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        );
        if pid == 0 {
            child.exec();
        }
        let clone_error = Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(CloneFailure::Clone(clone_error));
        }
        pid as i32
    };
    drop(report_w);
    let mut errno = [0u8; 4];
    // The child has executed (the pipe closed with it) or failed (it wrote
    // its errno, then exited): either way the read does not wait.
    let n = nix::unistd::read(&report_r, &mut errno).unwrap_or(0);
    if n == errno.len() {
        super::spawn::reap_blocking(pid);
        let errno = i32::from_ne_bytes(errno);
        return Err(CloneFailure::Child(Error::from_raw_os_error(errno)));
    }
    Ok(pid)
}

/// What the child needs, prepared by the parent: pointers into its memory,
/// which the child has a copy of.
struct Child<'a> {
    path: *const libc::c_char,
    argv: *const *mut libc::c_char,
    envp: *const *mut libc::c_char,
    cwd: *const libc::c_char,
    fds: ChildFds,
    reset: &'a [libc::c_int],
    report: libc::c_int,
}

impl Child<'_> {
    /// The child's side: async-signal-safe system calls only, then `execve`.
    ///
    /// # Safety
    /// Only in the child of the clone, whose pointers all point into its copy
    /// of the parent's memory.
    unsafe fn exec(&self) -> ! {
        // SAFETY: raw system calls on values prepared by the parent.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                self.fail();
            }
            for &sig in self.reset {
                raw_sigaction(sig, Some(&KernelSigaction::default()), None);
            }
            let f = self.fds;
            if libc::dup2(f.stdin, 0) < 0
                || libc::dup2(f.stdout, 1) < 0
                || libc::dup2(f.stderr, 2) < 0
            {
                self.fail();
            }
            if !self.cwd.is_null() && libc::chdir(self.cwd) != 0 {
                self.fail();
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::execve(self.path, self.argv.cast(), self.envp.cast());
            self.fail()
        }
    }

    /// Reports errno to the parent and exits.
    unsafe fn fail(&self) -> ! {
        // SAFETY: errno is this thread's; write and _exit are async-signal-safe.
        unsafe {
            let errno = *libc::__errno_location();
            libc::write(self.report, errno.to_ne_bytes().as_ptr().cast(), 4);
            libc::_exit(127)
        }
    }
}
