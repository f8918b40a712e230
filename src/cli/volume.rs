//! `dhv-conform volume ...`: the manager by hand, with Nomad's environment and
//! Nomad's messages.
//!
//! Every verb works on one node's state dir, so commands run one after another
//! (or at once, from several shells) see each other's volumes. Failures print
//! one line, Nomad's text, and exit 1 when the operation failed (plugin error,
//! name conflict) or 2 when the input is wrong (bad id, bad `--parameters`,
//! missing dir or option, corrupt state file). A signal during a verb that
//! runs plugins ends it cleanly (see `signals.rs`).

use std::path::{Path, PathBuf};

use super::signals::until_signal;
use super::{CliError, CliResult, EXIT_FAIL, EXIT_OK, print_json, print_stdout};
use crate::exec::Supervisor;
use crate::manager::{
    DeleteOutcome, HostVolumeManager, ManagerError, RegisterSpec, Volume, VolumeSpec,
};
use crate::plugin::go_quote;
use crate::plugin::mkdir::MKDIR_ID;
use crate::report::{
    RestoreListOutput, RestoreOutput, VolumeDeleteOutput, VolumeListOutput, VolumeOutput,
    printable_line,
};

/// The `volume` verbs (boxed: the arguments are large, the enum stays small).
#[derive(Debug, clap::Subcommand)]
pub enum VolumeCommand {
    /// Create (or, for an existing id, update) a volume with a plugin.
    Create(Box<CreateArgs>),
    /// Delete a volume: through its plugin, or forget a registered one.
    Delete(Box<DeleteArgs>),
    /// Register an existing path as a volume (no plugin runs).
    Register(Box<RegisterArgs>),
    /// List the volumes of this node.
    List(Box<ListArgs>),
    /// Restore every volume, as an agent does at start: create again, or stat.
    Restore(Box<RestoreArgs>),
}

/// The node every verb works on.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The plugin dir (Nomad's `host_volume_plugin_dir`); without it only `mkdir` exists.
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: Option<PathBuf>,
    /// Where this node's state (`state.json`) is kept; created by create and register.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// Where plugins create volumes (Nomad's `host_volumes_dir`); needed by create.
    #[arg(long, value_name = "DIR")]
    pub volumes_dir: Option<PathBuf>,
    /// DHV_NODE_ID [default: an id generated once and stored in the state dir]
    #[arg(long, value_name = "ID")]
    pub node_id: Option<String>,
    /// DHV_NODE_POOL
    #[arg(long, value_name = "POOL", default_value = "default")]
    pub node_pool: String,
    /// Print JSON instead of one line per volume.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `volume create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// The plugin: `mkdir`, or an executable in the plugin dir.
    #[arg(long, value_name = "ID")]
    plugin: String,
    /// The volume name, unique on the node.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The volume id, a lower-case UUID; an existing id updates the volume [default: a fresh one]
    #[arg(long, value_name = "UUID")]
    id: Option<String>,
    /// The namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    namespace: String,
    /// capacity_min, in bytes.
    #[arg(long, value_name = "B", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    capacity_min: i64,
    /// capacity_max, in bytes.
    #[arg(long, value_name = "B", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    capacity_max: i64,
    /// The parameters block, as a JSON object of strings [default: none, sent as null]
    #[arg(long, value_name = "JSON")]
    parameters: Option<String>,
}

/// Arguments of `volume delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// The volume id.
    #[arg(long, value_name = "UUID")]
    id: String,
}

/// Arguments of `volume register`.
#[derive(Debug, clap::Args)]
pub struct RegisterArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// The volume name, unique on the node.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The existing path to register.
    #[arg(long, value_name = "PATH")]
    path: PathBuf,
    /// The volume id, a lower-case UUID [default: a fresh one]
    #[arg(long, value_name = "UUID")]
    id: Option<String>,
    /// The namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    namespace: String,
}

/// Arguments of `volume list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    node: NodeArgs,
}

/// Arguments of `volume restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// At most this many plugin calls at once: one per core at first, more
    /// while the CPUs have room [default: 4 per core]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: Option<u32>,
}

/// Runs a `volume` verb.
pub async fn run(cmd: VolumeCommand) -> CliResult {
    match cmd {
        VolumeCommand::Create(args) => {
            let supervisor = Supervisor::new();
            until_signal(&supervisor, create(*args, &supervisor)).await
        }
        VolumeCommand::Delete(args) => {
            let supervisor = Supervisor::new();
            until_signal(&supervisor, delete(*args, &supervisor)).await
        }
        VolumeCommand::Register(args) => register(*args).await,
        VolumeCommand::List(args) => list(*args).await,
        VolumeCommand::Restore(args) => {
            let supervisor = Supervisor::new();
            until_signal(&supervisor, restore(*args, &supervisor)).await
        }
    }
}

async fn create(args: CreateArgs, supervisor: &Supervisor) -> CliResult {
    let Some(volumes_dir) = &args.node.volumes_dir else {
        return Err(CliError::usage("volume create needs --volumes-dir"));
    };
    require_dir("volumes dir", volumes_dir)?;
    if args.plugin != MKDIR_ID && args.node.plugin_dir.is_none() {
        return Err(CliError::usage(format!(
            "volume create with plugin {} needs --plugin-dir",
            go_quote(&args.plugin)
        )));
    }
    let parameters = super::run::parse_parameters(args.parameters.as_deref().map(str::as_bytes))?;
    let manager = open(&args.node, true)?.with_supervisor(supervisor.clone());
    let mut spec = VolumeSpec::new(&args.plugin, &args.name)
        .with_namespace(&args.namespace)
        .with_capacity(args.capacity_min, args.capacity_max);
    // An existing id makes this an update (Nomad's words: the plugin gets create
    // again); the answer says which it was.
    let existed = match &args.id {
        Some(id) => manager.get(id).await.ok().flatten().is_some(),
        None => false,
    };
    if let Some(id) = args.id {
        spec = spec.with_id(id);
    }
    if let Some(p) = parameters {
        spec = spec.with_parameters(p);
    }
    let volume = manager.create(spec).await.map_err(manager_error)?;
    if args.node.json {
        print_json(&volume_json(&volume));
    } else {
        let verb = if existed { "updated" } else { "created" };
        print_stdout(&format!("{verb} {}\n", volume_line(&volume)));
    }
    Ok(EXIT_OK)
}

async fn register(args: RegisterArgs) -> CliResult {
    let manager = open(&args.node, true)?;
    // A relative path means nothing to a later command run elsewhere.
    let path = std::path::absolute(&args.path).unwrap_or(args.path);
    let mut spec = RegisterSpec::new(&args.name, path).with_namespace(&args.namespace);
    if let Some(id) = args.id {
        spec = spec.with_id(id);
    }
    let volume = manager.register(spec).await.map_err(manager_error)?;
    if args.node.json {
        print_json(&volume_json(&volume));
    } else {
        print_stdout(&format!("registered {}\n", volume_line(&volume)));
    }
    Ok(EXIT_OK)
}

async fn delete(args: DeleteArgs, supervisor: &Supervisor) -> CliResult {
    let manager = open(&args.node, false)?.with_supervisor(supervisor.clone());
    let outcome = manager.delete(&args.id).await.map_err(manager_error)?;
    let (result, volume) = match &outcome {
        DeleteOutcome::Deleted(v) => ("deleted", Some(v)),
        DeleteOutcome::Unregistered(v) => ("unregistered", Some(v)),
        _ => ("not_found", None),
    };
    if args.node.json {
        print_json(&VolumeDeleteOutput {
            id: args.id.clone(),
            result: result.to_owned(),
            volume: volume.map(volume_json),
        });
        return Ok(EXIT_OK);
    }
    let line = match outcome {
        DeleteOutcome::Deleted(v) => format!("deleted {}", volume_line(&v)),
        DeleteOutcome::Unregistered(v) => format!(
            "unregistered {} (the path was left in place)",
            volume_line(&v)
        ),
        _ => format!(
            "no volume {} on this node: nothing to delete",
            printable_line(&args.id)
        ),
    };
    print_stdout(&format!("{line}\n"));
    Ok(EXIT_OK)
}

async fn list(args: ListArgs) -> CliResult {
    let manager = open(&args.node, false)?;
    let volumes = manager.list().await.map_err(manager_error)?;
    if args.node.json {
        print_json(&VolumeListOutput {
            volumes: volumes.iter().map(volume_json).collect(),
        });
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    if volumes.is_empty() {
        out.push_str("no volumes\n");
    }
    for v in &volumes {
        out.push_str(&format!("{}\n", volume_line(v)));
    }
    print_stdout(&out);
    Ok(EXIT_OK)
}

async fn restore(args: RestoreArgs, supervisor: &Supervisor) -> CliResult {
    let mut manager = open(&args.node, false)?.with_supervisor(supervisor.clone());
    if let Some(n) = args.concurrency {
        manager = manager.with_restore_concurrency(n as usize);
    }
    let results = manager.restore().await.map_err(manager_error)?;
    let failed = results.iter().filter(|r| !r.is_ok()).count();
    if args.node.json {
        let results = results
            .iter()
            .map(|r| RestoreOutput {
                id: r.volume.id.clone(),
                name: r.volume.name.clone(),
                ok: r.is_ok(),
                path: r.path().map(str::to_owned),
                plugin: r.volume.plugin_id.clone(),
                error: r.error().map(ToString::to_string),
            })
            .collect();
        print_json(&RestoreListOutput { results });
    } else {
        let mut out = String::new();
        for r in &results {
            let who = format!("{} {}", r.volume.id, go_quote(&r.volume.name));
            match &r.result {
                Ok(path) => out.push_str(&format!("restored {who} at {}\n", printable_line(path))),
                Err(_) => out.push_str(&format!("FAILED   {who}: {}\n", restore_failure(r))),
            }
        }
        let restored = results.len() - failed;
        out.push_str(&format!("{restored} restored, {failed} failed\n"));
        print_stdout(&out);
    }
    Ok(if failed == 0 { EXIT_OK } else { EXIT_FAIL })
}

/// Why a volume was not restored: the plugin, Nomad's error, and the first line
/// the plugin printed on each stream (a decoder error alone rarely says why).
fn restore_failure(r: &crate::manager::Restored) -> String {
    let error = r.error().map(ToString::to_string).unwrap_or_default();
    let mut text = match &r.volume.plugin_id {
        Some(plugin) => format!("plugin {}: {error}", go_quote(plugin)),
        None => error,
    };
    if let Some(run) = &r.run {
        for (name, bytes) in [("stdout", run.stdout()), ("stderr", run.stderr())] {
            let first = String::from_utf8_lossy(bytes);
            let first = first.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first = if first.is_empty() { "(empty)" } else { first };
            text.push_str(&format!("; {name}: {first}"));
        }
    }
    printable_line(&text).into_owned()
}

/// Opens the manager for `node`. Reading verbs refuse a state dir that does not
/// exist: a mistyped path must not look like a node without volumes.
fn open(node: &NodeArgs, may_create_state: bool) -> Result<HostVolumeManager, CliError> {
    if !may_create_state {
        require_dir("state dir", &node.state_dir)?;
    }
    if let Some(dir) = &node.plugin_dir {
        require_dir("plugin dir", dir)?;
    }
    let mut manager = HostVolumeManager::open(&node.state_dir)
        .map_err(manager_error)?
        .with_node_pool(&node.node_pool);
    if let Some(dir) = &node.plugin_dir {
        manager = manager.with_plugin_dir(dir);
    }
    if let Some(dir) = &node.volumes_dir {
        // Plugins get DHV_VOLUMES_DIR verbatim: make it absolute so a plugin
        // running elsewhere (or a later restore) finds the same place.
        manager =
            manager.with_volumes_dir(std::path::absolute(dir).unwrap_or_else(|_| dir.clone()));
    }
    if let Some(id) = &node.node_id {
        manager = manager.with_node_id(id);
    }
    Ok(manager)
}

fn require_dir(what: &str, dir: &Path) -> Result<(), CliError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CliError::usage(format!(
            "{what} {} is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CliError::usage(format!(
            "{what} {} does not exist",
            dir.display()
        ))),
        Err(e) => Err(CliError::usage(format!("{what} {}: {e}", dir.display()))),
    }
}

fn manager_error(e: ManagerError) -> CliError {
    if e.is_input_error() {
        CliError::usage(e.to_string())
    } else {
        CliError::failed(e.to_string())
    }
}

fn volume_json(v: &Volume) -> VolumeOutput {
    VolumeOutput {
        id: v.id.clone(),
        name: v.name.clone(),
        namespace: v.namespace.clone(),
        plugin: v.plugin_id.clone(),
        path: v.host_path.clone(),
        bytes: v.bytes,
    }
}

/// One line per volume; the name is quoted because it comes from users and may
/// hold spaces or control characters.
fn volume_line(v: &Volume) -> String {
    let plugin = match &v.plugin_id {
        Some(p) => format!("plugin {}", go_quote(p)),
        None => "registered".to_string(),
    };
    format!(
        "{} name {} namespace {} {plugin} path {} bytes {}",
        v.id,
        go_quote(&v.name),
        go_quote(&v.namespace),
        printable_line(&v.host_path),
        v.bytes
    )
}
