//! `dhv-conform plugins`: discovery and fingerprinting of a plugin dir, showing
//! the node attributes a Nomad client would publish and the plugins it would
//! leave out.

use std::path::PathBuf;

use serde_json::json;

use super::{CliError, CliResult, EXIT_OK};
use crate::manager::Fingerprinter;
use crate::plugin::Timeouts;

/// Arguments of `plugins`.
#[derive(Debug, clap::Args)]
pub struct PluginsArgs {
    /// The plugin dir (Nomad's `client.host_volume_plugin_dir`); a missing dir has no plugins.
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: PathBuf,
    /// Print `{"attributes": {...}, "errors": {"<id>": "<why>"}}` instead.
    #[arg(long)]
    pub json: bool,
    /// Multiply the 1 s fingerprint limit (for the harness's own tests of slow plugins).
    #[arg(long, value_name = "X", default_value_t = 1.0, value_parser = parse_scale)]
    pub timeout_scale: f64,
}

/// Runs `plugins`.
pub async fn run(args: PluginsArgs) -> CliResult {
    let mut fingerprinter = Fingerprinter::new(Some(args.plugin_dir))
        .with_timeouts(Timeouts::default().scaled(args.timeout_scale));
    let fp = fingerprinter
        .fingerprint()
        .await
        .map_err(|e| CliError::usage(e.to_string()))?;
    let errors: std::collections::BTreeMap<&str, &str> = fp
        .discovery
        .left_out
        .iter()
        .map(|(id, l)| (id.as_str(), l.reason.as_str()))
        .collect();
    if args.json {
        let doc = json!({ "attributes": fp.attributes, "errors": errors });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(EXIT_OK);
    }
    for (key, value) in &fp.attributes {
        println!("{key} = {value}");
    }
    for (id, why) in errors {
        println!("left out {}: {why}", crate::plugin::go_quote(id));
    }
    Ok(EXIT_OK)
}

fn parse_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}
