//! How a library run is made: [`SuiteConfig`], built from defaults or read
//! from a plugin's `dhv-conform.toml` and a fixture as `check` reads them.

use std::path::{Path, PathBuf};

use super::{Claims, Progress, RequestTemplate, SuiteError, Target};

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
    pub(super) fn refused(&self) -> Result<(), SuiteError> {
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
