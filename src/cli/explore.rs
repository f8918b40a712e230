//! `dhv-conform explore PLUGIN`: random histories on a node for a time
//! budget, the first failing one shrunk to a minimal one and printed with
//! its replay (see `conformance::explore` and docs/histories.md).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{CliError, CliResult, EXIT_FAIL, EXIT_HARNESS, EXIT_OK, print_stdout};
use crate::conformance::explore::{
    self, ExploreOptions, ExploreOutcome, ExploreProgress, Op, Step,
};
use crate::conformance::{RequestTemplate, Settings};

/// Arguments of `explore`.
#[derive(Debug, clap::Args)]
pub struct ExploreArgs {
    /// Path to the plugin executable, or `mkdir` for the built-in plugin.
    pub plugin: String,
    /// How long to look for a failing history, in seconds (shrinking one is not counted).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub budget: f64,
    /// The seed the histories are drawn from [default: drawn, and printed].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Stop after N histories even within the budget (for scripts and tests: a
    /// budget in histories is the same on every machine).
    #[arg(long, value_name = "N")]
    pub max_histories: Option<u64>,
    /// Play the failing history of a JSON file `explore --json` wrote, once.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// The volume request: JSON, or a Nomad volume spec (.hcl) as given to `nomad volume create`.
    #[arg(long, value_name = "FILE")]
    pub fixture: Option<PathBuf>,
    /// The plugin's config [default: dhv-conform.toml beside the plugin, when present].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write what was explored (seed, budget, histories, the minimal failing history) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Where the run's sandboxes are made [default: TMPDIR]. Must be a directory.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Keep the run's temp dir, so the `env -i` lines work when pasted.
    #[arg(long)]
    pub keep: bool,
}

/// Exit codes, for `explore --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  no failing history found within the budget
  1  a failing history was found (printed, shrunk, with its replay)
  2  usage or input error: bad flag, bad seed, missing or malformed --replay file
  4  the harness itself failed
  130/143/129  interrupted by SIGINT/SIGTERM/SIGHUP";

/// The JSON file `--json` writes and `--replay` reads.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ExploreDoc {
    /// The plugin explored.
    pub plugin: String,
    /// The seed.
    pub seed: u64,
    /// The budget, in seconds.
    pub budget_secs: f64,
    /// Histories played (shrinking's replays included).
    pub histories: u64,
    /// Operations played.
    pub operations: u64,
    /// The minimal failing history, or `null`.
    pub failing: Option<Vec<Step>>,
}

/// Runs `explore`.
pub fn run(rt: &tokio::runtime::Runtime, mut args: ExploreArgs) -> CliResult {
    let config =
        super::config::find(args.config.as_deref(), &args.plugin).map_err(CliError::usage)?;
    if args.work_dir.is_none() {
        args.work_dir = config.as_ref().and_then(|c| c.work_dir.clone());
    }
    crate::exec::set_call_limits(config.as_ref().map(|c| c.limits).unwrap_or_default());
    if !(args.budget.is_finite() && args.budget > 0.0 && args.budget <= 86_400.0) {
        return Err(CliError::usage(format!(
            "--budget must be a number of seconds greater than 0 (at most a day), not {}",
            args.budget
        )));
    }
    let replay = args.replay.as_deref().map(read_replay).transpose()?;
    if let Some((_, seed)) = &replay {
        args.seed = args.seed.or(Some(*seed));
    }
    let replay = replay.map(|(ops, _)| ops);
    let target = super::selection::target(&args.plugin)?;
    let template = match (&args.fixture, &config) {
        (Some(path), _) => super::check_requests::template(Some(path))?,
        (None, Some(c)) if !c.requests.is_empty() => c.requests[0].template.clone(),
        _ => RequestTemplate::default(),
    };
    let claims = super::check::claims_of(config.as_ref(), &target);
    super::clean::check_work_dir(args.work_dir.as_deref())?;
    super::clean::before_a_run(args.work_dir.as_deref());
    let seed = args.seed.unwrap_or_else(drawn_seed);
    let terminal = std::io::stdout().is_terminal();
    print_stdout(&match replay {
        Some(_) => format!("dhv-conform explore: replaying {}\n", shown(&args.replay)),
        None => format!(
            "dhv-conform explore: seed {seed}, budget {}s (replay with --seed {seed})\n",
            args.budget
        ),
    });
    let opts = ExploreOptions {
        settings: Settings {
            target,
            template,
            timeout_scale: config.as_ref().and_then(|c| c.timeout_scale).unwrap_or(1.0),
            claims,
            pin: None,
        },
        seed,
        budget: Duration::from_secs_f64(args.budget),
        max_histories: args.max_histories,
        replay,
        work_dir: args.work_dir.clone(),
        keep: args.keep,
        progress: terminal.then(|| Arc::new(progress_line) as explore::ProgressHook),
    };
    let outcome = explore::run_explore(rt, &opts).map_err(|e| CliError::harness(e.to_string()))?;
    if terminal {
        print_stdout("\r\x1b[K");
    }
    finish(&args, outcome)
}

/// A seed of its own for a run without `--seed`.
fn drawn_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    explore::Rng::new(nanos ^ u64::from(std::process::id())).next_u64() % 1_000_000_000
}

fn shown(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map_or(String::new(), |p| p.display().to_string())
}

/// The progress line, rewritten in place on a terminal.
fn progress_line(p: &ExploreProgress) {
    let state = if p.shrinking {
        ", shrinking a failing history"
    } else {
        ""
    };
    print_stdout(&format!(
        "\r\x1b[K{} operations, {} histories, {:.0}s of {:.0}s{state}",
        p.operations,
        p.histories,
        p.elapsed.as_secs_f64(),
        p.budget.as_secs_f64()
    ));
}

/// The history of a `--json` file, and its seed, for `--replay`.
fn read_replay(path: &std::path::Path) -> Result<(Vec<Op>, u64), CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--replay {}: {e}", path.display())))?;
    let doc: ExploreDoc = serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "--replay {}: not a JSON file of `explore --json`: {e}",
            path.display()
        ))
    })?;
    match doc.failing {
        Some(steps) if !steps.is_empty() => {
            Ok((steps.into_iter().map(|s| s.op).collect(), doc.seed))
        }
        _ => Err(CliError::usage(format!(
            "--replay {}: it holds no failing history",
            path.display()
        ))),
    }
}

/// The words, the JSON file and the exit code of an outcome.
fn finish(args: &ExploreArgs, outcome: ExploreOutcome) -> CliResult {
    let teardown = &outcome.teardown;
    if !teardown.removed && !teardown.kept_on_request {
        super::print_stderr(&format!(
            "dhv-conform: {}\n",
            crate::report::printable_line(&teardown.summary())
        ));
    }
    let mut text = format!(
        "explored {} histories, {} operations in {:.1}s (seed {})\n",
        outcome.histories,
        outcome.operations,
        outcome.elapsed.as_secs_f64(),
        outcome.seed
    );
    if let Some(f) = &outcome.failing {
        text.push_str(&failing_words(args, f, &outcome));
    } else if outcome.harness_error.is_none() && outcome.interrupted.is_none() {
        text.push_str("no failing history found within the budget\n");
    }
    print_stdout(&text);
    if let Some(path) = &args.json {
        let doc = ExploreDoc {
            plugin: args.plugin.clone(),
            seed: outcome.seed,
            budget_secs: args.budget,
            histories: outcome.histories,
            operations: outcome.operations,
            failing: outcome.failing.as_ref().map(|f| f.steps.clone()),
        };
        let json = serde_json::to_string_pretty(&doc).unwrap_or_default();
        super::write_output(&path.to_string_lossy(), &format!("{json}\n"))?;
    }
    if let Some(signal) = outcome.interrupted {
        return Err(CliError {
            code: 128u8.saturating_add(signal as u8),
            message: format!("interrupted; {}", teardown.summary()),
        });
    }
    if let Some(e) = outcome.harness_error {
        return Err(CliError {
            code: EXIT_HARNESS,
            message: e,
        });
    }
    Ok(if outcome.failing.is_some() {
        EXIT_FAIL
    } else {
        EXIT_OK
    })
}

/// The minimal failing history as numbered steps, and how to replay it.
fn failing_words(args: &ExploreArgs, f: &explore::Failing, outcome: &ExploreOutcome) -> String {
    let mut text = format!(
        "FAILING HISTORY ({} steps; found with {}, shrunk over {} replays):\n",
        f.steps.len(),
        f.found_with,
        f.shrink_replays
    );
    for (n, step) in f.steps.iter().enumerate() {
        text.push_str(&format!("  {}. {}: {}\n", n + 1, step.op.words(), step.did));
        if let Some(seen) = &step.oracle {
            text.push_str(&format!("     oracle: {seen}\n"));
        }
    }
    text.push_str("replay by hand, in order (each plugin call as Nomad makes it):\n");
    for step in &f.steps {
        for call in &step.calls {
            text.push_str(&format!("  {call}\n"));
        }
    }
    if !outcome.teardown.kept_on_request {
        text.push_str(
            "  (the run's temp dir was removed: run again with --keep so these lines work when pasted)\n",
        );
    }
    let json = args
        .json
        .as_ref()
        .map_or("FILE.json".to_string(), |p| p.display().to_string());
    let how = if args.json.is_some() {
        ""
    } else {
        " (write FILE.json with --json)"
    };
    text.push_str(&format!(
        "replay: dhv-conform explore --replay {json} {}{how}\n",
        args.plugin
    ));
    text
}
