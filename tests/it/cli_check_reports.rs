//! `dhv-conform check` end to end through the binary, what it writes: the report
//! files and colour (the snapshot gate is in `snapshot_gate.rs`). Every run is shown to leave nothing in its
//! scratch TMPDIR; files a test asks for go to a separate output dir.

use crate::util;

use std::ffi::OsStr;
use std::fs;
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::process::Stdio;

use dhv_conform::conformance::CATALOGUE;
use dhv_conform::report;

use crate::util::check::{RUN_LIMIT, assert_left_nothing, check};
use crate::util::{sample, wait_bounded};

// ---- report forms ----------------------------------------------------------------

/// `--json -`: stdout is the report and nothing else; progress and the summary go to
/// stderr.
#[test]
fn json_to_stdout_is_only_json() {
    let out = check([sample("reference").as_str(), "--json", "-"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    assert_eq!(report.schema, report::SCHEMA);
    assert_eq!(report.checks.len(), CATALOGUE.len());
    let running = format!("running {} checks", CATALOGUE.len());
    assert!(out.stderr.contains(&running), "{}", out.stderr);
    assert!(
        out.stderr.ends_with("verdict: conformant\n"),
        "{}",
        out.stderr
    );
}

/// With `--json -` the progress lines go to stderr without reopening it: a CI log that
/// stderr is appended to keeps what it held before.
#[test]
fn json_to_stdout_appends_to_a_stderr_log() {
    let tmp = util::Scratch::new();
    let out_dir = util::Scratch::new();
    let log = out_dir.path().join("ci.log");
    fs::write(&log, "earlier CI output\n").unwrap();
    let stderr = fs::OpenOptions::new().append(true).open(&log).unwrap();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
        .args([
            "check",
            &sample("reference"),
            "--exact",
            "create.idempotent",
        ])
        .args(["--json", "-"])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let status = wait_bounded(child, RUN_LIMIT);
    assert_left_nothing(&tmp);
    assert_eq!(status.code(), Some(0));
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("earlier CI output\n"), "{text}");
    assert!(text.contains("running 1 check"), "{text}");
    assert!(text.ends_with("verdict: conformant\n"), "{text}");
}

#[test]
fn junit_and_markdown_files_are_written() {
    let out_dir = util::Scratch::new();
    let junit = out_dir.path().join("reports/junit.xml");
    let markdown = out_dir.path().join("summary.md");
    // Output dirs must exist: a typo in one fails before the run (tests/it/outputs.rs).
    fs::create_dir(out_dir.path().join("reports")).unwrap();
    let out = check([
        OsStr::new(&sample("reference")),
        OsStr::new("-q"),
        OsStr::new("--junit"),
        junit.as_os_str(),
        OsStr::new("--markdown"),
        markdown.as_os_str(),
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);

    let xml = fs::read_to_string(&junit).unwrap();
    let parsed = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let cases = &parsed.test_suites[0].test_cases;
    assert_eq!(cases.len(), CATALOGUE.len());
    assert_eq!(parsed.test_suites[0].failures, 0);
    let skipped: Vec<_> = cases
        .iter()
        .filter(|c| matches!(c.status, quick_junit::TestCaseStatus::Skipped { .. }))
        .collect();
    // The failure.* checks judge a failure the suite provokes on purpose, so
    // nothing is skipped for the reference plugin (they used to skip) but
    // the checks of claims it does not make and of what it does not use
    // (loop devices).
    let skipped: Vec<_> = skipped
        .into_iter()
        .filter(|c| match &c.status {
            quick_junit::TestCaseStatus::Skipped { message, .. } => {
                !message.as_ref().is_some_and(|m| {
                    m.as_str().starts_with("not claimed")
                        || m.as_str().starts_with("not applicable")
                })
            }
            _ => true,
        })
        .collect();
    assert!(
        skipped.is_empty(),
        "the reference run skips nothing: {skipped:?}"
    );

    let md = fs::read_to_string(&markdown).unwrap();
    assert!(md.starts_with("**dhv-conform**: `"), "{md}");
    assert!(md.contains("is **conformant**"), "{md}");
    assert!(md.contains("No check failed or warned."), "{md}");

    // Written by rename: nothing but the two reports in the output dir.
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [out_dir.path().to_owned(), out_dir.path().join("reports")] {
        for e in fs::read_dir(dir).unwrap().flatten() {
            if e.file_type().unwrap().is_file() {
                files.push(e.path());
            }
        }
    }
    files.sort();
    assert_eq!(files, vec![junit, markdown]);
}

// ---- colour ----------------------------------------------------------------------

#[test]
fn color_always_paints_the_summary() {
    let out = check([
        sample("reference").as_str(),
        "--exact",
        "create.idempotent",
        "--color",
        "always",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("\x1b[32mPASS\x1b[0m"),
        "{:?}",
        out.stdout
    );
    assert!(
        out.stdout.contains("verdict: \x1b[32mconformant\x1b[0m"),
        "{:?}",
        out.stdout
    );
}

#[test]
fn color_never_paints_nothing() {
    let out = check([
        sample("reference").as_str(),
        "--exact",
        "create.idempotent",
        "--color",
        "never",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("PASS"), "{}", out.stdout);
    assert!(!out.stdout.contains('\x1b'), "{:?}", out.stdout);
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
}

/// Runs `check` with stdout on a pseudo-terminal (so `--color auto` would paint) and
/// returns what it printed there.
fn on_a_terminal(no_color: bool) -> String {
    // SAFETY: posix_openpt returns a new fd that nothing else owns, so the File may own
    // it; grantpt and unlockpt only act on that fd.
    let master = unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = fs::File::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0, "grantpt");
        assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
        master
    };
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: ptsname_r writes at most `name.len()` bytes, NUL included, into `name`.
    let rc = unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
    assert_eq!(rc, 0, "ptsname_r");
    // SAFETY: on success ptsname_r left a NUL-terminated string in `name`.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let terminal = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&name)
        .unwrap();

    let tmp = util::Scratch::new();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("dhv-conform"));
    cmd.args([
        "check",
        &sample("reference"),
        "--exact",
        "create.idempotent",
    ])
    .env("TMPDIR", tmp.path())
    .env_remove("NO_COLOR")
    .stdin(Stdio::null())
    .stdout(terminal)
    .stderr(Stdio::null());
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let child = cmd.spawn().unwrap();
    // Our copy of the terminal end must close, or reading never sees the end.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        // Linux reports EIO once every process has closed the terminal end.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            text.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    let status = wait_bounded(child, RUN_LIMIT);
    let text = reader.join().unwrap();
    assert_left_nothing(&tmp);
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains("PASS"), "{text:?}");
    text
}

/// `--color auto` paints on a terminal, and NO_COLOR turns that off.
#[test]
fn no_color_turns_off_colour_on_a_terminal() {
    let painted = on_a_terminal(false);
    assert!(painted.contains("\x1b[32mPASS\x1b[0m"), "{painted:?}");
    let plain = on_a_terminal(true);
    assert!(!plain.contains('\x1b'), "{plain:?}");
}
