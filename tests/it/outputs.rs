//! Report paths are written, never blindly replaced: a device or FIFO is
//! written in place, a symlink's target is written and the link kept, only
//! regular files are replaced (atomically); and a path that cannot be
//! written fails before the run, with exit 2.

use crate::util;

use std::fs;
use std::os::unix::fs::FileTypeExt as _;
use std::time::{Duration, Instant};

use assert_cmd::Command;

use crate::util::sample;

/// `check mkdir create.succeeds` (quick) with `args`, in a scratch TMPDIR.
fn check(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["check", "mkdir", "create.succeeds", "-q"])
        .args(args)
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
    out
}

/// A character device given as `--junit` (a private copy of /dev/null, so a
/// regression cannot break the machine's own) stays a device.
#[test]
fn a_device_target_stays_a_device() {
    if !nix::unistd::Uid::effective().is_root() {
        util::skip("a_device_target_stays_a_device", "mknod needs root");
        return;
    }
    let dir = util::Scratch::new();
    let null = dir.path().join("null");
    let dev = nix::sys::stat::makedev(1, 3);
    nix::sys::stat::mknod(
        &null,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        dev,
    )
    .unwrap();
    let out = check(&["--junit".as_ref(), null.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = fs::symlink_metadata(&null).unwrap();
    assert!(meta.file_type().is_char_device(), "replaced: {meta:?}");
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "nothing beside it: {names:?}");
}

/// A FIFO gets the report through it, with a reader on the other end.
#[test]
fn a_fifo_target_is_written_through() {
    let dir = util::Scratch::new();
    let fifo = dir.path().join("junit.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let reader = {
        let fifo = fifo.clone();
        // Opening for reading blocks until the writer comes: a thread waits.
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    let out = check(&["--junit".as_ref(), fifo.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let xml = reader.join().unwrap();
    assert!(xml.contains("<testsuites"), "{xml}");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

/// A symlink survives; its target gets the report.
#[test]
fn a_symlink_target_is_written_and_the_link_kept() {
    let dir = util::Scratch::new();
    fs::create_dir(dir.path().join("real")).unwrap();
    let target = dir.path().join("real/report.md");
    fs::write(&target, "old").unwrap();
    let link = dir.path().join("summary.md");
    std::os::unix::fs::symlink("real/report.md", &link).unwrap();
    let out = check(&["--markdown".as_ref(), link.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let md = fs::read_to_string(&target).unwrap();
    assert!(md.contains("**conformant**"), "{md}");
}

/// `--json /dev/stdout` goes to our stdout, wherever that is. The path used
/// is a link of the test's own that is made exactly as `/dev/stdout` is (to
/// `/proc/self/fd/1`): a regressed writer then replaces that link, never the
/// machine's `/dev/stdout`.
#[test]
fn dev_stdout_is_our_stdout() {
    let dir = util::Scratch::new();
    let stdout = dir.path().join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &stdout).unwrap();
    let out = check(&["--json".as_ref(), stdout.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"schema\": \"dhv-conform/report/v1\""),
        "{text}"
    );
    assert!(
        fs::symlink_metadata(&stdout)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link to our stdout was replaced"
    );
}

/// A missing parent dir (or any unwritable output) fails before the run:
/// exit 2 within seconds although the plugin hangs for minutes.
#[test]
fn an_output_in_a_missing_dir_fails_before_the_run() {
    let dir = util::Scratch::new();
    for flag in ["--json", "--junit", "--markdown", "--html"] {
        let path = dir.path().join("no-such-dir/report");
        let tmp = util::Scratch::new();
        let started = Instant::now();
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .args(["check", &sample("hanging-create"), "-q", flag])
            .arg(&path)
            .env("TMPDIR", tmp.path())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{flag}: took {:?}",
            started.elapsed()
        );
        assert!(stderr.contains("no-such-dir"), "{flag}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{flag}: one line: {stderr}");
        assert!(!path.parent().unwrap().exists());
    }
}

/// A signal that comes once the checks are over, while the reports are
/// written, still ends the run as every interrupted run ends (128 + the
/// signal), and every report is whole. The JSON report goes to a FIFO whose
/// small pipe the test filled beforehand, so the harness is held inside that
/// write when the signal is sent; the JUnit and Markdown files come after it.
#[test]
fn a_signal_while_the_reports_are_written_ends_in_128_plus_it() {
    use nix::sys::signal::{Signal, kill};

    for (signal, code) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let dir = util::Scratch::new();
        let tmp = util::Scratch::new();
        let json = dir.path().join("report.json.fifo");
        let junit = dir.path().join("junit.xml");
        let markdown = dir.path().join("summary.md");
        let full = FullFifo::new(&json);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
            .args(["check", "mkdir", "create.succeeds", "-q", "--json"])
            .arg(&json)
            .arg("--junit")
            .arg(&junit)
            .arg("--markdown")
            .arg(&markdown)
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Once the harness has the FIFO open it is inside that report's write.
        let pid = child.id();
        let writing = util::wait_for(Duration::from_secs(120), || {
            holds_open(pid, &json) || child.try_wait().unwrap().is_some()
        });
        kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
        let report = full.drain();
        let mut stderr_pipe = child.stderr.take().unwrap();
        let status = util::wait_bounded(child, Duration::from_secs(120));
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut stderr_pipe, &mut stderr).unwrap();
        assert!(
            writing,
            "{signal}: the harness never opened the JSON report: {stderr}"
        );

        assert_eq!(status.code(), Some(code), "{signal}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {signal}")),
            "{signal}: {stderr}"
        );
        serde_json::from_str::<serde_json::Value>(&report)
            .unwrap_or_else(|e| panic!("{signal}: the JSON report is not whole: {e}"));
        let xml = fs::read_to_string(&junit).unwrap();
        assert!(xml.trim_end().ends_with("</testsuites>"), "{signal}: {xml}");
        let md = fs::read_to_string(&markdown).unwrap();
        assert!(md.contains("**conformant**"), "{signal}: {md}");
        let beside: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(beside.len(), 3, "{signal}: no temp file left: {beside:?}");
        let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "{signal}: temp files left: {left:?}");
    }
}

/// A FIFO whose pipe is full before anyone writes to it: the test holds it
/// open for reading and writing and fills it with spaces (which JSON allows
/// before a value), so a writer blocks until [`drain`](Self::drain).
struct FullFifo {
    both: fs::File,
    path: std::path::PathBuf,
}

impl FullFifo {
    fn new(path: &std::path::Path) -> FullFifo {
        use std::os::unix::fs::OpenOptionsExt as _;
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Read and write at once: Linux opens a FIFO so without waiting.
        let mut both = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .unwrap();
        nix::fcntl::fcntl(&both, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
        let spaces = [b' '; 4096];
        loop {
            match std::io::Write::write(&mut both, &spaces) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling the FIFO: {e}"),
            }
        }
        FullFifo {
            both,
            path: path.to_path_buf(),
        }
    }

    /// Everything written to the FIFO (the spaces first), to its end: the
    /// test's own writing end is closed, so the end comes when the writer's is.
    fn drain(self) -> String {
        // Writers are there (the harness, and us until the drop), so this
        // open does not wait.
        let mut reader = fs::File::open(&self.path).unwrap();
        drop(self.both);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
        text
    }
}

/// Whether process `pid` has `path` open for writing (the harness holds
/// every output from the start, but by an `O_PATH` descriptor, not for writing).
fn holds_open(pid: u32, path: &std::path::Path) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| {
            fs::read_link(fd.path()).is_ok_and(|p| p == path) && {
                let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
                fs::read_to_string(info).is_ok_and(|text| {
                    text.lines()
                        .find_map(|l| l.strip_prefix("flags:"))
                        .and_then(|f| i64::from_str_radix(f.trim(), 8).ok())
                        .is_some_and(|flags| flags & 3 == 1)
                })
            }
        })
}

/// Two reports aimed at one file would keep only the last: refused before
/// the run with one line (exit 2), and so is a `--bless` snapshot whose dir
/// is missing (it is not made).
#[test]
fn one_file_for_two_reports_and_a_snapshot_in_a_missing_dir_are_refused() {
    let dir = util::Scratch::new();
    let same = dir.path().join("report");
    let missing = dir.path().join("no-such-dir/s.snap");
    let cases: [(Vec<&std::ffi::OsStr>, &str); 3] = [
        (
            vec![
                "--json".as_ref(),
                same.as_os_str(),
                "--junit".as_ref(),
                same.as_os_str(),
            ],
            "--json and --junit name the same file",
        ),
        (
            vec![
                "--markdown".as_ref(),
                same.as_os_str(),
                "--snapshot".as_ref(),
                same.as_os_str(),
                "--bless".as_ref(),
            ],
            "--markdown and --snapshot name the same file",
        ),
        (
            vec![
                "--snapshot".as_ref(),
                missing.as_os_str(),
                "--bless".as_ref(),
            ],
            "no-such-dir",
        ),
    ];
    for (args, want) in cases {
        let tmp = util::Scratch::new();
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .args(["check", &sample("hanging-create"), "-q"])
            .args(&args)
            .env("TMPDIR", tmp.path())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(!same.exists() && !missing.parent().unwrap().exists());
    }
}

/// An output that is one of the run's inputs (the plugin, by its path, a
/// link or a hard link; its config; the fixture; the snapshot being
/// compared, even one not made yet) is refused before anything runs: exit 2,
/// one line, the input unchanged.
#[test]
fn an_output_that_is_an_input_is_refused_before_the_run() {
    let dir = util::Scratch::new();
    let body = fs::read_to_string(sample("hanging-create")).unwrap();
    let plugin = dir.plugin("plugin", &body);
    let config = dir.path().join("dhv-conform.toml");
    fs::write(&config, "").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink("plugin", &link).unwrap();
    let hard = dir.path().join("hard");
    fs::hard_link(&plugin, &hard).unwrap();
    let fixture = dir.path().join("request.json");
    fs::write(&fixture, r#"{"name": "x"}"#).unwrap();
    let snap = dir.path().join("not-yet.snap");
    let p = plugin.as_os_str();
    let cases: Vec<(Vec<&std::ffi::OsStr>, &str)> = vec![
        (vec!["--json".as_ref(), p], "the plugin"),
        (vec!["--junit".as_ref(), link.as_os_str()], "the plugin"),
        (vec!["--markdown".as_ref(), hard.as_os_str()], "the plugin"),
        (
            vec!["--snapshot".as_ref(), p, "--bless".as_ref()],
            "the plugin",
        ),
        (vec!["--html".as_ref(), config.as_os_str()], "its config"),
        (
            vec![
                "--fixture".as_ref(),
                fixture.as_os_str(),
                "--json".as_ref(),
                fixture.as_os_str(),
            ],
            "the fixture",
        ),
        (
            vec![
                "--snapshot".as_ref(),
                snap.as_os_str(),
                "--json".as_ref(),
                snap.as_os_str(),
            ],
            "the snapshot being compared",
        ),
    ];
    for (args, want) in cases {
        let tmp = util::Scratch::new();
        let started = Instant::now();
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .arg("check")
            .arg(&plugin)
            .arg("-q")
            .args(&args)
            .env("TMPDIR", tmp.path())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(stderr.contains("an input of the run"), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?}");
        assert_eq!(fs::read_to_string(&plugin).unwrap(), body, "{args:?}");
        assert_eq!(fs::read_to_string(&config).unwrap(), "", "{args:?}");
        assert!(fs::read_to_string(&fixture).unwrap().contains("name"));
        assert!(!snap.exists(), "{args:?}");
        let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "{args:?}: temp files left: {left:?}");
    }
}

/// A plugin that, on its first create, turns the `--json` target into a
/// symlink to an outside file and swaps the `--junit` file's directory for
/// a symlink to an outside directory redirects neither write: the outputs
/// were opened before the run and are written through what was opened.
#[test]
fn outputs_swapped_for_links_mid_run_are_not_redirected() {
    let dir = util::Scratch::new();
    let victim = dir.path().join("victim");
    fs::write(&victim, "outside file").unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let reports = dir.path().join("reports");
    fs::create_dir(&reports).unwrap();
    let json = dir.path().join("report.json");
    let junit = reports.join("junit.xml");
    let d = dir.path().display();
    let plugin = dir.plugin(
        "swapper",
        &format!(
            "#!/bin/sh\n\
             if [ \"$1\" = create ] && /bin/mkdir {d}/swapped 2>/dev/null; then\n\
             /bin/ln -s {d}/victim {d}/report.json\n\
             /bin/mv {d}/reports {d}/moved && /bin/ln -s {d}/outside {d}/reports\n\
             fi\n\
             exec {} \"$@\"\n",
            sample("reference")
        ),
    );
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(&plugin)
        .args(["create.succeeds", "-q", "--json"])
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        dir.path().join("swapped").exists(),
        "the plugin never swapped: {stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "outside file");
    assert!(
        fs::symlink_metadata(&json).unwrap().is_file(),
        "the link was followed"
    );
    assert!(
        fs::read_to_string(&json)
            .unwrap()
            .contains("dhv-conform/report/v1")
    );
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "written through the swapped dir"
    );
    let xml = fs::read_to_string(dir.path().join("moved/junit.xml")).unwrap();
    assert!(xml.contains("<testsuites"), "{xml}");
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
}
