//! The engine: one libtest-mimic trial per catalogue check, run in parallel,
//! each on its trial's thread with a tokio runtime of its own (the run's
//! shared runtime listens for signals and runs the teardown) and in its own
//! sandbox; then the result model.
//!
//! Checks judged over the whole run (deadlines, leaks, clean failures, timing)
//! are trials too, placed last: they wait until every other selected check has
//! finished, then read the run's call log. Filtering is applied here, before
//! libtest-mimic sees the trials, so the set being waited for is exactly the set
//! that runs.

use std::collections::{BTreeMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};

use super::catalogue::{CATALOGUE, CheckSpec};
use super::checks::{self, CheckFn};
use super::context::{Finding, RunLog, ScenarioRun, Settings, Shared};
use super::evidence;
use super::verdict::{libtest_verdict, to_result};
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
    pub progress: super::Progress,
    /// `--keep`: leave the run's temp dir in place (mounts below it are still
    /// unmounted), so that reproduce lines work when pasted.
    pub keep: bool,
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
    pub teardown: super::Teardown,
    /// The number of the signal (SIGINT, SIGTERM, SIGHUP) that cut the run
    /// short, if one did: the report is whole, the checks it cut short are
    /// `skip` (`interrupted`), and [`Report::interrupted`] names it.
    pub interrupted: Option<i32>,
}

/// The skip reason of a check a signal cut short.
pub const INTERRUPTED: &str = "interrupted";

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

/// What a check came to: its finding, the calls behind it, and why a
/// snapshot does not pin it (when it does not).
type Checked = (Finding, Vec<PluginRun>, Option<String>);

/// Counts the non-aggregate checks still running, so aggregates can wait.
struct Barrier {
    remaining: Mutex<usize>,
    done: Condvar,
}

impl Barrier {
    fn finish_one(&self) {
        let mut n = crate::lock(&self.remaining);
        *n = n.saturating_sub(1);
        // The waiters wait for zero: waking them at every check that ends
        // (each wakes, takes the lock and sleeps again) is CPU for nothing.
        if *n == 0 {
            self.done.notify_all();
        }
    }

    fn wait(&self) {
        let mut n = crate::lock(&self.remaining);
        while *n > 0 {
            n = self.done.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// What every trial of one run shares.
#[derive(Clone)]
struct RunState {
    shared: Arc<Shared>,
    /// Counts the checks of the parallel phase: the exclusive phase waits
    /// for it (see [`CheckSpec::phase`]).
    parallel: Arc<Barrier>,
    /// Held by an exclusive check while it runs: one at a time.
    exclusive: Arc<Mutex<()>>,
    /// Counts the parallel and exclusive checks: the run-wide ones wait for it.
    barrier: Arc<Barrier>,
    /// Counts every check but the closing ones, which wait for it (see
    /// [`Needs::RunEnd`](crate::report::Needs::RunEnd)).
    closing: Arc<Barrier>,
    /// What clearing the run's end for the closing checks did, once it ran:
    /// the final teardown tells it with its own.
    cleared: Arc<Mutex<Option<super::Teardown>>>,
    /// The run's signals: a second one cuts the clearing's deletes short.
    signals: Arc<super::interrupt::Signals>,
    /// `--keep`: the run's end is cleared without removing anything.
    keep: bool,
    results: Arc<Mutex<BTreeMap<&'static str, CheckResult>>>,
    harness_failed: Arc<Mutex<bool>>,
    calls: Arc<Mutex<Vec<PluginRun>>>,
    handle: tokio::runtime::Handle,
    strict: bool,
    /// The load average when the run started.
    load_start: Option<[f64; 3]>,
    /// When the run started: the origin of the calls' start offsets.
    started: Instant,
    progress: super::Progress,
}

/// What the teardown needs of the run's shared state.
fn run_end(shared: &Shared) -> super::teardown::RunEnd<'_> {
    super::teardown::RunEnd {
        live: &shared.live,
        target: &shared.settings.target,
        timeouts: shared.settings.timeouts(),
        root: &shared.root_dir,
        planted: &shared.planted,
        owner_file: super::leftovers::OWNER_FILE,
    }
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
    let shared = Arc::new(Shared::new(
        opts.settings.clone(),
        root,
        checks::PROBE_OWNERS,
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
    let count = |phase: Phase| chosen.iter().filter(|c| c.phase() == phase).count();
    let state = RunState {
        shared,
        parallel: Arc::new(Barrier {
            remaining: Mutex::new(count(Phase::Parallel)),
            done: Condvar::new(),
        }),
        exclusive: Arc::default(),
        barrier: Arc::new(Barrier {
            remaining: Mutex::new(count(Phase::Parallel) + count(Phase::Exclusive)),
            done: Condvar::new(),
        }),
        closing: Arc::new(Barrier {
            remaining: Mutex::new(chosen.len() - count(Phase::Closing)),
            done: Condvar::new(),
        }),
        cleared: Arc::default(),
        signals: Arc::new(signals.share()),
        keep: opts.keep,
        results: Arc::default(),
        harness_failed: Arc::new(Mutex::new(false)),
        calls: Arc::default(),
        handle: rt.handle().clone(),
        strict: opts.strict,
        load_start: evidence::load_average(),
        started: Instant::now(),
        progress: opts.progress.clone(),
    };
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
    opts.progress
        .send(super::ProgressEvent::Run(super::InFlight::new(
            state.shared.supervisor.clone(),
            state.shared.root.clone(),
        )));
    // The run's plan: the parallel checks, then the exclusive ones, then the
    // run-wide ones, then the closing ones, so with any number of threads
    // each phase is dispatched after every check it waits for.
    // Within a phase, the checks others wait for go first: a waiting check
    // never holds the thread the one it waits for would run on.
    let mut ordered = chosen.clone();
    ordered.sort_by_key(|c| (c.phase(), !checks::AWAITED.contains(c)));
    state.shared.awaited.expect(
        ordered
            .iter()
            .filter(|c| checks::AWAITED.contains(c))
            .map(|c| c.id),
    );
    let trials: Vec<Trial> = ordered
        .into_iter()
        .map(|spec| {
            let state = state.clone();
            Trial::ignorable_test(spec.id, move || state.trial(spec)).with_kind(spec.level.as_str())
        })
        .collect();

    // The filter was applied above; libtest must not filter again.
    let mut args = opts.libtest.clone();
    args.filter = None;
    args.skip.clear();
    args.exact = false;
    let conclusion = libtest_mimic::run(&args, trials);
    let mut outcome = state.outcome(&opts, chosen.len() != CATALOGUE.len(), conclusion);
    guard.armed = false;
    let teardown = super::teardown::finish(rt, &run_end(&state.shared), &signals, opts.keep);
    disown(&state.shared, opts.keep);
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
    // A plugin that captured the harness (moved it into a cgroup of the
    // run's, froze the run, traced it): the harness undid it, but what ran
    // meanwhile is not to be trusted. Said, and exit 4.
    if let Some(what) = state.shared.supervisor.interrupted() {
        outcome.harness_failed = true;
        outcome
            .report
            .interrupted
            .get_or_insert(format!("the plugin: {what}"));
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

impl RunState {
    /// One trial: the check, its result recorded, libtest's verdict returned.
    fn trial(&self, spec: &'static CheckSpec) -> Result<Completion, Failed> {
        let _alone = match spec.phase() {
            Phase::Parallel => None,
            Phase::Exclusive => {
                self.parallel.wait();
                Some(crate::lock(&self.exclusive))
            }
            Phase::RunWide => {
                self.barrier.wait();
                None
            }
            Phase::Closing => {
                self.closing.wait();
                self.clear_run_end();
                None
            }
        };
        self.progress.send(super::ProgressEvent::Started(spec.id));
        let start = Instant::now();
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.on_this_thread(self.check(spec))));
        let (finding, runs, unpinned) = match outcome {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => self.harness_error(format!("cannot make the check's sandbox: {e}")),
            Err(panic) => {
                let what = crate::panic_text(&*panic);
                self.harness_error(format!("the check panicked: {what}"))
            }
        };
        // A check that ends once the run is cancelled was cut short: its
        // killed calls say nothing about the plugin, so it is never failed.
        let (finding, runs, unpinned) = if self.shared.supervisor.is_cancelled() {
            (Finding::Skip(INTERRUPTED.into()), Vec::new(), None)
        } else {
            (finding, runs, unpinned)
        };
        let limits = self.shared.settings.timeouts();
        let mut result = to_result(
            spec,
            finding,
            start.elapsed(),
            &runs,
            &self.in_flight(),
            &limits,
            self.started,
        );
        result.unpinned = unpinned;
        self.progress.send(super::ProgressEvent::Finished(&result));
        crate::lock(&self.calls).extend(runs);
        let verdict = libtest_verdict(&result, self.strict);
        crate::lock(&self.results).insert(spec.id, result);
        self.shared.awaited.ended(spec.id);
        match spec.phase() {
            Phase::Parallel => {
                self.parallel.finish_one();
                self.barrier.finish_one();
            }
            Phase::Exclusive => self.barrier.finish_one(),
            Phase::RunWide | Phase::Closing => {}
        }
        if spec.phase() != Phase::Closing {
            self.closing.finish_one();
        }
        verdict
    }

    /// Clears the run's end for the closing checks, once (every other check
    /// has finished): the teardown's deletes, unmounts and detaches, and a
    /// trial removal of the checks' dirs. What could not be removed is a
    /// fact for the check whose rule owns it; nothing of it is done once
    /// the run is interrupted (the teardown does it all).
    fn clear_run_end(&self) {
        let mut cleared = crate::lock(&self.cleared);
        if cleared.is_some() || self.shared.supervisor.is_cancelled() {
            return;
        }
        let done = super::teardown::clear(
            &self.handle,
            &run_end(&self.shared),
            &self.signals,
            self.keep,
        );
        let left = done.left();
        if !left.is_empty() {
            self.shared.facts.publish(super::context::Fact::RunEndLeft {
                temp_dir: done.temp_dir.clone(),
                left,
            });
        }
        *cleared = Some(done);
    }

    /// Runs a check on its trial's thread, on a runtime of its own (one
    /// thread, made for the trial): its calls' events then wake this thread
    /// itself, where on the shared runtime a worker takes each one and wakes
    /// this thread in turn (a hand-off measured at 0.03 ms a call, most of
    /// what the runner adds to a bare spawn). Tokio's timers, pipes and locks work across
    /// runtimes, so the checks' shared gates and barriers are unchanged. On
    /// the shared runtime where one cannot be made.
    fn on_this_thread<F: Future>(&self, check: F) -> F::Output {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(own) => own.block_on(check),
            Err(_) => self.handle.block_on(check),
        }
    }

    /// Runs the check's function: a scenario in its own sandbox, or a
    /// run-wide judgement over the call log.
    async fn check(&self, spec: &'static CheckSpec) -> std::io::Result<Checked> {
        if self.shared.supervisor.is_cancelled() {
            // Interrupted: no check starts any more.
            return Ok((Finding::Skip(INTERRUPTED.into()), Vec::new(), None));
        }
        if let Some(reason) = self.shared.settings.claims.skip_reason(spec.id) {
            // The config's choice, shown in every report: a gate visibly weakened.
            return Ok((
                Finding::Skip(format!("skipped by the config: {reason}")),
                Vec::new(),
                None,
            ));
        }
        match spec.run {
            CheckFn::RunWide(judge, _) => {
                // Timing is judged on calls made alone: the first run-wide
                // check makes them, once every parallel check has finished.
                self.shared.timing_phase().await;
                let log = RunLog::new(
                    self.shared.log.calls(),
                    self.shared.settings.target.is_builtin(),
                    &self.shared,
                );
                let finding = judge(&log).unwrap_or_else(|f| f);
                Ok((finding, log.evidence(), log.unpinned()))
            }
            CheckFn::Scenario(body, _) => {
                let run = match ScenarioRun::new(self.shared.clone(), spec.asker()) {
                    Ok(run) => run,
                    // Something made the check's dir before the harness did:
                    // only a plugin writing outside its volumes dir can have.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Ok((
                            Finding::Fail(format!(
                                "the check's own dir in the run's temp dir: {e} \
                                 (made by something outside its volumes dir)"
                            )),
                            Vec::new(),
                            None,
                        ));
                    }
                    Err(e) => return Err(e),
                };
                let finding = body(run.ctx()).await.unwrap_or_else(|f| f);
                Ok(run.finish(finding).await)
            }
        }
    }

    /// How many calls of the run were in flight when each logged call started.
    fn in_flight(&self) -> std::collections::HashMap<Instant, usize> {
        self.shared.log.in_flight_by_start()
    }

    fn harness_error(&self, what: String) -> Checked {
        *crate::lock(&self.harness_failed) = true;
        (
            Finding::Fail(format!("harness error: {what}")),
            Vec::new(),
            None,
        )
    }

    /// The suite's outcome once every trial has finished.
    fn outcome(&self, opts: &SuiteOptions, filtered: bool, conclusion: Conclusion) -> SuiteOutcome {
        let checks: Vec<CheckResult> = std::mem::take(&mut *crate::lock(&self.results))
            .into_values()
            .collect();
        let (plugin_calls, plugin_busy) =
            busy_time(std::mem::take(&mut *crate::lock(&self.calls)), &self.shared);
        let mut report = Report::new(
            crate::contract::SPEC_VERSION,
            evidence::plugin_info(&self.shared),
            RunOptions {
                strict: opts.strict,
                timeout_scale: opts.settings.timeout_scale,
                fixture: opts.fixture.clone(),
                filtered,
            },
            checks,
            checks::timing_profiles(&self.shared),
        );
        if let Some(change) = self.shared.pin.as_ref().and_then(|p| p.change()) {
            report.mark_plugin_changed(plugin_changed(change));
        }
        report.conditions = Some(crate::report::RunConditions {
            cores: evidence::cores(),
            load_average_start: self.load_start,
            load_average_end: evidence::load_average(),
        });
        SuiteOutcome {
            report,
            conclusion,
            harness_failed: *crate::lock(&self.harness_failed),
            plugin_calls,
            plugin_busy,
            teardown: super::Teardown::default(),
            interrupted: None,
        }
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
