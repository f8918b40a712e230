//! The snapshot gate end to end through the binary: `check --snapshot` (missing,
//! matching, differing; the older form), `--bless` and its pending file, and
//! `dhv-conform snapshot review|accept|reject`. Every run is shown to leave nothing
//! in its scratch TMPDIR; snapshots go to a separate output dir.

use crate::util;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt as _;

use dhv_conform::conformance::CATALOGUE;
use dhv_conform::report;

use crate::util::check::{RUN_LIMIT, check};
use crate::util::sample;

/// A snapshot that does not exist yet: exit 3 with the would-be content as a diff, and
/// the file is not written. Under CI the message says that this is an error.
#[test]
fn missing_snapshot_exits_3_and_writes_nothing() {
    let out_dir = util::Scratch::new();
    let snap = out_dir.path().join("snaps/reference.snap");
    let reference = sample("reference");
    let args = [
        OsStr::new(&reference),
        OsStr::new("--exact"),
        OsStr::new("create.idempotent"),
        OsStr::new("-q"),
        OsStr::new("--snapshot"),
        snap.as_os_str(),
    ];
    let out = check(args).run();
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(!snap.exists());
    assert!(!snap.parent().unwrap().exists());
    assert!(
        out.stderr
            .contains("does not exist; run again with --bless"),
        "{}",
        out.stderr
    );
    // Only what did not pass is listed: a check that passed is counted.
    assert!(
        out.stderr
            .contains("\n+passed: 1 of 1 checks; the others are listed below\n"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("create.idempotent must"),
        "{}",
        out.stderr
    );

    let out = check(args).env("CI", "true").run();
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(!snap.exists());
    assert!(
        out.stderr
            .contains("under CI a missing snapshot is an error"),
        "{}",
        out.stderr
    );
}

/// `dhv-conform snapshot ARGS`.
fn snapshot_cmd(args: &[&OsStr]) -> util::check::Out {
    let out = assert_cmd::Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("snapshot")
        .args(args)
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    util::check::Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `--bless` writes the run's snapshot beside the stored one (`FILE.new`),
/// leaving it as it is; `snapshot accept` moves it over by rename (never in
/// place); a second run compares equal (two runs normalise byte for byte
/// alike), and a changed snapshot fails with what changed and a unified diff.
#[test]
fn bless_then_accept_then_compare_then_differ() {
    let out_dir = util::Scratch::new();
    let snap = out_dir.path().join("reference.snap");
    let pending = out_dir.path().join("reference.snap.new");
    fs::write(&snap, "an older snapshot\n").unwrap();
    let before = fs::metadata(&snap).unwrap().ino();
    let reference = sample("reference");
    let gate = |bless: bool| {
        let mut args = vec![
            OsStr::new(&reference),
            OsStr::new("-q"),
            OsStr::new("--snapshot"),
            snap.as_os_str(),
        ];
        if bless {
            args.push(OsStr::new("--bless"));
        }
        let run = check(args);
        let scratch = run.tmp.path().to_string_lossy().into_owned();
        (run.run(), scratch)
    };

    let (blessed, scratch) = gate(true);
    assert_eq!(blessed.code, Some(0), "{}", blessed.stderr);
    assert!(
        blessed.stderr.contains(&format!(
            "pending snapshot written to {}: review it with `dhv-conform snapshot review {}`",
            pending.display(),
            snap.display()
        )),
        "{}",
        blessed.stderr
    );
    assert_eq!(fs::read_to_string(&snap).unwrap(), "an older snapshot\n");
    let text = fs::read_to_string(&pending).unwrap();
    assert_normalised(&text, &scratch);

    let accepted = snapshot_cmd(&["accept".as_ref(), snap.as_os_str()]);
    assert_eq!(accepted.code, Some(0), "{}", accepted.stderr);
    assert_eq!(fs::read_to_string(&snap).unwrap(), text);
    assert_ne!(
        fs::metadata(&snap).unwrap().ino(),
        before,
        "written in place"
    );
    let entries: Vec<_> = fs::read_dir(out_dir.path()).unwrap().flatten().collect();
    assert_eq!(
        entries.len(),
        1,
        "a temp or pending file was left: {entries:?}"
    );

    let (again, _) = gate(false);
    assert_eq!(again.code, Some(0), "two runs differ:\n{}", again.stderr);

    let line = "create.idempotent must fail: tampered\n";
    let tampered = text.replacen("\n\n", &format!("\n\n{line}"), 1);
    fs::write(&snap, &tampered).unwrap();
    let (differs, _) = gate(false);
    assert_eq!(differs.code, Some(3), "{}", differs.stderr);
    let diff = &differs.stderr;
    assert!(diff.contains("the results differ from snapshot"), "{diff}");
    assert!(
        diff.contains("\n  create.idempotent: fail before, passed or not run now\n"),
        "{diff}"
    );
    assert!(
        diff.contains(&format!(
            "--- {}\n+++ {} (this run)\n",
            snap.display(),
            snap.display()
        )),
        "{diff}"
    );
    assert!(diff.contains(&format!("\n-{line}")), "{diff}");
}

/// The ways out of a pending snapshot, on a quick run: `reject` removes it,
/// `--accept` writes the snapshot at once, a `--bless` that matches leaves the
/// snapshot as it is and removes a pending file it contradicts, and `review`
/// with nothing to answer leaves it pending (exit 3). Paths that are nothing
/// are exit 2, with nothing done.
#[test]
fn pending_snapshots_are_rejected_accepted_or_left() {
    let out_dir = util::Scratch::new();
    let snap = out_dir.path().join("quick.snap");
    let pending = out_dir.path().join("quick.snap.new");
    let reference = sample("reference");
    let bless = |extra: &[&str]| {
        let mut args = vec![
            reference.as_str(),
            "--exact",
            "create.idempotent",
            "-q",
            "--snapshot",
            snap.to_str().unwrap(),
            "--bless",
        ];
        args.extend(extra);
        check(args).run()
    };

    let out = bless(&[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(pending.exists() && !snap.exists(), "{}", out.stderr);
    let out = snapshot_cmd(&["reject".as_ref(), out_dir.path().as_os_str()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!pending.exists() && !snap.exists());

    let out = bless(&["--accept"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(snap.exists() && !pending.exists(), "{}", out.stderr);
    let blessed = fs::read_to_string(&snap).unwrap();

    fs::write(&pending, "a stale proposal\n").unwrap();
    let out = bless(&[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("holds this run's results: left as it is"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("out of date"), "{}", out.stderr);
    assert!(!pending.exists());
    assert_eq!(fs::read_to_string(&snap).unwrap(), blessed);

    fs::write(
        &snap,
        blessed
            .replace("passed: 1 of 1", "passed: 0 of 1")
            .replacen("\n\n", "\n\ncreate.idempotent must fail: no\n", 1),
    )
    .unwrap();
    let out = bless(&[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(pending.exists());
    let out = snapshot_cmd(&["review".as_ref(), snap.as_os_str()]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(
        out.stdout.contains("create.idempotent: fail before"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("0 accepted, 0 rejected, 1 left pending"),
        "{}",
        out.stderr
    );
    assert!(pending.exists());

    let nowhere = out_dir.path().join("nowhere.snap");
    for cmd in ["review", "accept", "reject"] {
        let out = snapshot_cmd(&[cmd.as_ref(), snap.as_os_str(), nowhere.as_os_str()]);
        assert_eq!(out.code, Some(2), "{cmd}: {}", out.stderr);
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "{cmd}: one line: {}",
            out.stderr
        );
        assert!(out.stderr.contains("no snapshot"), "{}", out.stderr);
        assert!(pending.exists(), "{cmd} did something before refusing");
    }
    let out = snapshot_cmd(&["accept".as_ref(), pending.as_os_str()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&snap).unwrap(), blessed);

    // A snapshot that cannot be read is mended by blessing, not refused.
    fs::write(&snap, b"\xff\xfe not text\n").unwrap();
    let out = bless(&[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot read snapshot"),
        "{}",
        out.stderr
    );
    let out = snapshot_cmd(&["review".as_ref(), snap.as_os_str()]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(
        out.stdout.contains("which cannot be read"),
        "{}",
        out.stdout
    );
    let out = snapshot_cmd(&["accept".as_ref(), snap.as_os_str()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&snap).unwrap(), blessed);
}

/// A snapshot in the older form, one line per check, is compared as it was, and
/// says once how to move it to the current form.
#[test]
fn an_older_snapshot_is_compared_as_before() {
    let out_dir = util::Scratch::new();
    let snap = out_dir.path().join("old.snap");
    let reference = sample("reference");
    let args = [
        reference.as_str(),
        "--exact",
        "create.idempotent",
        "-q",
        "--snapshot",
        snap.to_str().unwrap(),
    ];
    let out = check(args.iter().chain(&["--json", "-"])).run();
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let report = out.report();
    let older = report::normalise_older(&report, &report::Redactions::for_report(&report));
    assert!(older.contains("\ncreate.idempotent must pass: "), "{older}");
    fs::write(&snap, &older).unwrap();
    let out = check(args).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    fs::write(&snap, older.replace("must pass: ", "must pass: another ")).unwrap();
    let out = check(args).run();
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let hint: Vec<_> = out
        .stderr
        .lines()
        .filter(|l| l.contains("older form"))
        .collect();
    assert_eq!(hint.len(), 1, "{}", out.stderr);
    assert!(hint[0].contains("--bless rewrites it"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("create.idempotent: pass, another message"),
        "{}",
        out.stderr
    );
}

/// A snapshot counts every check of the catalogue (listed, or among those that
/// passed), and holds nothing of the machine or the run (`scratch` is its
/// TMPDIR): the one normaliser took it all out.
fn assert_normalised(text: &str, scratch: &str) {
    assert!(
        text.starts_with("schema: dhv-conform/report/v1\n"),
        "{text}"
    );
    let listed = text
        .lines()
        .filter(|l| {
            CATALOGUE
                .iter()
                .any(|c| l.starts_with(&format!("{} {} ", c.id, c.level)))
        })
        .count();
    let all = CATALOGUE.len();
    let passed = format!(
        "\npassed: {} of {all} checks; the others are listed below\n\n",
        all - listed
    );
    assert!(text.contains(&passed), "{passed:?} in:\n{text}");
    assert!(!text.contains(" pass: "), "{text}");
    for needle in [scratch, "/dhv-conform-", env!("CARGO_MANIFEST_DIR"), " ms"] {
        assert!(!text.contains(needle), "{needle:?} in:\n{text}");
    }
}
