//! What `check` prints while it runs: progress lines that agree with the table,
//! JSON lines only under `--format json`, SLOW lines naming the operation a
//! hanging plugin is in, deliberate kills not called timeouts, and no panic
//! when stdout or stderr is closed.

use super::*;

/// `dhv-conform check --list | head -1`: the reader goes away, the tool exits quietly.
#[test]
fn a_closed_stdout_is_no_panic() {
    for args in [
        &["check", "--list"][..],
        &["explain", "--all"],
        &["check", "mkdir", "fingerprint."],
        &["check", "mkdir", "fingerprint.", "--json", "-"],
    ] {
        let tmp = util::Scratch::new();
        let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
            .args(args)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then hang up, as `head -c1` does.
        let mut stdout = child.stdout.take().unwrap();
        let mut one = [0u8; 1];
        stdout.read_exact(&mut one).unwrap();
        drop(stdout);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(status.code(), Some(101), "{args:?}: {stderr}");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
}

/// A stderr nobody reads (a closed pipe) drops the message; the exit code is
/// still the one the message would have explained, not a panic's 101.
#[test]
fn a_closed_stderr_is_no_panic() {
    let tmp = util::Scratch::new();
    let missing = tmp.path().join("missing.snap");
    let missing = missing.to_str().unwrap();
    for (args, code) in [
        (&["check", "/no/such/plugin"][..], 2),
        (&["run", "mkdir", "fingerprint", "--id", "X"], 2),
        (
            &[
                "check",
                "mkdir",
                "create.succeeds",
                "-q",
                "--snapshot",
                missing,
            ],
            3,
        ),
    ] {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        drop(read_end);
        let out = StdCommand::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
            .args(args)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::from(write_end))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left {left:?}");
}

/// A warned check's progress line says `warn`, and the summary line counts what the
/// table counts, including the checks the filter left out.
#[test]
fn progress_agrees_with_the_table() {
    let out = dhv(&["check", &sample("non-semver-version"), "fingerprint."]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("test fingerprint.version-semver ... warn\n"),
        "{}",
        out.stdout
    );
    let chosen = CATALOGUE
        .iter()
        .filter(|c| c.id.contains("fingerprint."))
        .count();
    let filtered = CATALOGUE.len() - chosen;
    let summary = format!(
        "test result: ok. {} passed; 0 failed; 1 warning; 0 skipped; 0 info; {filtered} filtered out;",
        chosen - 1
    );
    assert!(out.stdout.contains(&summary), "{summary}\n{}", out.stdout);
    let table = format!(
        "passed: {}, failed: 0, warnings: 1, skipped: 0, info: 0",
        chosen - 1
    );
    assert!(out.stdout.contains(&table), "{}", out.stdout);

    let exact = dhv(&["check", "mkdir", "--exact", "create.idempotent"]);
    let filtered = CATALOGUE.len() - 1;
    assert!(
        exact.stdout.contains(&format!(
            "1 passed; 0 failed; 0 warnings; 0 skipped; 0 info; {filtered} filtered out"
        )),
        "{}",
        exact.stdout
    );
}

/// `--format json`: stdout is JSON lines only; the table goes to stderr.
#[test]
fn format_json_writes_only_json_lines() {
    let out = dhv(&[
        "check",
        &sample("non-semver-version"),
        "--format",
        "json",
        "fingerprint.",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let events: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(events[0]["type"], "suite");
    assert_eq!(events[0]["event"], "started");
    let warned = events
        .iter()
        .find(|e| e["name"] == "fingerprint.version-semver" && e["event"] != "started")
        .unwrap();
    assert_eq!(warned["status"], "warn");
    assert_eq!(warned["event"], "ok");
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["event"].as_str()),
        (Some("suite"), Some("ok"))
    );
    assert_eq!(last["warned"], 1);
    assert!(out.stderr.contains("verdict: conformant"), "{}", out.stderr);
}

/// A check still running after `--slow-after` gets a `SLOW` line naming the plugin
/// operation in flight, repeated each time the threshold passes again.
#[test]
fn a_hanging_plugin_gets_slow_lines_naming_the_operation() {
    // Create's limit is 3 s here (60 s × 0.05): the hang ends in a bounded time.
    let out = dhv(&[
        "check",
        &sample("hanging-create"),
        "--exact",
        "create.succeeds",
        "--slow-after",
        "1",
        "--timeout-scale",
        "0.05",
    ]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let slow: Vec<&str> = out.stdout.lines().filter(|l| l.contains("SLOW")).collect();
    assert!(slow.len() >= 2, "{}", out.stdout);
    assert!(
        slow[0].trim().starts_with("SLOW [> 1s] create.succeeds: "),
        "{}",
        slow[0]
    );
    assert!(
        slow[1].trim().starts_with("SLOW [> 2s] create.succeeds: "),
        "{}",
        slow[1]
    );
    for line in &slow {
        assert!(
            line.contains("create") && line.ends_with("in flight"),
            "{line}"
        );
    }
    let quick = dhv(&["check", "mkdir", "--exact", "create.succeeds"]);
    assert!(!quick.stdout.contains("SLOW"), "{}", quick.stdout);
}

/// Calls the crash checks kill on purpose are labelled so, not "timed out".
#[test]
fn deliberate_kills_are_not_timeouts() {
    let out = dhv(&[
        "check",
        &sample("crash-unsafe"),
        "--exact",
        "lifecycle.crash-create",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let killed: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains("(signal 9"))
        .collect();
    assert!(!killed.is_empty(), "{}", out.stdout);
    for line in killed {
        assert!(line.contains("killed by the check at "), "{line}");
        assert!(!line.contains("timed out"), "{line}");
    }
}
