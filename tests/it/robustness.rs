//! The harness's bounds, whatever plugin it runs: hostile plugins that cannot
//! make a run hang, leak a process, leave a temp file or touch anything outside
//! its area; Ctrl-C that tears a run down cleanly; flat memory under a plugin
//! that prints a gibibyte. Parsers fed anything are in robustness_parsers.rs,
//! the fleet's Nomad job in nomad_job.rs.
//!
//! `tests/it/reports.rs` holds every sample plugin to its verdicts; the tests here
//! only hold the harness to its bounds.

use crate::util;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant, SystemTime};

use assert_cmd::Command;

use crate::util::{bin, repo, sample, wait_bounded, wait_for};

mod leftovers;
use leftovers::{assert_left_nothing, tree};

/// How long any one run of the binary may take before the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// Hostile plugins: bounded time, nothing left, nothing touched outside.
// ---------------------------------------------------------------------------

/// Where a run may write, and what must not change around it.
struct Area {
    scratch: util::Scratch,
    /// A dir beside the area, in the system temp dir.
    outside: tempfile::TempDir,
}

impl Area {
    /// `<area>/deep/er/tmp` is TMPDIR, so that a plugin climbing out of its
    /// volumes dir with `../` still lands inside the area where it is seen;
    /// `<area>/cwd` is the working directory; canaries sit beside both, and in
    /// a dir outside the area.
    fn new() -> Area {
        let scratch = util::Scratch::new();
        let area = scratch.path();
        for dir in ["deep/er/tmp", "cwd", "deep/canaries"] {
            fs::create_dir_all(area.join(dir)).unwrap();
        }
        let outside = tempfile::Builder::new()
            .prefix("dhv-canary-")
            .tempdir()
            .unwrap();
        for dir in [
            area.join("deep/canaries"),
            area.join("deep"),
            outside.path().to_path_buf(),
        ] {
            fs::write(dir.join("canary"), format!("canary in {}\n", dir.display())).unwrap();
        }
        Area { scratch, outside }
    }

    fn path(&self) -> &Path {
        self.scratch.path()
    }

    fn tmp(&self) -> PathBuf {
        self.path().join("deep/er/tmp")
    }

    fn cwd(&self) -> PathBuf {
        self.path().join("cwd")
    }

    /// Every entry of the area and of the outside dir, with its size and mtime.
    fn state(&self) -> BTreeMap<PathBuf, (u64, SystemTime)> {
        let mut all = tree(self.path());
        all.extend(tree(self.outside.path()));
        all
    }
}

/// Runs `dhv-conform check` on a hostile sample and holds the run to the bounds.
fn hostile_run_stays_in_bounds(name: &str, timeout_scale: &str) {
    let area = Area::new();
    let before = area.state();
    let samples_before = tree(&repo().join("sample-plugins"));
    let started = Instant::now();
    let out = Command::new(bin())
        .args([
            "check",
            &sample(name),
            "-q",
            "--timeout-scale",
            timeout_scale,
        ])
        .env("TMPDIR", area.tmp())
        .current_dir(area.cwd())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let took = started.elapsed();
    eprintln!("{name}: exit {:?} after {took:?}", out.status.code());

    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{name}: expected a verdict (exit 0 or 1) within {RUN_LIMIT:?}; got {:?} after {took:?}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The dir mounts-over-root made beside the run's temp dir (and mounted
    // over it): as it made it, then removed.
    crate::mounts_over_root::remove_outside_as_made(&area.tmp());
    // The binary reaps what it kills before it exits; the short wait only
    // covers a process the kernel is still tearing down.
    assert_left_nothing(&area, name, Duration::from_secs(2));
    let after = area.state();
    let changed: Vec<_> = after
        .iter()
        .filter(|(p, meta)| before.get(*p) != Some(meta))
        .map(|(p, _)| p.display().to_string())
        .chain(
            before
                .keys()
                .filter(|p| !after.contains_key(*p))
                .map(|p| format!("removed {}", p.display())),
        )
        .collect();
    assert!(
        changed.is_empty(),
        "{name}: touched outside its temp dir: {changed:?}"
    );
    let samples_after = tree(&repo().join("sample-plugins"));
    let new: Vec<_> = samples_after
        .keys()
        .filter(|p| !samples_before.contains_key(*p))
        .collect();
    assert!(
        new.is_empty(),
        "{name}: new files in sample-plugins/: {new:?}"
    );
}

macro_rules! hostile {
    ($($test:ident => $name:literal at $scale:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                hostile_run_stays_in_bounds($name, $scale);
            }
        )*
    };
}

// The two hanging plugins run at a tenth of Nomad's limits (6 s for a create)
// to keep the suite short; the bound is the same.
hostile! {
    hanging_create_is_bounded_and_leaves_nothing => "hanging-create" at "0.1",
    ignores_sigterm_is_bounded_and_leaves_nothing => "ignores-sigterm" at "0.1",
    leaked_child_is_bounded_and_leaves_nothing => "leaked-child" at "1",
    setsid_daemon_is_bounded_and_leaves_nothing => "setsid-daemon" at "1",
    slow_fingerprint_is_bounded_and_leaves_nothing => "slow-fingerprint" at "1",
    eval_name_is_bounded_and_leaves_nothing => "eval-name" at "1",
    name_as_path_is_bounded_and_leaves_nothing => "name-as-path" at "1",
    blind_delete_is_bounded_and_leaves_nothing => "blind-delete" at "1",
    mounts_over_root_is_bounded_and_leaves_nothing => "mounts-over-root" at "1",
}

// Every other broken sample, held to the same bounds: whatever its fault, a
// run ends with a verdict and leaves nothing behind. Left out: `writes-cwd`,
// whose fault is writing into its working dir (the harness's own, as under
// Nomad); `process.cwd-independent` reports it. And `tmp-log`, whose fault is
// writing into the node's `/tmp`; `delete.no-residue` reports it.
hostile! {
    bad_version_leaves_nothing => "bad-version" at "1",
    busy_pool_leaves_nothing => "busy-pool" at "1",
    bytes_out_of_range_leaves_nothing => "bytes-out-of-range" at "1",
    crash_unsafe_leaves_nothing => "crash-unsafe" at "1",
    glob_delete_leaves_nothing => "glob-delete" at "1",
    ledger_drift_leaves_nothing => "ledger-drift" at "1",
    realpath_delete_leaves_nothing => "realpath-delete" at "1",
    crlf_shebang_leaves_nothing => "crlf-shebang" at "1",
    fails_on_existing_dir_leaves_nothing => "fails-on-existing-dir" at "1",
    fails_on_missing_dir_leaves_nothing => "fails-on-missing-dir" at "1",
    logs_on_stdout_leaves_nothing => "logs-on-stdout" at "1",
    missing_shebang_leaves_nothing => "missing-shebang" at "1",
    missing_version_leaves_nothing => "missing-version" at "1",
    needs_home_leaves_nothing => "needs-home" at "1",
    needs_path_leaves_nothing => "needs-path" at "1",
    non_semver_version_leaves_nothing => "non-semver-version" at "1",
    nonexistent_path_leaves_nothing => "nonexistent-path" at "1",
    not_executable_leaves_nothing => "not-executable" at "1",
    null_version_leaves_nothing => "null-version" at "1",
    racy_concurrency_leaves_nothing => "racy-concurrency" at "1",
    realtime_signal_leaves_nothing => "realtime-signal" at "1",
    lies_about_bytes_leaves_nothing => "lies-about-bytes" at "1",
    check_then_mkdir_leaves_nothing => "check-then-mkdir" at "1",
    relative_path_leaves_nothing => "relative-path" at "1",
    rmdir_delete_leaves_nothing => "rmdir-delete" at "1",
    shared_path_leaves_nothing => "shared-path" at "1",
    side_file_leaves_nothing => "side-file" at "1",
    string_bytes_leaves_nothing => "string-bytes" at "1",
    text_error_leaves_nothing => "text-error" at "1",
    wipes_on_update_leaves_nothing => "wipes-on-update" at "1",
}

/// The sweep above covers every sample but the three good ones and `writes-cwd`.
#[test]
fn the_sweep_covers_every_broken_sample() {
    let source = include_str!("robustness.rs");
    let swept: BTreeSet<&str> = source
        .lines()
        .filter_map(|l| l.split_once("=> \"")?.1.split_once('"').map(|(n, _)| n))
        .collect();
    let missing: Vec<String> = fs::read_dir(repo().join("sample-plugins"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !n.ends_with(".md"))
        .filter(|n| {
            ![
                "reference",
                "labelled-dirs",
                "ledger-quota",
                "loop-ext4",
                "loop-block",
                "mkfs-on-reboot",
                "mkfs-crash-window",
                "slow-start",
                "writes-cwd",
                "tmp-log",
            ]
            .contains(&n.as_str())
        })
        .filter(|n| !swept.contains(n.as_str()))
        .collect();
    assert!(missing.is_empty(), "samples not swept: {missing:?}");
}

// ---------------------------------------------------------------------------
// Ctrl-C.
// ---------------------------------------------------------------------------

/// Starts a check of `plugin`, waits until a plugin call with a volumes dir is
/// running, sends SIGINT, and holds the teardown to its promises.
fn interrupt_mid_run(plugin: &str) {
    let area = Area::new();
    let child = StdCommand::new(bin())
        .args(["check", &sample(plugin), "-q"])
        .env("TMPDIR", area.tmp())
        .current_dir(area.cwd())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let running = format!("DHV_VOLUMES_DIR={}", area.tmp().display());
    let started = wait_for(Duration::from_secs(30), || {
        !util::processes_with_env_containing(&running).is_empty()
    });
    if !started {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = wait_bounded(child, RUN_LIMIT);
        panic!("{plugin}: no plugin call started within 30 s");
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{plugin}: {status:?}");
    assert_left_nothing(
        &area,
        &format!("{plugin} after Ctrl-C"),
        Duration::from_secs(5),
    );
}

#[test]
fn ctrl_c_during_a_hanging_create_exits_130_and_leaves_nothing() {
    interrupt_mid_run("hanging-create");
}

/// Many checks in flight, each leaving a background child: a check whose call
/// was just killed must not get to start another one before the exit.
#[test]
fn ctrl_c_with_many_calls_in_flight_exits_130_and_leaves_nothing() {
    interrupt_mid_run("leaked-child");
}

// ---------------------------------------------------------------------------
// Memory.
// ---------------------------------------------------------------------------

/// `dhv-conform run` of a create that prints 1 GiB on stdout and 1 GiB on
/// stderr: the output is capped and drained, and the binary's peak RSS stays
/// small.
///
/// The peak is read two ways. The plugin itself, once both floods are through
/// the pipes, reads `VmHWM` from its parent's (the binary's) `/proc` status:
/// exact for the binary's own image, on any Linux. And, when GNU time is
/// installed, `/usr/bin/time -f %M` reports the high-water mark over the
/// binary's whole life. (`getrusage`/`wait4` from this test would not do: a
/// child's `ru_maxrss` starts from the RSS of the process that spawned it, and
/// a test binary is large.)
#[test]
fn memory_stays_flat_when_a_plugin_prints_a_gibibyte() {
    const BOUND_KIB: u64 = 64 * 1024;
    let area = Area::new();
    let hwm = area.path().join("vmhwm");
    let plugin = area.scratch.plugin(
        "flood",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             head -c 1073741824 /dev/zero &\nhead -c 1073741824 /dev/zero >&2\nwait\n\
             grep VmHWM /proc/$PPID/status > {}\n",
            hwm.display()
        ),
    );
    let maxrss = area.path().join("maxrss");
    let gnu_time = StdCommand::new("/usr/bin/time")
        .args(["-f", "%M", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    let mut cmd = if gnu_time {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "%M", "-o"]).arg(&maxrss).arg(bin());
        c
    } else {
        Command::new(bin())
    };
    let started = Instant::now();
    let out = cmd
        .args(["run", plugin.to_str().unwrap(), "create", "--volumes-dir"])
        .arg(area.tmp())
        .env("TMPDIR", area.tmp())
        .current_dir(area.cwd())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let took = started.elapsed();
    // Nomad would reject the output (exit 1); anything else is a crash.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?} after {took:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The number on the last line ("VmHWM:  8420 kB"; GNU time may put
    // "Command exited with non-zero status 1" first).
    let kib = |text: &str| -> u64 {
        text.lines()
            .last()
            .and_then(|l| l.split_whitespace().find_map(|w| w.parse().ok()))
            .unwrap_or_else(|| panic!("no number in {text:?}"))
    };
    let during = kib(&fs::read_to_string(&hwm).expect("the plugin got to the end of its flood"));
    eprintln!("flood: {took:?}; VmHWM after 2 GiB of output: {during} KiB");
    assert!(
        during < BOUND_KIB,
        "VmHWM {during} KiB after 2 GiB of output (bound {BOUND_KIB} KiB)"
    );
    if gnu_time {
        let whole = kib(&fs::read_to_string(&maxrss).unwrap());
        eprintln!("flood: peak RSS over the whole run (GNU time): {whole} KiB");
        assert!(
            whole < BOUND_KIB,
            "peak RSS {whole} KiB (bound {BOUND_KIB} KiB)"
        );
    }
}

/// A whole `check` run stays under 256 MiB (GNU time's `%M`, the binary's
/// own high-water mark) against a plugin that writes 1 MiB to stderr on
/// every call (it took 902 MiB when each call kept its 1 MiB for the run),
/// against one whose every create leaves 4 processes with 1.4 MiB command
/// lines, and one whose every create leaves 4 with 1.4 MiB environments:
/// what a run keeps of plugin output is bounded for the run (the
/// supervisor's output budget), every read of a leftover's command line by
/// its own cap, and a leftover's environment is streamed, never held whole.
#[test]
fn a_check_run_stays_under_its_memory_bound_whatever_its_calls_write_or_leave() {
    const TEST: &str = "a_check_run_stays_under_its_memory_bound_whatever_its_calls_write_or_leave";
    const BOUND_KIB: u64 = 256 * 1024;
    let has_time = StdCommand::new("/usr/bin/time")
        .args(["-f", "%M", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_time {
        util::skip(TEST, "GNU time (/usr/bin/time) is not installed");
        return;
    }
    let area = Area::new();
    let reference = sample("reference");
    let flood = area.scratch.plugin(
        "stderr-flood",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             head -c 1048576 /dev/zero | tr '\\0' e >&2\n\
             exec '{reference}' \"$@\"\n"
        ),
    );
    let big_cmdlines = area.scratch.plugin(
        "big-cmdlines",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             if [ \"$1\" = create ]; then\n\
             a=$(head -c 131000 /dev/zero | tr '\\0' a)\n\
             for i in 1 2 3 4; do\n\
             setsid sh -c 'sleep 30; :' x $a $a $a $a $a $a $a $a $a $a $a \
             </dev/null >/dev/null 2>&1 &\n\
             done\nfi\n\
             exec '{reference}' \"$@\"\n"
        ),
    );
    // The same, with 1.4 MiB environments: each orphan's environment is
    // read to tell whose call it was (read whole, it was held at once).
    let big_environs = area.scratch.plugin(
        "big-environs",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             if [ \"$1\" = create ]; then\n\
             a=$(head -c 131000 /dev/zero | tr '\\0' a)\n\
             for i in 1 2 3 4; do\n\
             env E0=$a E1=$a E2=$a E3=$a E4=$a E5=$a E6=$a E7=$a E8=$a E9=$a E10=$a \
             setsid sh -c 'sleep 30; :' </dev/null >/dev/null 2>&1 &\n\
             done\nfi\n\
             exec '{reference}' \"$@\"\n"
        ),
    );
    for plugin in [flood, big_cmdlines, big_environs] {
        let maxrss = area.path().join("maxrss");
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M", "-o"])
            .arg(&maxrss)
            .arg(bin())
            .args(["check", plugin.to_str().unwrap(), "-q", "--color", "never"])
            .env("TMPDIR", area.tmp())
            .current_dir(area.cwd())
            .timeout(Duration::from_secs(300))
            .output()
            .unwrap();
        // A verdict either way (the leftovers fail process.no-orphans).
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}: {:?}: {}",
            plugin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = fs::read_to_string(&maxrss).unwrap();
        let kib: u64 = text
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("no number in {text:?}"));
        eprintln!("{}: peak RSS {kib} KiB", plugin.display());
        assert!(
            kib < BOUND_KIB,
            "{}: peak RSS {kib} KiB (bound {BOUND_KIB} KiB)",
            plugin.display()
        );
    }
    assert!(
        util::processes_mentioning("sleep 30; :").is_empty(),
        "a leftover outlived its run"
    );
}
