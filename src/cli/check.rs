//! `dhv-conform check [PLUGIN] [FILTER]`: the conformance suite, its reports,
//! and the snapshot gate.

use std::io::{IsTerminal, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, ColorSetting, FormatSetting};

use super::{CliError, CliResult, EXIT_HARNESS, EXIT_OK, EXIT_SNAPSHOT};
use crate::conformance::{self, RequestTemplate, Settings, SuiteOptions, Target, fixture};
use crate::report::{self, Redactions, SnapshotOutcome};

/// Arguments of `check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Path to the plugin executable, or `mkdir` for the built-in plugin.
    #[arg(default_value = "mkdir")]
    pub plugin: String,
    /// Run only checks whose id contains FILTER (the whole id with --exact).
    pub filter: Option<String>,
    /// The volume request: JSON, or a Nomad volume spec (.hcl) as given to `nomad volume create`.
    #[arg(long, value_name = "FILE")]
    pub fixture: Option<PathBuf>,
    /// Should-level failures fail the run.
    #[arg(long)]
    pub strict: bool,
    /// Write the full JSON report to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Compare the normalised report with FILE; missing or different exits 3 with a diff.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Write (or overwrite) the --snapshot file instead of comparing.
    #[arg(long, requires = "snapshot")]
    pub bless: bool,
    /// The node's name in the report [default: the host name]; `report merge` tells
    /// nodes apart by it (a Nomad job passes `${node.unique.name}`).
    #[arg(long, value_name = "NAME")]
    pub node_name: Option<String>,
    /// Multiply every time limit by X (for slow machines; reported).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub timeout_scale: f64,
    /// Match FILTER and --skip against whole ids.
    #[arg(long)]
    pub exact: bool,
    /// Skip checks whose id contains FILTER (repeatable).
    #[arg(long, value_name = "FILTER")]
    pub skip: Vec<String>,
    /// List the checks instead of running them.
    #[arg(long)]
    pub list: bool,
    /// How many checks run at once [default: all of them].
    #[arg(long, value_name = "N")]
    pub test_threads: Option<usize>,
    /// Output format of the progress lines.
    #[arg(long, value_name = "pretty|terse|json")]
    pub format: Option<String>,
    /// One character per check.
    #[arg(short, long)]
    pub quiet: bool,
    /// Colour: auto, always or never (NO_COLOR is honoured).
    #[arg(long, value_name = "auto|always|never")]
    pub color: Option<String>,
}

/// Runs `check`.
pub fn run(rt: &tokio::runtime::Runtime, args: CheckArgs) -> CliResult {
    let target = Target::parse(&args.plugin);
    if let Target::External(path) = &target {
        match std::fs::metadata(path) {
            Err(e) => {
                let arg = path.to_string_lossy();
                let looks_like_filter = conformance::CATALOGUE
                    .iter()
                    .any(|c| c.id.contains(arg.as_ref()));
                let hint = if looks_like_filter {
                    format!(
                        " (to run {arg:?} on the built-in plugin, name it first: `check mkdir {arg}`)"
                    )
                } else {
                    String::new()
                };
                return Err(CliError::usage(format!(
                    "plugin {}: {e}{hint}",
                    path.display()
                )));
            }
            Ok(m) if m.is_dir() => {
                return Err(CliError::usage(format!(
                    "plugin {} is a directory, not an executable",
                    path.display()
                )));
            }
            Ok(_) => {}
        }
    }
    if !(args.timeout_scale.is_finite() && args.timeout_scale > 0.0) {
        return Err(CliError::usage(format!(
            "--timeout-scale must be a positive number, not {}",
            args.timeout_scale
        )));
    }
    let template = match &args.fixture {
        Some(path) => {
            fixture::load(path)
                .map_err(|e| CliError::usage(e.to_string()))?
                .template
        }
        None => RequestTemplate::default(),
    };
    let node = node_info(args.node_name.as_deref())?;
    let color = color_choice(args.color.as_deref())?;
    let json_to_stdout = args.json.as_deref() == Some("-");
    let libtest = libtest_args(&args, color)?;

    install_interrupt_handler(rt);
    let opts = SuiteOptions {
        settings: Settings {
            target,
            template,
            timeout_scale: args.timeout_scale,
        },
        strict: args.strict,
        fixture: args.fixture.as_ref().map(|p| p.display().to_string()),
        libtest,
    };
    let outcome = {
        let _progress_to_stderr = if json_to_stdout {
            let redirect = StdoutToStderr::start()
                .map_err(|e| CliError::harness(format!("cannot point stdout at stderr: {e}")))?;
            Some(redirect)
        } else {
            None
        };
        conformance::run_suite(rt, opts)
    }
    .map_err(|e| CliError::harness(e.to_string()))?;
    if args.list {
        return Ok(EXIT_OK);
    }
    let mut report = outcome.report;
    report.node = node;

    let table = report::summary_table(&report, color.unwrap_or(false));
    // Quiet keeps only the verdict line of the table.
    let shown = if args.quiet {
        table
            .lines()
            .last()
            .map(|l| format!("{l}\n"))
            .unwrap_or_default()
    } else {
        format!("\n{table}")
    };
    if json_to_stdout {
        eprint!("{shown}");
    } else {
        print!("{shown}");
    }
    if let Some(dest) = &args.json {
        write_output(dest, &report::to_json(&report))?;
    }
    if let Some(path) = &args.junit {
        write_output(&path.to_string_lossy(), &report::to_junit(&report))?;
    }
    if let Some(path) = &args.markdown {
        write_output(&path.to_string_lossy(), &report::to_markdown(&report))?;
    }
    let snapshot_code = match &args.snapshot {
        Some(path) => snapshot_gate(&report, path, args.bless)?,
        None => EXIT_OK,
    };
    if outcome.harness_failed {
        return Ok(EXIT_HARNESS);
    }
    if snapshot_code != EXIT_OK {
        return Ok(snapshot_code);
    }
    Ok(report.exit_code())
}

/// Compares (or blesses) the normalised report.
fn snapshot_gate(report: &report::Report, path: &Path, bless: bool) -> CliResult {
    let text = report::normalise(report, &Redactions::for_report(report));
    if bless {
        report::bless(path, &text)
            .map_err(|e| CliError::usage(format!("{e}: {}", source_of(&e))))?;
        eprintln!("dhv-conform: snapshot written to {}", path.display());
        return Ok(EXIT_OK);
    }
    match report::compare(path, &text)
        .map_err(|e| CliError::usage(format!("{e}: {}", source_of(&e))))?
    {
        SnapshotOutcome::Matched => Ok(EXIT_OK),
        SnapshotOutcome::Missing { path } => {
            let hint = if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                "under CI a missing snapshot is an error: bless it locally with --bless and commit it"
            } else {
                "run again with --bless to write it"
            };
            eprintln!(
                "dhv-conform: snapshot {} does not exist; {hint}",
                path.display()
            );
            eprint!(
                "{}",
                report::diff("", &text, "(none)", &path.display().to_string())
            );
            Ok(EXIT_SNAPSHOT)
        }
        SnapshotOutcome::Differs { path, diff } => {
            eprintln!(
                "dhv-conform: the results differ from snapshot {} (review, then --bless to accept):",
                path.display()
            );
            eprint!("{diff}");
            Ok(EXIT_SNAPSHOT)
        }
    }
}

fn source_of(e: &dyn std::error::Error) -> String {
    e.source().map(|s| s.to_string()).unwrap_or_default()
}

/// Writes a report file (or stdout for `-`), atomically for files.
fn write_output(dest: &str, text: &str) -> Result<(), CliError> {
    if dest == "-" {
        print!("{text}");
        return Ok(());
    }
    let path = Path::new(dest);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fail = |e: std::io::Error| CliError::usage(format!("cannot write {dest}: {e}"));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

/// The node to record: `--node-name`, else the host name (none when it cannot be read).
fn node_info(flag: Option<&str>) -> Result<Option<report::NodeInfo>, CliError> {
    let name = match flag {
        Some(name) if name.trim().is_empty() => {
            return Err(CliError::usage("--node-name must not be empty"));
        }
        Some(name) => name.to_owned(),
        None => match nix::unistd::gethostname() {
            Ok(host) => host.to_string_lossy().into_owned(),
            Err(_) => return Ok(None),
        },
    };
    Ok(Some(report::NodeInfo { name }))
}

/// `Some(true)` colour, `Some(false)` none, decided from `--color` and NO_COLOR.
fn color_choice(flag: Option<&str>) -> Result<Option<bool>, CliError> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    match flag.unwrap_or("auto") {
        "always" => Ok(Some(true)),
        "never" => Ok(Some(false)),
        "auto" => Ok(Some(!no_color && std::io::stdout().is_terminal())),
        other => Err(CliError::usage(format!(
            "--color must be auto, always or never, not {other:?}"
        ))),
    }
}

fn libtest_args(args: &CheckArgs, color: Option<bool>) -> Result<Arguments, CliError> {
    let format = match args.format.as_deref() {
        None => None,
        Some("pretty") => Some(FormatSetting::Pretty),
        Some("terse") => Some(FormatSetting::Terse),
        Some("json") => Some(FormatSetting::Json),
        Some(other) => {
            return Err(CliError::usage(format!(
                "--format must be pretty, terse or json, not {other:?}"
            )));
        }
    };
    if args.test_threads == Some(0) {
        return Err(CliError::usage("--test-threads must be at least 1"));
    }
    Ok(Arguments {
        filter: args.filter.clone(),
        exact: args.exact,
        skip: args.skip.clone(),
        list: args.list,
        quiet: args.quiet,
        format,
        // Checks mostly wait (on plugin processes, or on a shared probe): one
        // thread each, so a slow probe never keeps an independent check waiting.
        test_threads: Some(args.test_threads.unwrap_or(conformance::CATALOGUE.len())),
        color: Some(match color {
            Some(true) => ColorSetting::Always,
            _ => ColorSetting::Never,
        }),
        ..Arguments::default()
    })
}

/// Points fd 1 at stderr until dropped, so that with `--json -` stdout carries the
/// report alone while libtest-mimic's progress lines go to stderr.
///
/// libtest-mimic writes progress to stdout or to a `logfile` it opens with
/// `File::create`; given `/dev/stderr` that would truncate the file stderr is
/// redirected to, wiping the earlier lines of a CI log opened with `2>>`.
struct StdoutToStderr {
    saved: OwnedFd,
}

impl StdoutToStderr {
    fn start() -> std::io::Result<StdoutToStderr> {
        let stdout = std::io::stdout();
        stdout.lock().flush()?;
        let saved = stdout.as_fd().try_clone_to_owned()?;
        nix::unistd::dup2_stdout(std::io::stderr())?;
        Ok(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        // Progress still buffered belongs on stderr: flush before fd 1 moves back.
        let _ = std::io::stdout().lock().flush();
        let _ = nix::unistd::dup2_stdout(&self.saved);
    }
}

/// Ctrl-C kills every plugin process and removes the run's temp dir before exiting.
fn install_interrupt_handler(rt: &tokio::runtime::Runtime) {
    rt.spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            if let Some(root) = conformance::interrupt() {
                let _ = std::fs::remove_dir_all(root);
            }
            eprintln!("\ndhv-conform: interrupted; every plugin process was killed and the temp dir removed");
            std::process::exit(130);
        }
    });
}
