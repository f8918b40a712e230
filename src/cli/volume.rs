//! `dhv-conform volume ...`: the manager by hand.
use super::CliResult;

/// The `volume` verbs.
#[derive(Debug, clap::Subcommand)]
pub enum VolumeCommand {
    /// List volumes.
    List,
}

/// Runs a `volume` verb.
pub async fn run(_cmd: VolumeCommand) -> CliResult {
    Err(super::CliError::harness("not implemented yet"))
}
