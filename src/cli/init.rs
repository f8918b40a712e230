//! `dhv-conform init PLUGIN`: a commented `dhv-conform.toml` for an existing
//! plugin, with what one create of the default request showed (a mounted
//! filesystem? a block device? the bytes it reported), for the author to
//! confirm. Nothing is claimed that was not seen.
//!
//! Exit: 0 when the create worked and the config was written; 1 when the
//! plugin's create failed (the config is written all the same, every claim
//! commented out, and the error is on stderr as well as in the file); 2 for
//! bad input (an existing config without `--force`, the built-in plugin).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{CliError, CliResult, EXIT_FAIL, EXIT_OK, print_stderr};
use crate::conformance::RequestTemplate;
use crate::conformance::volume_facts::{Kind, VolumeFacts};
use crate::contract::DeleteRequest;
use crate::plugin::{CallOptions, PluginSource};

/// Arguments of `init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The plugin executable.
    pub plugin: PathBuf,
    /// Where to write the config [default: dhv-conform.toml beside the plugin].
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Overwrite an existing config.
    #[arg(long)]
    pub force: bool,
}

/// What one create showed.
struct Seen {
    facts: Option<VolumeFacts>,
    bytes: i64,
    error: Option<String>,
}

/// Runs `init`.
pub async fn run(args: InitArgs) -> CliResult {
    let target = super::selection::target(&args.plugin.to_string_lossy())?;
    if target.is_builtin() {
        return Err(CliError::usage(
            "init: the built-in mkdir plugin needs no config (its claims are Nomad's own)",
        ));
    }
    let output = args.output.clone().unwrap_or_else(|| {
        args.plugin
            .parent()
            .unwrap_or(Path::new("."))
            .join(super::config::FILE_NAME)
    });
    if output.exists() && !args.force {
        return Err(CliError::usage(format!(
            "init: {} exists; --force overwrites it",
            output.display()
        )));
    }
    crate::safe_fs::check_target(&output).map_err(|e| CliError::usage(e.to_string()))?;
    let seen = observe(&target).await?;
    let text = render(&args.plugin, &seen);
    crate::safe_fs::write_file(
        &output,
        text.as_bytes(),
        &crate::safe_fs::WriteOptions::default(),
    )
    .map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(error) = &seen.error {
        // The file alone would hide it: a script or a CI step reads the exit code.
        print_stderr(&format!(
            "dhv-conform: init: the plugin's create of the default request failed, so nothing \
             was observed: {error}\ndhv-conform: wrote {} with every claim commented out; fix \
             the create, then `dhv-conform init --force {}`\n",
            output.display(),
            args.plugin.display()
        ));
        return Ok(EXIT_FAIL);
    }
    print_stderr(&format!(
        "dhv-conform: wrote {}: confirm what it says, then `dhv-conform check {}`\n",
        output.display(),
        args.plugin.display()
    ));
    Ok(EXIT_OK)
}

/// One create of the default request in a volumes dir of its own, measured,
/// then deleted; the dir is removed as the teardown removes a run's (mounts
/// left by the plugin unmounted, loop devices detached, nothing crossed).
async fn observe(target: &PluginSource) -> Result<Seen, CliError> {
    let root = tempfile::Builder::new()
        .prefix("dhv-conform-init-")
        .tempdir()
        .map_err(|e| CliError::harness(format!("init: cannot make a temp dir: {e}")))?
        .keep();
    let volumes = root.join("volumes");
    let seen = async {
        std::fs::create_dir(&volumes).map_err(|e| CliError::harness(format!("init: {e}")))?;
        let plugin = target.open(&CallOptions::default());
        let plugin_dir = plugin
            .plugin_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = uuid::Uuid::new_v4().to_string();
        let req = RequestTemplate::default().request(
            &volumes.to_string_lossy(),
            &plugin_dir,
            format!("init-{}", &id[..8]),
            id,
            &uuid::Uuid::new_v4().to_string(),
        );
        let call = plugin.create(&req).await;
        let seen = match &call.result {
            Ok(resp) => {
                let seen = Seen {
                    facts: VolumeFacts::measure(
                        &crate::conformance::host::LocalHost::new(),
                        Path::new(&resp.path),
                    )
                    .ok(),
                    bytes: resp.bytes,
                    error: None,
                };
                let _ = plugin
                    .delete(&DeleteRequest::for_created(&req, &resp.path))
                    .await;
                seen
            }
            Err(e) => Seen {
                facts: None,
                bytes: 0,
                error: Some(e.to_string()),
            },
        };
        Ok::<Seen, CliError>(seen)
    }
    .await;
    let removal = crate::conformance::remove_unheld(&root);
    if !removal.removed {
        print_stderr(&format!("dhv-conform: init: {}\n", removal.summary()));
    }
    seen
}

/// The config's text: what was seen as comments, claims only where seen.
fn render(plugin: &Path, seen: &Seen) -> String {
    let mut out = String::new();
    header(&mut out, plugin);
    let _ = writeln!(out, "[claims]");
    match (&seen.error, &seen.facts) {
        (Some(e), _) => {
            let _ = writeln!(
                out,
                "# A create with the default request failed, so nothing was observed:\n# {}",
                crate::report::printable(e)
            );
        }
        (None, None) => {
            let _ = writeln!(out, "# The path create returned could not be measured.");
        }
        (None, Some(f)) => {
            let _ = writeln!(
                out,
                "# Seen: create with the default request made {}, mode {:04o}, owner {}:{},\n\
                 # and reported bytes = {}.",
                f.describe(),
                f.mode,
                f.uid,
                f.gid,
                seen.bytes
            );
            attachment_claims(&mut out, &f.kind);
        }
    }
    claims_to_confirm(&mut out);
    out
}

/// Where the config came from, how it is confirmed, and `strict` to turn on.
fn header(out: &mut String, plugin: &Path) {
    let _ = writeln!(
        out,
        "# dhv-conform.toml for {}, written by `dhv-conform init`.",
        plugin.display()
    );
    let _ = writeln!(
        out,
        "# Confirm every claim below: `dhv-conform check` verifies each one on real volumes.\n\
         # Every key is documented in dhv-conform's docs/config.md.\n"
    );
    let _ = writeln!(out, "# strict = true\n");
}

/// The attachment, filesystem and capacity claims the volume made suggests.
fn attachment_claims(out: &mut String, kind: &Kind) {
    match kind {
        Kind::BlockDevice { .. } => {
            let _ = writeln!(out, "attachment = \"block-device\"");
            let _ = writeln!(out, "# capacity = \"enforced\"");
        }
        Kind::Mount {
            fs_type, own: true, ..
        } => {
            let _ = writeln!(out, "attachment = \"file-system\"");
            let _ = writeln!(out, "filesystem = \"{fs_type}\"");
            let _ = writeln!(
                out,
                "# A filesystem of its own size: confirm that writing past it fails.\ncapacity = \"enforced\""
            );
        }
        _ => {
            let _ = writeln!(out, "attachment = \"file-system\"");
            let _ = writeln!(
                out,
                "# A plain directory: no capacity of its own. With a quota, claim it:\n# capacity = \"enforced\""
            );
        }
    }
}

/// What no create can show, as commented-out examples: ephemeral, the
/// parameters' effects and the skips.
fn claims_to_confirm(out: &mut String) {
    let _ = writeln!(
        out,
        "# ephemeral = true        # the volume is lost on a reboot by design"
    );
    let _ = writeln!(
        out,
        "\n# What a parameter sets, and the values to try:\n\
         # [claims.parameters.mode]\n# effect = \"mode\"        # mode, uid, gid or fs_type\n# values = [\"0750\"]\n\
         \n# Checks skipped, each with the reason every report shows:\n# [skip]\n# \"check.id\" = \"why\""
    );
}
