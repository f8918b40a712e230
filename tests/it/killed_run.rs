//! A run killed outright (SIGKILL: no teardown) leaves its mounts, loop
//! devices and temp dir only until `dhv-conform clean` (or the next run):
//! that unmounts, detaches and removes them and names them; a second clean
//! finds nothing; the temp dir of a run still alive is never touched.

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dhv_conform::conformance::OWNER_FILE;

/// The run dirs (with an owner file) in `tmp`.
fn run_dirs(tmp: &Path) -> Vec<PathBuf> {
    fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(OWNER_FILE).exists())
        .collect()
}

fn loops_of(dir: &Path) -> Vec<String> {
    let out = Command::new("losetup").arg("-a").output().unwrap();
    let needle = dir.to_string_lossy().into_owned();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&needle))
        .filter_map(|l| l.split(':').next().map(str::to_owned))
        .collect()
}

/// Whether loop device `dev` (`/dev/loopN`) is set to detach itself at its
/// last close.
fn autoclear(dev: &str) -> bool {
    let name = dev.trim_start_matches("/dev/");
    std::fs::read_to_string(format!("/sys/block/{name}/loop/autoclear"))
        .is_ok_and(|v| v.trim() == "1")
}

/// A `check` run that ends with the test however the test ends: a failed
/// assertion must not leave it running (SIGTERM first, so that its teardown
/// runs, then SIGKILL if it has not ended in 90 s).
struct Run(Option<Child>);

impl Run {
    /// The child, for a test that ends it itself.
    fn into_inner(mut self) -> Child {
        self.0.take().expect("a run not yet taken")
    }
}

impl std::ops::Deref for Run {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("a run not yet taken")
    }
}

impl std::ops::DerefMut for Run {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("a run not yet taken")
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let ended = util::wait_for(Duration::from_secs(90), || {
            // The child's exit is the event; its status is read below.
            nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG))
                .is_ok_and(|s| s != nix::sys::wait::WaitStatus::StillAlive)
        });
        if !ended {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn check(tmp: &Path, plugin: &str, extra: &[&str]) -> Run {
    Run(Some(
        Command::new(util::bin())
            .args(["check", &util::sample(plugin), "-q"])
            .args(extra)
            .env("TMPDIR", tmp)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ))
}

/// The cgroups named for a run of process `pid` (`dhv-conform-run-<pid>-<start>`),
/// anywhere in the first levels of the cgroup tree.
fn run_cgroups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("dhv-conform-run-{pid}-");
    let mut found = Vec::new();
    let mut dirs = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                found.push(entry.path());
            } else if depth < 4 {
                dirs.push((entry.path(), depth + 1));
            }
        }
    }
    found
}

fn clean(tmp: &Path) -> (Option<i32>, String) {
    clean_with(tmp, &[])
}

fn clean_with(tmp: &Path, extra: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out = assert_cmd::Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("clean")
        .args(extra)
        .env("TMPDIR", tmp)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), stdout)
}

#[test]
fn clean_removes_what_a_killed_run_left_and_never_a_live_runs() {
    const TEST: &str = "clean_removes_what_a_killed_run_left_and_never_a_live_runs";
    if let Some(why) = util::loop_devices_unusable() {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI this must run: {why}"
        );
        println!("SKIPPED {TEST}: {why}");
        return;
    }
    if !util::in_private_mount_ns(TEST) {
        return;
    }
    let tmp = util::Scratch::new();
    let bound = Duration::from_secs(180);
    // A live run first, held in its hanging create for as long as the test.
    let live = check(tmp.path(), "hanging-create", &["--timeout-scale", "100"]);
    assert!(
        util::wait_for(bound, || run_dirs(tmp.path()).len() == 1),
        "no live run dir"
    );
    let live_dir = run_dirs(tmp.path())[0].clone();

    let mut killed = check(tmp.path(), "loop-ext4", &[]);
    let mut dead_dir = None;
    let mounted = util::wait_for(bound, || {
        dead_dir = run_dirs(tmp.path()).into_iter().find(|d| *d != live_dir);
        dead_dir
            .as_ref()
            .is_some_and(|d| !util::mounts_below(d).is_empty() && !loops_of(d).is_empty())
    });
    assert!(mounted, "the loop-ext4 run never mounted a volume");
    let killed_pid = killed.id();
    killed.kill().unwrap();
    killed.wait().unwrap();
    let dead_dir = dead_dir.unwrap();
    let needle = dead_dir.to_string_lossy().into_owned();
    // Its plugin calls run on for a moment: what they make is left too.
    assert!(util::wait_for(bound, || {
        util::processes_with_env_containing(&needle).is_empty()
    }));
    let mounts = util::mounts_below(&dead_dir);
    let loops = loops_of(&dead_dir);
    assert!(
        !mounts.is_empty() && !loops.is_empty(),
        "the kill left nothing to clean"
    );

    let autoclear_before: Vec<String> = loops.iter().filter(|d| autoclear(d)).cloned().collect();
    let clears_itself = |dev: &String| autoclear_before.contains(dev);
    let (code, stdout) = clean(tmp.path());
    println!("clean: {stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("temp dir {} removed", dead_dir.display())),
        "{stdout}"
    );
    // The line names the first few mounts and counts them all.
    assert!(
        stdout.contains(&format!("{} mount(s) left by the plugin", mounts.len()))
            && mounts
                .iter()
                .any(|m| stdout.contains(&m.display().to_string())),
        "{mounts:?}: {stdout}"
    );
    // A device told to go at its last close (autoclear: `mount -o loop`, or a
    // detach while it was still mounted) goes with its unmount, before clean
    // looks for devices to detach: it is gone, as the checks below hold, but
    // clean had none to name.
    for dev in loops.iter().filter(|dev| !clears_itself(dev)) {
        assert!(stdout.contains(dev.as_str()), "{dev} not named: {stdout}");
    }
    assert!(
        !stdout.contains(&live_dir.display().to_string()),
        "{stdout}"
    );
    assert!(util::mounts_below(&dead_dir).is_empty(), "mounts left");
    assert!(loops_of(&dead_dir).is_empty(), "loop devices left");
    assert!(!dead_dir.exists(), "temp dir left");
    let cgroups = run_cgroups_of(killed_pid);
    assert!(
        cgroups.is_empty(),
        "the killed run's cgroup left: {cgroups:?}"
    );
    assert!(
        live_dir.join(OWNER_FILE).exists(),
        "the live run's dir was touched"
    );

    let (code, stdout) = clean(tmp.path());
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.starts_with("no leftovers of killed runs"),
        "{stdout}"
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(live.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = util::wait_bounded(live.into_inner(), bound);
    assert_eq!(status.code(), Some(143));
    assert!(
        fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "the live run left its dir"
    );
}

/// Starts a loop-ext4 run in `work`, waits until it has a volume mounted on
/// a loop device, sets a grabber on its lock, kills the run (SIGKILL) and
/// waits for its plugin calls to end: its dir, with what it left, and the
/// grabber holding its lock.
fn killed_in_work_dir(tmp: &Path, work: &Path) -> (PathBuf, util::LockHolder) {
    let bound = Duration::from_secs(180);
    let mut killed = check(tmp, "loop-ext4", &["--work-dir", work.to_str().unwrap()]);
    let mut dir = None;
    let mounted = util::wait_for(bound, || {
        dir = run_dirs(work).into_iter().next();
        dir.as_ref()
            .is_some_and(|d| !util::mounts_below(d).is_empty() && !loops_of(d).is_empty())
    });
    assert!(mounted, "the loop-ext4 run never mounted a volume");
    let dir = dir.unwrap();
    let mut grabber = util::LockHolder::new(&dir.join(OWNER_FILE));
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(grabber.grabbed(), "the lock was never free to take");
    let needle = dir.to_string_lossy().into_owned();
    assert!(util::wait_for(bound, || {
        util::processes_with_env_containing(&needle).is_empty()
    }));
    assert!(
        !util::mounts_below(&dir).is_empty() && !loops_of(&dir).is_empty(),
        "the kill left nothing to clean"
    );
    (dir, grabber)
}

/// Asserts that `clean`'s or a run's words name `dir` as cleaned, with the
/// grabber killed, and that nothing of it is left.
fn all_gone(words: &str, dir: &Path, grabber: util::LockHolder) {
    assert!(
        words.contains(&format!("temp dir {} removed", dir.display())),
        "{words}"
    );
    assert!(words.contains("holding its lock, killed"), "{words}");
    assert!(
        words.contains(&format!("{} (flock", grabber.id())),
        "the grabber is not named: {words}"
    );
    let status = grabber.ended().expect("the grabber still runs");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(util::mounts_below(dir).is_empty(), "mounts left");
    assert!(loops_of(dir).is_empty(), "loop devices left");
    assert!(!dir.exists(), "temp dir left");
}

#[test]
fn a_killed_runs_leftovers_in_its_work_dir_are_found_though_a_leftover_holds_its_lock() {
    const TEST: &str =
        "a_killed_runs_leftovers_in_its_work_dir_are_found_though_a_leftover_holds_its_lock";
    if let Some(why) = util::loop_devices_unusable() {
        util::skip(TEST, &why);
        return;
    }
    if !util::in_private_mount_ns(TEST) {
        return;
    }
    let tmp = util::Scratch::new();
    let work = util::Scratch::new();
    let elsewhere = util::Scratch::new();

    // `clean --work-dir`, from a temp dir that knows nothing of the run.
    let (dir, grabber) = killed_in_work_dir(tmp.path(), work.path());
    let (code, stdout) = clean_with(
        elsewhere.path(),
        &["--work-dir".as_ref(), work.path().as_os_str()],
    );
    println!("clean --work-dir: {stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    all_gone(&stdout, &dir, grabber);
    let (code, stdout) = clean_with(
        elsewhere.path(),
        &["--work-dir".as_ref(), work.path().as_os_str()],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.starts_with("no leftovers of killed runs"),
        "{stdout}"
    );

    // A plain `clean` from the run's own temp dir: its breadcrumb there
    // leads to the work dir.
    let (dir, grabber) = killed_in_work_dir(tmp.path(), work.path());
    let (code, stdout) = clean(tmp.path());
    println!("clean: {stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    all_gone(&stdout, &dir, grabber);
    assert!(
        fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "a breadcrumb is left in the temp dir"
    );
    assert!(fs::read_dir(work.path()).unwrap().next().is_none());
}
