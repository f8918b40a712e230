//! `dhv-conform check [PLUGIN] [FILTER]`: the conformance suite, its reports,
//! and the snapshot gate.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use libtest_mimic::{Arguments, ColorSetting, FormatSetting};

use super::check_args::CheckArgs;
use super::check_outputs::{Outputs, open_outputs, write_files, write_reports};
use super::check_requests::{Request, config_info, inputs, merged, requests};
use super::check_rounds::{Rounds, Tally};
use super::config::Config;
use super::progress_lines::{Ending, LineFormat, Printer, Stream};
use super::selection::{config_leaves_some, describe, list, rfc3339_utc, selection, target};
use super::signals::LateEnding;
use super::{CliError, CliResult, EXIT_HARNESS, EXIT_OK, print_stderr};
use crate::conformance::{
    self, CATALOGUE, Claims, Progress, RequestTemplate, Settings, SuiteOptions,
};
use crate::plugin::PluginPin;
use crate::report;

/// `--test-threads`' default: every check at once (a check mostly waits on its
/// plugin), for `check` and the library alike.
pub(crate) const DEFAULT_TEST_THREADS: usize = CATALOGUE.len();

/// The largest `--timeout-scale`: beyond it a limit stops meaning anything.
const MAX_TIMEOUT_SCALE: f64 = 100.0;

/// Runs `check`.
pub fn run(rt: &tokio::runtime::Runtime, mut args: CheckArgs) -> CliResult {
    let config = configure(&mut args)?;
    let color = color_choice(args.color.as_deref())?.unwrap_or(false);
    let format = progress_format(&args)?;
    let requests = requests(&args, config.as_ref())?;
    let node = node_info(args.node_name.as_deref())?;
    if args.list {
        return list(&args, format);
    }
    let plan = plan(&args, config.as_ref(), &requests)?;
    let (progress_to, table_to) = line_streams(&args, format);
    let printer = Printer::new(
        format,
        color,
        args.strict,
        progress_to,
        Duration::from_secs_f64(args.slow_after),
        CATALOGUE.len() - plan.chosen,
    );
    let what = what_is_checked(&plan.target, &args, config.as_ref());
    // Pinned once for every round and request: the plugin that ran is the
    // plugin reported, and a change between rounds shows too.
    let pin = crate::plugin::PluginPin::for_source(&plan.target);
    printer.begin(&what, plan.chosen * requests.len());
    let ticker = printer.watch_slow();

    let late = LateEnding::listen()?;
    let started = std::time::SystemTime::now();
    let rounds = rounds(&args)?;
    let base = plan.settings(&args, pin.clone());
    let outcomes = match run_requests(rt, &args, requests, &base, rounds, &printer) {
        Ok(outcomes) => outcomes,
        Err(e) => {
            printer.end(None);
            let _ = ticker.join();
            return Err(e);
        }
    };
    let outcome = merged_outcome(outcomes, config.as_ref(), &plan.claims, pin.as_deref());
    printer.end(Some(Ending {
        verdict: outcome.report.summary.verdict,
        interrupted: outcome.report.interrupted.as_deref(),
    }));
    let _ = ticker.join();
    let code = finish(
        &args,
        &plan.outputs,
        outcome,
        node,
        started,
        color,
        table_to,
    )?;
    late_ending(&late, code)
}

/// The config found for the run, its settings given to `args` where no flag
/// set them, and the numbers checked; every plugin call is held to its limits.
fn configure(args: &mut CheckArgs) -> Result<Option<Config>, CliError> {
    let config =
        super::config::find(args.config.as_deref(), &args.plugin).map_err(CliError::usage)?;
    if let Some(c) = &config {
        with_config(args, c);
    }
    validate_numbers(args)?;
    // Every call cgroup of the run gets these (the defaults without a config).
    crate::exec::set_call_limits(config.as_ref().map(|c| c.limits).unwrap_or_default());
    Ok(config)
}

/// What a run checks and where it writes, settled before anything runs.
struct Plan {
    /// How many checks the selection leaves.
    chosen: usize,
    target: conformance::Target,
    outputs: Outputs,
    claims: Claims,
}

/// The run's [`Plan`]: the checks selected, the plugin, every output opened
/// (none an input), the claims (which must leave some check to run) and a
/// usable work dir, cleared of what an earlier run left.
fn plan(args: &CheckArgs, config: Option<&Config>, requests: &[Request]) -> Result<Plan, CliError> {
    let chosen = selection(args)?;
    let target = target(&args.plugin)?;
    let outputs = open_outputs(args, &inputs(args, &target, config, requests))?;
    let claims = claims_of(config, &target);
    config_leaves_some(args, &claims, config.map(|c| c.path.as_path()))?;
    super::clean::check_work_dir(args.work_dir.as_deref())?;
    super::clean::before_a_run(args.work_dir.as_deref());
    Ok(Plan {
        chosen,
        target,
        outputs,
        claims,
    })
}

impl Plan {
    /// The settings each request's run starts from.
    fn settings(&self, args: &CheckArgs, pin: Option<Arc<PluginPin>>) -> Settings {
        Settings {
            target: self.target.clone(),
            template: RequestTemplate::default(),
            timeout_scale: args.timeout_scale.unwrap_or(1.0),
            claims: self.claims.clone(),
            pin,
        }
    }
}

/// The requests' outcomes as one, with the config and claims it ran under.
fn merged_outcome(
    outcomes: Vec<(String, Option<String>, conformance::SuiteOutcome)>,
    config: Option<&Config>,
    claims: &Claims,
    pin: Option<&PluginPin>,
) -> conformance::SuiteOutcome {
    let mut outcome = merged(outcomes);
    outcome.report.config = config_info(config.map(|c| c.path.as_path()), claims);
    // Last, as merging rounds and requests recounts the verdict.
    if let Some(change) = pin.and_then(|p| p.change()) {
        outcome
            .report
            .mark_plugin_changed(conformance::plugin_changed(change));
    }
    outcome
}

/// The claims the checks hold the plugin to: its config's, the built-in's
/// own, or none.
pub(super) fn claims_of(config: Option<&Config>, target: &conformance::Target) -> Claims {
    match config {
        Some(c) => c.claims.clone(),
        None if target.is_builtin() => Claims::builtin_mkdir(),
        None => Claims::default(),
    }
}

/// Where the progress lines and the summary table go: stdout, unless it
/// carries the JSON report (`--json -`) or JSON lines (`--format json`).
fn line_streams(args: &CheckArgs, format: LineFormat) -> (Stream, Stream) {
    match (args.reports.json_to_stdout(), format) {
        (true, _) => (Stream::Stderr, Stream::Stderr),
        (false, LineFormat::Json) => (Stream::Stdout, Stream::Stderr),
        (false, _) => (Stream::Stdout, Stream::Stdout),
    }
}

/// The plugin checked, as the first line says it, with its config.
fn what_is_checked(
    target: &conformance::Target,
    args: &CheckArgs,
    config: Option<&Config>,
) -> String {
    let mut what = describe(target, &args.plugin);
    if let Some(c) = config {
        what.push_str(&format!(" (config {})", c.path.display()));
    }
    what
}

/// What a config gives the run: flags win, so a config can turn strict on,
/// and give the scale and the work dir a flag did not.
fn with_config(args: &mut CheckArgs, config: &Config) {
    args.strict |= config.strict;
    args.timeout_scale = args.timeout_scale.or(config.timeout_scale);
    if args.work_dir.is_none() {
        args.work_dir = config.work_dir.clone();
    }
}

/// `code`, unless a signal arrived after the run ended: then the exit of a
/// process ended by it (128 + its number), with whole reports.
fn late_ending(late: &LateEnding, code: u8) -> CliResult {
    match late.arrived() {
        Some((number, name)) => Err(CliError {
            code: 128u8.saturating_add(number as u8),
            message: format!(
                "interrupted by {name} after the run ended; the reports written are whole"
            ),
        }),
        None => Ok(code),
    }
}

/// Runs the suite for each request in turn, each for its rounds (see
/// [`run_rounds`]), with `base` and the request's template; an interrupted
/// request is the last.
fn run_requests(
    rt: &tokio::runtime::Runtime,
    args: &CheckArgs,
    requests: Vec<Request>,
    base: &Settings,
    rounds: Rounds,
    printer: &Arc<Printer>,
) -> Result<Vec<(String, Option<String>, conformance::SuiteOutcome)>, CliError> {
    let several = requests.len() > 1;
    let mut outcomes = Vec::new();
    for request in requests {
        if several {
            print_stderr(&format!(
                "dhv-conform: request {}\n",
                report::printable_line(&request.name)
            ));
        }
        let hook = printer.clone();
        let opts = SuiteOptions {
            settings: Settings {
                template: request.template,
                ..base.clone()
            },
            strict: args.strict,
            fixture: request.fixture.clone(),
            libtest: libtest_args(args),
            progress: Progress::new(move |e| hook.on_event(e)),
            keep: args.keep,
            host: None,
        };
        let outcome = run_rounds(rt, &opts, rounds, printer, args.work_dir.as_deref())?;
        let cut_short = outcome.interrupted.is_some();
        outcomes.push((request.name, request.fixture, outcome));
        if cut_short {
            break;
        }
    }
    Ok(outcomes)
}

/// `--repeat N` and `--until-fail`.
fn rounds(args: &CheckArgs) -> Result<Rounds, CliError> {
    if args.repeat == Some(0) {
        return Err(CliError::usage("--repeat must be at least 1"));
    }
    Ok(match (args.repeat, args.until_fail) {
        (None, false) => Rounds::ONCE,
        (limit, until_fail) => Rounds { limit, until_fail },
    })
}

/// Runs the suite for every round due; one outcome (see [`check_rounds`](super::check_rounds)).
/// An interrupted round is the last.
fn run_rounds(
    rt: &tokio::runtime::Runtime,
    opts: &SuiteOptions,
    rounds: Rounds,
    printer: &Printer,
    work_dir: Option<&Path>,
) -> Result<conformance::SuiteOutcome, CliError> {
    let mut tally = Tally::default();
    let mut done = 0;
    loop {
        if rounds != Rounds::ONCE {
            printer.note(&format!("round {}", done + 1));
        }
        let signals = conformance::Signals::install(rt);
        let outcome = conformance::run_suite_with(rt, opts.clone(), signals, work_dir)
            .map_err(|e| CliError::harness(e.to_string()))?;
        let stop = outcome.interrupted.is_some() || outcome.harness_failed;
        done += 1;
        let found = tally.add(outcome);
        if stop || !rounds.another(done, found) {
            break;
        }
    }
    tally
        .finish(opts.strict)
        .ok_or_else(|| CliError::harness("no round ran"))
}

/// After the suite: what the teardown could not do, the summary table, the
/// report files and the snapshot gate, and the exit code they come to.
fn finish(
    args: &CheckArgs,
    outputs: &Outputs,
    outcome: conformance::SuiteOutcome,
    node: Option<report::NodeInfo>,
    started: std::time::SystemTime,
    color: bool,
    table_to: Stream,
) -> CliResult {
    let teardown = &outcome.teardown;
    let left_something = !teardown.mounts_found.is_empty() || !teardown.loops_found.is_empty();
    if (!teardown.removed && !teardown.kept_on_request) || left_something {
        // Mount points and sources come from the plugin: one escaped line.
        print_stderr(&format!(
            "dhv-conform: {}\n",
            report::printable_line(&teardown.summary())
        ));
    }
    let mut report = outcome.report;
    report.node = node;
    report.started_at = Some(rfc3339_utc(started));
    report.duration_ms = started.elapsed().ok().map(|d| d.as_millis() as u64);
    let note = temp_dir_note(teardown);
    table_to.write(&table(&report, color, args.quiet, &note));
    if let Some(signal) = outcome.interrupted {
        return interrupted(args, outputs, &report, signal, &teardown.summary());
    }
    let code = write_reports(args, outputs, &report)?;
    if outcome.harness_failed {
        return Ok(EXIT_HARNESS);
    }
    Ok(if code != EXIT_OK {
        code
    } else {
        report.exit_code()
    })
}

/// A run a signal cut short: its reports are written whole and say so, the
/// snapshot is neither compared nor blessed (what was cut short is no change
/// of behaviour), and the exit is 128 + the signal's number.
fn interrupted(
    args: &CheckArgs,
    outputs: &Outputs,
    report: &report::Report,
    signal: i32,
    teardown: &str,
) -> CliResult {
    write_files(outputs, report)?;
    let name = report.interrupted.as_deref().unwrap_or("a signal");
    let snapshot = if args.snapshot.is_some() {
        "; the snapshot was not compared"
    } else {
        ""
    };
    Err(CliError {
        code: 128u8.saturating_add(signal as u8),
        message: format!(
            "interrupted by {name}; {teardown}; the checks it cut short are skipped (interrupted), the reports written are whole{snapshot}"
        ),
    })
}

/// What became of the dirs the reproduce lines name.
fn temp_dir_note(teardown: &conformance::Teardown) -> String {
    let dir = teardown.temp_dir.display();
    if teardown.kept_on_request {
        format!(
            "the run's temp dir is kept (--keep): {dir}; the reproduce lines work as printed (remove it when done)"
        )
    } else if teardown.removed {
        format!(
            "the run's temp dir {dir} was removed, so the dirs in the reproduce lines are gone; run again with --keep to keep them"
        )
    } else {
        format!(
            "the run's temp dir {dir} was not removed: {}",
            teardown.summary()
        )
    }
}

/// The summary table; quiet keeps the failures and warnings (each with its
/// reproduce lines, and the `--keep` note) and the verdict line.
fn table(report: &report::Report, color: bool, quiet: bool, note: &str) -> String {
    let table = report::summary_table_noted(report, color, Some(note));
    if !quiet {
        return format!("\n{table}");
    }
    match table.find("\nfailures and warnings:\n") {
        Some(at) => table[at..].to_owned(),
        None => {
            let last = table.lines().last().unwrap_or_default();
            // A run the space limited says so, quiet or not.
            match &report.space_limited {
                Some(space) => format!("{}\n{last}\n", report::printable_line(&space.describe())),
                None => format!("{last}\n"),
            }
        }
    }
}

/// Bad numbers are input errors, before anything runs.
fn validate_numbers(args: &CheckArgs) -> Result<(), CliError> {
    let scale = args.timeout_scale.unwrap_or(1.0);
    if !(scale.is_finite() && scale > 0.0 && scale <= MAX_TIMEOUT_SCALE) {
        let shown = if scale.abs() >= 1e6 {
            format!("{scale:e}")
        } else {
            scale.to_string()
        };
        return Err(CliError::usage(format!(
            "--timeout-scale must be a number greater than 0 and at most {MAX_TIMEOUT_SCALE}, not {shown}"
        )));
    }
    let slow = args.slow_after;
    if !(slow.is_finite() && slow > 0.0 && slow <= 86_400.0) {
        return Err(CliError::usage(format!(
            "--slow-after must be a number of seconds greater than 0 (at most a day), not {slow}"
        )));
    }
    if args.test_threads == Some(0) {
        return Err(CliError::usage("--test-threads must be at least 1"));
    }
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

/// `--format` and `-q`: how progress is shown.
fn progress_format(args: &CheckArgs) -> Result<LineFormat, CliError> {
    match args.format.as_deref() {
        None | Some("pretty") if args.quiet => Ok(LineFormat::Terse),
        None | Some("pretty") => Ok(LineFormat::Pretty),
        Some("terse") => Ok(LineFormat::Terse),
        Some("json") => Ok(LineFormat::Json),
        Some(other) => Err(CliError::usage(format!(
            "--format must be pretty, terse or json, not {other:?}"
        ))),
    }
}

/// libtest-mimic runs the trials; its printer is silenced (the CLI prints its
/// own progress) and it must not filter again: the engine already did.
fn libtest_args(args: &CheckArgs) -> Arguments {
    Arguments {
        filter: args.filter.clone(),
        exact: args.exact,
        skip: args.skip.clone(),
        logfile: Some("/dev/null".to_owned()),
        // Checks mostly wait (on plugin processes, or on a shared probe): one
        // thread each, so a slow probe never keeps an independent check waiting.
        test_threads: Some(args.test_threads.unwrap_or(DEFAULT_TEST_THREADS)),
        color: Some(ColorSetting::Never),
        format: Some(FormatSetting::Pretty),
        ..Arguments::default()
    }
}
