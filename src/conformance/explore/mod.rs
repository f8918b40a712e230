//! `dhv-conform explore`: random histories of operations on one node,
//! each played on a fresh sandboxed node of the run with the node's model
//! and its oracle after every operation (the `history.*` checks' model);
//! the first failing history is shrunk (delta debugging, every candidate
//! replayed on a fresh node) to a minimal one. Every plugin call takes the
//! checks' path: the run's sandbox, call limits, supervisor, interrupts and
//! teardown (see docs/histories.md).

mod generate;
mod history;
mod play;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use generate::Rng;
pub use history::{Capacity, Op, Params, Step, Task, normalise};

use super::context::{Asker, Finding, ProbeOwners, ScenarioRun, Settings, Shared};
use super::engine::EngineError;
use super::teardown::Teardown;

/// Who `explore`'s calls are made for, in the run's log and sandboxes.
const ASKER: Asker = Asker {
    id: "explore",
    subject: None,
    repeats: false,
};

/// The most candidates a failing history's shrinking replays.
const SHRINK_REPLAYS: usize = 400;

/// The shortest and longest history drawn.
const LENGTHS: (usize, usize) = (3, 10);

/// Told as `explore` goes.
pub type ProgressHook = Arc<dyn Fn(&ExploreProgress) + Send + Sync>;

/// How `explore` runs.
#[derive(Clone)]
pub struct ExploreOptions {
    /// The plugin and the request template (fixture) the volumes start from.
    pub settings: Settings,
    /// The seed every history is drawn from.
    pub seed: u64,
    /// How long to look for a failing history (shrinking one is not counted).
    pub budget: Duration,
    /// Stop after this many histories, even within the budget.
    pub max_histories: Option<u64>,
    /// Play this history once instead of exploring (`--replay`).
    pub replay: Option<Vec<Op>>,
    /// Where the run's temp dir is made [default: TMPDIR].
    pub work_dir: Option<PathBuf>,
    /// Leave the run's temp dir in place.
    pub keep: bool,
    /// Told after every history and shrinking step.
    pub progress: Option<ProgressHook>,
}

/// Where `explore` is.
#[derive(Debug, Clone, Copy)]
pub struct ExploreProgress {
    /// Operations played so far.
    pub operations: u64,
    /// Histories played so far (shrinking's replays included).
    pub histories: u64,
    /// Time since exploring began.
    pub elapsed: Duration,
    /// The budget.
    pub budget: Duration,
    /// A failing history was found and is being shrunk.
    pub shrinking: bool,
}

/// The minimal failing history found.
#[derive(Debug, Clone)]
pub struct Failing {
    /// Its steps, the last one with what the oracle saw.
    pub steps: Vec<Step>,
    /// How many operations the history had when found.
    pub found_with: usize,
    /// How many candidates shrinking replayed.
    pub shrink_replays: usize,
}

/// What `explore` came to.
#[derive(Debug)]
pub struct ExploreOutcome {
    /// The seed.
    pub seed: u64,
    /// Histories played (shrinking's replays included).
    pub histories: u64,
    /// Operations played.
    pub operations: u64,
    /// The minimal failing history, if one was found.
    pub failing: Option<Failing>,
    /// The harness itself failed (a sandbox not made, a panic), and how.
    pub harness_error: Option<String>,
    /// The signal that cut the run short, if one did.
    pub interrupted: Option<i32>,
    /// What the end of the run did with its temp dir.
    pub teardown: Teardown,
    /// Plugin calls made, and the sum of their run times (spawn to exit).
    pub plugin_calls: usize,
    /// See `plugin_calls`.
    pub plugin_busy: Duration,
    /// Wall time of exploring (and shrinking), the teardown left out.
    pub elapsed: Duration,
}

/// Runs `explore`: the run's temp dir, the histories, the teardown. SIGINT,
/// SIGTERM and SIGHUP end it through its teardown, as they end `check`.
pub fn run_explore(
    rt: &tokio::runtime::Runtime,
    opts: &ExploreOptions,
) -> Result<ExploreOutcome, EngineError> {
    let signals = super::interrupt::Signals::install(rt);
    let root =
        super::leftovers::make_root(opts.work_dir.as_deref()).map_err(EngineError::TempDir)?;
    let shared = Arc::new(Shared::new(
        opts.settings.clone(),
        root,
        ProbeOwners::all(ASKER),
        super::host::local(),
    ));
    signals.watch(&shared.supervisor);
    let mut tally = Tally::default();
    let started = Instant::now();
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(explore(&shared, opts, &mut tally, started))
    }));
    let elapsed = started.elapsed();
    let teardown = super::teardown::finish(
        rt,
        &super::engine_trial::run_end(&shared),
        &signals,
        opts.keep,
    );
    super::leftovers::disown(shared.root_dir.path(), opts.keep);
    let (failing, harness_error) = match found {
        Ok(Ok(failing)) => (failing, None),
        Ok(Err(e)) => (None, Some(e)),
        Err(panic) => (
            None,
            Some(format!("explore panicked: {}", crate::panic_text(&*panic))),
        ),
    };
    Ok(ExploreOutcome {
        seed: opts.seed,
        histories: tally.histories,
        operations: tally.operations,
        failing,
        harness_error,
        interrupted: signals.received(),
        teardown,
        plugin_calls: tally.calls,
        plugin_busy: tally.busy,
        elapsed,
    })
}

/// What the histories played so far came to.
#[derive(Default)]
struct Tally {
    histories: u64,
    operations: u64,
    calls: usize,
    busy: Duration,
}

async fn explore(
    shared: &Arc<Shared>,
    opts: &ExploreOptions,
    tally: &mut Tally,
    started: Instant,
) -> Result<Option<Failing>, String> {
    let baseline = {
        let run = sandbox(shared, "explore-fresh")?;
        let fp = play::fresh_fingerprint(run.ctx()).await;
        let _ = run.finish(Finding::Pass(String::new())).await;
        fp
    };
    let baseline = baseline.as_deref();
    let tell = |tally: &Tally, shrinking: bool| {
        if let Some(hook) = &opts.progress {
            hook(&ExploreProgress {
                operations: tally.operations,
                histories: tally.histories,
                elapsed: started.elapsed(),
                budget: opts.budget,
                shrinking,
            });
        }
    };
    if let Some(ops) = &opts.replay {
        let played = replay(shared, tally, ops, baseline, None).await?;
        return Ok(played.failed.then_some(Failing {
            found_with: ops.len(),
            steps: played.steps,
            shrink_replays: 0,
        }));
    }
    let mut rng = Rng::new(opts.seed);
    while started.elapsed() < opts.budget
        && opts.max_histories.is_none_or(|m| tally.histories < m)
        && !shared.supervisor.is_cancelled()
    {
        let len = LENGTHS.0 + rng.below(LENGTHS.1 - LENGTHS.0 + 1);
        let ops = generate::history(&mut rng, len);
        let played = replay(shared, tally, &ops, baseline, Some(started + opts.budget)).await?;
        tell(tally, false);
        if played.failed {
            let found_with = played.steps.len();
            let (steps, shrink_replays) =
                shrink(shared, tally, played.steps, baseline, &tell).await?;
            return Ok(Some(Failing {
                steps,
                found_with,
                shrink_replays,
            }));
        }
    }
    Ok(None)
}

/// Shrinks the failing `steps` (delta debugging: the candidates of
/// [`generate::candidates`], each replayed on a fresh node; the first that
/// still fails is kept, until none does).
async fn shrink(
    shared: &Arc<Shared>,
    tally: &mut Tally,
    mut steps: Vec<Step>,
    baseline: Option<&str>,
    tell: &impl Fn(&Tally, bool),
) -> Result<(Vec<Step>, usize), String> {
    let mut replays = 0;
    'smaller: loop {
        let ops: Vec<Op> = steps.iter().map(|s| s.op.clone()).collect();
        for candidate in generate::candidates(&ops) {
            if replays >= SHRINK_REPLAYS || shared.supervisor.is_cancelled() {
                break 'smaller;
            }
            replays += 1;
            let played = replay(shared, tally, &candidate, baseline, None).await?;
            tell(tally, true);
            if played.failed {
                steps = played.steps;
                continue 'smaller;
            }
        }
        break;
    }
    Ok((steps, replays))
}

/// Plays `ops` once, on a fresh node of its own, until `deadline` if given.
async fn replay(
    shared: &Arc<Shared>,
    tally: &mut Tally,
    ops: &[Op],
    baseline: Option<&str>,
    deadline: Option<Instant>,
) -> Result<play::Played, String> {
    let run = sandbox(shared, &format!("explore-{}", tally.histories))?;
    let played = play::play(run.ctx(), ops, baseline, deadline).await;
    let (_, runs, _) = run.finish(Finding::Pass(String::new())).await;
    tally.histories += 1;
    tally.operations += played.steps.len() as u64;
    // Each call once: a run recorded twice (cited and recorded) is known
    // by when it started and its pid.
    let mut seen = std::collections::HashSet::new();
    for run in &runs {
        let pid = run.result.as_ref().map(|o| o.pid).ok();
        if seen.insert((run.started_at, pid, run.operation.clone())) {
            tally.calls += 1;
            tally.busy += run.duration();
        }
    }
    Ok(played)
}

/// A fresh node: the new dir `dir` of the run, with its volumes dir.
fn sandbox(shared: &Arc<Shared>, dir: &str) -> Result<ScenarioRun, String> {
    ScenarioRun::in_dir(shared.clone(), ASKER, dir)
        .map_err(|e| format!("cannot make the sandbox {dir}: {e}"))
}
