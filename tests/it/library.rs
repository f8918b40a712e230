//! The suite as a library (`dhv_conform::suite`), called the way an integrator calls
//! it: from `#[tokio::main]`-style async code and from plain sync code; a panic in the
//! middle of a run leaves nothing behind; the host's signal handling is untouched.

use crate::util;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dhv_conform::manager::{Cleanup, ManagerError, VolumeSpec};
use dhv_conform::suite::{
    Progress, ProgressEvent, SuiteConfig, SuiteError, SuiteRequest, run, run_blocking,
};

fn sample(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-plugins")
        .join(name)
        .display()
        .to_string()
}

/// Whether this process catches `signo` (its bit in /proc/self/status SigCgt).
fn caught(signo: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap();
    mask & (1 << (signo - 1)) != 0
}

fn empty(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// Inside a running tokio runtime (as from `#[tokio::main]`): no nested-runtime
/// panic, the report's counts are the checks', and SIGINT is left to the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_runs_inside_the_callers_runtime() {
    let work = util::Scratch::new();
    let mut config = SuiteConfig::new(sample("reference"));
    config.filter = Some("create.".into());
    config.work_dir = Some(work.path().to_owned());
    let sigint_before = caught(libc::SIGINT as u32);
    let done = run(config).await.expect("the suite ran");
    assert_eq!(done.exit_code(), 0, "{:?}", done.report.summary);
    let s = &done.report.summary;
    assert_eq!(s.total, done.report.checks.len());
    assert_eq!(
        s.passed + s.failed + s.warned + s.skipped + s.info,
        s.total,
        "{s:?}"
    );
    assert!(done.teardown.removed);
    assert!(empty(work.path()).is_empty(), "{:?}", empty(work.path()));
    assert_eq!(
        caught(libc::SIGINT as u32),
        sigint_before,
        "SIGINT handling changed"
    );
}

/// A panic in the progress hook, mid-run: the run is cancelled, the teardown runs,
/// and the panic resumes in the caller; nothing is left.
#[test]
fn a_panic_inside_the_suite_still_tears_down() {
    let work = util::Scratch::new();
    let finished = Arc::new(AtomicUsize::new(0));
    let count = finished.clone();
    let mut config = SuiteConfig::new(sample("reference"));
    config.work_dir = Some(work.path().to_owned());
    config.test_threads = Some(4);
    config.progress = Progress::new(move |e| {
        if let ProgressEvent::Finished(_) = e {
            if count.fetch_add(1, Ordering::SeqCst) == 3 {
                panic!("a hook panics on purpose");
            }
        }
    });
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_blocking(config)))
        .expect_err("the panic resumes");
    let what = panic.downcast_ref::<&str>().copied().unwrap_or_default();
    assert_eq!(what, "a hook panics on purpose");
    assert!(empty(work.path()).is_empty(), "{:?}", empty(work.path()));
    let needle = work.path().display().to_string();
    assert!(util::processes_with_env_containing(&needle).is_empty());
}

/// The same with a plugin that mounts ext4 images on loop devices, in a private
/// mount namespace: no mount, no loop device, no temp dir is left.
#[test]
fn a_panic_inside_a_mounting_run_unmounts_and_detaches() {
    let ci = std::env::var_os("CI").is_some();
    if let Some(why) = util::loop_devices_unusable() {
        assert!(!ci, "CI is set and loop devices are unusable: {why}");
        println!("SKIPPED a_panic_inside_a_mounting_run_unmounts_and_detaches: {why}");
        return;
    }
    if !util::in_private_mount_ns("a_panic_inside_a_mounting_run_unmounts_and_detaches") {
        return;
    }
    let work = util::Scratch::new();
    let mounted = Arc::new(Mutex::new(false));
    let seen = mounted.clone();
    let needle = work.path().display().to_string();
    let probe = needle.clone();
    let mut config = SuiteConfig::new(sample("loop-ext4"));
    config.work_dir = Some(work.path().to_owned());
    config.test_threads = Some(4);
    config.progress = Progress::new(move |e| {
        if let ProgressEvent::Finished(_) = e {
            // Panic once volumes are mounted below the run's dir.
            let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
            if mounts.contains(&probe) {
                *seen.lock().unwrap() = true;
                panic!("a hook panics on purpose");
            }
        }
    });
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_blocking(config)));
    assert!(
        *mounted.lock().unwrap(),
        "no volume was mounted when checks ended"
    );
    assert!(result.is_err(), "the panic resumes in the caller");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains(&needle), "mounts left: {mounts}");
    let loops = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    let loops = String::from_utf8_lossy(&loops.stdout);
    assert!(!loops.contains(&needle), "loop devices left: {loops}");
    assert!(empty(work.path()).is_empty(), "{:?}", empty(work.path()));
}

/// Dropping the future cancels the run; its teardown still runs and leaves nothing.
#[test]
fn a_dropped_run_is_cancelled_and_torn_down() {
    let work = util::Scratch::new();
    let mut config = SuiteConfig::new(sample("reference"));
    config.work_dir = Some(work.path().to_owned());
    let rt = util::runtime();
    rt.block_on(async {
        let run = run(config);
        // Long enough to be mid-run (the temp dir exists), never to finish.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(300), run).await;
    });
    // The teardown runs on the suite's thread: wait for it, bounded.
    assert!(
        util::wait_for(std::time::Duration::from_secs(120), || empty(work.path())
            .is_empty()),
        "{:?}",
        empty(work.path())
    );
}

/// The descriptors this process holds open on anything below `dir`.
fn fds_below(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.starts_with(dir))
        .collect()
}

/// Suite after suite in one process (as a service that checks plugins does):
/// each run lets go of what it held. A run's shared state holds its temp dir
/// open (and its probes' dirs, its call log, every output it captured), so a
/// run that was never freed shows as a descriptor left on a removed dir.
#[test]
#[ignore = "long (soak): 50 suites in one process; run by scripts/long-tests"]
fn fifty_runs_in_one_process_hold_nothing_afterwards() {
    const RUNS: usize = 50;
    let plugins = util::Scratch::new();
    let tiny = plugins.plugin(
        "tiny",
        r#"#!/bin/sh
PATH=/usr/bin:/bin
dir="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case "$1" in
fingerprint) echo '{"version": "1.0.0"}' ;;
create) mkdir -p "$dir" && echo "{\"path\": \"$dir\", \"bytes\": 0}" ;;
delete) rm -rf "$dir" ;;
*) exit 1 ;;
esac
"#,
    );
    let work = util::Scratch::new();
    for n in 0..RUNS {
        let mut config = SuiteConfig::new(tiny.display().to_string());
        // The checks of the shared probes (create, create again, two
        // volumes) and a run-wide one (the timing phase).
        config.filter = Some("create.".into());
        config.work_dir = Some(work.path().to_owned());
        let done = run_blocking(config).expect("the suite ran");
        assert_eq!(done.exit_code(), 0, "run {n}: {:?}", done.report.summary);
        assert!(done.teardown.removed, "run {n}");
    }
    assert!(empty(work.path()).is_empty(), "{:?}", empty(work.path()));
    let held = fds_below(work.path());
    assert!(
        held.is_empty(),
        "{} descriptors still held on the runs' dirs after {RUNS} runs: {held:?}",
        held.len()
    );
}

/// The statuses of a report's checks, by id.
fn statuses(report: &dhv_conform::report::Report) -> Vec<(String, String)> {
    report
        .checks
        .iter()
        .map(|c| (c.id.clone(), c.status.as_str().to_owned()))
        .collect()
}

/// `SuiteConfig::from_files` runs the suite as `check` does with the plugin's
/// `dhv-conform.toml` (its strict, its skips, its two requests) or a fixture:
/// the same checks, the same statuses, the same config in the report.
#[test]
fn from_files_runs_the_suite_as_check_does_with_a_config_and_a_fixture() {
    let work = util::Scratch::new();
    let plugin = work.path().join("reference");
    std::fs::copy(sample("reference"), &plugin).unwrap();
    std::fs::write(
        work.path().join("small.json"),
        r#"{"name": "small", "capacity_min": "1MiB"}"#,
    )
    .unwrap();
    std::fs::write(
        work.path().join("dhv-conform.toml"),
        "strict = true\n\n[[request]]\nname = \"default-like\"\nfixture = \"small.json\"\n\n\
         [[request]]\nname = \"again\"\nfixture = \"small.json\"\n\n\
         [skip]\n\"create.update\" = \"not supported yet\"\n",
    )
    .unwrap();
    let plugin_arg = plugin.to_str().unwrap();
    let mut config =
        SuiteConfig::from_files(plugin_arg, None, None).expect("read as check reads it");
    assert!(config.strict);
    assert_eq!(config.requests.len(), 2);
    assert_eq!(config.test_threads, None);
    config.filter = Some("create.".into());
    let done = run_blocking(config).expect("the suite ran");
    let cli = util::check::check([
        plugin.as_os_str(),
        "create.".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
    ])
    .run();
    let cli_report = cli.report();
    assert_eq!(statuses(&done.report), statuses(&cli_report));
    assert_eq!(done.exit_code() as i32, cli.code.unwrap(), "{}", cli.stderr);
    assert!(done.report.options.strict);
    let update = util::check::find(&done.report, "create.update");
    assert!(
        update.message.contains("not supported yet"),
        "{}",
        update.message
    );
    assert_eq!(
        done.report.config.as_ref().and_then(|c| c.path.clone()),
        cli_report.config.as_ref().and_then(|c| c.path.clone())
    );
    assert!(done.report.config.and_then(|c| c.path).is_some());

    // A fixture replaces the config's requests, as `--fixture` does.
    let fixture = work.path().join("small.json");
    let config = SuiteConfig::from_files(plugin_arg, None, Some(&fixture)).unwrap();
    assert!(config.requests.is_empty());
    assert_eq!(config.fixture.as_deref(), Some(fixture.as_path()));
    let _: &[SuiteRequest] = &config.requests;
}

/// What `check` refuses with exit 2 is `SuiteError::Input` (exit code 2), never a
/// non-conformant report: a missing plugin, from `from_files` or from `new`; a
/// malformed config; a fixture that is not there.
#[test]
fn bad_input_is_an_input_error_with_exit_2_as_for_the_cli() {
    let work = util::Scratch::new();
    let missing = work.path().join("no-such-plugin");
    let missing = missing.to_str().unwrap();
    let err = SuiteConfig::from_files(missing, None, None).unwrap_err();
    assert!(matches!(err, SuiteError::Input(_)), "{err:?}");
    assert_eq!(err.exit_code(), 2);
    let cli = util::check::check([missing]).run();
    assert_eq!(cli.code, Some(2));
    assert!(
        cli.stderr.contains(&err.to_string()),
        "{} / {err}",
        cli.stderr
    );

    let err = run_blocking(SuiteConfig::new(missing)).unwrap_err();
    assert!(matches!(err, SuiteError::Input(_)), "{err:?}");
    assert_eq!(err.exit_code(), 2);

    let config = work.path().join("bad.toml");
    std::fs::write(&config, "stritc = true\n").unwrap();
    let err = SuiteConfig::from_files("mkdir", Some(&config), None).unwrap_err();
    assert!(
        matches!(&err, SuiteError::Input(m) if m.contains("bad.toml")),
        "{err:?}"
    );
    let err =
        SuiteConfig::from_files("mkdir", None, Some(&work.path().join("none.json"))).unwrap_err();
    assert!(matches!(err, SuiteError::Input(_)), "{err:?}");
}

/// The library's manager undoes a first create whose plugin exited 0 with an
/// answer that cannot be decoded: what the plugin made is deleted, with the
/// volume's own path, and the error says so.
#[test]
fn a_malformed_create_answer_is_undone_by_a_compensating_delete() {
    let node = util::Node::new();
    let log = node.work.path().join("calls.log");
    node.plugins.plugin(
        "half",
        &format!(
            "#!/bin/sh\n\
             echo \"$DHV_OPERATION $DHV_CREATED_PATH\" >> '{}'\n\
             case \"$DHV_OPERATION\" in\n\
             fingerprint) echo '{{\"version\": \"1.0.0\"}}' ;;\n\
             create) mkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\" && echo '{{\"path\": ' ;;\n\
             delete) rm -rf \"$DHV_CREATED_PATH\" ;;\n\
             esac\n",
            log.display()
        ),
    );
    let m = node.manager();
    let rt = util::manager::rt();
    let id = util::manager::ID1;
    let err = rt
        .block_on(m.create(VolumeSpec::new("half", "v").with_id(id)))
        .unwrap_err();
    assert!(
        matches!(&err, ManagerError::Response { cleanup: Some(c), .. } if matches!(**c, Cleanup::Deleted)),
        "{err:?}"
    );
    assert!(
        err.to_string().ends_with("; the plugin deleted it again"),
        "{err}"
    );
    let own = node.volumes().join(id);
    assert!(!own.exists(), "the half-made volume is left: {own:?}");
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains(&format!("delete {}", own.display())),
        "{calls}"
    );
    assert!(rt.block_on(m.list()).unwrap().is_empty());
}
