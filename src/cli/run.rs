//! `dhv-conform run PLUGIN OPERATION`: one operation, exactly as Nomad runs it,
//! with everything Nomad would see laid out for the plugin author.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use super::run_lookup::{self, RunBy};
use super::run_output::{self, OneRun};
use super::{CliError, CliResult, EXIT_FAIL, EXIT_OK, print_json, print_stderr, print_stdout};
use crate::conformance::RequestTemplate;
use crate::contract::Operation;
use crate::contract::{self, CreateRequest, DeleteRequest, Parameters};
use crate::plugin::{
    CallOptions, HostVolumePlugin, KillMode, PluginCall, PluginError, PluginSource, Timeouts,
};
use crate::report::printable;

mod calls;

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Path to the plugin executable, `mkdir` for the built-in plugin, or,
    /// with --plugin-dir, a plugin id looked up in that dir as Nomad looks
    /// plugins up (a path to a file of that dir runs as that file's id).
    pub plugin: std::ffi::OsString,
    /// The operation: fingerprint, create or delete (anything else is sent as is).
    pub operation: String,
    /// DHV_VOLUMES_DIR, handed over as it is (never made or checked, as by a Nomad client) [default: a new dir $TMPDIR/dhv-conform-volumes-XXXXXX, made for this run and kept]
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
    /// DHV_CAPACITY_MIN_BYTES (negative values too: Nomad passes any int64)
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub capacity_min: i64,
    /// DHV_CAPACITY_MAX_BYTES (negative values too: Nomad passes any int64)
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub capacity_max: i64,
    /// DHV_PARAMETERS as a JSON object of strings [default: null, as Nomad sends without a parameters block]
    #[arg(long, value_name = "JSON")]
    pub parameters: Option<std::ffi::OsString>,
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

/// Parses `--parameters` as Go decodes JSON into the `map[string]string` a
/// volume's parameters are: an object of strings, or `null` (a duplicate key
/// keeps its last value, a `null` value is `""`, a lone surrogate or a byte
/// that is not UTF-8 becomes U+FFFD).
pub fn parse_parameters(raw: Option<&[u8]>) -> Result<Option<Parameters>, CliError> {
    let Some(raw) = raw else { return Ok(None) };
    contract::unmarshal_string_map(raw).map_err(|e| {
        CliError::usage(format!(
            "--parameters must be a JSON object of strings, as Nomad's parameters are: {e}"
        ))
    })
}

/// Runs `run`.
pub async fn run(args: RunArgs) -> CliResult {
    let id = volume_id(args.id.as_deref())?;
    let parameters = parse_parameters(args.parameters.as_deref().map(OsStrExt::as_bytes))?;
    // Nomad refuses a relative host_volume_plugin_dir or host_volumes_dir
    // ("must be given as an absolute path"): a relative one here means the
    // same dir from where `run` is.
    let plugin_dir = args
        .plugin_dir
        .as_deref()
        .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()));
    run_lookup::check_plugin_dir(&args.plugin, plugin_dir.as_deref())?;
    let (source, run_by) = match run_lookup::find(&args.plugin, plugin_dir.as_deref()) {
        Ok(found) => found,
        Err((refused, run_by)) => {
            // A path Nomad's lookup refuses was most likely meant as a file.
            if let Some(hint) = run_lookup::plugin_dir_hint(&args.plugin, plugin_dir.as_deref()) {
                print_stderr(&printable(&format!("dhv-conform: {hint}\n")));
            }
            return refused_by_lookup(&args, refused, run_by);
        }
    };
    if matches!(run_by, RunBy::Path { .. }) {
        check_plugin_file(&source)?;
    }
    let (volumes_dir, volumes_note) = volumes_dir(args.volumes_dir.as_deref())?;
    let timeouts = args
        .timeout
        .map_or_else(Timeouts::default, Timeouts::uniform);
    let limit = timeouts.for_operation(&args.operation);
    let follow = args.follow.unwrap_or(DEFAULT_FOLLOW).min(limit);
    // As Nomad: a time limit kills the plugin's process alone, with SIGKILL
    // (Go's `exec.CommandContext`), and a plugin found by id runs by its
    // path in the plugin dir.
    let mut opts = CallOptions::new(timeouts).following(follow);
    opts.kill_mode = Some(KillMode::NomadLeader);
    opts.exec_by_path = true;
    let plugin = source.open(&opts);
    let create = create_request(
        &args,
        plugin.as_ref(),
        plugin_dir.as_deref(),
        &volumes_dir,
        id,
        parameters,
    );
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
    report.volumes_dir = Some((volumes_dir, volumes_note));
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
    // Each deliberate difference that touched this call, on stderr too, so
    // that it is seen whatever is done with stdout (`--json | jq`).
    for note in report.not_reproduced() {
        print_stderr(&printable(&format!("dhv-conform: not as Nomad: {note}\n")));
    }
    if args.json {
        print_json(&run_output::to_json(report));
    } else {
        // Everything here may come from the plugin: no escape reaches the terminal.
        let plugin = args.plugin.to_string_lossy();
        print_stdout(&printable(&run_output::to_human(report, &plugin)));
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

/// `--volumes-dir`, made absolute and otherwise as given, or a new dir made
/// for this run; with what `run` did about it, in words.
///
/// A Nomad 2.0.5 client neither makes nor checks its `host_volumes_dir`, at
/// start or between calls: it hands the path to every plugin as it is, and
/// only the built-in `mkdir`'s `os.MkdirAll` makes it, as a parent of a
/// volume. So a given dir is not made here either: missing, a file or a
/// dangling symlink, it reaches the plugin as Nomad would hand it over.
///
/// The default is never a fixed name: another user could plant a symlink
/// there ahead of us. It is made like `mkdtemp` (a random name, created
/// exclusively, mode 0700, ours), and kept, since the volume made in it
/// outlives the run.
fn volumes_dir(given: Option<&std::path::Path>) -> Result<(PathBuf, String), CliError> {
    const NOMAD: &str = "as a Nomad 2.0.5 client does: it neither makes nor checks \
                         host_volumes_dir, at start or between calls";
    match given {
        Some(dir) => {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
            let state = match (std::fs::symlink_metadata(&dir), std::fs::metadata(&dir)) {
                (_, Ok(meta)) if meta.is_dir() => "a directory".to_string(),
                (_, Ok(_)) => "not a directory".to_string(),
                (Ok(link), Err(_)) if link.file_type().is_symlink() => {
                    "a dangling symlink".to_string()
                }
                (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => "missing".to_string(),
                (_, Err(e)) => format!("not readable ({e})"),
            };
            let note = format!("{state}; passed to the plugin as it is, {NOMAD}");
            Ok((dir, note))
        }
        None => {
            let dir = tempfile::Builder::new()
                .prefix("dhv-conform-volumes-")
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .tempdir()
                .map_err(|e| {
                    CliError::usage(format!(
                        "cannot create a volumes dir in {}: {e}",
                        std::env::temp_dir().display()
                    ))
                })?
                .keep();
            let dir = std::path::absolute(&dir).unwrap_or(dir);
            Ok((
                dir,
                "made empty for this run (--volumes-dir names another); \
                 a Nomad 2.0.5 client never makes host_volumes_dir itself"
                    .to_string(),
            ))
        }
    }
}

/// The create request from the flags, with the defaults `RunArgs` documents.
fn create_request(
    args: &RunArgs,
    plugin: &dyn HostVolumePlugin,
    plugin_dir: Option<&std::path::Path>,
    volumes_dir: &std::path::Path,
    id: String,
    parameters: Option<Parameters>,
) -> CreateRequest {
    let plugin_dir = match (plugin_dir, plugin.plugin_dir()) {
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
        Ok(Operation::Fingerprint) => report.call_fingerprint(plugin).await,
        Ok(Operation::Create) => report.call_create(plugin, create).await,
        Ok(Operation::Delete) => report.call_delete(plugin, delete).await,
        Err(_) => report.call_unknown(plugin, op).await?,
    }
    Ok(report)
}

/// Whether the built-in delete's `error` may name another step or path than
/// Go's `os.RemoveAll` would: its first steps are Go's exactly (`os.Remove`,
/// the open of the parent, the `unlinkat` under a non-directory); past them,
/// the step that fails varies.
fn remove_all_step_unsure(error: &str) -> bool {
    error.starts_with("unlinkat ") && !error.ends_with(": not a directory")
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
    fn only_a_delete_failing_past_remove_alls_first_steps_is_said_to_differ() {
        assert!(remove_all_step_unsure(
            "unlinkat /v/6e1a3f0c-1b2d-4c5e-8f90-a1b2c3d4e5f6: device or resource busy"
        ));
        assert!(!remove_all_step_unsure(
            "unlinkat /f/6e1a3f0c-1b2d-4c5e-8f90-a1b2c3d4e5f6: not a directory"
        ));
        assert!(!remove_all_step_unsure(
            "open /v: too many levels of symbolic links"
        ));
    }

    #[test]
    fn parameters_must_be_an_object_of_strings() {
        let parse = |s: &str| parse_parameters(Some(s.as_bytes()));
        assert_eq!(parse_parameters(None).unwrap(), None);
        assert_eq!(parse("null").unwrap(), None);
        let p = parse(r#"{"a":"1"}"#).unwrap().unwrap();
        assert_eq!(p.get("a").map(String::as_str), Some("1"));
        // What Go's decoder takes, it takes as Go does.
        let p = parse(r#"{"k":"\ud800x"}"#).unwrap().unwrap();
        assert_eq!(p["k"], "\u{fffd}x");
        for bad in ["{", "[]", r#"{"a":1}"#, "\"x\""] {
            assert_eq!(parse(bad).unwrap_err().code, super::super::EXIT_USAGE);
        }
    }
}
