//! The command line: clap definitions and one module per command.
//!
//! Exit codes (README, "Exit codes"): 0 conformant or success; 1 non-conformant or the
//! operation failed as Nomad would report it; 2 usage or input error; 3 snapshot
//! missing or different; 4 the harness itself failed, or the run is
//! inconclusive (the plugin file changed mid-run).

pub(crate) mod check;
mod check_args;
mod check_outputs;
pub(crate) mod check_requests;
mod check_rounds;
pub(crate) mod clean;
pub(crate) mod config;
mod explain;
mod explore;
mod init;
mod new;
mod plugins;
mod progress_lines;
mod report;
mod report_files;
mod run;
mod run_lookup;
mod run_output;
pub(crate) mod selection;
mod signals;
mod snapshot;
mod terminal;
mod volume;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code: success / conformant.
pub const EXIT_OK: u8 = 0;
/// Exit code: non-conformant, or the plugin call failed.
pub const EXIT_FAIL: u8 = 1;
/// Exit code: usage or input error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: snapshot missing or different.
pub const EXIT_SNAPSHOT: u8 = 3;
/// Exit code: the harness itself failed.
pub const EXIT_HARNESS: u8 = 4;

/// A command's failure: one line for stderr and the exit code.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub code: u8,
    /// The one-line message.
    pub message: String,
}

impl CliError {
    /// A usage or input error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// A failure of the operation itself (exit 1).
    pub fn failed(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_FAIL,
            message: message.into(),
        }
    }

    /// The harness broke (exit 4).
    pub fn harness(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_HARNESS,
            message: message.into(),
        }
    }
}

/// What a command returns: its exit code, or an error to print.
pub type CliResult = Result<u8, CliError>;

#[derive(Debug, Parser)]
#[command(
    name = "dhv-conform",
    version,
    about = "Conformance harness for Nomad dynamic host volume plugins",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the conformance checks against a plugin.
    #[command(after_help = check_args::EXIT_CODES_HELP)]
    Check(Box<check_args::CheckArgs>),
    /// Explore random histories of operations on a node for a time budget; a failing one
    /// is shrunk to a minimal one and printed with its replay.
    #[command(after_help = explore::EXIT_CODES_HELP)]
    Explore(Box<explore::ExploreArgs>),
    /// Explain a check: its rule, why Nomad cares, how to fix a failure.
    Explain(explain::ExplainArgs),
    /// Run one plugin operation exactly as Nomad would, and show what Nomad sees.
    Run(Box<run::RunArgs>),
    /// Discover and fingerprint a plugin dir like a Nomad client.
    Plugins(plugins::PluginsArgs),
    /// Manage volumes by hand with the Nomad-compatible manager.
    #[command(subcommand)]
    Volume(volume::VolumeCommand),
    /// Remove what runs killed outright left (mounts, loop devices, temp dirs); live runs are not touched.
    Clean(clean::CleanArgs),
    /// Work with JSON reports: `report merge` turns many nodes' reports into one.
    #[command(subcommand)]
    Report(report::ReportCommand),
    /// Write a commented dhv-conform.toml for an existing plugin, from what one create shows.
    ///
    /// Exit 0 when written; 1 when the plugin's create failed (the config is
    /// written with every claim commented out, the error on stderr); 2 for bad input.
    Init(init::InitArgs),
    /// Write a new plugin that passes every check, with its config, snapshot and CI files.
    New(new::NewArgs),
    /// Review the pending snapshots `check --snapshot FILE --bless` wrote (FILE.new):
    /// accept them over their snapshots, or reject them.
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
}

/// Prints to stdout; a reader that went away (`dhv-conform ... | head -1`) is
/// not an error worth a panic: the rest of the output is dropped quietly.
pub(crate) fn print_stdout(text: &str) {
    progress_lines::Stream::Stdout.write(text);
}

/// Prints to stderr; a stderr that cannot be written (a closed pipe) must not
/// turn a clean exit code into a panic's 101: the message is dropped instead.
pub(crate) fn print_stderr(text: &str) {
    progress_lines::Stream::Stderr.write(text);
}

/// Prints a schema type (from [`crate::report`]) as pretty JSON on stdout.
pub(crate) fn print_json<T: serde::Serialize>(doc: &T) {
    let text = serde_json::to_string_pretty(doc).unwrap_or_default();
    print_stdout(&format!("{text}\n"));
}

/// Writes one output of a command (a report file, or stdout for `-`) with
/// the crate's one writer: regular files atomically, devices, FIFOs and
/// symlinks' targets (`/dev/stdout`) in place.
pub(crate) fn write_output(dest: &str, text: &str) -> Result<(), CliError> {
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

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            print_stderr(&format!(
                "dhv-conform: cannot start the async runtime: {e}\n"
            ));
            return ExitCode::from(EXIT_HARNESS);
        }
    };
    // Only commands that run plugins: a plugin may reach the terminal.
    let runs_plugins = !matches!(
        cli.command,
        Command::Explain(_) | Command::Report(_) | Command::Clean(_) | Command::Snapshot(_)
    );
    let terminal = runs_plugins.then(terminal::Terminal::keep).flatten();
    let result = match cli.command {
        Command::Check(args) => check::run(&runtime, *args),
        Command::Explore(args) => explore::run(&runtime, *args),
        Command::Explain(args) => explain::run(args),
        Command::Run(args) => runtime.block_on(run::run(*args)),
        Command::Plugins(args) => runtime.block_on(plugins::run(args)),
        Command::Volume(cmd) => runtime.block_on(volume::run(cmd)),
        Command::Report(cmd) => report::run(cmd),
        Command::Init(args) => runtime.block_on(init::run(args)),
        Command::New(args) => new::run(&runtime, args),
        Command::Clean(args) => clean::run(args),
        Command::Snapshot(cmd) => snapshot::run(cmd),
    };
    drop(terminal);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Messages quote plugin output and user input: escape control characters.
            print_stderr(&format!(
                "dhv-conform: {}\n",
                crate::report::printable_line(&e.message)
            ));
            ExitCode::from(e.code)
        }
    }
}
