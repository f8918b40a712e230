//! The engine: one libtest-mimic trial per catalogue check, run in parallel,
//! each on its trial's thread with a tokio runtime of its own (the run's
//! shared runtime listens for signals and runs the teardown) and in its own
//! sandbox; then the result model.
//!
//! Checks judged over the whole run (deadlines, leaks, clean failures, timing)
//! are trials too, placed last: they wait until every other selected check has
//! finished, then read the run's call log. Filtering is applied here, before
//! libtest-mimic sees the trials, so the set being waited for is exactly the set
//! that runs. What one trial does, and what the trials share, is
//! `engine_trial.rs`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Conclusion, Trial};

use super::catalogue::{CATALOGUE, CheckSpec};
use super::checks;
use super::checks::process::{AGENT_UNTOUCHED, interfered, mounted_over};
use super::context::{Settings, Shared};
use super::engine_trial::{Barrier, RunState, run_end};
use super::evidence;
use super::progress::{InFlight, Progress, ProgressEvent};
use super::space::SpacePlan;
use super::teardown::Teardown;
use crate::plugin::PluginRun;
use crate::report::{CheckResult, Phase, Report, RunOptions};

/// How a suite is run.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// What to test and with which request.
    pub settings: Settings,
    /// Should-level failures fail the run.
    pub strict: bool,
    /// The fixture file, for the report.
    pub fixture: Option<String>,
    /// libtest options: filter, `--exact`, `--skip`, `--list`, threads, format.
    pub libtest: Arguments,
    /// Told as each check starts and ends.
    pub progress: Progress,
    /// `--keep`: leave the run's temp dir in place (mounts below it are still
    /// unmounted), so that reproduce lines work when pasted.
    pub keep: bool,
    /// The machine the plugin's calls run on and the checks look at (see
    /// [`super::host`]); `None`: this one ([`super::host::LocalHost`]).
    pub host: Option<Arc<dyn super::host::Host>>,
}

impl SuiteOptions {
    /// A run of `settings` under libtest's `libtest` options, and the rest as
    /// `check` has it without flags: not strict, no fixture file, no progress
    /// hook, the temp dir removed, this machine as the host.
    pub fn new(settings: Settings, libtest: Arguments) -> SuiteOptions {
        SuiteOptions {
            settings,
            strict: false,
            fixture: None,
            libtest,
            progress: Progress::default(),
            keep: false,
            host: None,
        }
    }
}

/// What a suite produced.
#[derive(Debug)]
pub struct SuiteOutcome {
    /// The full report (empty of checks for `--list`).
    pub report: Report,
    /// libtest-mimic's counts.
    pub conclusion: Conclusion,
    /// A check panicked or its sandbox could not be made: the harness failed.
    pub harness_failed: bool,
    /// How many plugin processes the checks and the shared probes started.
    pub plugin_calls: usize,
    /// The sum of those calls' run times (spawn to exit), counting every call,
    /// not only the ones a report lists: what the plugin itself took, so that
    /// benchmarks can tell the harness's share of the wall time from it.
    pub plugin_busy: Duration,
    /// What the end of the run did with its temp dir and what was left in it.
    pub teardown: Teardown,
    /// The number of the signal (SIGINT, SIGTERM, SIGHUP) that cut the run
    /// short, if one did: the report is whole, the checks it cut short are
    /// `skip` (`interrupted`), and [`Report::interrupted`] names it.
    pub interrupted: Option<i32>,
}

/// The engine could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The run's temp dir could not be made.
    #[error("cannot create the run's temp dir: {0}")]
    TempDir(#[source] std::io::Error),
}

/// Whether libtest would run `id` under these arguments.
pub fn selected(args: &Arguments, id: &str) -> bool {
    let matches = |pattern: &str| {
        if args.exact {
            id == pattern
        } else {
            id.contains(pattern)
        }
    };
    let wanted = args.filter.as_deref().is_none_or(matches);
    wanted && !args.skip.iter().any(|s| matches(s))
}

/// Lets go of the run's temp dir once its teardown ended (see
/// [`super::leftovers`]).
fn disown(shared: &Shared, keep: bool) {
    super::leftovers::disown(shared.root_dir.path(), keep);
}

/// Runs the suite: the trials print libtest-style lines as they finish; the
/// report is returned for the renderers. SIGINT, SIGTERM and SIGHUP end the run
/// (through its teardown) while it lasts; the sandboxes live in `TMPDIR`.
pub fn run_suite(
    rt: &tokio::runtime::Runtime,
    opts: SuiteOptions,
) -> Result<SuiteOutcome, EngineError> {
    // Listening before the temp dir exists: a signal from now on ends in
    // the teardown, never in a dir left behind.
    let signals = super::interrupt::Signals::install(rt);
    run_suite_with(rt, opts, signals, None)
}

/// [`run_suite`] with the run's signals chosen by the caller (a listener, or a
/// [`super::interrupt::Trigger`] only) and its temp dir made in `work_dir`.
pub(crate) fn run_suite_with(
    rt: &tokio::runtime::Runtime,
    opts: SuiteOptions,
    signals: super::interrupt::Signals,
    work_dir: Option<&std::path::Path>,
) -> Result<SuiteOutcome, EngineError> {
    let root = super::leftovers::make_root(work_dir).map_err(EngineError::TempDir)?;
    let host = opts.host.clone().unwrap_or_else(super::host::local);
    let shared = Arc::new(Shared::new(
        opts.settings.clone(),
        root,
        checks::PROBE_OWNERS,
        host,
    ));
    Ok(run_in(rt, opts, signals, shared))
}

/// The run itself, in `shared` (whose temp dir is made): the checks, the
/// report, the teardown. Every hold on `shared` ends with it.
fn run_in(
    rt: &tokio::runtime::Runtime,
    opts: SuiteOptions,
    signals: super::interrupt::Signals,
    shared: Arc<Shared>,
) -> SuiteOutcome {
    let chosen: Vec<&'static CheckSpec> = CATALOGUE
        .iter()
        .filter(|c| selected(&opts.libtest, c.id))
        .collect();
    let ordered = planned_order(&chosen);
    let state = run_state(rt, &opts, &signals, shared, &ordered);
    signals.watch(&state.shared.supervisor);
    // Whatever unwinds out of here (a panic in the engine or in libtest), the
    // teardown still runs: deletes, unmounts, detaches, removes.
    let mut guard = UnwindTeardown {
        rt,
        shared: &state.shared,
        signals: &signals,
        keep: opts.keep,
        armed: true,
    };
    opts.progress.send(ProgressEvent::Run(InFlight::new(
        state.shared.live_calls.clone(),
    )));
    let trials = planned_trials(&state, &ordered);
    // The filter was applied above; libtest must not filter again.
    let mut args = opts.libtest.clone();
    args.filter = None;
    args.skip.clear();
    args.exact = false;
    let conclusion = libtest_mimic::run(&args, trials);
    let outcome = outcome(&state, &opts, chosen.len() != CATALOGUE.len(), conclusion);
    guard.armed = false;
    ended(rt, &state, &signals, opts.keep, outcome)
}

/// What the trials of the `chosen` checks share: the run, its phases'
/// barriers, and where their results go.
fn run_state(
    rt: &tokio::runtime::Runtime,
    opts: &SuiteOptions,
    signals: &super::interrupt::Signals,
    shared: Arc<Shared>,
    chosen: &[&'static CheckSpec],
) -> RunState {
    let count = |phase: Phase| chosen.iter().filter(|c| c.phase() == phase).count();
    let space = Arc::new(space_plan(&shared, chosen));
    RunState {
        shared,
        parallel: Arc::new(Barrier::new(count(Phase::Parallel))),
        exclusive: Arc::default(),
        barrier: Arc::new(Barrier::new(
            count(Phase::Parallel) + count(Phase::Exclusive),
        )),
        closing: Arc::new(Barrier::new(chosen.len() - count(Phase::Closing))),
        space,
        cleared: Arc::default(),
        signals: Arc::new(signals.share()),
        keep: opts.keep,
        running: Arc::default(),
        results: Arc::default(),
        harness_failed: Arc::new(Mutex::new(false)),
        calls: Arc::default(),
        handle: rt.handle().clone(),
        strict: opts.strict,
        load_start: evidence::load_average(),
        started: Instant::now(),
        progress: opts.progress.clone(),
    }
}

/// The `chosen` checks in the run's plan: the parallel checks, then the
/// exclusive ones, then the run-wide ones, then the closing ones, so with
/// any number of threads each phase is dispatched after every check it
/// waits for. Within a phase, the checks others wait for go first: a waiting
/// check never holds the thread (nor the room on the work filesystem: see
/// [`super::space`]) the one it waits for would run on.
fn planned_order(chosen: &[&'static CheckSpec]) -> Vec<&'static CheckSpec> {
    let mut ordered = chosen.to_vec();
    ordered.sort_by_key(|c| (c.phase(), !checks::AWAITED.contains(c)));
    ordered
}

/// The plan of the work filesystem's space for the `ordered` checks: the
/// free space of the filesystem the run's temp dir is on, read now.
fn space_plan(shared: &Shared, ordered: &[&'static CheckSpec]) -> SpacePlan {
    let free = shared.host.space(shared.root_dir.path()).ok();
    SpacePlan::new(
        ordered,
        &shared.settings.template,
        free.map(|s| s.available),
    )
}

/// The trials of the `ordered` checks (see [`planned_order`]).
fn planned_trials(state: &RunState, ordered: &[&'static CheckSpec]) -> Vec<Trial> {
    let ordered = ordered.to_vec();
    state.shared.awaited.expect(
        ordered
            .iter()
            .filter(|c| checks::AWAITED.contains(c))
            .map(|c| c.id),
    );
    ordered
        .into_iter()
        .map(|spec| {
            let state = state.clone();
            Trial::ignorable_test(spec.id, move || state.trial(spec)).with_kind(spec.level.as_str())
        })
        .collect()
}

/// The run's end once its trials are over: the teardown, and what it and
/// the run's signals add to the `outcome`.
fn ended(
    rt: &tokio::runtime::Runtime,
    state: &RunState,
    signals: &super::interrupt::Signals,
    keep: bool,
    mut outcome: SuiteOutcome,
) -> SuiteOutcome {
    let teardown = super::teardown::finish(rt, &run_end(&state.shared), signals, keep);
    disown(&state.shared, keep);
    // What clearing the run's end found (before the closing checks judged
    // it) is the teardown's to tell too; no check's verdict changes here.
    outcome.teardown = match crate::lock(&state.cleared).take() {
        Some(cleared) => teardown.after(cleared),
        None => teardown,
    };
    outcome.report.sandbox = Some(outcome.teardown.outcome());
    // A signal during the checks or while the run was ending: the teardown
    // went on as it does for every ending, the report is whole and says so.
    outcome.interrupted = signals.received();
    outcome.report.interrupted = outcome.interrupted.map(signal_name);
    // A plugin that touched the harness (moved it into a cgroup of the
    // run's, froze the run, traced it): the harness undid it, and the
    // conclusion is certain: process.agent-untouched fails, even when a
    // filter left it out or it was done after the check judged (during the
    // run's clearing or teardown). Exit 1, not 4: nothing is left unknown.
    let fact = state.notice_interference();
    let finding = mounted_over(&state.shared.facts.all())
        .or_else(|| fact.map(|fact| interfered(&fact, &state.shared.log.calls())));
    if let Some(finding) = finding {
        let held = outcome
            .report
            .checks
            .iter()
            .find(|c| c.id == AGENT_UNTOUCHED.id);
        if held.is_none_or(|c| c.status != crate::report::Status::Fail) {
            let result = super::verdict::to_result(
                &AGENT_UNTOUCHED,
                finding,
                Duration::ZERO,
                &[],
                &std::collections::HashMap::new(),
                &state.shared.settings.timeouts(),
                state.started,
            );
            outcome.report.put_check(result);
        }
    }
    outcome
}

/// `SIGINT`, or `signal N` for a number without a name.
fn signal_name(signo: i32) -> String {
    nix::sys::signal::Signal::try_from(signo)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {signo}"))
}

/// Runs the teardown when the engine unwinds before its own teardown ran.
struct UnwindTeardown<'a> {
    rt: &'a tokio::runtime::Runtime,
    shared: &'a Shared,
    signals: &'a super::interrupt::Signals,
    keep: bool,
    armed: bool,
}

impl Drop for UnwindTeardown<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ =
                super::teardown::finish(self.rt, &run_end(self.shared), self.signals, self.keep);
            disown(self.shared, self.keep);
        }
    }
}

/// The suite's outcome once every trial of `state` has finished.
fn outcome(
    state: &RunState,
    opts: &SuiteOptions,
    filtered: bool,
    conclusion: Conclusion,
) -> SuiteOutcome {
    let checks: Vec<CheckResult> = std::mem::take(&mut *crate::lock(&state.results))
        .into_values()
        .collect();
    let (plugin_calls, plugin_busy) = busy_time(
        std::mem::take(&mut *crate::lock(&state.calls)),
        &state.shared,
    );
    let mut report = Report::new(
        crate::contract::SPEC_VERSION,
        evidence::plugin_info(&state.shared),
        RunOptions {
            strict: opts.strict,
            timeout_scale: opts.settings.timeout_scale,
            fixture: opts.fixture.clone(),
            filtered,
        },
        checks,
        checks::timing_profiles(&state.shared),
    );
    if let Some(change) = state.shared.pin.as_ref().and_then(|p| p.change()) {
        report.mark_plugin_changed(plugin_changed(change));
    }
    report.space_limited = state.space.limited();
    report.conditions = Some(crate::report::RunConditions {
        cores: evidence::cores(),
        load_average_start: state.load_start,
        load_average_end: evidence::load_average(),
    });
    SuiteOutcome {
        report,
        conclusion,
        harness_failed: *crate::lock(&state.harness_failed),
        plugin_calls,
        plugin_busy,
        teardown: Teardown::default(),
        interrupted: None,
    }
}

/// The report's record of a plugin file changed mid-run.
pub(crate) fn plugin_changed(change: crate::plugin::PluginChange) -> crate::report::PluginChanged {
    crate::report::PluginChanged {
        calls_before: change.calls_before,
        sha256_before: change.sha256_before,
        sha256_after: change.sha256_after,
        detail: change.detail,
    }
}

/// Counts every plugin call once: each check's own calls, plus the shared
/// probes' calls, which live in the run's log (a check that awaited a probe
/// does not record it). A call is known by when it started and its pid. The
/// one call left out is the probes' clean-up delete after the last check,
/// which nothing records.
fn busy_time(check_runs: Vec<PluginRun>, shared: &Shared) -> (usize, Duration) {
    let logged: Vec<_> = shared
        .log
        .calls()
        .into_iter()
        .filter_map(|c| c.run)
        .collect();
    let mut seen = HashSet::new();
    let mut busy = Duration::ZERO;
    for run in check_runs.iter().chain(logged.iter().map(|r| &**r)) {
        let pid = run.result.as_ref().map(|o| o.pid).ok();
        if seen.insert((run.started_at, pid, run.operation.clone())) {
            busy += run.duration();
        }
    }
    (seen.len(), busy)
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
