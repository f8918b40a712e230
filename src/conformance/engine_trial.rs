//! One trial per check, and what the trials of one run share: the barriers
//! between the run's phases (parallel, exclusive, run-wide, closing), the
//! clearing of the run's end before the closing checks, and a check run on
//! its trial's thread, its finding turned into a result. The engine
//! (`engine.rs`) makes the run's [`RunState`], hands libtest-mimic a trial
//! per check, and turns what the trials recorded into the suite's outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use libtest_mimic::{Completion, Failed};

use super::catalogue::CheckSpec;
use super::checks::CheckFn;
use super::checks::process::{AGENT_UNTOUCHED, INTERFERED_SKIP, interfered, mounted_over};
use super::context::{Fact, Finding, RunLog, ScenarioRun, Shared};
use super::progress::{Progress, ProgressEvent};
use super::teardown::Teardown;
use super::verdict::{libtest_verdict, to_result};
use crate::plugin::PluginRun;
use crate::report::{CheckResult, Phase};

/// The skip reason of a check a signal cut short.
pub(super) const INTERRUPTED: &str = "interrupted";

/// What a check came to: its finding, the calls behind it, and why a
/// snapshot does not pin it (when it does not).
type Checked = (Finding, Vec<PluginRun>, Option<String>);

/// Counts the non-aggregate checks still running, so aggregates can wait.
pub(super) struct Barrier {
    remaining: Mutex<usize>,
    done: Condvar,
}

impl Barrier {
    /// A barrier that lets its waiters go once `n` checks have finished.
    pub(super) fn new(n: usize) -> Barrier {
        Barrier {
            remaining: Mutex::new(n),
            done: Condvar::new(),
        }
    }

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
pub(super) struct RunState {
    pub(super) shared: Arc<Shared>,
    /// Counts the checks of the parallel phase: the exclusive phase waits
    /// for it (see [`CheckSpec::phase`]).
    pub(super) parallel: Arc<Barrier>,
    /// Held by an exclusive check while it runs: one at a time.
    pub(super) exclusive: Arc<Mutex<()>>,
    /// Counts the parallel and exclusive checks: the run-wide ones wait for it.
    pub(super) barrier: Arc<Barrier>,
    /// Counts every check but the closing ones, which wait for it (see
    /// [`Needs::RunEnd`](crate::report::Needs::RunEnd)).
    pub(super) closing: Arc<Barrier>,
    /// The plan of the work filesystem's space: a check starts once what it
    /// holds fits (see [`super::space`]).
    pub(super) space: Arc<super::space::SpacePlan>,
    /// What clearing the run's end for the closing checks did, once it ran:
    /// the final teardown tells it with its own.
    pub(super) cleared: Arc<Mutex<Option<Teardown>>>,
    /// The run's signals: a second one cuts the clearing's deletes short.
    pub(super) signals: Arc<super::interrupt::Signals>,
    /// `--keep`: the run's end is cleared without removing anything.
    pub(super) keep: bool,
    /// The checks running now, by id: which of them made the call that
    /// touched the harness, when a plugin does (see [`Fact::Interfered`]).
    pub(super) running: Arc<Mutex<BTreeSet<&'static str>>>,
    pub(super) results: Arc<Mutex<BTreeMap<&'static str, CheckResult>>>,
    pub(super) harness_failed: Arc<Mutex<bool>>,
    pub(super) calls: Arc<Mutex<Vec<PluginRun>>>,
    pub(super) handle: tokio::runtime::Handle,
    pub(super) strict: bool,
    /// The load average when the run started.
    pub(super) load_start: Option<[f64; 3]>,
    /// When the run started: the origin of the calls' start offsets.
    pub(super) started: Instant,
    pub(super) progress: Progress,
}

/// What the teardown needs of the run's shared state.
pub(super) fn run_end(shared: &Shared) -> super::teardown::RunEnd<'_> {
    super::teardown::RunEnd {
        live: &shared.live,
        target: &shared.settings.target,
        timeouts: shared.settings.timeouts(),
        root: &shared.root_dir,
        planted: &shared.planted,
        owner_file: super::leftovers::OWNER_FILE,
        transport: shared.live_calls.owned(shared.host.transport(), ""),
    }
}

impl RunState {
    /// One trial: the check, its result recorded, libtest's verdict returned.
    pub(super) fn trial(&self, spec: &'static CheckSpec) -> Result<Completion, Failed> {
        // Let in before its phase (in the run's order): one let in waits
        // only for checks let in before it (see `super::space`).
        let space = self.space.admit(spec);
        let _alone = self.enter_phase(spec);
        self.progress.send(ProgressEvent::Started(spec.id));
        let start = Instant::now();
        // Seen before it starts: a check started once the plugin touched
        // the harness is skipped, and not among the ones it was seen during.
        self.notice_interference();
        crate::lock(&self.running).insert(spec.id);
        let (finding, runs, unpinned) = self.checked(spec, space.as_ref().err());
        self.notice_interference();
        crate::lock(&self.running).remove(spec.id);
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
        self.progress.send(ProgressEvent::Finished(&result));
        crate::lock(&self.calls).extend(runs);
        let verdict = libtest_verdict(&result, self.strict);
        crate::lock(&self.results).insert(spec.id, result);
        self.shared.awaited.ended(spec.id);
        self.leave_phase(spec);
        drop(space);
        verdict
    }

    /// Waits until the check's phase may start; for an exclusive check, the
    /// hold that keeps every other exclusive check out while it runs.
    fn enter_phase(&self, spec: &'static CheckSpec) -> Option<MutexGuard<'_, ()>> {
        match spec.phase() {
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
        }
    }

    /// The check run on this thread: what it found, or the harness error
    /// its panic or its sandbox makes.
    fn checked(&self, spec: &'static CheckSpec, no_room: Option<&String>) -> Checked {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.on_this_thread(self.check(spec, no_room))
        }));
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
        if self.shared.supervisor.is_cancelled() {
            (Finding::Skip(INTERRUPTED.into()), Vec::new(), None)
        } else {
            (finding, runs, unpinned)
        }
    }

    /// Counts the check out of the barriers the later phases wait on.
    fn leave_phase(&self, spec: &'static CheckSpec) {
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
                held_elsewhere: done.held_elsewhere.clone(),
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
    async fn check(
        &self,
        spec: &'static CheckSpec,
        no_room: Option<&String>,
    ) -> std::io::Result<Checked> {
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
        if let Some(fact) = self.interfered() {
            // What a check would see is no longer the plugin alone: the
            // harness was moved, frozen or traced, and undid it. Nothing more
            // is asked of the plugin; the finding is already made.
            let finding = match spec.id == AGENT_UNTOUCHED.id {
                true => mounted_over(&self.shared.facts.all())
                    .unwrap_or_else(|| interfered(&fact, &self.shared.log.calls())),
                false => Finding::Skip(INTERFERED_SKIP.into()),
            };
            return Ok((finding, Vec::new(), None));
        }
        if let Some(reason) = no_room {
            // What it holds at once does not fit the work filesystem: the
            // host's limit, not the plugin's doing.
            return Ok((Finding::Skip(reason.clone()), Vec::new(), None));
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

    /// Publishes what the plugin did to the process that runs it, the first
    /// time the supervisor says it (with the checks running then), for
    /// `process.agent-untouched`; what was published, once it was.
    pub(super) fn notice_interference(&self) -> Option<Fact> {
        // Mounts over the harness's dirs, detached at once: published, and
        // the run goes on (later calls see the dirs as they were).
        for what in self.shared.supervisor.mounts_undone() {
            self.shared.facts.publish(Fact::MountedOver { what });
        }
        // Held while looking and publishing: one fact, whoever sees it first.
        let running = crate::lock(&self.running);
        if let Some(fact) = self.interfered() {
            return Some(fact);
        }
        let what = self.shared.supervisor.interrupted()?;
        // The call that did it may still be running: it is looked for when
        // the fact is judged (see `checks::process::interfered`).
        let fact = Fact::Interfered {
            what,
            by: None,
            during: running.iter().copied().collect(),
        };
        self.shared.facts.publish(fact.clone());
        Some(fact)
    }

    /// What the plugin did to the process that runs it, once published.
    fn interfered(&self) -> Option<Fact> {
        let facts = self.shared.facts.all();
        facts
            .into_iter()
            .find(|f| matches!(f, Fact::Interfered { .. }))
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
}
