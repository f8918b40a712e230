//! The library keeps no process-global state of a run: two suites run at once
//! in one process, on one runtime, and each gets the verdicts it gets alone.

use std::path::PathBuf;

use dhv_conform::conformance::{Settings, SuiteOptions, Target, run_suite};
use dhv_conform::report::Status;
use libtest_mimic::Arguments;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("sample-plugins")
        .join(name)
}

fn options(plugin: &str) -> SuiteOptions {
    let libtest = Arguments {
        quiet: true,
        test_threads: Some(4),
        logfile: Some("/dev/null".into()),
        ..Arguments::default()
    };
    SuiteOptions::new(Settings::new(Target::Executable(sample(plugin))), libtest)
}

/// Failed and warned check ids of one report.
fn findings(report: &dhv_conform::report::Report) -> Vec<String> {
    report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .map(|c| format!("{}:{:?}", c.id, c.status))
        .collect()
}

#[test]
fn two_suites_run_at_once_in_one_process() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (reference, needs_home) = std::thread::scope(|s| {
        let a = s.spawn(|| run_suite(&rt, options("reference")).expect("reference suite"));
        let b = s.spawn(|| run_suite(&rt, options("needs-home")).expect("needs-home suite"));
        (a.join().unwrap(), b.join().unwrap())
    });

    // The reference plugin conforms, and nothing of the other run leaked into it.
    assert!(!reference.harness_failed);
    assert_eq!(findings(&reference.report), Vec::<String>::new());
    // needs-home fails exactly where its header says, in its own report.
    let got = findings(&needs_home.report);
    assert!(
        got.contains(&"process.env-self-contained:Fail".to_string())
            && got.contains(&"create.succeeds:Fail".to_string()),
        "{got:?}"
    );
    // Two runs, two temp dirs, both removed.
    assert_ne!(reference.teardown.temp_dir, needs_home.teardown.temp_dir);
    for outcome in [&reference, &needs_home] {
        assert!(outcome.teardown.removed, "{:?}", outcome.teardown);
        assert!(!outcome.teardown.temp_dir.exists());
    }
}
