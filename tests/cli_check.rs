//! `dhv-conform check` end to end through the binary: exit codes, the libtest-style
//! options, the report files, fixtures, colour and the snapshot gate.
//!
//! Every run gets a scratch TMPDIR, and every run is shown to leave nothing in it (no
//! temp dir, no process). Files a test asks for (reports, snapshots) go to a separate
//! output dir. Exit code 4 (the harness itself failed) is not tested: nothing a test can
//! do from outside breaks the harness without breaking the machine it runs on.

mod util;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::conformance::CATALOGUE;
use dhv_conform::report::{self, Report};

/// Longest any single run may take before the test calls it hung.
const RUN_LIMIT: Duration = Duration::from_secs(120);

use util::{repo, sample};

fn fixture(name: &str) -> String {
    repo()
        .join("fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// What a run printed and how it ended.
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    /// The `--json -` report on stdout; stdout must hold nothing else.
    fn report(&self) -> Report {
        report::from_json(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON report ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    fn ids(&self) -> BTreeSet<String> {
        self.report().checks.into_iter().map(|c| c.id).collect()
    }
}

/// `dhv-conform check ARGS`, with a scratch TMPDIR.
struct Check {
    cmd: Command,
    tmp: util::Scratch,
}

fn check<I, S>(args: I) -> Check
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let tmp = util::Scratch::new();
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.arg("check")
        .args(args)
        .env("TMPDIR", tmp.path())
        .env_remove("NO_COLOR")
        .env_remove("CI")
        .timeout(RUN_LIMIT);
    Check { cmd, tmp }
}

impl Check {
    fn env(mut self, key: &str, value: &str) -> Check {
        self.cmd.env(key, value);
        self
    }

    /// Runs it, and proves the run left no temp file and no process behind.
    fn run(mut self) -> Out {
        let out = self.cmd.output().unwrap();
        assert_left_nothing(&self.tmp);
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn assert_left_nothing(tmp: &util::Scratch) {
    let left: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temp files left behind: {left:?}");
    let procs = util::processes_with_env_containing(&tmp.path().to_string_lossy());
    assert!(procs.is_empty(), "processes left behind: {procs:?}");
}

/// Waits for `child` at most [`RUN_LIMIT`], killing it when it takes longer.
fn wait_bounded(mut child: Child) -> ExitStatus {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(RUN_LIMIT) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) has no memory effects; the pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = rx.recv();
            panic!("dhv-conform did not finish within {RUN_LIMIT:?}");
        }
    }
}

/// The find-or-fail helper for a check in a report.
fn find<'a>(report: &'a Report, id: &str) -> &'a report::CheckResult {
    report
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no {id} in the report"))
}

// ---- exit codes ------------------------------------------------------------------

#[test]
fn reference_is_conformant_and_exits_0() {
    let out = check([sample("reference").as_str(), "-q"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.ends_with("verdict: conformant\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_failed_must_exits_1() {
    let out = check([sample("fails-on-missing-dir").as_str(), "-q"]).run();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stdout.ends_with("verdict: NON-CONFORMANT\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_failed_should_exits_1_only_under_strict() {
    let plugin = sample("non-semver-version");
    let lenient = check([plugin.as_str(), "fingerprint.", "-q"]).run();
    assert_eq!(lenient.code, Some(0), "{}", lenient.stderr);
    assert!(lenient.stdout.contains("warnings: 1"), "{}", lenient.stdout);
    let strict = check([plugin.as_str(), "fingerprint.", "-q", "--strict"]).run();
    assert_eq!(strict.code, Some(1), "{}", strict.stderr);
    assert!(
        strict.stdout.ends_with("verdict: NON-CONFORMANT\n"),
        "{}",
        strict.stdout
    );
}

/// Usage errors exit 2 before any check runs (the helper proves no temp dir was made).
#[test]
fn usage_errors_exit_2() {
    let reference = sample("reference");
    let dir = repo().join("sample-plugins").to_string_lossy().into_owned();
    let missing = repo().join("no-such-plugin").to_string_lossy().into_owned();
    let cases: &[(&[&str], &str)] = &[
        (&[&reference, "--bogus"], "unexpected argument '--bogus'"),
        (&[&missing], "no-such-plugin: No such file or directory"),
        (&[&dir], "is a directory, not an executable"),
        (
            &[&reference, "--timeout-scale", "0"],
            "--timeout-scale must be a number greater than 0 and at most 100, not 0",
        ),
        (
            &[&reference, "--timeout-scale", "NaN"],
            "--timeout-scale must be a number greater than 0 and at most 100, not NaN",
        ),
        (
            &[&reference, "--timeout-scale", "1e300"],
            "--timeout-scale must be a number greater than 0 and at most 100, not 1e300",
        ),
        (
            &[&reference, "--timeout-scale", "inf"],
            "at most 100, not inf",
        ),
        (&[&reference, "--slow-after", "0"], "--slow-after must be"),
        (&[&reference, "--bless"], "--snapshot <FILE>"),
        (
            &[&reference, "--color", "sometimes"],
            "--color must be auto, always or never",
        ),
        (
            &[&reference, "--format", "xml"],
            "--format must be pretty, terse or json",
        ),
        (
            &[&reference, "--test-threads", "0"],
            "--test-threads must be at least 1",
        ),
    ];
    for (args, says) in cases {
        let out = check(*args).run();
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
}

// ---- fixtures --------------------------------------------------------------------

/// Every malformed fixture exits 2 with one line that names the file and, for syntax
/// errors, the line where the parser gave up.
#[test]
fn bad_fixtures_exit_2_with_one_line_naming_the_file() {
    let cases: &[(&str, &str)] = &[
        ("bad/truncated.json", "invalid JSON at line 6 column 0"),
        ("bad/syntax-error.hcl", "invalid HCL at line 6 column 15"),
        (
            "bad/csi-type.hcl",
            "type: expected \"host\" (a dynamic host volume), got \"csi\"",
        ),
        (
            "bad/number-parameter.json",
            "parameters.replicas: parameter values must be strings",
        ),
        (
            "bad/number-parameter.hcl",
            "parameters.replicas: parameter values must be strings",
        ),
        ("bad/does-not-exist.json", "cannot read fixture"),
    ];
    // Files only: bad/hostile/ has its own test (tests/hostile_fixtures.rs).
    let on_disk: BTreeSet<String> = fs::read_dir(repo().join("fixtures/bad"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| format!("bad/{}", e.file_name().to_string_lossy()))
        .collect();
    let tested: BTreeSet<String> = cases.iter().map(|(f, _)| f.to_string()).collect();
    let untested: Vec<_> = on_disk.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "bad fixtures without a case: {untested:?}"
    );

    for (name, says) in cases {
        let path = fixture(name);
        let out = check([sample("reference").as_str(), "--fixture", path.as_str()]).run();
        assert_eq!(out.code, Some(2), "{name}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {}", out.stderr);
        let line = out.stderr.trim_end();
        assert!(line.starts_with("dhv-conform: "), "{name}: {line}");
        assert!(
            line.contains(&path),
            "{name}: does not name the file: {line}"
        );
        assert!(line.contains(says), "{name}: {line}");
        assert!(out.stdout.is_empty(), "{name}: {}", out.stdout);
    }
}

/// `fixtures/default.json` spells out the defaults: loading it gives exactly the
/// request a run without a fixture starts from.
#[test]
fn default_fixture_spells_out_the_defaults() {
    use dhv_conform::conformance::{RequestTemplate, fixture};
    let loaded = fixture::load(Path::new(&fixture("default.json"))).unwrap();
    assert_eq!(loaded.template, RequestTemplate::default());
}

/// The environment of the create calls behind a check.
fn create_env(report: &Report, id: &str) -> Vec<String> {
    find(report, id)
        .invocations
        .iter()
        .find(|i| i.operation == "create")
        .unwrap_or_else(|| panic!("{id} made no create call"))
        .env
        .clone()
}

/// A Nomad volume spec in HCL passes with the reference plugin, and what it sets
/// reaches the plugin.
#[test]
fn hcl_volume_spec_reaches_the_plugin() {
    let spec = fixture("database.hcl");
    let out = check([
        sample("reference").as_str(),
        "--fixture",
        spec.as_str(),
        "--json",
        "-",
        "-q",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    assert_eq!(report.options.fixture.as_deref(), Some(spec.as_str()));
    // create.succeeds is judged on a shared probe whose calls the report does not carry;
    // create.idempotent creates from the same request with calls of its own.
    let env = create_env(&report, "create.idempotent");
    // Every volume of a run has a name of its own, derived from the spec's:
    // `database`, `database-1`, …
    let name = env
        .iter()
        .find_map(|e| e.strip_prefix("DHV_VOLUME_NAME="))
        .unwrap();
    let suffix = name.strip_prefix("database").unwrap_or("?");
    assert!(
        suffix.is_empty()
            || suffix
                .strip_prefix('-')
                .is_some_and(|n| n.parse::<u32>().is_ok()),
        "{name}"
    );
    for var in [
        "DHV_NAMESPACE=prod",
        "DHV_NODE_POOL=default",
        "DHV_CAPACITY_MIN_BYTES=10737418240",
        "DHV_CAPACITY_MAX_BYTES=21474836480",
    ] {
        assert!(env.iter().any(|e| e == var), "{var} not in {env:#?}");
    }
    let params = env
        .iter()
        .find_map(|e| e.strip_prefix("DHV_PARAMETERS="))
        .unwrap();
    let params: serde_json::Value = serde_json::from_str(params).unwrap();
    assert_eq!(
        params,
        serde_json::json!({"mode": "0700", "owner": "postgres", "tier": "ssd"})
    );
}

/// Parameter values full of shell and markup syntax reach the plugin byte for byte, and
/// nothing runs from them.
#[test]
fn hostile_parameters_reach_the_plugin_verbatim() {
    let path = fixture("hostile-parameters.json");
    let cwd = util::Scratch::new();
    let mut run = check([
        sample("reference").as_str(),
        "--fixture",
        path.as_str(),
        "--json",
        "-",
        "-q",
    ]);
    run.cmd.current_dir(cwd.path());
    let out = run.run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    let env = create_env(&report, "create.idempotent");
    let sent: serde_json::Value = serde_json::from_str(
        env.iter()
            .find_map(|e| e.strip_prefix("DHV_PARAMETERS="))
            .unwrap(),
    )
    .unwrap();
    let fixture: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(sent, fixture["parameters"]);
    let ran: Vec<_> = fs::read_dir(cwd.path()).unwrap().flatten().collect();
    assert!(ran.is_empty(), "something ran from the parameters: {ran:?}");
}

// ---- selecting checks -------------------------------------------------------------

/// `--exact ID` runs that check alone. (The shared create probe runs too, but only the
/// selected check is reported.)
#[test]
fn exact_selects_one_check() {
    let out = check([
        sample("reference").as_str(),
        "--exact",
        "create.idempotent",
        "--json",
        "-",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.ids(), BTreeSet::from(["create.idempotent".to_owned()]));
    assert!(out.report().options.filtered);
    assert!(out.stderr.contains("running 1 check"), "{}", out.stderr);
}

#[test]
fn list_prints_the_whole_catalogue() {
    let out = check([sample("reference").as_str(), "--list"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let listed: BTreeSet<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let catalogue: BTreeSet<&str> = CATALOGUE.iter().map(|c| c.id).collect();
    assert_eq!(catalogue.len(), 43);
    assert_eq!(listed, catalogue, "{}", out.stdout);
}

/// FILTER keeps ids containing it; each `--skip` drops ids containing it.
#[test]
fn filter_and_skip_select_by_substring() {
    let out = check([
        sample("reference").as_str(),
        "fingerprint.",
        "--skip",
        "stable",
        "--skip",
        "version",
        "--json",
        "-",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let want: BTreeSet<String> = CATALOGUE
        .iter()
        .map(|c| c.id)
        .filter(|id| id.contains("fingerprint.") && !id.contains("stable"))
        .filter(|id| !id.contains("version"))
        .map(str::to_owned)
        .collect();
    assert_eq!(want.len(), 3, "{want:?}");
    assert_eq!(out.ids(), want);
}

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
    assert!(out.stderr.contains("running 43 checks"), "{}", out.stderr);
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
    let status = wait_bounded(child);
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
    // Output dirs must exist: a typo in one fails before the run (tests/outputs.rs).
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
    // nothing is skipped for the reference plugin (they used to skip).
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
    let status = wait_bounded(child);
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

// ---- the snapshot gate -----------------------------------------------------------

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
    assert!(
        out.stderr.contains("\n+create.idempotent must pass: "),
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

/// `--bless` writes the snapshot by rename (never in place), a second run compares
/// equal (two runs normalise byte for byte alike), and a changed snapshot fails with a
/// unified diff.
#[test]
fn bless_then_compare_then_differ() {
    let out_dir = util::Scratch::new();
    let snap = out_dir.path().join("reference.snap");
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
        blessed.stderr.contains("snapshot written to"),
        "{}",
        blessed.stderr
    );
    assert_ne!(
        fs::metadata(&snap).unwrap().ino(),
        before,
        "written in place"
    );
    let entries: Vec<_> = fs::read_dir(out_dir.path()).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1, "a temp file was left: {entries:?}");
    let text = fs::read_to_string(&snap).unwrap();
    assert!(
        text.starts_with("schema: dhv-conform/report/v1\n"),
        "{text}"
    );
    let check_lines = text.lines().filter(|l| {
        CATALOGUE
            .iter()
            .any(|c| l.starts_with(&format!("{} {} ", c.id, c.level)))
    });
    assert_eq!(check_lines.count(), CATALOGUE.len(), "{text}");
    // Nothing of the machine or the run: the one normaliser took it all out.
    for needle in [
        scratch.as_str(),
        "/dhv-conform-",
        env!("CARGO_MANIFEST_DIR"),
        " ms",
    ] {
        assert!(!text.contains(needle), "{needle:?} in:\n{text}");
    }
    for placeholder in ["[TMP]/", "[UUID]", "[DURATION]"] {
        assert!(text.contains(placeholder), "no {placeholder} in:\n{text}");
    }

    let (again, _) = gate(false);
    assert_eq!(again.code, Some(0), "two runs differ:\n{}", again.stderr);

    let line = "create.idempotent must pass: same path and bytes; data kept";
    assert!(text.contains(line), "{text}");
    fs::write(
        &snap,
        text.replace(line, "create.idempotent must fail: tampered"),
    )
    .unwrap();
    let (differs, _) = gate(false);
    assert_eq!(differs.code, Some(3), "{}", differs.stderr);
    let diff = &differs.stderr;
    assert!(diff.contains("the results differ from snapshot"), "{diff}");
    assert!(
        diff.contains(&format!(
            "--- {}\n+++ {} (this run)\n",
            snap.display(),
            snap.display()
        )),
        "{diff}"
    );
    assert!(
        diff.contains(&format!(
            "\n-create.idempotent must fail: tampered\n+{line}\n"
        )),
        "{diff}"
    );
}
