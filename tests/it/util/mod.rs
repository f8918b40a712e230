//! Shared helpers for the end-to-end tests: a scratch dir with throwaway plugins,
//! and process-table checks that prove nothing was left behind; the re-runs
//! of a test in a process of its own are in `rerun.rs`.
#![allow(dead_code)]

pub mod check;
pub mod dead_run;
pub mod manager;
mod rerun;

pub use rerun::{in_a_process_of_its_own, in_private_mount_ns};

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The repository's root, where `sample-plugins/` and `fixtures/` live.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The path of a bundled sample plugin, as the command line takes it.
pub fn sample(name: &str) -> String {
    repo()
        .join("sample-plugins")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The binary under test.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dhv-conform")
}

/// Waits, with a bound, for `probe` to hold; whether it did. For what has no
/// event to wait on (a file appearing, a process going away), so it polls.
pub fn wait_for(limit: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !probe() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Waits for `child` at most `limit`; a child that takes longer is killed and
/// the test fails, so a hung harness never hangs the suite.
pub fn wait_bounded(mut child: Child, limit: Duration) -> ExitStatus {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(limit) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = rx.recv();
            panic!("dhv-conform did not finish within {limit:?}");
        }
    }
}

/// A process that takes an exclusive `flock` on a file as soon as it is free
/// (within 120 s) and keeps it: a plugin's helper that took a run's owner
/// lock when the run died. Killed when dropped, however the test ends.
pub struct LockHolder(Option<Child>);

impl LockHolder {
    /// Starts it on `file`.
    pub fn new(file: &Path) -> LockHolder {
        LockHolder(Some(
            std::process::Command::new("flock")
                .args(["-x", "-w", "120"])
                .arg(file)
                .args(["sh", "-c", "echo locked; exec sleep 600"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        ))
    }

    /// Its pid.
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Waits for its word that the lock is its (false: it gave up).
    pub fn grabbed(&mut self) -> bool {
        let mut line = String::new();
        let child = self.0.as_mut().unwrap();
        let _ = std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        );
        line == "locked\n"
    }

    /// How it ended, when something else ended it within 10 s; `None` when
    /// it still runs (it is then killed, as it is dropped).
    pub fn ended(mut self) -> Option<ExitStatus> {
        let child = self.0.as_mut()?;
        let mut status = None;
        wait_for(Duration::from_secs(10), || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A temp dir that holds throwaway plugins and whatever they make.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::Builder::new()
                .prefix("dhv-test-")
                .tempdir()
                .expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an executable script named `name` with `body`.
    pub fn plugin(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        fs::write(&path, body).expect("write plugin");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }
}

/// Whether a process with this pid is alive and runs `needle` in its command line.
pub fn alive_with(pid: i32, needle: &str) -> bool {
    let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        .unwrap_or(true);
    !zombie && String::from_utf8_lossy(&raw).contains(needle)
}

/// Every live process whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        if alive_with(pid, needle) {
            let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&raw).replace('\0', " ")
            ));
        }
    }
    found
}

/// Every live process whose environment mentions `needle` (plugin descendants
/// inherit the `DHV_*` variables, which name the run's temp dirs).
pub fn processes_with_env_containing(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if String::from_utf8_lossy(&env).contains(needle) && alive_with(pid, "") {
            let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&raw).replace('\0', " ")
            ));
        }
    }
    found
}

/// A node's dirs for manager tests: a plugin dir (the scratch root), a volumes
/// dir and a state dir beside it.
pub struct Node {
    pub plugins: Scratch,
    pub work: tempfile::TempDir,
}

impl Node {
    pub fn new() -> Node {
        let work = tempfile::Builder::new()
            .prefix("dhv-node-")
            .tempdir()
            .unwrap();
        fs::create_dir(work.path().join("volumes")).unwrap();
        Node {
            plugins: Scratch::new(),
            work,
        }
    }

    pub fn volumes(&self) -> PathBuf {
        self.work.path().join("volumes")
    }

    pub fn state(&self) -> PathBuf {
        self.work.path().join("state")
    }
}

/// The variable that says privileged tests must run here (`.ci/run` sets it:
/// CI runs as root, so a privileged test that cannot run there is a failure).
pub const REQUIRE_PRIVILEGED: &str = "DHV_REQUIRE_PRIVILEGED";

/// Skips a test that cannot run here, saying why on stdout; when
/// [`REQUIRE_PRIVILEGED`] is set, fails it instead, so that a skip can never
/// pass unseen where the environment promises everything can run.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os(REQUIRE_PRIVILEGED).is_some_and(|v| !v.is_empty()) {
        panic!("{test} cannot run here ({why}), and {REQUIRE_PRIVILEGED} says it must");
    }
    println!("SKIPPED {test}: {why}");
}

/// Why loop devices cannot be used here, or `None` when they can.
pub fn loop_devices_unusable() -> Option<String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Some("not running as root".into());
    }
    for tool in ["mkfs.ext4", "losetup", "mount", "umount"] {
        let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(tool).exists());
        if !found {
            return Some(format!("{tool} is not installed"));
        }
    }
    match std::process::Command::new("losetup").arg("-f").output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "no free loop device: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run losetup: {e}")),
    }
}

/// A small multi-thread runtime for tests that drive the library directly.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `mount --bind from to`, panicking with mount's message.
pub fn bind_mount(from: &Path, to: &Path) {
    let out = std::process::Command::new("mount")
        .arg("--bind")
        .arg(from)
        .arg(to)
        .output()
        .expect("run mount");
    assert!(
        out.status.success(),
        "mount --bind {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The mount points at or below `dir`, from /proc/self/mountinfo.
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    dhv_host::safe_fs::mounts_under(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_point)
        .collect()
}

/// A tree of sentinel files in `dir`, each with its own content.
pub fn plant_sentinels(dir: &Path) {
    for sub in ["", "a", "a/b"] {
        let d = dir.join(sub);
        fs::create_dir_all(&d).unwrap();
        for i in 0..3 {
            let f = d.join(format!("sentinel-{i}"));
            fs::write(&f, format!("sentinel {}\n", f.display())).unwrap();
        }
    }
}

/// A digest of every entry below `dir`: path, kind, content and mode.
pub fn tree_digest(dir: &Path) -> std::collections::BTreeMap<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            let what = if meta.is_dir() {
                stack.push(e.path());
                format!("dir {:o}", meta.mode())
            } else if meta.is_file() {
                let body = fs::read(e.path()).unwrap_or_default();
                format!("file {:o} {:x?}", meta.mode(), sha(&body))
            } else {
                format!("other {:o}", meta.mode())
            };
            out.insert(e.path(), what);
        }
    }
    out
}

fn sha(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).to_vec()
}

/// CPU-bound threads, twice as many as the machine has cores, until dropped or
/// until their bound passes (whichever is first): each thread stops itself, so
/// a test that panics mid-sweep leaves nothing spinning for long.
pub struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The busy threads (twice the cores).
    pub threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// Starts the threads; they stop when the `Load` is dropped or `bound` passes.
    pub fn start(bound: std::time::Duration) -> Load {
        Load::oversubscribed(bound, 2)
    }

    /// [`start`](Self::start) with `per_core` busy threads per core.
    pub fn oversubscribed(bound: std::time::Duration, per_core: usize) -> Load {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let deadline = std::time::Instant::now() + bound;
        let threads = (0..per_core * cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x: u64 = 1;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed)
                        && std::time::Instant::now() < deadline
                    {
                        for _ in 0..100_000 {
                            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        }
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Whether `signo` is still pending for process `pid` (sent, its handler not
/// yet run): the kernel keeps one pending instance of a standard signal, so a
/// second one sent before the first is delivered is lost.
pub fn signal_pending(pid: i32, signo: i32) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let bit = 1u64 << (signo - 1);
    status
        .lines()
        .filter_map(|l| {
            l.strip_prefix("SigPnd:")
                .or_else(|| l.strip_prefix("ShdPnd:"))
        })
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .any(|mask| mask & bit != 0)
}

/// Sends `signal` to `pid` and waits (bounded) until it has been delivered,
/// so that a signal sent next is a signal of its own.
pub fn send_and_wait_delivered(pid: i32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
    let delivered = wait_for(Duration::from_secs(10), || {
        !signal_pending(pid, signal as i32)
    });
    assert!(delivered, "{signal} was never delivered to {pid}");
}
