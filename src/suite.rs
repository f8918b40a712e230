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
use std::path::{Path, PathBuf};
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
    /// Checks run at once (`--test-threads`); `None`: every check at once, as
    /// `check` does (a check mostly waits on its plugin).
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
    /// The fixture `template` was read from, named in the report (`--fixture`).
    pub fixture: Option<PathBuf>,
    /// The requests of a `dhv-conform.toml`'s `[[request]]`s: when there are any,
    /// the suite runs once per request (not with `template`), and the report is
    /// their reports merged as `check` merges them (each check's worst status,
    /// its request named).
    pub requests: Vec<SuiteRequest>,
    /// The `dhv-conform.toml` the settings came from, named in the report.
    pub config_file: Option<PathBuf>,
}

/// One request of a `dhv-conform.toml` ([`SuiteConfig::requests`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SuiteRequest {
    /// Its name, shown in the report.
    pub name: String,
    /// The fixture it was read from.
    pub fixture: PathBuf,
    /// The request itself.
    pub template: RequestTemplate,
}

impl SuiteRequest {
    /// A request named `name`, `template` as read from `fixture` (a JSON or
    /// HCL fixture, as `--fixture` takes).
    pub fn new(
        name: impl Into<String>,
        fixture: impl Into<PathBuf>,
        template: RequestTemplate,
    ) -> SuiteRequest {
        SuiteRequest {
            name: name.into(),
            fixture: fixture.into(),
            template,
        }
    }
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
            fixture: None,
            requests: Vec::new(),
            config_file: None,
        }
    }

    /// The suite as `dhv-conform check PLUGIN [--config CONFIG] [--fixture FIXTURE]`
    /// runs it: the plugin's `dhv-conform.toml` (`config`, else the one beside the
    /// plugin when there is one) gives strict, the time-limit scale, the work dir,
    /// the claims and skips, and the requests; a `fixture` replaces the config's
    /// requests, as the flag does. Everything else is [`SuiteConfig::new`]'s, and
    /// may be changed before the run, as flags would.
    ///
    /// Whatever `check` refuses with exit 2 is [`SuiteError::Input`], with the
    /// CLI's one-line message: a plugin that is not there (or a directory), a
    /// config or fixture that cannot be read or is malformed, a request too large
    /// to pass to a plugin.
    pub fn from_files(
        plugin: impl AsRef<str>,
        config: Option<&Path>,
        fixture: Option<&Path>,
    ) -> Result<SuiteConfig, SuiteError> {
        use crate::cli::{check_requests as check, config as toml, selection};
        let input = |e: crate::cli::CliError| SuiteError::Input(e.message);
        let arg = plugin.as_ref();
        let found = toml::find(config, arg).map_err(SuiteError::Input)?;
        selection::target(arg).map_err(input)?;
        let mut suite = SuiteConfig::new(arg);
        if let Some(c) = &found {
            suite.strict = c.strict;
            suite.timeout_scale = c.timeout_scale.unwrap_or(1.0);
            suite.work_dir = c.work_dir.clone();
            suite.claims = c.claims.clone();
            suite.config_file = Some(c.path.clone());
        }
        match (fixture, &found) {
            (Some(path), _) => {
                suite.template = check::template(Some(path)).map_err(input)?;
                suite.fixture = Some(path.to_owned());
            }
            (None, Some(c)) => {
                for r in &c.requests {
                    check::fits_the_kernel(&r.fixture, &r.template).map_err(input)?;
                    suite.requests.push(SuiteRequest::new(
                        r.name.clone(),
                        r.fixture.clone(),
                        r.template.clone(),
                    ));
                }
            }
            (None, None) => {}
        }
        Ok(suite)
    }

    /// What `check` would refuse before running (exit 2): a plugin that is not
    /// there, a work dir that is not a directory, a timeout scale out of range.
    fn refused(&self) -> Result<(), SuiteError> {
        let input = |e: crate::cli::CliError| SuiteError::Input(e.message);
        if let Some(path) = self.plugin.path() {
            crate::cli::selection::target(&path.to_string_lossy()).map_err(input)?;
        }
        crate::cli::clean::check_work_dir(self.work_dir.as_deref()).map_err(input)?;
        let scale = self.timeout_scale;
        if !(scale.is_finite() && scale > 0.0 && scale <= 100.0) {
            return Err(SuiteError::Input(format!(
                "the timeout scale must be more than 0 and at most 100, not {scale}"
            )));
        }
        if self.test_threads == Some(0) {
            return Err(SuiteError::Input("test threads must be at least 1".into()));
        }
        Ok(())
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
    let shown = |p: &Path| p.display().to_string();
    let requests: Vec<(String, Option<String>, RequestTemplate)> = if config.requests.is_empty() {
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
    };
    let mut outcomes = Vec::new();
    let mut failed = None;
    for (name, fixture, template) in requests {
        let opts = SuiteOptions {
            settings: Settings {
                target: config.plugin.clone(),
                template,
                timeout_scale: config.timeout_scale,
                claims: config.claims.clone(),
                pin: None,
            },
            strict: config.strict,
            fixture: fixture.clone(),
            libtest: libtest_args(
                &config.filter,
                config.exact,
                &config.skip,
                config.test_threads,
                config.print,
            ),
            progress: progress.clone(),
            keep: config.keep,
        };
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
        test_threads: Some(threads.unwrap_or(crate::cli::check::DEFAULT_TEST_THREADS)),
        quiet: !print,
        // libtest-mimic writes its lines to the logfile instead of stdout.
        logfile: (!print).then(|| "/dev/null".to_owned()),
        ..libtest_mimic::Arguments::default()
    }
}
