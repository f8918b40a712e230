//! The conformance suite as a library: [`run`] from async code (inside the caller's
//! tokio runtime), [`run_blocking`] from plain sync code.
//!
//! A run is the CLI's `check` without the CLI: the same checks, the same report, the
//! same teardown, the same defaults (every check at once), and the same inputs:
//! [`SuiteConfig::from_files`] reads a plugin's `dhv-conform.toml` and a fixture as
//! `check PLUGIN --config FILE --fixture FILE` does, and a plugin, a config, a
//! fixture or a work dir that `check` refuses with exit 2 is a
//! [`SuiteError::Input`] here (its [`SuiteError::exit_code`] is 2), never a
//! non-conformant report. What it does not do to the host program:
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
//! # Example: as `dhv-conform check PLUGIN` with its config and a fixture
//!
//! The plugin's `dhv-conform.toml` (beside it, or named) and a fixture, read and
//! checked as the CLI reads them; the exit code is the CLI's:
//!
//! ```
//! use dhv_conform::suite::{SuiteConfig, SuiteError, run_blocking};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let fixture = dir.path().join("volume.json");
//! std::fs::write(&fixture, r#"{"name": "data", "capacity_min": "1MiB"}"#)?;
//! let mut config = SuiteConfig::from_files("mkdir", None, Some(&fixture))?;
//! config.filter = Some("create.succeeds".into());
//! let done = run_blocking(config)?;
//! assert_eq!(done.exit_code(), 0);
//!
//! // A plugin that is not there is bad input (exit 2), as for the CLI.
//! let missing = SuiteConfig::from_files("/no/such/plugin", None, None).unwrap_err();
//! assert!(matches!(missing, SuiteError::Input(_)));
//! assert_eq!(missing.exit_code(), 2);
//! # Ok(())
//! # }
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
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::conformance::{self, Settings, SuiteOptions};

pub use crate::conformance::{
    Attachment, CATALOGUE, CheckSpec, Claims, Effect, EngineError, InFlight, ParameterClaim,
    Progress, ProgressEvent, RequestTemplate, TEARDOWN_DEADLINE, Target, Teardown,
};
use crate::report::Report;

mod config;
pub use config::{SuiteConfig, SuiteRequest};

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
    /// Bad input, which `check` refuses with exit 2 (the same one-line message):
    /// a plugin that is not there, an unreadable or malformed config or fixture.
    #[error("{0}")]
    Input(String),
    /// The suite's own runtime or thread could not be started.
    #[error("cannot start the suite's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The run could not start, or a signal ended it (after its teardown).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl SuiteError {
    /// The CLI's exit code for this error: 2 for bad input, 4 when the harness
    /// could not run.
    pub fn exit_code(&self) -> u8 {
        match self {
            SuiteError::Input(_) => crate::cli::EXIT_USAGE,
            SuiteError::Runtime(_) | SuiteError::Engine(_) => crate::cli::EXIT_HARNESS,
        }
    }
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
    config.refused()?;
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
    let panicked: Caught = Arc::default();
    let progress = guarded(config.progress.clone(), panicked.clone(), cancel);
    let mut outcomes = Vec::new();
    let mut failed = None;
    for (name, fixture, template) in requests(&config) {
        let opts = request_options(&config, fixture.clone(), template, progress.clone());
        match conformance::run_suite_with(rt, opts, signals.share(), config.work_dir.as_deref()) {
            Ok(outcome) => {
                let cut_short = outcome.interrupted.is_some();
                outcomes.push((name, fixture, outcome));
                if cut_short || crate::lock(&panicked).is_some() {
                    break;
                }
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(panic) = crate::lock(&panicked).take() {
        resume_unwind(panic);
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(merged(outcomes, &config))
}

/// How one request of the run is run: `config`'s settings and checks, with
/// the request's fixture and template.
fn request_options(
    config: &SuiteConfig,
    fixture: Option<String>,
    template: RequestTemplate,
    progress: Progress,
) -> SuiteOptions {
    SuiteOptions {
        settings: Settings {
            target: config.plugin.clone(),
            template,
            timeout_scale: config.timeout_scale,
            claims: config.claims.clone(),
            pin: None,
        },
        strict: config.strict,
        fixture,
        libtest: libtest_args(
            &config.filter,
            config.exact,
            &config.skip,
            config.test_threads,
            config.print,
        ),
        progress,
        keep: config.keep,
        host: None,
    }
}

/// The requests' outcomes as the one run, with the config it ran under.
fn merged(
    outcomes: Vec<(String, Option<String>, conformance::SuiteOutcome)>,
    config: &SuiteConfig,
) -> SuiteRun {
    // An earlier request's teardown that left something is the one reported.
    let mut untidy = None;
    let mut outcome = crate::cli::check_requests::merge_outcomes(outcomes, |_, teardown| {
        untidy.get_or_insert_with(|| teardown.clone());
    });
    if let Some(teardown) = untidy {
        outcome.teardown = teardown;
    }
    outcome.report.config =
        crate::cli::check_requests::config_info(config.config_file.as_deref(), &config.claims);
    SuiteRun {
        report: outcome.report,
        teardown: outcome.teardown,
        harness_failed: outcome.harness_failed,
    }
}

/// A panic of the progress hook, caught to be raised again after the teardown.
type Caught = Arc<Mutex<Option<Box<dyn Any + Send>>>>;

/// `hook`, guarded: its first panic is kept in `caught` and cancels the run
/// (`cancel`); it is not called again after that.
fn guarded(hook: Progress, caught: Caught, cancel: conformance::Trigger) -> Progress {
    Progress::new(move |event: ProgressEvent<'_>| {
        if crate::lock(&caught).is_some() {
            return;
        }
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook.send(event))) {
            *crate::lock(&caught) = Some(panic);
            cancel.fire(CANCELLED);
        }
    })
}

/// The requests of a run, as (name, fixture, template): the config's
/// `[[request]]`s, else its one (`fixture`, or `default`).
fn requests(config: &SuiteConfig) -> Vec<(String, Option<String>, RequestTemplate)> {
    let shown = |p: &Path| p.display().to_string();
    if config.requests.is_empty() {
        let fixture = config.fixture.as_deref().map(shown);
        let name = if fixture.is_some() {
            "fixture"
        } else {
            "default"
        };
        vec![(name.to_owned(), fixture, config.template.clone())]
    } else {
        config
            .requests
            .iter()
            .map(|r| (r.name.clone(), Some(shown(&r.fixture)), r.template.clone()))
            .collect()
    }
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
        test_threads: Some(threads.unwrap_or(crate::cli::check::DEFAULT_TEST_THREADS)),
        quiet: !print,
        // libtest-mimic writes its lines to the logfile instead of stdout.
        logfile: (!print).then(|| "/dev/null".to_owned()),
        ..libtest_mimic::Arguments::default()
    }
}
