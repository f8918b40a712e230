//! Unit tests of the engine: what a run holds once it is over.
use super::*;
use crate::plugin::PluginSource;
use crate::report::Status;

/// A finished run lets go of its shared state: nothing it made (a probe's
/// context, say) still holds it, so a process that runs suite after
/// suite keeps no run's call log and captured output.
#[test]
fn a_finished_run_frees_its_shared_state() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let settings = Settings {
        target: PluginSource::Builtin,
        template: Default::default(),
        timeout_scale: 1.0,
        claims: crate::conformance::Claims::builtin_mkdir(),
        pin: None,
    };
    let root = super::super::leftovers::make_root(Some(work.path())).unwrap();
    let shared = Arc::new(Shared::new(
        settings.clone(),
        root,
        crate::conformance::checks::PROBE_OWNERS,
        crate::conformance::host::local(),
    ));
    let run = Arc::downgrade(&shared);
    let libtest = Arguments {
        quiet: true,
        logfile: Some("/dev/null".into()),
        test_threads: Some(4),
        ..Arguments::default()
    };
    let opts = SuiteOptions::new(settings, libtest);
    // Every check: the shared probes, the run-wide checks and the timing
    // phase all make contexts of the run.
    let outcome = run_in(
        &rt,
        opts,
        super::super::interrupt::Signals::manual(),
        shared,
    );
    let status = |id: &str| {
        outcome
            .report
            .checks
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.status)
    };
    for probed in [
        "fingerprint.runs",
        "create.succeeds",
        "delete.succeeds",
        "create.idempotent",
        "create.distinct",
    ] {
        assert_eq!(status(probed), Some(Status::Pass), "{probed}");
    }
    assert!(outcome.teardown.removed, "{}", outcome.teardown.summary());
    assert_eq!(
        run.strong_count(),
        0,
        "the run's shared state is still held after the run"
    );
    assert!(run.upgrade().is_none());
}
