//! `dhv-conform report merge REPORT…`: many nodes' JSON reports into one fleet report.
//!
//! Exit codes: 0 every node conformant, 1 a node is not, 2 an input cannot be used
//! (unreadable, not a report, another schema, an empty directory, a node reported twice).

use std::path::PathBuf;

use super::{CliError, CliResult, print_stdout};
use crate::report::fleet::{self, FleetReport};

/// `report` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ReportCommand {
    /// Merge per-node JSON reports into one fleet report (checks × nodes, grouped by
    /// plugin build); prints the Markdown when no output is named.
    Merge(MergeArgs),
}

/// Arguments of `report merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// `dhv-conform/report/v1` JSON files, or directories of them (their *.json files).
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Write the fleet JSON report (`dhv-conform/fleet/v1`) to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write the Markdown summary to FILE (`-` for stdout), e.g. $GITHUB_STEP_SUMMARY.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<String>,
    /// Write JUnit XML, one testsuite per node, to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<String>,
}

/// A fleet report form.
type Render = fn(&FleetReport) -> String;

/// Runs a `report` subcommand.
pub fn run(command: ReportCommand) -> CliResult {
    match command {
        ReportCommand::Merge(args) => merge(&args),
    }
}

fn merge(args: &MergeArgs) -> CliResult {
    let fleet = read_fleet(&args.reports)?;
    let outputs: [(&Option<String>, Render); 3] = [
        (&args.json, fleet::to_fleet_json),
        (&args.markdown, fleet::to_fleet_markdown),
        (&args.junit, fleet::to_fleet_junit),
    ];
    let mut wrote = false;
    for (dest, render) in outputs {
        if let Some(dest) = dest {
            write_output(dest, &render(&fleet))?;
            wrote = true;
        }
    }
    if !wrote {
        print_stdout(&fleet::to_fleet_markdown(&fleet));
    }
    Ok(fleet.summary.verdict.exit_code())
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

/// Writes one output (stdout for `-`) with the crate's one writer: regular
/// files atomically, devices, FIFOs and symlinks' targets in place.
fn write_output(dest: &str, text: &str) -> Result<(), CliError> {
    if dest == "-" {
        print_stdout(text);
        return Ok(());
    }
    crate::safe_fs::write_file(
        std::path::Path::new(dest),
        text.as_bytes(),
        &crate::safe_fs::WriteOptions::default(),
    )
    .map_err(|e| CliError::usage(e.to_string()))
}
