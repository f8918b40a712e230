//! The sweep over every ending: every sample plugin, interrupted by SIGINT,
//! SIGTERM and SIGHUP while a plugin call of it runs (and `reference` and
//! `loop-ext4` also left to end normally; `tests/it/robustness.rs` holds every
//! broken sample to the same bounds at a normal ending). After each: exit
//! 128 + the signal, no process left, no mount left, the temp dir gone, and
//! nothing outside the run's sandbox changed (a tree of sentinel files beside
//! it and its working dir, hashed before and after).

use crate::util;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::wait_for;

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins")
}

/// `tmp` is the run's TMPDIR, `cwd` its working dir; sentinels are planted
/// beside them and in `outside`.
struct Area {
    scratch: util::Scratch,
}

impl Area {
    fn new() -> Area {
        let scratch = util::Scratch::new();
        for d in ["tmp", "cwd", "outside"] {
            fs::create_dir(scratch.path().join(d)).unwrap();
        }
        util::plant_sentinels(&scratch.path().join("outside"));
        util::plant_sentinels(&scratch.path().join("cwd"));
        Area { scratch }
    }
    fn tmp(&self) -> PathBuf {
        self.scratch.path().join("tmp")
    }
    /// Everything but the TMPDIR (the run's own) hashed; `ignore` names a
    /// file a sample is known to write into its working dir.
    fn digest(&self, ignore: Option<&str>) -> Vec<(PathBuf, String)> {
        util::tree_digest(self.scratch.path())
            .into_iter()
            .filter(|(p, _)| !p.starts_with(self.tmp()))
            .filter(|(p, _)| ignore.is_none_or(|i| p.file_name().is_none_or(|n| n != i)))
            .collect()
    }
}

/// Runs `check` on `sample`; with a signal, sends it once a plugin call is
/// under way; then holds the ending to every bound.
fn sweep(sample: &str, signal: Option<Signal>) {
    let what = format!("{sample} / {}", signal.map_or("normal end", |s| s.as_str()));
    let area = Area::new();
    // writes-cwd's fault is writing into its working dir (the harness's own):
    // process.cwd-independent reports it; it is not the harness's doing.
    let ignore = (sample == "writes-cwd").then_some(".last-op");
    let before = area.digest(ignore);
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
        .args(["check", samples_dir().join(sample).to_str().unwrap(), "-q"])
        .env("TMPDIR", area.tmp())
        .current_dir(area.scratch.path().join("cwd"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let needle = area.tmp().to_string_lossy().into_owned();
    // A plugin call's environment names its volumes dir (the harness's own
    // names only TMPDIR).
    let call = format!("DHV_VOLUMES_DIR={needle}");
    let interrupted =
        signal.is_some_and(|signal| signal_once_a_call_runs(&mut child, signal, &call));
    if signal.is_some() && !interrupted {
        eprintln!("{what}: the run ended before the signal (no plugin call was seen)");
    }
    let started = Instant::now();
    let exited = wait_for(Duration::from_secs(240), || {
        child.try_wait().unwrap().is_some()
    });
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(exited, "{what}: did not end within 240 s: {stderr}");
    match (signal, interrupted) {
        (Some(s), true) => {
            assert_eq!(out.status.code(), Some(128 + s as i32), "{what}: {stderr}");
            assert!(
                started.elapsed() < Duration::from_secs(100),
                "{what}: teardown took {:?}",
                started.elapsed()
            );
        }
        _ => assert!(matches!(out.status.code(), Some(0 | 1)), "{what}: {stderr}"),
    }
    assert_nothing_left(&area, &what, sample == "loop-ext4", &stderr);
    assert!(
        area.digest(ignore) == before,
        "{what}: something outside the sandbox changed"
    );
}

/// Sends `signal` once a plugin call with a volumes dir in the area runs, or
/// at once if none comes in 20 s (a plugin that never starts gets it anyway);
/// whether it was sent before the run ended by itself.
fn signal_once_a_call_runs(child: &mut std::process::Child, signal: Signal, call: &str) -> bool {
    wait_for(Duration::from_secs(20), || {
        !util::processes_with_env_containing(call).is_empty() || child.try_wait().unwrap().is_some()
    });
    if child.try_wait().unwrap().is_some() {
        return false;
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, signal).unwrap();
    true
}

/// No process, mount, loop device (`loop_devices`: the sample makes them) or
/// temp file of the run is left.
fn assert_nothing_left(area: &Area, what: &str, loop_devices: bool, stderr: &str) {
    let needle = area.tmp().to_string_lossy().into_owned();
    let gone = wait_for(Duration::from_secs(5), || {
        util::processes_with_env_containing(&needle).is_empty()
    });
    assert!(
        gone,
        "{what}: processes left: {:?}",
        util::processes_with_env_containing(&needle)
    );
    assert!(
        util::mounts_below(area.scratch.path()).is_empty(),
        "{what}: mounts left"
    );
    if loop_devices {
        let loops = Command::new("losetup").arg("-a").output().unwrap();
        let loops = String::from_utf8_lossy(&loops.stdout);
        assert!(
            !loops.contains(&needle),
            "{what}: loop devices left: {loops}"
        );
    }
    let left: Vec<_> = fs::read_dir(area.tmp())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{what}: temp dir left: {left:?}; {stderr}");
}

fn every_signal(sample: &str) {
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        sweep(sample, Some(signal));
    }
}

macro_rules! swept {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            #[ignore = "long (sweep): three interrupted runs per sample; run by scripts/long-tests"]
            fn $test() {
                every_signal($name);
            }
        )*
    };
}

swept! {
    reference_every_signal => "reference",
    bad_version_every_signal => "bad-version",
    blind_delete_every_signal => "blind-delete",
    busy_pool_every_signal => "busy-pool",
    bytes_out_of_range_every_signal => "bytes-out-of-range",
    crash_unsafe_every_signal => "crash-unsafe",
    crlf_shebang_every_signal => "crlf-shebang",
    eval_name_every_signal => "eval-name",
    fails_on_existing_dir_every_signal => "fails-on-existing-dir",
    fails_on_missing_dir_every_signal => "fails-on-missing-dir",
    hanging_create_every_signal => "hanging-create",
    ignores_sigterm_every_signal => "ignores-sigterm",
    leaked_child_every_signal => "leaked-child",
    logs_on_stdout_every_signal => "logs-on-stdout",
    missing_shebang_every_signal => "missing-shebang",
    missing_version_every_signal => "missing-version",
    name_as_path_every_signal => "name-as-path",
    needs_home_every_signal => "needs-home",
    needs_path_every_signal => "needs-path",
    non_semver_version_every_signal => "non-semver-version",
    nonexistent_path_every_signal => "nonexistent-path",
    not_executable_every_signal => "not-executable",
    null_version_every_signal => "null-version",
    racy_concurrency_every_signal => "racy-concurrency",
    realtime_signal_every_signal => "realtime-signal",
    lies_about_bytes_every_signal => "lies-about-bytes",
    check_then_mkdir_every_signal => "check-then-mkdir",
    relative_path_every_signal => "relative-path",
    rmdir_delete_every_signal => "rmdir-delete",
    setsid_daemon_every_signal => "setsid-daemon",
    shared_path_every_signal => "shared-path",
    side_file_every_signal => "side-file",
    glob_delete_every_signal => "glob-delete",
    labelled_dirs_every_signal => "labelled-dirs",
    ledger_drift_every_signal => "ledger-drift",
    ledger_quota_every_signal => "ledger-quota",
    realpath_delete_every_signal => "realpath-delete",
    slow_fingerprint_every_signal => "slow-fingerprint",
    slow_start_every_signal => "slow-start",
    string_bytes_every_signal => "string-bytes",
    text_error_every_signal => "text-error",
    writes_cwd_every_signal => "writes-cwd",
    wipes_on_update_every_signal => "wipes-on-update",
}

#[test]
fn reference_normal_end() {
    sweep("reference", None);
}

/// loop-ext4 mounts: in a private mount namespace, every ending.
#[test]
#[ignore = "long (sweep): four runs of a mounting plugin; run by scripts/long-tests"]
fn loop_ext4_every_ending() {
    if let Some(why) = util::loop_devices_unusable() {
        util::skip("loop-ext4 sweep", &why);
        return;
    }
    if !util::in_private_mount_ns("loop_ext4_every_ending") {
        return;
    }
    sweep("loop-ext4", None);
    every_signal("loop-ext4");
}

/// loop-block attaches loop devices: every ending detaches them all.
#[test]
#[ignore = "long (sweep): four runs of a loop-device plugin; run by scripts/long-tests"]
fn loop_block_every_ending() {
    if let Some(why) = util::loop_devices_unusable() {
        assert!(
            std::env::var_os("CI").is_none(),
            "loop-block sweep cannot run under CI: {why}"
        );
        println!("SKIPPED loop-block sweep: {why}");
        return;
    }
    sweep("loop-block", None);
    every_signal("loop-block");
}

/// Every sample is in the sweep above.
#[test]
fn the_sweep_covers_every_sample() {
    let source = include_str!("sweep.rs");
    let swept: BTreeSet<&str> = source
        .lines()
        .filter_map(|l| l.split_once("=> \"")?.1.split_once('"').map(|(n, _)| n))
        .collect();
    let missing: Vec<String> = fs::read_dir(samples_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !n.ends_with(".md") && !n.starts_with("loop-"))
        .filter(|n| n != "mkfs-on-reboot" && n != "mkfs-crash-window")
        // Its fault is files in the node's /tmp, which a sweep would leave
        // there; reports.rs runs it and removes them.
        .filter(|n| n != "tmp-log")
        // Its fault is a mount over the run's temp dir of a dir it makes
        // beside it, which a run ended at any step would leave there;
        // robustness.rs, reports.rs and mounts_over_root.rs run it and
        // remove that dir.
        .filter(|n| n != "mounts-over-root")
        .filter(|n| !swept.contains(n.as_str()))
        .collect();
    assert!(missing.is_empty(), "samples not swept: {missing:?}");
}
