//! Starting a leader and waiting for it: `posix_spawn` into a process group of
//! its own, a pidfd to wait on, signals to its group.

use std::ffi::{CString, OsString};
use std::io::{Error, ErrorKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;

use super::cgroup::CallCgroup;
use super::clone_spawn::{ChildFds, CloneFailure, above_stdio, clone_spawn};
use crate::exec::wait_status;
use dhv_contract::ExitReason;

pub(crate) use super::procfs::EnvBlock;

/// Builds the [`EnvBlock`] for `env`. Fails on a NUL byte, which no
/// environment can hold.
pub(crate) fn env_block(env: &[(String, String)]) -> std::io::Result<EnvBlock> {
    env.iter()
        .map(|(k, v)| {
            // Sized for the NUL too, so that CString::new does not reallocate.
            let mut kv = Vec::with_capacity(k.len() + v.len() + 2);
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidInput,
                    "NUL byte in an environment variable",
                )
            })
        })
        .collect()
}

/// The inode of a pipe end, so leftovers holding the other end can be recognised.
/// `fstat` on the descriptor gives the same pipefs inode as following
/// `/proc/<pid>/fd/N`, without a path walk through procfs.
pub(crate) fn pipe_inode(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|st| st.st_ino)
}

/// A leader just started by [`spawn`], with the parent's ends of its pipes.
pub(crate) struct Spawned {
    pub pid: i32,
    /// The leader was born in the cgroup it was given.
    pub in_cgroup: bool,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The hold filter's listener, when the leader was started under one.
    pub listener: Option<OwnedFd>,
    /// When the leader executed the program, after every step of ours
    /// (read by the clone's child; `None` for `posix_spawn`'s).
    pub executed_at: Option<std::time::Instant>,
}

/// Why a call that was to be refused system calls cannot start.
fn no_refusal() -> Error {
    Error::new(
        ErrorKind::Unsupported,
        "system calls can be refused to a plugin only where the harness can start it with clone3 (x86-64, Linux 5.7 or later, clone3 not filtered)",
    )
}

fn cstr(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| Error::new(ErrorKind::InvalidInput, "NUL byte in argument"))
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid two-element array; the fds are owned from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What a leader is started with besides its program, arguments and
/// environment.
pub(crate) struct StartWith<'a> {
    pub cwd: Option<&'a Path>,
    /// The call's cgroup directory, open: the leader is born there.
    pub cgroup: Option<&'a OwnedFd>,
    /// The `cgroup.procs` of the call's v1 dirs, open (`-1` for none): the
    /// leader writes itself there before its exec. Only with `cgroup`.
    pub v1_procs: [libc::c_int; 2],
    /// System calls its processes are refused.
    pub refuse: Option<crate::exec::Refusal>,
    /// Install the watch filter (`Some(starts)`: whether program starts
    /// notify too) and hand its listener back.
    pub hold: Option<bool>,
}

/// Starts `program` with exactly `env` (in order), stdin `/dev/null`, stdout and
/// stderr on fresh pipes, every signal at its default disposition and an empty
/// mask, in a new session (no controlling terminal) and process group. `argv[0]`
/// is `arg0` (the plugin's path as Nomad passes it), which may differ from the
/// file run, `program`. With a cgroup, the leader is born in it (see
/// [`clone_spawn`]).
///
/// With `refuse`, the leader and all it starts are refused those system
/// calls (see `seccomp`); with `hold`, their changes of state notify us (see
/// `hold`). Both need the clone (x86-64): without it a refusal fails the call
/// with [`ErrorKind::Unsupported`] and a hold is not made ([`Spawned::listener`]
/// is `None`).
///
/// `posix_spawn` rather than `std::process::Command`: std sorts the environment
/// (Nomad does not), and its `execvp` falls back to `/bin/sh` for a script without
/// a shebang (Nomad gets `exec format error`). The caller has marked the spawn
/// in flight (`process_wide::spawn_in_flight`) until the leader is recorded.
pub(crate) fn spawn(
    (program, arg0): (&Path, &Path),
    args: &[OsString],
    env: &[CString],
    with: StartWith<'_>,
) -> std::io::Result<Spawned> {
    let filter = match with.refuse {
        Some(r) => Some(super::seccomp::filter(r).ok_or_else(no_refusal)?),
        None => None,
    };
    let exec = Exec::new((program, arg0), args, env, with.cwd)?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    // Above 2 for the clone's child (a no-op unless our own stdio is closed);
    // the same ends serve `posix_spawn`'s `dup2`s.
    let (out_w, err_w) = (above_stdio(out_w)?, above_stdio(err_w)?);
    let starts = with.hold.filter(|_| super::hold::can_hold());
    let hold = starts.map(|_| super::hold::hand_over_pair()).transpose()?;
    let mut hand_over = hold.as_ref().zip(starts).map(|((send, _), starts)| {
        super::hold::HandOver::new(std::os::fd::AsFd::as_fd(send), starts)
    });
    // No descriptor inside a volume is copied into the clone (see `fence`).
    let fence = crate::fence::cloning();
    let cloned = clone_leader(
        &exec,
        &with,
        (&out_w, &err_w),
        filter.as_ref(),
        hand_over.as_deref_mut(),
    )?;
    let in_cgroup = cloned.is_some_and(|(_, in_cgroup, _)| in_cgroup);
    let executed_at = cloned.and_then(|(_, _, at)| at);
    let listener = match (&cloned, &hold) {
        (Some(_), Some((_, recv))) => super::hold::receive(recv),
        _ => None,
    };
    let pid = match cloned {
        Some((pid, _, _)) => pid,
        None => {
            let mut plan = SpawnPlan::new()?;
            plan.stdio(&out_w, &err_w, exec.cwd.as_ref())?;
            plan.own_session_default_signals()?;
            plan.spawn(&exec.path, &exec.argv, &exec.envp)?
        }
    };
    drop(fence);
    drop((out_w, err_w));
    Ok(Spawned {
        pid,
        in_cgroup,
        stdout: out_r,
        stderr: err_r,
        listener,
        executed_at,
    })
}

/// The program, its arguments, its environment and its working dir as
/// `execve` and `chdir` take them, for the clone's child or `posix_spawn`.
struct Exec {
    path: CString,
    /// Owns the strings `argv` points to.
    _args: Vec<CString>,
    argv: Vec<*mut libc::c_char>,
    envp: Vec<*mut libc::c_char>,
    cwd: Option<CString>,
}

impl Exec {
    fn new(
        (program, arg0): (&Path, &Path),
        args: &[OsString],
        env: &[CString],
        cwd: Option<&Path>,
    ) -> std::io::Result<Exec> {
        let path = cstr(program.as_os_str().as_bytes())?;
        let mut argv_owned = vec![cstr(arg0.as_os_str().as_bytes())?];
        for a in args {
            argv_owned.push(cstr(a.as_bytes())?);
        }
        let cwd = cwd.map(|d| cstr(d.as_os_str().as_bytes())).transpose()?;
        let mut argv: Vec<*mut libc::c_char> =
            argv_owned.iter().map(|c| c.as_ptr() as *mut _).collect();
        argv.push(std::ptr::null_mut());
        let mut envp: Vec<*mut libc::c_char> = env.iter().map(|c| c.as_ptr() as *mut _).collect();
        envp.push(std::ptr::null_mut());
        Ok(Exec {
            path,
            _args: argv_owned,
            argv,
            envp,
            cwd,
        })
    }
}

/// Starts the leader with [`clone_spawn`] when it is to be born in a cgroup,
/// refused system calls or held (`hand_over`): its pid, whether it was
/// born in the cgroup, and when it executed the program. `None` when
/// `posix_spawn` is to start it: nothing
/// needs the clone, or a cgroup alone did and the clone is not to be had.
fn clone_leader(
    exec: &Exec,
    with: &StartWith<'_>,
    (out_w, err_w): (&OwnedFd, &OwnedFd),
    filter: Option<&libc::sock_fprog>,
    mut hand_over: Option<&mut super::hold::HandOver>,
) -> std::io::Result<Option<(i32, bool, Option<std::time::Instant>)>> {
    let needs_clone = filter.is_some() || hand_over.is_some();
    if with.cgroup.is_none() && !needs_clone {
        return Ok(None);
    }
    let mut fds = ChildFds {
        stdin: dev_null()?,
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        cgroup: with.cgroup.map_or(-1, |c| c.as_raw_fd()),
        v1_procs: with.v1_procs,
    };
    let mut clone = |fds| {
        clone_spawn(
            &exec.path,
            &exec.argv,
            &exec.envp,
            exec.cwd.as_ref(),
            fds,
            filter,
            hand_over.as_deref_mut(),
        )
    };
    match clone(fds) {
        Ok((pid, at)) => Ok(Some((pid, fds.cgroup >= 0, at))),
        Err(CloneFailure::Child(e)) => Err(e),
        Err(CloneFailure::Clone(e)) if fds.cgroup >= 0 && cgroup_refused(&e) => {
            CallCgroup::refused();
            // Born in ours, then, when only the clone can do the rest;
            // untracked by a cgroup, it is bounded by none either.
            fds.cgroup = -1;
            fds.v1_procs = [-1; 2];
            match needs_clone.then(|| clone(fds)) {
                None => Ok(None),
                Some(Ok((pid, at))) => Ok(Some((pid, false, at))),
                Some(Err(CloneFailure::Child(e))) => Err(e),
                Some(Err(CloneFailure::Clone(_))) if filter.is_some() => Err(no_refusal()),
                Some(Err(CloneFailure::Clone(_))) => Ok(None),
            }
        }
        Err(CloneFailure::Clone(_)) if filter.is_some() => Err(no_refusal()),
        // No clone3 here: posix_spawn, unheld.
        Err(CloneFailure::Clone(_)) if with.cgroup.is_none() => Ok(None),
        Err(CloneFailure::Clone(e)) => Err(e),
    }
}

/// `/dev/null`, open for reading above 2 and close-on-exec, opened once for
/// every leader's stdin (each `dup2`s it onto its 0): reading it never blocks
/// nor depends on an offset, so the leaders may share it.
fn dev_null() -> std::io::Result<libc::c_int> {
    static DEV_NULL: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
    if let Some(fd) = DEV_NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let fd = above_stdio(std::fs::File::open("/dev/null")?.into())?;
    // A racing first call may have set it: its descriptor is used, ours closed.
    Ok(DEV_NULL.get_or_init(|| fd).as_raw_fd())
}

/// Whether `clone3` failed because it, or starting in a cgroup, is not
/// available here (old kernel, a seccomp filter, a cgroup that cannot take
/// processes), rather than for want of resources.
fn cgroup_refused(e: &Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EINVAL | libc::EPERM | libc::EOPNOTSUPP | libc::EBUSY)
    )
}

/// The file actions and attributes of one `posix_spawn`, destroyed on drop.
struct SpawnPlan {
    actions: libc::posix_spawn_file_actions_t,
    attr: libc::posix_spawnattr_t,
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::from_raw_os_error(rc))
    }
}

impl SpawnPlan {
    fn new() -> std::io::Result<Box<SpawnPlan>> {
        // Boxed: the structures are initialised in place and must not move.
        // SAFETY: both are plain C structs, initialised by their init calls
        // before any other use.
        let mut plan: Box<SpawnPlan> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: init on zeroed, owned, pinned-by-box structures.
        check(unsafe { libc::posix_spawn_file_actions_init(&mut plan.actions) })?;
        // SAFETY: as above; on failure the actions are destroyed here.
        if let Err(e) = check(unsafe { libc::posix_spawnattr_init(&mut plan.attr) }) {
            // SAFETY: the actions were initialised just above and are
            // destroyed once; the plan is forgotten, never dropped, so
            // nothing destroys them again.
            unsafe { libc::posix_spawn_file_actions_destroy(&mut plan.actions) };
            std::mem::forget(plan);
            return Err(e);
        }
        Ok(plan)
    }

    /// stdin `/dev/null`, stdout and stderr onto the pipes, the working dir.
    fn stdio(
        &mut self,
        out: &OwnedFd,
        err: &OwnedFd,
        cwd: Option<&CString>,
    ) -> std::io::Result<()> {
        let a = &mut self.actions;
        // SAFETY: the actions are initialised; the strings outlive the spawn
        // (glibc copies the paths when the action is added).
        unsafe {
            check(libc::posix_spawn_file_actions_addopen(
                a,
                0,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                a,
                out.as_raw_fd(),
                1,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                a,
                err.as_raw_fd(),
                2,
            ))?;
            if let Some(dir) = cwd {
                check(libc::posix_spawn_file_actions_addchdir_np(a, dir.as_ptr()))?;
            }
        }
        Ok(())
    }

    /// A new session (and so process group); every signal default and unblocked.
    fn own_session_default_signals(&mut self) -> std::io::Result<()> {
        // SAFETY: the attr is initialised; the sets are initialised before use.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigemptyset(&mut none);
            check(libc::posix_spawnattr_setsigdefault(&mut self.attr, &all))?;
            check(libc::posix_spawnattr_setsigmask(&mut self.attr, &none))?;
            let flags = libc::POSIX_SPAWN_SETSID as libc::c_int
                | libc::POSIX_SPAWN_SETSIGDEF
                | libc::POSIX_SPAWN_SETSIGMASK;
            check(libc::posix_spawnattr_setflags(
                &mut self.attr,
                flags as libc::c_short,
            ))
        }
    }

    fn spawn(
        &self,
        path: &CString,
        argv: &[*mut libc::c_char],
        envp: &[*mut libc::c_char],
    ) -> std::io::Result<i32> {
        let mut pid: libc::pid_t = 0;
        // SAFETY: argv and envp are NULL-terminated arrays of pointers into
        // CStrings that outlive this call; actions and attr are initialised.
        check(unsafe {
            libc::posix_spawn(
                &mut pid,
                path.as_ptr(),
                &self.actions,
                &self.attr,
                argv.as_ptr(),
                envp.as_ptr(),
            )
        })?;
        Ok(pid)
    }
}

impl Drop for SpawnPlan {
    fn drop(&mut self) {
        // SAFETY: both were initialised in `new` and are destroyed once.
        unsafe {
            libc::posix_spawn_file_actions_destroy(&mut self.actions);
            libc::posix_spawnattr_destroy(&mut self.attr);
        }
    }
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+).
pub(crate) fn pidfd(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: the syscall returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Reaps our child `pid` if it has ended, without waiting: `None` while it
/// runs. One that is not ours any more has nothing to report but a kill.
pub(crate) fn try_reap(pid: i32) -> Option<ExitReason> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes the status of our own child into `status`.
        let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if reaped < 0 {
            if Errno::last() == Errno::EINTR {
                continue;
            }
            return Some(ExitReason::Signal(libc::SIGKILL));
        }
        // 0: still running; a status that is no ending (a stop): wait on.
        return (reaped == pid)
            .then(|| wait_status::exit_reason(status))
            .flatten();
    }
}

/// Waits for our child `pid` to exit and reaps it, without blocking a thread.
pub(crate) async fn wait_exit(pid: i32, pidfd: &tokio::io::unix::AsyncFd<OwnedFd>) -> ExitReason {
    // Not ours any more: nothing to report but a kill.
    let gone = ExitReason::Signal(libc::SIGKILL);
    loop {
        if let Some(reason) = try_reap(pid) {
            return reason;
        }
        match pidfd.readable().await {
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => return gone,
        }
    }
}
