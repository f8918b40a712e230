//! The conformance suite as a library: [`run`] from async code (inside the caller's
//! tokio runtime), [`run_blocking`] from plain sync code.
//!
//! A run is the CLI's `check` without the CLI: the same checks, the same report, the
//! same teardown. What it does not do to the host program:
//! - it needs no runtime of the caller's and nests none: the suite runs on a thread
//!   and a tokio runtime of its own, so calling it from `#[tokio::main]` is fine;
//! - it prints nothing unless [`SuiteConfig::print`] asks for the libtest-style lines;
//! - it installs no signal handler unless [`SuiteConfig::handle_signals`] asks. Then
//!   SIGINT, SIGTERM and SIGHUP end the run through its teardown; tokio keeps its
//!   handlers registered for the rest of the process, so a program that wants its
//!   own SIGINT handling leaves this off and cancels by dropping the future;
//! - whatever happens inside, the teardown runs, exactly as the CLI's does: every
//!   volume still alive is deleted through the plugin, mounts below the run's temp
//!   dir are unmounted (loop devices detached with them), the temp dir is removed.
//!   A panic in the [`SuiteConfig::progress`] hook cancels the run, the teardown
//!   runs, and the panic then resumes in the caller. Dropping the future of [`run`]
//!   cancels the run: its plugin calls are killed and the teardown runs on the
//!   suite's thread (a program that exits at once may cut it short: await the run
//!   to be sure).
//!
//! # Example: from async code
//!
//! Inside the caller's runtime (here `#[tokio::main]`), the built-in `mkdir` plugin:
//!
//! ```
//! use dhv_conform::suite::{SuiteConfig, run};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut config = SuiteConfig::new("mkdir"); // or "/opt/nomad/plugins/my-plugin"
//!     config.filter = Some("create.succeeds".into());
//!     config.exact = true;
//!     let done = run(config).await?;
//!     assert_eq!(done.report.summary.verdict.as_str(), "conformant");
//!     assert_eq!(done.exit_code(), 0);
//!     Ok(())
//! }
//! ```
//!
//! # Example: from sync code
//!
//! The built-in `mkdir` plugin, two checks, the report's counts:
//!
//! ```
//! use dhv_conform::suite::{SuiteConfig, run_blocking};
//!
//! let mut config = SuiteConfig::new("mkdir");
//! config.filter = Some("create.".into());
//! config.test_threads = Some(2);
//! let done = run_blocking(config).expect("the suite ran");
//! assert!(done.teardown.removed);
//! assert_eq!(done.report.summary.failed, 0);
//! assert_eq!(done.report.summary.total, done.report.checks.len());
//! ```

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::conformance::{self, Settings, SuiteOptions};

pub use crate::conformance::{
    Attachment, CATALOGUE, CheckSpec, Claims, Effect, EngineError, InFlight, ParameterClaim,
    Progress, ProgressEvent, RequestTemplate, TEARDOWN_DEADLINE, Target, Teardown,
};
use crate::report::Report;

/// How a library run is made. [`SuiteConfig::new`] gives the CLI's defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SuiteConfig {
    /// The plugin: an executable, or the built-in `mkdir`.
    pub plugin: Target,
    /// The request the checks send (a fixture's, or the default one).
    pub template: RequestTemplate,
    /// Nomad's time limits times this (`--timeout-scale`).
    pub timeout_scale: f64,
    /// What the plugin claims its volumes are, and checks skipped with a reason
    /// (a `dhv-conform.toml`'s `[claims]` and `[skip]`). [`SuiteConfig::new`]
    /// gives the built-in `mkdir` Nomad's own claims, and no claim otherwise.
    pub claims: Claims,
    /// Should-level failures fail the run (`--strict`).
    pub strict: bool,
    /// Run only the checks whose id contains this (`check PLUGIN FILTER`).
    pub filter: Option<String>,
    /// The filter is an exact id (`--exact`).
    pub exact: bool,
    /// Leave out the checks whose id contains any of these (`--skip`).
    pub skip: Vec<String>,
    /// Checks run at once (`--test-threads`); `None`: one per core.
    pub test_threads: Option<usize>,
    /// Keep the run's temp dir (`--keep`; mounts below it are still unmounted).
    pub keep: bool,
    /// Where the run's temp dir is made (`--work-dir`); `None`: `TMPDIR`.
    pub work_dir: Option<PathBuf>,
    /// Print libtest-style lines to stdout as checks end. Off: nothing is printed.
    pub print: bool,
    /// Listen for SIGINT, SIGTERM and SIGHUP while the run lasts (see the module
    /// docs). Off: the host program's signal handling is left alone.
    pub handle_signals: bool,
    /// Told as each check starts and ends, from the checks' threads.
    pub progress: Progress,
}

impl SuiteConfig {
    /// The CLI's defaults for `plugin` (`mkdir` is the built-in, anything else a path).
    pub fn new(plugin: impl AsRef<str>) -> SuiteConfig {
        let plugin = Target::parse(plugin.as_ref());
        let claims = if plugin.is_builtin() {
            Claims::builtin_mkdir()
        } else {
            Claims::default()
        };
        SuiteConfig {
            plugin,
            template: RequestTemplate::default(),
            timeout_scale: 1.0,
            claims,
            strict: false,
            filter: None,
            exact: false,
            skip: Vec::new(),
            test_threads: None,
            keep: false,
            work_dir: None,
            print: false,
            handle_signals: false,
            progress: Progress::default(),
        }
    }
}

/// A finished run.
#[derive(Debug)]
#[non_exhaustive]
pub struct SuiteRun {
    /// The report; its `summary` holds the counts.
    pub report: Report,
    /// What the teardown did with the run's temp dir, and what it found left.
    pub teardown: Teardown,
    /// A check panicked or its sandbox could not be made: the harness failed.
    pub harness_failed: bool,
}

impl SuiteRun {
    /// The CLI's exit code for this run: 0 conformant, 1 non-conformant, 4 the
    /// harness failed.
    pub fn exit_code(&self) -> u8 {
        if self.harness_failed {
            4
        } else {
            self.report.exit_code()
        }
    }
}

/// Why a library run has no report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    /// The suite's own runtime or thread could not be started.
    #[error("cannot start the suite's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The run could not start, or a signal ended it (after its teardown).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// What the suite's thread hands back: its result, or the panic it caught.
type FromThread = Result<Result<SuiteRun, SuiteError>, Box<dyn Any + Send>>;

/// The signal number a cancelled library run records (SIGTERM's).
const CANCELLED: i32 = libc::SIGTERM;

/// Runs the suite from async code, on a thread and runtime of its own; see the
/// module docs. A panic inside (the progress hook's) resumes here after the
/// teardown; dropping the future cancels the run.
pub async fn run(config: SuiteConfig) -> Result<SuiteRun, SuiteError> {
    let (tx, rx) = tokio::sync::oneshot::channel::<FromThread>();
    let trigger = start(config, move |outcome| {
        let _ = tx.send(outcome);
    })?;
    let mut cancel = CancelOnDrop(Some(trigger));
    let outcome = rx.await;
    cancel.0 = None;
    finish(outcome.unwrap_or_else(|_| Err(Box::new("the suite's thread ended without a result"))))
}

/// Runs the suite from sync code, on a thread and runtime of its own, and waits for
/// it; see the module docs. A panic inside (the progress hook's) resumes here after
/// the teardown.
pub fn run_blocking(config: SuiteConfig) -> Result<SuiteRun, SuiteError> {
    let (tx, rx) = std::sync::mpsc::channel::<FromThread>();
    start(config, move |outcome| {
        let _ = tx.send(outcome);
    })?;
    finish(
        rx.recv()
            .unwrap_or_else(|_| Err(Box::new("the suite's thread ended without a result"))),
    )
}

fn finish(outcome: FromThread) -> Result<SuiteRun, SuiteError> {
    match outcome {
        Ok(result) => result,
        Err(panic) => resume_unwind(panic),
    }
}

/// Fires the run's trigger when the future awaiting it is dropped unfinished.
struct CancelOnDrop(Option<conformance::Trigger>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.fire(CANCELLED);
        }
    }
}

/// Starts the run on its own thread; `done` gets its outcome. Returns the trigger
/// that cancels it.
fn start(
    config: SuiteConfig,
    done: impl FnOnce(FromThread) + Send + 'static,
) -> Result<conformance::Trigger, SuiteError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("dhv-conform-suite")
        .build()
        .map_err(SuiteError::Runtime)?;
    let signals = if config.handle_signals {
        conformance::Signals::install(&rt)
    } else {
        conformance::Signals::manual()
    };
    let trigger = signals.trigger();
    let cancel = trigger.clone();
    std::thread::Builder::new()
        .name("dhv-conform-suite".into())
        .spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| suite(&rt, config, signals, cancel)));
            // The runtime ends here, on this thread, never inside the caller's.
            drop(rt);
            done(outcome);
        })
        .map_err(SuiteError::Runtime)?;
    Ok(trigger)
}

/// The run itself; a panic of the progress hook is caught, cancels the run, and is
/// raised again once the teardown is done.
fn suite(
    rt: &tokio::runtime::Runtime,
    config: SuiteConfig,
    signals: conformance::Signals,
    cancel: conformance::Trigger,
) -> Result<SuiteRun, SuiteError> {
    let panicked: Arc<Mutex<Option<Box<dyn Any + Send>>>> = Arc::default();
    let hook = config.progress.clone();
    let caught = panicked.clone();
    let progress = Progress::new(move |event: ProgressEvent<'_>| {
        if crate::lock(&caught).is_some() {
            return;
        }
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook.send(event))) {
            *crate::lock(&caught) = Some(panic);
            cancel.fire(CANCELLED);
        }
    });
    let opts = SuiteOptions {
        settings: Settings {
            target: config.plugin,
            template: config.template,
            timeout_scale: config.timeout_scale,
            claims: config.claims,
            pin: None,
        },
        strict: config.strict,
        fixture: None,
        libtest: libtest_args(
            &config.filter,
            config.exact,
            &config.skip,
            config.test_threads,
            config.print,
        ),
        progress,
        keep: config.keep,
    };
    let outcome = conformance::run_suite_with(rt, opts, signals, config.work_dir.as_deref());
    if let Some(panic) = crate::lock(&panicked).take() {
        resume_unwind(panic);
    }
    let outcome = outcome?;
    Ok(SuiteRun {
        report: outcome.report,
        teardown: outcome.teardown,
        harness_failed: outcome.harness_failed,
    })
}

fn libtest_args(
    filter: &Option<String>,
    exact: bool,
    skip: &[String],
    threads: Option<usize>,
    print: bool,
) -> libtest_mimic::Arguments {
    libtest_mimic::Arguments {
        filter: filter.clone(),
        exact,
        skip: skip.to_vec(),
        test_threads: threads,
        quiet: !print,
        // libtest-mimic writes its lines to the logfile instead of stdout.
        logfile: (!print).then(|| "/dev/null".to_owned()),
        ..libtest_mimic::Arguments::default()
    }
}
