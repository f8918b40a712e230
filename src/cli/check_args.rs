//! The arguments of `check`, apart from the command that runs them, so that
//! the selection helpers and the run both take them from here.

use std::path::PathBuf;

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
    /// The plugin's config (requests, claims, skips) [default: dhv-conform.toml beside the plugin, when present].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The report files (--json, --junit, --markdown, --html).
    #[command(flatten)]
    pub reports: super::report_files::ReportFiles,
    /// Compare the normalised report with FILE; missing or different exits 3 with a diff.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Instead of failing on a missing or different --snapshot FILE, write the new
    /// one beside it as FILE.new for `dhv-conform snapshot review FILE` (a FILE that
    /// still matches is left as it is).
    #[arg(long, requires = "snapshot")]
    pub bless: bool,
    /// With --bless, write FILE itself, accepted without review (for scripts).
    #[arg(long, requires = "bless")]
    pub accept: bool,
    /// The node's name in the report [default: the host name]; `report merge` tells
    /// nodes apart by it (a Nomad job passes `${node.unique.name}`).
    #[arg(long, value_name = "NAME")]
    pub node_name: Option<String>,
    /// Keep the run's temp dir (printed at the end), so the reproduce lines work when pasted.
    #[arg(long)]
    pub keep: bool,
    /// Where the run's sandboxes are made [default: TMPDIR]: put them on the filesystem
    /// the plugin needs (an XFS mount with project quotas, say). Must be a directory.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<std::path::PathBuf>,
    /// Multiply every time limit by X, more than 0 and at most 100 (for slow machines; reported) [default: 1].
    #[arg(long, value_name = "X")]
    pub timeout_scale: Option<f64>,
    /// Print a SLOW line for a check still running after SECS seconds, and every SECS after.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub slow_after: f64,
    /// Match FILTER and --skip against whole ids.
    #[arg(long)]
    pub exact: bool,
    /// Skip checks whose id contains FILTER (repeatable).
    #[arg(long, value_name = "FILTER")]
    pub skip: Vec<String>,
    /// List the checks (level, id, rule) instead of running them; JSON lines with --format json.
    #[arg(long)]
    pub list: bool,
    /// How many checks run at once [default: all of them].
    #[arg(long, value_name = "N")]
    pub test_threads: Option<usize>,
    /// Output format of the progress lines (json: JSON lines only on stdout).
    #[arg(long, value_name = "pretty|terse|json")]
    pub format: Option<String>,
    /// One character per check, and only the verdict line of the table.
    #[arg(short, long)]
    pub quiet: bool,
    /// Colour: auto, always or never (NO_COLOR is honoured).
    #[arg(long, value_name = "auto|always|never")]
    pub color: Option<String>,
    /// Run the selected checks N times, each round fresh; a check that failed in any
    /// round fails, and says "failed k/N rounds".
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Run rounds until a check fails or warns (at most --repeat N rounds, if given).
    #[arg(long)]
    pub until_fail: bool,
}

/// Exit codes, for `check --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  conformant
  1  non-conformant: a must failed (or a should, with --strict)
  2  usage or input error: bad flag, missing plugin, bad fixture, no check matches the filter
  3  --snapshot missing or different
  4  the harness itself failed, or inconclusive: the plugin file changed mid-run
  130/143/129  interrupted by SIGINT/SIGTERM/SIGHUP";
