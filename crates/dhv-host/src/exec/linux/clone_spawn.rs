//! Starting a leader directly in its call's cgroup: `clone3` with
//! `CLONE_INTO_CGROUP` (Linux 5.7), which `posix_spawn` cannot do. The same
//! clone, without a cgroup, starts a call that is refused system calls
//! where there is no cgroup to give it (not root): the filter is installed
//! by the child between the clone and `execve`, which `posix_spawn` cannot
//! do either, and needs nothing of a cgroup.
//!
//! Why not move the leader in after `posix_spawn`: the plugin would already
//! be running (and could fork out of reach first), and moving a process
//! between cgroups waits for an RCU grace period (half a millisecond and more
//! per call); a process born in the cgroup costs neither.
//!
//! The clone shares our memory (`CLONE_VM`), like `posix_spawn`'s, with
//! `CLONE_VFORK` so that we resume only once the child has executed the plugin
//! or failed; the child runs on a stack of its own, makes async-signal-safe
//! system calls only, and leaves a failure's errno where we read it. On other
//! architectures than x86-64 there is no cgroup per call (the assembly that
//! starts the child on its stack is x86-64's): `posix_spawn` and the
//! subreaper do the work.

use std::ffi::CString;
use std::io::Error;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

mod child;

/// The descriptors the child puts in place (all above 2, all close-on-exec).
#[derive(Clone, Copy)]
pub(crate) struct ChildFds {
    pub stdin: libc::c_int,
    pub stdout: libc::c_int,
    pub stderr: libc::c_int,
    /// The call's cgroup directory, or -1: the child is born in ours.
    pub cgroup: libc::c_int,
    /// The `cgroup.procs` of the call's dirs in v1 hierarchies (see
    /// `cgroup_v1`), open for writing, or -1: the child writes itself there
    /// before anything else.
    pub v1_procs: [libc::c_int; 2],
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
/// Every caught signal at its default in the child (Linux 5.5, before
/// `CLONE_INTO_CGROUP`'s 5.7): none of our handlers can run there.
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

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

/// The signals this process ignores, for the child to reset: an ignored
/// signal stays ignored across `execve`, and a plugin must start with every
/// signal at its default. (A caught one needs nothing: `CLONE_CLEAR_SIGHAND`
/// makes it default in the child at birth, so no handler of ours can run
/// there, and `execve` would reset it anyway.) Found here, so that the child,
/// which holds a copy of every descriptor of ours until it executes (and
/// keeps a file being written "busy" meanwhile), makes as few calls as it can.
///
/// From `process_wide::ignored_signals` (one `pread`); where that cannot be
/// read, by asking for each signal (62 system calls).
fn signals_to_reset() -> Vec<libc::c_int> {
    let wanted = |sig: &libc::c_int| *sig != libc::SIGKILL && *sig != libc::SIGSTOP;
    if let Some(mask) = super::process_wide::ignored_signals() {
        return (1..65)
            .filter(wanted)
            .filter(|&sig| mask & (1u64 << (sig - 1)) != 0)
            .collect();
    }
    queried_ignored_signals()
}

/// [`signals_to_reset`] the long way: a query per signal.
fn queried_ignored_signals() -> Vec<libc::c_int> {
    (1..65)
        .filter(|&sig| sig != libc::SIGKILL && sig != libc::SIGSTOP)
        .filter(|&sig| {
            let mut old = KernelSigaction::default();
            raw_sigaction(sig, None, Some(&mut old)) && old.handler == libc::SIG_IGN
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

/// Starts `path` in the cgroup `fds.cgroup` (when there is one), in a session
/// and process group of its own with no controlling terminal (as under a
/// Nomad agent, which has none), with the given stdio and working dir, every
/// signal at its default and none blocked, under the seccomp `filter` when
/// one is given (see `seccomp`), and with the hold filter when `hand_over`
/// is given (see `hold`: the listener is sent through it). Returns its pid,
/// and when it executed the program (`None` where that was not read).
pub(crate) fn clone_spawn(
    path: &CString,
    argv: &[*mut libc::c_char],
    envp: &[*mut libc::c_char],
    cwd: Option<&CString>,
    fds: ChildFds,
    filter: Option<&libc::sock_fprog>,
    hand_over: Option<&mut super::hold::HandOver>,
) -> Result<(i32, Option<std::time::Instant>), CloneFailure> {
    let reset = signals_to_reset();
    let mut child = Child {
        path: path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.map_or(std::ptr::null(), |c| c.as_ptr()),
        fds,
        reset: &reset,
        filter: filter.map_or(std::ptr::null(), |f| f as *const libc::sock_fprog),
        hand_over: hand_over.map_or(std::ptr::null_mut(), |h| h as *mut super::hold::HandOver),
        errno: 0,
        v1_failed: 0,
        exec_at: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    };
    // SAFETY: every signal is blocked around the clone, and the child is born
    // with no handler of ours (CLONE_CLEAR_SIGHAND), so none runs there before
    // it executes; `clone_into_cgroup` returns
    // only in the parent, once the child has executed or exited.
    let (pid, errno, v1_failed, exec_at) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = clone_into_cgroup(&mut child);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (
            pid,
            std::ptr::read_volatile(&child.errno),
            std::ptr::read_volatile(&child.v1_failed),
            std::ptr::read_volatile(&child.exec_at),
        )
    };
    let pid = pid.map_err(CloneFailure::Clone)?;
    if pid > 0 && v1_failed != 0 {
        // This call runs without its v1 limits (its counts stay as they
        // were: nothing is said of them); later calls get no v1 dirs.
        super::cgroup::CallCgroup::v1_refused();
    }
    if errno != 0 {
        crate::exec::signal::reap_blocking(pid);
        return Err(CloneFailure::Child(Error::from_raw_os_error(errno)));
    }
    Ok((pid, instant_of(exec_at)))
}

/// What the child needs, prepared by the parent, and where it reports a
/// failure: it shares our memory until it executes.
#[repr(C)]
struct Child<'a> {
    path: *const libc::c_char,
    argv: *const *mut libc::c_char,
    envp: *const *mut libc::c_char,
    cwd: *const libc::c_char,
    fds: ChildFds,
    reset: &'a [libc::c_int],
    /// A seccomp filter to install before executing, or null.
    filter: *const libc::sock_fprog,
    /// Where to send the hold filter's listener, or null: no hold.
    hand_over: *mut super::hold::HandOver,
    /// Set by the child when a step before or at `execve` failed.
    errno: libc::c_int,
    /// Set by the child when it could not write itself into a v1 dir.
    v1_failed: libc::c_int,
    /// `CLOCK_MONOTONIC` as the child was about to execute the program,
    /// after every step of ours: where the plugin's time starts.
    exec_at: libc::timespec,
}

/// The moment `at` (a `CLOCK_MONOTONIC` reading, the clock `Instant` reads
/// on Linux) as an `Instant`; `None` for a reading never made (zero) or one
/// after now.
fn instant_of(at: libc::timespec) -> Option<std::time::Instant> {
    let since_boot = |t: libc::timespec| {
        let secs = u64::try_from(t.tv_sec).ok()?;
        let nanos = u32::try_from(t.tv_nsec).ok()?;
        Some(std::time::Duration::new(secs, nanos))
    };
    let then = since_boot(at).filter(|d| !d.is_zero())?;
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one we pass.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
        return None;
    }
    let instant = std::time::Instant::now();
    instant.checked_sub(since_boot(now)?.checked_sub(then)?)
}

/// The clone itself, on x86-64: `clone3` with `CLONE_VM | CLONE_VFORK`, as
/// `posix_spawn` does it (no copy of our memory, which would cost a page-table
/// copy and a fault on every page we touch afterwards). The child starts on a
/// stack of its own, so it must not return into this function: the assembly
/// calls [`child_entry`] on that stack right after the system call.
///
/// # Safety
/// `child`'s pointers must stay valid until this returns (the child reads
/// them until it executes), and every signal must be blocked around the call.
#[cfg(target_arch = "x86_64")]
unsafe fn clone_into_cgroup(child: &mut Child<'_>) -> Result<i32, Error> {
    // One stack per thread, reused by its every spawn: the thread is held
    // (CLONE_VFORK) until its child is done with it, and a 64 KiB block
    // allocated and freed per spawn made the allocator consolidate its heap
    // at every free. Never read before the child writes it: not zeroed.
    thread_local! {
        static STACK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(STACK_SIZE));
    }
    // Borrowed once per spawn, never twice at a time: a spawn starts no other.
    // SAFETY: the stack stays borrowed until `clone_on` returns.
    STACK.with_borrow_mut(|stack| unsafe { clone_on(child, stack.as_mut_ptr()) })
}

/// The size of the child's stack.
#[cfg(target_arch = "x86_64")]
const STACK_SIZE: usize = 64 * 1024;

/// [`clone_into_cgroup`] with the child on `stack`, [`STACK_SIZE`] bytes
/// that stay ours until this returns.
///
/// # Safety
/// As [`clone_into_cgroup`]'s, and `stack` must be [`STACK_SIZE`] bytes no one
/// else uses until this returns.
#[cfg(target_arch = "x86_64")]
unsafe fn clone_on(child: &mut Child<'_>, stack: *mut u8) -> Result<i32, Error> {
    let args = CloneArgs {
        flags: if child.fds.cgroup >= 0 {
            CLONE_INTO_CGROUP
        } else {
            0
        } | CLONE_CLEAR_SIGHAND
            | (libc::CLONE_VM | libc::CLONE_VFORK) as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        // The kernel starts the child at stack + stack_size: keep it 16-aligned.
        stack_size: (STACK_SIZE as u64) & !15,
        cgroup: child.fds.cgroup.max(0) as u64,
        ..CloneArgs::default()
    };
    let ret: i64;
    // SAFETY: the parent's path is a plain system call (rcx, r11 clobbered);
    // the child's path never comes back here: it calls `child_entry`, which
    // executes the program or exits. `stack` outlives the child's use of it
    // (CLONE_VFORK holds us until then).
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") &args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") child as *mut Child<'_>,
            in("r13") child_entry as *const () as usize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        return Err(Error::from_raw_os_error(-ret as i32));
    }
    Ok(ret as i32)
}

/// Whether [`clone_spawn`] can work here, asked once without starting
/// anything: `clone3` with `CLONE_INTO_CGROUP` and a cgroup no descriptor
/// can be. A kernel that knows both (5.7, so `CLONE_CLEAR_SIGHAND`'s 5.5
/// too) rejects it as invalid (`EINVAL`); an older one finds fields it does
/// not know (`E2BIG`) or no `clone3` (`ENOSYS`), and a seccomp filter of a
/// container answers `ENOSYS` or `EPERM`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn clone3_usable() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| {
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP | CLONE_CLEAR_SIGHAND,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: u64::MAX,
            ..CloneArgs::default()
        };
        // SAFETY: the kernel only reads `args`, and refuses it before it
        // would start a process (an invalid cgroup).
        let ret = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        let errno = Error::last_os_error().raw_os_error();
        match ret {
            // No kernel starts one with that cgroup; were one to, it is a
            // plain fork of ours, which leaves at once.
            // SAFETY: `_exit` in a forked child runs nothing of ours.
            0 => unsafe { libc::_exit(127) },
            pid if pid > 0 => {
                crate::exec::signal::reap_blocking(pid as i32);
                false
            }
            _ => errno == Some(libc::EINVAL),
        }
    })
}

/// Elsewhere there is no clone's child.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn clone3_usable() -> bool {
    false
}

/// Elsewhere no cgroup is used: the caller falls back to `posix_spawn` and
/// the subreaper.
///
/// # Safety
/// None needed: it does nothing; `unsafe` to match the x86-64 signature.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone_into_cgroup(_child: &mut Child<'_>) -> Result<i32, Error> {
    Err(Error::from_raw_os_error(libc::ENOSYS))
}

/// The child's first and only frame, on its own stack.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
extern "C" fn child_entry(child: *mut Child<'_>) -> ! {
    // SAFETY: `child` is the parent's Child, alive while the parent waits;
    // only async-signal-safe system calls follow.
    unsafe {
        let errno = (*child).exec();
        std::ptr::write_volatile(&mut (*child).errno, errno.max(1));
        libc::_exit(127)
    }
}

#[cfg(test)]
#[path = "clone_spawn_tests.rs"]
mod tests;
