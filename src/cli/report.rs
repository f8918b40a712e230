//! `dhv-conform report merge REPORT…`: many nodes' JSON reports into one fleet report;
//! `dhv-conform report html REPORT`: a saved JSON report as its HTML page.
//!
//! Exit codes: 0 every node conformant, 1 a node is not, 2 an input cannot be used
//! (unreadable, not a report, another schema, an empty directory, a node reported twice).
//! `report html` exits 0 once the page is written, whatever the report's verdict, and 2
//! for an input that is not a report.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use super::report_files::write_to;
use super::{CliError, CliResult, EXIT_OK, print_stdout, write_output};
use crate::report::fleet::{self, FleetReport};
use crate::report::{self, SCHEMA};

/// The largest JSON report `report html` reads: a report holds at most 20 calls per
/// check with 4 KiB excerpts, a few MiB; a synthetic 10,000-call one is tens of MiB.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// `report` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ReportCommand {
    /// Merge per-node JSON reports into one fleet report (checks × nodes, grouped by
    /// plugin build); prints the Markdown when no output is named.
    Merge(MergeArgs),
    /// Render a saved JSON report (`check --json`) as its self-contained HTML page,
    /// the one `check --html` writes.
    Html(HtmlArgs),
}

/// Arguments of `report html`.
#[derive(Debug, clap::Args)]
pub struct HtmlArgs {
    /// A `dhv-conform/report/v1` JSON file.
    #[arg(value_name = "REPORT")]
    pub report: PathBuf,
    /// Write the page to FILE (`-` or none: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<String>,
}

/// Arguments of `report merge`.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("json", |a| a.help("Write the fleet JSON report (`dhv-conform/fleet/v1`) to FILE (`-` for stdout)")),
    mut_arg("markdown", |a| a.help("Write the Markdown summary to FILE (`-` for stdout), e.g. $GITHUB_STEP_SUMMARY")),
    mut_arg("junit", |a| a.help("Write JUnit XML, one testsuite per node, to FILE (`-` for stdout)")),
    mut_arg("html", |a| a.help("Write the fleet's HTML page to FILE (`-` for stdout): the checks × nodes heat map, the builds, each node's findings")),
)]
pub struct MergeArgs {
    /// `dhv-conform/report/v1` JSON files, or directories of them (their *.json files).
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// The fleet's report files (--json, --junit, --markdown, --html).
    #[command(flatten)]
    pub files: super::report_files::ReportFiles,
}

/// Runs a `report` subcommand.
pub fn run(command: ReportCommand) -> CliResult {
    match command {
        ReportCommand::Merge(args) => merge(&args),
        ReportCommand::Html(args) => html(&args),
    }
}

fn merge(args: &MergeArgs) -> CliResult {
    let fleet = read_fleet(&args.reports)?;
    let mut wrote = false;
    for (format, dest) in args.files.requested() {
        write_to(dest, &(format.fleet)(&fleet))?;
        wrote = true;
    }
    if !wrote {
        print_stdout(&fleet::to_fleet_markdown(&fleet));
    }
    Ok(fleet.summary.verdict.exit_code())
}

/// `report html`: the page is a pure function of the saved report.
fn html(args: &HtmlArgs) -> CliResult {
    let path = &args.report;
    let bytes = read_bounded(path)?;
    let report: report::Report = serde_json::from_slice(&bytes).map_err(|e| {
        let why = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Err(_) => format!("not JSON: {e}"),
            Ok(doc) => match doc.get("schema").and_then(|s| s.as_str()) {
                Some(schema) if schema != SCHEMA => {
                    format!("schema {schema:?} is not {SCHEMA}")
                }
                _ => format!("not a {SCHEMA} report: {e}"),
            },
        };
        CliError::usage(format!("{}: {why}", path.display()))
    })?;
    if report.schema != SCHEMA {
        return Err(CliError::usage(format!(
            "{}: schema {:?} is not {SCHEMA}",
            path.display(),
            report.schema
        )));
    }
    let page = report::to_html(&report);
    write_output(args.output.as_deref().unwrap_or("-"), &page)?;
    Ok(EXIT_OK)
}

/// The bytes of a regular file of at most [`MAX_REPORT_BYTES`]; a FIFO or device is
/// refused rather than waited on.
fn read_bounded(path: &Path) -> Result<Vec<u8>, CliError> {
    let cannot =
        |e: std::io::Error| CliError::usage(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(CliError::usage(format!(
            "cannot read {}: not a regular file",
            path.display()
        )));
    }
    if meta.len() > MAX_REPORT_BYTES {
        return Err(CliError::usage(format!(
            "{}: {} bytes, more than a report can be ({MAX_REPORT_BYTES})",
            path.display(),
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(CliError::usage(format!(
            "{}: more than a report can be ({MAX_REPORT_BYTES} bytes)",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Reads every report into the fleet matrix, keeping no report whole.
fn read_fleet(inputs: &[PathBuf]) -> Result<FleetReport, CliError> {
    let files = fleet::expand_inputs(inputs).map_err(|e| input_error(&e))?;
    fleet::merge_files(&files).map_err(|e| input_error(&e))
}

/// One line: the error and its causes.
fn input_error(e: &dyn std::error::Error) -> CliError {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    CliError::usage(line)
}
