//! The Linux-specific half of the runner: process groups, signals, the child
//! subreaper, and finding the descendants a plugin left behind.
//!
//! Why a subreaper: a plugin that runs `setsid daemon &` and exits leaves a process
//! that is in neither its process group nor its session. Without help it would be
//! re-parented to init and be invisible to us. With `PR_SET_CHILD_SUBREAPER` set on
//! this process, such orphans are re-parented to *us*, so they can be found (as our
//! children that we did not spawn), recorded, killed and reaped.
//!
//! Attribution: a leftover belongs to a call when it is in the call's process group,
//! or when it is an orphan re-parented to us whose environment still holds every
//! variable the call was started with (plugins inherit the cleared `DHV_*` env), or
//! when it descends from either. A daemon that rewrites its whole environment after
//! leaving the group cannot be attributed and is not reported.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// A call's environment as handed to `execve`, `KEY=value` each, in order;
/// shared by the spawn, the live-call table and the sweeps without copying.
pub(crate) type EnvBlock = std::sync::Arc<[CString]>;

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
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "NUL byte in an environment variable",
                )
            })
        })
        .collect()
}

/// A process the plugin left behind, as seen in `/proc` when it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Its process id at the time it was found (it has been killed since).
    pub pid: i32,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// Whether it had left the plugin's process group (setsid, setpgid).
    pub escaped_group: bool,
    /// Whether it still held the plugin's stdout or stderr pipe open.
    pub held_stdio: bool,
}

/// Makes this process a child subreaper, once. Failure is not fatal: escaped
/// daemons are then re-parented to init and only group members are found.
pub(crate) fn ensure_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    });
}

/// Leaders this runner spawned and has not finished with. Orphans re-parented to
/// us are told apart from our own children with this set; the lock also orders a
/// spawn against a reap so we never reap a leader tokio is about to wait for.
fn leaders() -> &'static Mutex<HashSet<i32>> {
    static LEADERS: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    LEADERS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Live calls: leader pid → the env it was started with (for attribution and for
/// [`kill_all`]).
fn live_calls() -> &'static Mutex<HashMap<i32, EnvBlock>> {
    static CALLS: OnceLock<Mutex<HashMap<i32, EnvBlock>>> = OnceLock::new();
    CALLS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Holds the spawn lock while a leader is being spawned and registered.
pub(crate) fn spawn_lock() -> std::sync::MutexGuard<'static, HashSet<i32>> {
    leaders().lock().unwrap_or_else(|e| e.into_inner())
}

/// Records a freshly spawned leader (caller holds the spawn lock).
pub(crate) fn register(
    guard: &mut std::sync::MutexGuard<'static, HashSet<i32>>,
    pid: i32,
    env: EnvBlock,
) {
    guard.insert(pid);
    live_calls()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pid, env);
}

/// Forgets a leader once its call is over.
pub(crate) fn unregister(pid: i32) {
    leaders()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
    live_calls()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
}

/// Sends `sig` to every process of the group led by `pgid`.
pub(crate) fn signal_group(pgid: i32, sig: Signal) {
    let _ = killpg(Pid::from_raw(pgid), sig);
}

/// Sends `sig` to one process.
pub(crate) fn signal_one(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// The inode of a pipe end, so leftovers holding the other end can be recognised.
/// `fstat` on the descriptor gives the same pipefs inode as following
/// `/proc/<pid>/fd/N`, without a path walk through procfs.
pub(crate) fn pipe_inode(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|st| st.st_ino)
}

/// One row of the process table.
#[derive(Debug, Clone)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    zombie: bool,
}

fn read_stat(pid: i32) -> Option<Proc> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself hold spaces or ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgid,
        zombie: state == "Z" || state == "X",
    })
}

fn process_table() -> Vec<Proc> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// Our children that no live call owns as a leader: orphans re-parented to us.
///
/// Runs once per call, so it must not cost one procfs read per thread (`check`
/// has 20 and more). Linux (since 3.19; the runner needs 5.3 for pidfd anyway)
/// gives an orphan to the *first live thread* of the subreaper, which is the
/// main thread for as long as it runs, whichever thread spawned the orphan's
/// ancestor. Only when the main thread has ended on its own (`pthread_exit`,
/// leaving a zombie thread) can orphans land elsewhere; then every thread is read.
fn unexpected_children() -> Vec<i32> {
    let mut pids = Vec::new();
    let parse = |text: &[u8], pids: &mut Vec<i32>| {
        pids.extend(
            String::from_utf8_lossy(text)
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    };
    match main_task() {
        Some(main) if main.running() => {
            if let Ok(text) = reread(&main.children) {
                parse(&text, &mut pids);
            }
        }
        _ => {
            if let Ok(tasks) = fs::read_dir("/proc/self/task") {
                for task in tasks.flatten() {
                    if let Ok(text) = fs::read(task.path().join("children")) {
                        parse(&text, &mut pids);
                    }
                }
            }
        }
    }
    let leaders = leaders().lock().unwrap_or_else(|e| e.into_inner());
    pids.retain(|p| !leaders.contains(p));
    pids
}

/// The main thread's `children` and `stat` files, opened once. Reading an open
/// procfs file again from offset 0 regenerates it, at a fraction of the cost
/// of opening it anew, and the sweep reads both after every call.
struct MainTask {
    /// Whose files they are: a forked child must not read its parent's.
    pid: u32,
    children: fs::File,
    stat: fs::File,
}

impl MainTask {
    /// Whether the main thread is alive (not a zombie left by `pthread_exit`).
    /// Unknown counts as not running, so the caller falls back to reading every
    /// thread.
    fn running(&self) -> bool {
        if self.pid != std::process::id() {
            return false;
        }
        let Ok(text) = reread(&self.stat) else {
            return false;
        };
        let state = text
            .iter()
            .rposition(|&b| b == b')')
            .and_then(|i| text.get(i + 2));
        !matches!(state, None | Some(b'Z') | Some(b'X'))
    }
}

fn main_task() -> Option<&'static MainTask> {
    static MAIN: OnceLock<Option<MainTask>> = OnceLock::new();
    MAIN.get_or_init(|| {
        let pid = std::process::id();
        let dir = format!("/proc/{pid}/task/{pid}");
        Some(MainTask {
            pid,
            children: fs::File::open(format!("{dir}/children")).ok()?,
            stat: fs::File::open(format!("{dir}/stat")).ok()?,
        })
    })
    .as_ref()
}

/// The whole current content of an open procfs file.
fn reread(file: &fs::File) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    // Both files are a line of a few hundred bytes, unless many orphans wait.
    let mut text = vec![0u8; 1024];
    let mut len = 0;
    loop {
        if len == text.len() {
            text.resize(2 * len, 0);
        }
        match file.read_at(&mut text[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    text.truncate(len);
    Ok(text)
}

fn environ_matches(pid: i32, env: &[CString]) -> bool {
    let Ok(raw) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let vars: HashSet<&[u8]> = raw.split(|b| *b == 0).collect();
    !env.is_empty() && env.iter().all(|kv| vars.contains(kv.as_bytes()))
}

fn cmdline(pid: i32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    if parts.is_empty() {
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| format!("[{}]", c.trim()))
            .unwrap_or_default()
    } else {
        parts.join(" ")
    }
}

fn holds_pipe(pid: i32, inodes: &[u64]) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        fs::metadata(fd.path())
            .map(|m| inodes.contains(&m.ino()))
            .unwrap_or(false)
    })
}

/// The first, cheap look after a call: whether its process group still has a
/// member, and which orphans were re-parented to us.
struct Remains {
    group_alive: bool,
    strays: Vec<i32>,
}

impl Remains {
    fn of(pgid: i32) -> Remains {
        Remains {
            group_alive: killpg(Pid::from_raw(pgid), None).is_ok(),
            strays: unexpected_children(),
        }
    }

    /// Nothing at all is left: the usual case.
    fn nothing(&self) -> bool {
        !self.group_alive && self.strays.is_empty()
    }
}

/// Finds every process that belongs to the call led by `pgid` (see the module docs).
/// Zombies are included (they must be reaped) but not reported as leftovers.
fn members(pgid: i32, env: &[CString]) -> Vec<Proc> {
    let remains = Remains::of(pgid);
    if remains.nothing() {
        return Vec::new();
    }
    if !remains.group_alive {
        // Strays that are all zombies (what is left of a group some call
        // killed) or already gone have no descendants to look for: they only
        // need reaping, and the walk of the whole process table is spared.
        let stats: Option<Vec<Proc>> = remains
            .strays
            .iter()
            .filter_map(|&pid| read_stat(pid))
            .map(|p| p.zombie.then_some(p))
            .collect();
        if let Some(zombies) = stats {
            return zombies;
        }
    }
    let me = std::process::id() as i32;
    let table = process_table();
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in table.iter().enumerate() {
        children.entry(p.ppid).or_default().push(i);
    }
    let mut seeds: Vec<usize> = Vec::new();
    for (i, p) in table.iter().enumerate() {
        if p.pid == me {
            continue;
        }
        let orphan_of_call = p.ppid == me
            && remains.strays.contains(&p.pid)
            && (p.zombie || environ_matches(p.pid, env));
        if p.pgid == pgid || orphan_of_call {
            seeds.push(i);
        }
    }
    let mut found: BTreeSet<usize> = BTreeSet::new();
    while let Some(i) = seeds.pop() {
        if found.insert(i) {
            seeds.extend(children.get(&table[i].pid).into_iter().flatten());
        }
    }
    found.into_iter().map(|i| table[i].clone()).collect()
}

/// Finds, records, kills and reaps everything the call led by `pgid` left behind.
/// `inodes` are the call's stdout/stderr pipe inodes, to tell who held them.
pub(crate) async fn sweep(pgid: i32, env: &EnvBlock, inodes: &[u64]) -> Vec<Leftover> {
    // Cheap test first, on this thread: usually nothing is left at all.
    if Remains::of(pgid).nothing() {
        return Vec::new();
    }
    // Walking /proc blocks: keep it off the async workers, which are timing
    // other plugins' calls.
    let (env, inodes) = (EnvBlock::clone(env), inodes.to_vec());
    let found = tokio::task::spawn_blocking(move || {
        let procs = members(pgid, &env);
        let leftovers: Vec<Leftover> = procs
            .iter()
            .filter(|p| !p.zombie)
            .map(|p| Leftover {
                pid: p.pid,
                cmdline: cmdline(p.pid),
                escaped_group: p.pgid != pgid,
                held_stdio: holds_pipe(p.pid, &inodes),
            })
            .collect();
        (procs, leftovers)
    })
    .await;
    let Ok((procs, leftovers)) = found else {
        return Vec::new();
    };
    let pids: Vec<i32> = procs.iter().map(|p| p.pid).collect();
    kill_and_reap(pgid, &pids).await;
    leftovers
}

/// SIGKILLs the group and each pid, then reaps the ones that end up as our
/// children. Bounded: a process we cannot reap within a second is left to init.
async fn kill_and_reap(pgid: i32, pids: &[i32]) {
    signal_group(pgid, Signal::SIGKILL);
    for &pid in pids {
        signal_one(pid, Signal::SIGKILL);
    }
    let mut pending: Vec<i32> = pids.to_vec();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    // Killed processes become zombies at once, but one whose parent is also being
    // killed is only re-parented to us a moment later: retry briefly.
    loop {
        pending.retain(|&pid| !reap_if_ours(pid));
        if pending.is_empty() || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Returns true when `pid` is gone for good (reaped by us, or by its own parent).
fn reap_if_ours(pid: i32) -> bool {
    let guard = leaders().lock().unwrap_or_else(|e| e.into_inner());
    if guard.contains(&pid) {
        return true; // a live leader of another call re-used the pid: not ours to touch
    }
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(nix::sys::wait::WaitStatus::StillAlive) => false,
        Ok(_) => true,
        Err(Errno::ECHILD) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        Err(_) => true,
    }
}

/// The synchronous sweep used when a call is cancelled (its future dropped):
/// find everything attributable while the tree is intact, kill it all, and reap
/// on a helper thread so the caller never blocks.
pub(crate) fn sweep_detached(pgid: i32, env: EnvBlock, leader_reaped: bool) {
    let procs = members(pgid, &env);
    signal_group(pgid, Signal::SIGKILL);
    if !leader_reaped {
        signal_one(pgid, Signal::SIGKILL);
    }
    let others: Vec<i32> = procs.iter().map(|p| p.pid).filter(|&p| p != pgid).collect();
    for &pid in &others {
        signal_one(pid, Signal::SIGKILL);
    }
    std::thread::spawn(move || {
        if !leader_reaped {
            reap_blocking(pgid);
        }
        unregister(pgid);
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        let mut pending = others;
        while !pending.is_empty() && std::time::Instant::now() < deadline {
            pending.retain(|&pid| !reap_if_ours(pid));
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Set once by [`kill_all`]: the process is being torn down and starts nothing more.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Whether [`kill_all`] has run: the process is being torn down, and the
/// runner starts nothing more.
pub fn stopped() -> bool {
    STOPPED.load(Ordering::SeqCst)
}

/// Kills every plugin process group this runner has live, and everything they
/// left behind. Meant for Ctrl-C: the caller exits right after.
///
/// From then on the runner starts nothing: every later call fails to start
/// with `ECANCELED`. Without that, a check whose call was just killed would go
/// on to its next call while the caller is still cleaning up, and that process
/// would outlive the exit.
pub fn kill_all() {
    {
        // Under the spawn lock: a spawn in flight has registered its leader by
        // the time we hold the lock, and every later spawn sees the flag.
        let _no_spawns = spawn_lock();
        STOPPED.store(true, Ordering::SeqCst);
    }
    let calls: Vec<(i32, EnvBlock)> = live_calls()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(k, v)| (*k, EnvBlock::clone(v)))
        .collect();
    for (pgid, env) in &calls {
        signal_group(*pgid, Signal::SIGKILL);
        let procs = members(*pgid, env);
        for p in procs {
            signal_one(p.pid, Signal::SIGKILL);
        }
    }
}

/// A leader just started by [`spawn`], with the parent's ends of its pipes.
pub(crate) struct Spawned {
    pub pid: i32,
    pub stdout: std::os::fd::OwnedFd,
    pub stderr: std::os::fd::OwnedFd,
}

/// Starts `program` with exactly `env` (in order), stdin `/dev/null`, stdout and
/// stderr on fresh pipes, every signal at its default disposition and an empty
/// mask, in a new process group. `argv[0]` is the program path, as Nomad passes it.
///
/// `posix_spawn` rather than `std::process::Command`: std sorts the environment
/// (Nomad does not), and its `execvp` falls back to `/bin/sh` for a script without
/// a shebang (Nomad gets `exec format error`). Caller holds the spawn lock.
/// Fails with `ECANCELED` once [`kill_all`] has run.
pub(crate) fn spawn(
    program: &std::path::Path,
    args: &[std::ffi::OsString],
    env: &[CString],
    cwd: Option<&std::path::Path>,
) -> std::io::Result<Spawned> {
    use std::io::{Error, ErrorKind};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    fn cstr(bytes: &[u8]) -> std::io::Result<CString> {
        CString::new(bytes).map_err(|_| Error::new(ErrorKind::InvalidInput, "NUL byte in argument"))
    }
    if STOPPED.load(Ordering::SeqCst) {
        return Err(Error::from_raw_os_error(libc::ECANCELED));
    }
    let path = cstr(program.as_os_str().as_bytes())?;
    let mut argv_owned = vec![path.clone()];
    for a in args {
        argv_owned.push(cstr(a.as_bytes())?);
    }
    let cwd = cwd.map(|d| cstr(d.as_os_str().as_bytes())).transpose()?;
    let mut argv: Vec<*mut libc::c_char> =
        argv_owned.iter().map(|c| c.as_ptr() as *mut _).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut libc::c_char> = env.iter().map(|c| c.as_ptr() as *mut _).collect();
    envp.push(std::ptr::null_mut());

    let pipe = || -> std::io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid two-element array; the fds are owned from here on.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::last_os_error());
        }
        // SAFETY: pipe2 just returned these two fresh descriptors.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let devnull = c"/dev/null";

    // SAFETY: every pointer handed to the posix_spawn family points into values
    // that live until the end of this block; the attr and file actions are
    // initialised before use and destroyed on every path.
    unsafe {
        let check = |rc: libc::c_int| {
            if rc == 0 {
                Ok(())
            } else {
                Err(Error::from_raw_os_error(rc))
            }
        };
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawn_file_actions_init(&mut actions))?;
        if let Err(e) = check(libc::posix_spawnattr_init(&mut attr)) {
            libc::posix_spawn_file_actions_destroy(&mut actions);
            return Err(e);
        }
        let result = (|| -> std::io::Result<libc::pid_t> {
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions,
                0,
                devnull.as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions,
                out_w.as_raw_fd(),
                1,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions,
                err_w.as_raw_fd(),
                2,
            ))?;
            if let Some(dir) = &cwd {
                check(libc::posix_spawn_file_actions_addchdir_np(
                    &mut actions,
                    dir.as_ptr(),
                ))?;
            }
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigemptyset(&mut none);
            check(libc::posix_spawnattr_setsigdefault(&mut attr, &all))?;
            check(libc::posix_spawnattr_setsigmask(&mut attr, &none))?;
            check(libc::posix_spawnattr_setpgroup(&mut attr, 0))?;
            let flags = libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGDEF
                | libc::POSIX_SPAWN_SETSIGMASK;
            check(libc::posix_spawnattr_setflags(
                &mut attr,
                flags as libc::c_short,
            ))?;
            let mut pid: libc::pid_t = 0;
            check(libc::posix_spawn(
                &mut pid,
                path.as_ptr(),
                &actions,
                &attr,
                argv.as_ptr(),
                envp.as_ptr(),
            ))?;
            Ok(pid)
        })();
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        let pid = result?;
        drop((out_w, err_w));
        Ok(Spawned {
            pid,
            stdout: out_r,
            stderr: err_r,
        })
    }
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+).
pub(crate) fn pidfd(pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a fresh descriptor that we now own.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits for our child `pid` to exit and reaps it, without blocking a thread.
pub(crate) async fn wait_exit(
    pid: i32,
    pidfd: &tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
) -> (bool, i32) {
    use nix::sys::wait::WaitStatus;
    loop {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return (false, code),
            Ok(WaitStatus::Signaled(_, sig, _)) => return (true, sig as i32),
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            // Not ours any more: nothing to report but a kill.
            Err(_) => return (true, Signal::SIGKILL as i32),
        }
        match pidfd.readable().await {
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => return (true, Signal::SIGKILL as i32),
        }
    }
}

/// Blocks until our child `pid` is reaped (used on a helper thread after SIGKILL).
fn reap_blocking(pid: i32) {
    loop {
        match waitpid(Pid::from_raw(pid), None) {
            Err(Errno::EINTR) => continue,
            _ => return,
        }
    }
}
