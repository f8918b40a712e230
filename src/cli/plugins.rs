//! `dhv-conform plugins`: discovery and fingerprinting of a plugin dir, showing
//! the node attributes a Nomad client would publish and the plugins it would
//! leave out.

use std::path::PathBuf;

use super::{CliError, CliResult, EXIT_OK, print_json, print_stdout};
use crate::manager::Fingerprinter;
use crate::plugin::Timeouts;
use crate::report::{PluginsOutput, printable_line};

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
    let doc = PluginsOutput {
        attributes: fp.attributes,
        errors: fp
            .discovery
            .left_out
            .iter()
            .map(|(id, l)| (id.clone(), l.reason.clone()))
            .collect(),
    };
    if args.json {
        print_json(&doc);
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    for (key, value) in &doc.attributes {
        // The key holds the plugin's file name, the value its output: one
        // escaped line each, so no plugin forges an attribute of its own.
        out.push_str(&format!(
            "{} = {}\n",
            printable_line(key),
            printable_line(value)
        ));
    }
    for (id, why) in &doc.errors {
        let id = crate::plugin::go_quote(id);
        out.push_str(&format!("left out {id}: {}\n", printable_line(why)));
    }
    print_stdout(&out);
    Ok(EXIT_OK)
}

fn parse_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 100.0 => Ok(x),
        _ => Err(format!(
            "{s:?} is not a number greater than 0 and at most 100"
        )),
    }
}
