//! Re-runs of the calling test in a process of its own: inside a private
//! mount namespace ([`in_private_mount_ns`]), for tests that mount, or
//! alone ([`in_a_process_of_its_own`]), for tests whose plugin does
//! something to the harness's process itself.

use super::skip;

/// Runs the calling test again inside a private mount namespace
/// (`unshare -m --propagation private`), so that the mounts it makes are
/// seen by nobody else and vanish with it.
///
/// Returns `true` in the re-run (go on with the test body), `false` in the
/// outer run once the inner one passed (or when it cannot run here: then it
/// prints why). The inner run's failure fails the outer test.
pub fn in_private_mount_ns(test: &str) -> bool {
    const INSIDE: &str = "DHV_TEST_IN_MOUNT_NS";
    if std::env::var_os(INSIDE).is_some() {
        return true;
    }
    if !nix::unistd::Uid::effective().is_root() {
        skip(test, "needs root for a private mount namespace");
        return false;
    }
    let unshare = ["unshare", "-m", "--propagation", "private", "--"];
    let out = match rerun(test, &unshare, INSIDE).output() {
        Ok(out) => out,
        Err(e) => {
            skip(test, &format!("cannot run unshare: {e}"));
            return false;
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("unshare failed") {
        skip(test, &format!("no private mount namespace here: {stderr}"));
        return false;
    }
    passed_in(test, &out, "its mount namespace");
    false
}

/// Runs the calling test again in a process of its own, alone: for a test
/// whose plugin does something to the harness's process itself (moves it
/// into a cgroup), which must not reach the tests running beside it.
///
/// Returns `true` in the re-run (go on with the test body), `false` in the
/// outer run once the inner one passed. The inner run's failure fails the
/// outer test.
pub fn in_a_process_of_its_own(test: &str) -> bool {
    const INSIDE: &str = "DHV_TEST_ALONE";
    if std::env::var_os(INSIDE).is_some() {
        return true;
    }
    let out = rerun(test, &[], INSIDE)
        .output()
        .expect("the test binary runs");
    passed_in(test, &out, "its own process");
    false
}

/// The test binary, run by `wrapper` (a command and its arguments, which run
/// what follows them; none: run directly), to run the calling test alone,
/// with `inside` set so that the re-run goes on with the test body.
fn rerun(test: &str, wrapper: &[&str], inside: &str) -> std::process::Command {
    // The test's full name, module path included (`mounts::...`), as the
    // re-run's `--exact` needs it: libtest names each test's thread so.
    let thread = std::thread::current();
    let full = thread
        .name()
        .filter(|name| name.ends_with(&format!("::{test}")))
        .unwrap_or(test)
        .to_owned();
    let me = std::env::current_exe().expect("test binary");
    let mut launcher = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(me);
            c
        }
        None => std::process::Command::new(me),
    };
    // --include-ignored: the test may be a long one (`#[ignore]`, run by
    // scripts/long-tests), and its re-run must run it all the same.
    launcher
        .args(["--exact", &full, "--include-ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(inside, "1");
    launcher
}

/// Shows the re-run's output, and fails the calling test unless it ran
/// there (`place`) and passed.
fn passed_in(test: &str, out: &std::process::Output, place: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{test} failed in {place}");
    assert!(stdout.contains("1 passed"), "{test} did not run in {place}");
}
