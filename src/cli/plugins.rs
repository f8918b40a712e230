//! `dhv-conform plugins`: discovery and fingerprinting of a plugin dir.
use super::CliResult;

/// Arguments of `plugins`.
#[derive(Debug, clap::Args)]
pub struct PluginsArgs {}

/// Runs `plugins`.
pub async fn run(_args: PluginsArgs) -> CliResult {
    Err(super::CliError::harness("not implemented yet"))
}
