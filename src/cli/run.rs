//! `dhv-conform run PLUGIN OPERATION`: one operation, exactly as Nomad runs it,
//! with everything Nomad would see laid out for the plugin author.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::run_fidelity::{self, RunBy};
use super::run_output;
use super::{CliError, CliResult, EXIT_FAIL, EXIT_OK, print_json, print_stdout};
use crate::conformance::RequestTemplate;
use crate::contract::Operation;
use crate::contract::{self, CreateRequest, DeleteRequest, Parameters};
use crate::plugin::{
    CallOptions, HostVolumePlugin, PluginCall, PluginError, PluginRun, PluginSource, Timeouts,
};
use crate::report::{CreateOutput, printable};
use crate::version::VersionInfo;

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Path to the plugin executable, `mkdir` for the built-in plugin, or,
    /// with --plugin-dir, a plugin id looked up in that dir exactly as Nomad
    /// looks plugins up.
    pub plugin: String,
    /// The operation: fingerprint, create or delete (anything else is sent as is).
    pub operation: String,
    /// DHV_VOLUMES_DIR [default: a new dir $TMPDIR/dhv-conform-volumes-XXXXXX, made for this run and kept]
    #[arg(long, value_name = "DIR")]
    pub volumes_dir: Option<PathBuf>,
    /// DHV_PLUGIN_DIR, and where a plugin named by id is looked up [default: the plugin's own directory]
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: Option<PathBuf>,
    /// DHV_VOLUME_ID, a lower-case UUID [default: a fresh one]
    #[arg(long, value_name = "UUID")]
    pub id: Option<String>,
    /// DHV_VOLUME_NAME [default: run-<first 8 characters of the id>]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// DHV_NAMESPACE
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// DHV_NODE_ID [default: a fresh UUID]
    #[arg(long, value_name = "ID")]
    pub node_id: Option<String>,
    /// DHV_NODE_POOL
    #[arg(long, value_name = "POOL", default_value = "default")]
    pub node_pool: String,
    /// DHV_CAPACITY_MIN_BYTES
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub capacity_min: i64,
    /// DHV_CAPACITY_MAX_BYTES
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub capacity_max: i64,
    /// DHV_PARAMETERS as a JSON object of strings [default: null, as Nomad sends without a parameters block]
    #[arg(long, value_name = "JSON")]
    pub parameters: Option<String>,
    /// DHV_CREATED_PATH for delete [default: VOLUMES_DIR/ID]
    #[arg(long, value_name = "PATH")]
    pub created_path: Option<String>,
    /// Time limit, e.g. `500ms`, `5s`, `1m` [default: Nomad's: 1s fingerprint, 60s create/delete]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// After the plugin exits, how long to keep reading a stdout or stderr
    /// that a process it started still holds, as Nomad waits for EOF
    /// [default: 5s, at most the time limit]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub follow: Option<Duration>,
    /// Print one JSON object instead of the human report.
    #[arg(long)]
    pub json: bool,
}

/// How long `run` keeps reading a pipe held after the plugin's exit, by default.
const DEFAULT_FOLLOW: Duration = Duration::from_secs(5);

/// Parses `250ms`, `5s`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 500ms, 5s or 1m"))?;
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        _ => return Err(format!("invalid duration unit in {s:?}: use ms, s or m")),
    };
    if !value.is_finite() || value < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    if value == 0.0 {
        // A zero limit kills every call before it starts: never what anyone meant.
        return Err(format!("the time limit must be more than 0, not {s:?}"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// Parses `--parameters`: a JSON object whose values are strings, or `null`.
pub fn parse_parameters(raw: Option<&str>) -> Result<Option<Parameters>, CliError> {
    let Some(raw) = raw else { return Ok(None) };
    let value: Value = serde_json::from_str(raw)
        .map_err(|e| CliError::usage(format!("--parameters is not valid JSON: {e}")))?;
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => map
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                other => Err(CliError::usage(format!(
                    "--parameters: the value of {k:?} must be a string, not {other}"
                ))),
            })
            .collect::<Result<Parameters, _>>()
            .map(Some),
        other => Err(CliError::usage(format!(
            "--parameters must be a JSON object of strings, not {other}"
        ))),
    }
}

/// What one `run` produced, whichever kind of plugin ran.
#[derive(Default)]
pub(super) struct OneRun {
    pub(super) operation: String,
    pub(super) env: Vec<(String, String)>,
    pub(super) run: Option<PluginRun>,
    pub(super) response: Option<CreateOutput>,
    pub(super) version: Option<VersionInfo>,
    pub(super) error: Option<String>,
    pub(super) explanation: Option<String>,
    pub(super) builtin_duration: Option<Duration>,
    pub(super) run_by: Option<RunBy>,
    pub(super) follow: Duration,
}

/// Runs `run`.
pub async fn run(args: RunArgs) -> CliResult {
    let id = volume_id(args.id.as_deref())?;
    let parameters = parse_parameters(args.parameters.as_deref())?;
    run_fidelity::check_plugin_dir(&args.plugin, args.plugin_dir.as_deref())?;
    let (source, run_by) = match run_fidelity::find(&args.plugin, args.plugin_dir.as_deref()) {
        Ok(found) => found,
        Err((refused, run_by)) => return refused_by_lookup(&args, refused, run_by),
    };
    check_plugin_file(&source)?;
    let volumes_dir = volumes_dir(args.volumes_dir.as_deref())?;
    let timeouts = args
        .timeout
        .map_or_else(Timeouts::default, Timeouts::uniform);
    let limit = timeouts.for_operation(&args.operation);
    let follow = args.follow.unwrap_or(DEFAULT_FOLLOW).min(limit);
    let plugin = source.open(&CallOptions::new(timeouts).following(follow));
    let create = create_request(&args, plugin.as_ref(), &volumes_dir, id, parameters);
    let created_path = args.created_path.clone().unwrap_or_else(|| {
        volumes_dir
            .join(&create.volume_id)
            .to_string_lossy()
            .into_owned()
    });
    let delete = DeleteRequest::for_created(&create, &created_path);

    let mut report = dispatch(plugin.as_ref(), &args.operation, &create, &delete).await?;
    report.run_by = Some(run_by);
    report.follow = follow;
    print_report(&args, &report)
}

/// Nomad's lookup refused the plugin: that is Nomad's verdict, and no call runs.
fn refused_by_lookup(args: &RunArgs, refused: PluginError, run_by: RunBy) -> CliResult {
    let report = OneRun {
        operation: args.operation.clone(),
        error: Some(refused.to_string()),
        run_by: Some(run_by),
        ..OneRun::default()
    };
    print_report(args, &report)
}

fn print_report(args: &RunArgs, report: &OneRun) -> CliResult {
    let ok = report.error.is_none();
    if args.json {
        print_json(&run_output::to_json(report));
    } else {
        // Everything here may come from the plugin: no escape reaches the terminal.
        print_stdout(&printable(&run_output::to_human(report, &args.plugin)));
    }
    Ok(if ok { EXIT_OK } else { EXIT_FAIL })
}

/// `--id` as given, when it is the lower-case UUID Nomad sends, or a fresh one.
fn volume_id(given: Option<&str>) -> Result<String, CliError> {
    match given {
        Some(id) if !contract::is_valid_volume_id(id) => Err(CliError::usage(format!(
            "--id {id:?} is not a lower-case UUID (8-4-4-4-12 hex digits)"
        ))),
        Some(id) => Ok(id.to_owned()),
        None => Ok(uuid::Uuid::new_v4().to_string()),
    }
}

/// A plugin path that is missing or not a file is bad input, said before any call.
fn check_plugin_file(source: &PluginSource) -> Result<(), CliError> {
    if let Some(path) = source.path().filter(|p| !p.exists()) {
        return Err(CliError::usage(format!(
            "plugin {} does not exist",
            path.display()
        )));
    }
    if let Some(path) = source.path().filter(|p| !p.is_file()) {
        return Err(CliError::usage(format!(
            "plugin {} is not a regular file, not an executable",
            path.display()
        )));
    }
    Ok(())
}

/// `--volumes-dir` (created if missing), or a new dir made for this run, and
/// made absolute, as Nomad's own volumes dir always is. The default is never a
/// fixed name: another user could plant a symlink there ahead of us. It is
/// made like `mkdtemp` (a random name, created exclusively, mode 0700, ours),
/// and kept, since the volume made in it outlives the run.
fn volumes_dir(given: Option<&std::path::Path>) -> Result<PathBuf, CliError> {
    let volumes_dir = match given {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                CliError::usage(format!("cannot create volumes dir {}: {e}", dir.display()))
            })?;
            dir.to_path_buf()
        }
        None => tempfile::Builder::new()
            .prefix("dhv-conform-volumes-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .map_err(|e| {
                CliError::usage(format!(
                    "cannot create a volumes dir in {}: {e}",
                    std::env::temp_dir().display()
                ))
            })?
            .keep(),
    };
    Ok(std::path::absolute(&volumes_dir).unwrap_or(volumes_dir))
}

/// The create request from the flags, with the defaults `RunArgs` documents.
fn create_request(
    args: &RunArgs,
    plugin: &dyn HostVolumePlugin,
    volumes_dir: &std::path::Path,
    id: String,
    parameters: Option<Parameters>,
) -> CreateRequest {
    let plugin_dir = match (&args.plugin_dir, plugin.plugin_dir()) {
        (Some(d), _) => d.to_string_lossy().into_owned(),
        (None, Some(dir)) => dir.to_string_lossy().into_owned(),
        (None, None) => String::new(),
    };
    // The flags are a request template, made into a request as every
    // template is.
    let template = RequestTemplate {
        name: args.name.clone(),
        namespace: args.namespace.clone(),
        node_pool: args.node_pool.clone(),
        capacity_min: args.capacity_min,
        capacity_max: args.capacity_max,
        parameters,
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("run-{}", &id[..8]));
    let node_id = args
        .node_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    template.request(
        &volumes_dir.to_string_lossy(),
        &plugin_dir,
        name,
        id,
        &node_id,
    )
}

/// Makes the one call, through the plugin interface whatever the plugin is.
async fn dispatch(
    plugin: &dyn HostVolumePlugin,
    op: &str,
    create: &CreateRequest,
    delete: &DeleteRequest,
) -> Result<OneRun, CliError> {
    let mut report = OneRun {
        operation: op.to_string(),
        ..OneRun::default()
    };
    match op.parse::<Operation>() {
        Ok(Operation::Fingerprint) => {
            let call = plugin.fingerprint().await;
            if let Some(fp) = report.absorb(call) {
                report.version = Some(fp.version);
            }
            if report.version.is_none() {
                // Show what the plugin printed even when Nomad rejects the version.
                let stdout = report.run.as_ref().map(PluginRun::stdout).unwrap_or(&[]);
                report.version = crate::plugin::shown_version(stdout)
                    .as_deref()
                    .map(VersionInfo::from_raw);
            }
        }
        Ok(Operation::Create) => {
            if let Some(resp) = report.absorb(plugin.create(create).await) {
                report.response = Some(CreateOutput {
                    path: resp.path,
                    bytes: resp.bytes,
                });
            }
        }
        Ok(Operation::Delete) => {
            report.absorb(plugin.delete(delete).await);
        }
        Err(_) => {
            let env = vec![(contract::var::OPERATION.to_string(), op.to_string())];
            let Some(run) = plugin.run_unknown(op, env).await else {
                return Err(CliError::usage(format!(
                    "the built-in mkdir plugin has no operation {op:?} (fingerprint, create, delete)"
                )));
            };
            if !run.succeeded() {
                report.error = Some(format!("operation {op:?} failed: {}", run.exit_error()));
            }
            report.env = run.env.clone();
            report.run = Some(run);
        }
    }
    Ok(report)
}

impl OneRun {
    /// Takes a call's evidence; returns its value when it succeeded.
    fn absorb<T>(&mut self, call: PluginCall<T>) -> Option<T> {
        self.env = call.request;
        if call.run.is_none() {
            self.builtin_duration = Some(call.duration);
        }
        self.run = call.run;
        match call.result {
            Ok(value) => Some(value),
            Err(e) => {
                if let PluginError::Start { explanation, .. } = &e {
                    self.explanation = Some(explanation.clone());
                }
                self.error = Some(e.to_string());
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("0").is_err());
    }

    #[test]
    fn parameters_must_be_an_object_of_strings() {
        assert_eq!(parse_parameters(None).unwrap(), None);
        assert_eq!(parse_parameters(Some("null")).unwrap(), None);
        let p = parse_parameters(Some(r#"{"a":"1"}"#)).unwrap().unwrap();
        assert_eq!(p.get("a").map(String::as_str), Some("1"));
        for bad in ["{", "[]", r#"{"a":1}"#, "\"x\""] {
            assert_eq!(
                parse_parameters(Some(bad)).unwrap_err().code,
                super::super::EXIT_USAGE
            );
        }
    }
}
