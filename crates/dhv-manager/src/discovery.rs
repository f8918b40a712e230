//! Discovery and fingerprinting of a plugin dir, as a Nomad client does it.
//!
//! Every entry of the plugin dir that is not a directory and has any execute bit
//! (by `lstat`, so symlinks and dot files are probed too) is fingerprinted, all at
//! once, under the fingerprint limit (1 s: Nomad's node fingerprinting wraps the
//! plugin's 5 s in a 1 s context). The built-in `mkdir` is always there. Each
//! success becomes a node attribute `plugins.host_volume.<id>.version =
//! <canonical version>`; each failure is left out, and we record why. A missing
//! plugin dir is simply empty, but an entry that cannot be read aborts the scan,
//! as in Nomad: publishing a partial list would silently hide plugins.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::plugin::mkdir::MKDIR_ID;
use crate::plugin::{
    ExternalPlugin, Fingerprint, HostVolumePlugin, MkdirPlugin, PluginError, Timeouts,
};

/// The prefix of every host volume plugin attribute.
pub const ATTRIBUTE_PREFIX: &str = "plugins.host_volume.";

/// The node attribute that carries plugin `id`'s version.
pub fn version_attribute(id: &str) -> String {
    format!("{ATTRIBUTE_PREFIX}{id}.version")
}

/// The plugin dir could not be scanned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// The dir exists but cannot be listed.
    #[error("cannot read plugin dir {}: {source}", .dir.display())]
    ReadDir {
        /// The plugin dir.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// One entry cannot be inspected.
    #[error("cannot inspect plugin {}: {source}", .path.display())]
    Entry {
        /// The entry.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A plugin that was probed and left out.
#[derive(Debug, Clone)]
pub struct LeftOut {
    /// The plugin's error, when a call or lookup failed.
    pub error: Option<PluginError>,
    /// Why, in one line: Nomad's text plus what it means (timeout, bad file).
    pub reason: String,
}

/// The result of one scan.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Every plugin that fingerprinted, by id (the built-in `mkdir` included).
    pub plugins: BTreeMap<String, Fingerprint>,
    /// Every plugin that was probed and left out, by id.
    pub left_out: BTreeMap<String, LeftOut>,
}

impl Discovery {
    /// The node attributes a Nomad client would publish, sorted.
    pub fn attributes(&self) -> BTreeMap<String, String> {
        self.plugins
            .iter()
            .filter_map(|(id, fp)| Some((version_attribute(id), fp.version.canonical.clone()?)))
            .collect()
    }
}

/// One fingerprint of the node, compared with the one before.
#[derive(Debug, Clone, Default)]
pub struct NodeFingerprint {
    /// What the scan found.
    pub discovery: Discovery,
    /// The attributes to publish now.
    pub attributes: BTreeMap<String, String>,
    /// Attributes published last time whose plugins are gone (or now fail), sorted:
    /// a node must remove these, or the scheduler places volumes on plugins that
    /// no longer exist.
    pub removed: Vec<String>,
}

impl NodeFingerprint {
    /// Compares `discovery` with the attributes published before.
    pub fn since(previous: &BTreeMap<String, String>, discovery: Discovery) -> NodeFingerprint {
        let attributes = discovery.attributes();
        let removed = previous
            .keys()
            .filter(|k| !attributes.contains_key(*k))
            .cloned()
            .collect();
        NodeFingerprint {
            discovery,
            attributes,
            removed,
        }
    }
}

/// Fingerprints a plugin dir again and again, remembering what it published, as
/// a client does on start and on every SIGHUP.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    plugin_dir: Option<PathBuf>,
    timeouts: Timeouts,
    overrides: Vec<Arc<dyn HostVolumePlugin>>,
    published: BTreeMap<String, String>,
}

impl Fingerprinter {
    /// A fingerprinter of `plugin_dir` (`None`: only the built-in and any
    /// [`with_plugin`](Self::with_plugin)), with Nomad's limits.
    pub fn new(plugin_dir: Option<PathBuf>) -> Fingerprinter {
        Fingerprinter {
            plugin_dir,
            timeouts: Timeouts::default(),
            overrides: Vec::new(),
            published: BTreeMap::new(),
        }
    }

    /// Uses these limits for the plugins found in the dir.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Fingerprinter {
        self.timeouts = timeouts;
        self
    }

    /// Adds a configured plugin, which replaces a dir entry of the same id.
    pub fn with_plugin(mut self, plugin: Arc<dyn HostVolumePlugin>) -> Fingerprinter {
        self.overrides.push(plugin);
        self
    }

    /// Scans and fingerprints, and says which earlier attributes are gone.
    pub async fn fingerprint(&mut self) -> Result<NodeFingerprint, DiscoveryError> {
        let discovery = scan(self.plugin_dir.as_deref(), self.timeouts, &self.overrides).await?;
        let fp = NodeFingerprint::since(&self.published, discovery);
        self.published = fp.attributes.clone();
        Ok(fp)
    }
}

/// Scans `plugin_dir` once and fingerprints every plugin concurrently: the
/// built-in `mkdir`, each executable entry (with `timeouts`), and `overrides`
/// (which replace dir entries of the same id; the built-in cannot be replaced
/// by a dir entry, only by an override).
pub async fn scan(
    plugin_dir: Option<&Path>,
    timeouts: Timeouts,
    overrides: &[Arc<dyn HostVolumePlugin>],
) -> Result<Discovery, DiscoveryError> {
    let mut discovery = Discovery::default();
    let mut probes: BTreeMap<String, Arc<dyn HostVolumePlugin>> = BTreeMap::new();
    probes.insert(MKDIR_ID.to_string(), Arc::new(MkdirPlugin));
    let mut limits: HashMap<String, Duration> = HashMap::new();

    if let Some(dir) = plugin_dir {
        dir_probes(dir, timeouts, &mut discovery, &mut probes, &mut limits).await?;
    }
    for plugin in overrides {
        discovery.left_out.remove(plugin.id());
        limits.remove(plugin.id());
        probes.insert(plugin.id().to_string(), Arc::clone(plugin));
    }

    let mut tasks = tokio::task::JoinSet::new();
    let mut by_task = HashMap::new();
    for (id, plugin) in probes {
        let handle = tasks.spawn(async move { plugin.fingerprint().await.result });
        by_task.insert(handle.id(), id);
    }
    while let Some(joined) = tasks.join_next_with_id().await {
        let (task, result) = match joined {
            Ok((task, result)) => (task, result),
            Err(e) => {
                let task = e.id();
                (
                    task,
                    Err(PluginError::Builtin(format!(
                        "fingerprint task failed: {e}"
                    ))),
                )
            }
        };
        let id = by_task.remove(&task).unwrap_or_default();
        match result {
            Ok(fp) if fp.version.canonical.is_some() => {
                discovery.plugins.insert(id, fp);
            }
            Ok(fp) => {
                let why = format!("version {:?} is not a valid version", fp.version.raw);
                discovery.left_out.insert(id, left_out_because(&why));
            }
            Err(e) => {
                let limit = limits.get(&id).copied();
                discovery.left_out.insert(id, left_out(e, limit));
            }
        }
    }
    Ok(discovery)
}

/// Adds a fingerprint probe for every plugin entry of `dir` (looked up like
/// any later call, so an entry that escapes the dir is refused here too), and
/// says why the other entries are left out.
async fn dir_probes(
    dir: &Path,
    timeouts: Timeouts,
    discovery: &mut Discovery,
    probes: &mut BTreeMap<String, Arc<dyn HostVolumePlugin>>,
    limits: &mut HashMap<String, Duration>,
) -> Result<(), DiscoveryError> {
    // The listing and every lookup (stat, realpath) block: off the async
    // workers, with the lookups done for the UTF-8 names up front.
    let owned = dir.to_path_buf();
    let found = tokio::task::spawn_blocking(move || {
        candidates(&owned).map(|names| {
            names
                .into_iter()
                .map(|name| {
                    let lookup = name
                        .to_str()
                        .filter(|id| *id != MKDIR_ID)
                        .map(|id| ExternalPlugin::lookup(&owned, id));
                    (name, lookup)
                })
                .collect::<Vec<_>>()
        })
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
    for (name, lookup) in found {
        let Ok(id) = name.clone().into_string() else {
            let id = name.to_string_lossy().into_owned();
            discovery
                .left_out
                .insert(id, left_out_because("the file name is not valid UTF-8"));
            continue;
        };
        match lookup {
            None => {
                let why = format!(
                    "shadowed by the built-in {} plugin",
                    crate::plugin::go_quote(MKDIR_ID)
                );
                discovery.left_out.insert(id, left_out_because(&why));
            }
            Some(Ok(plugin)) => {
                limits.insert(id.clone(), timeouts.fingerprint);
                probes.insert(id, Arc::new(plugin.with_timeouts(timeouts)));
            }
            Some(Err(e)) => {
                discovery.left_out.insert(id, left_out(e, None));
            }
        }
    }
    Ok(())
}

fn left_out_because(reason: &str) -> LeftOut {
    LeftOut {
        error: None,
        reason: reason.to_string(),
    }
}

fn left_out(error: PluginError, limit: Option<Duration>) -> LeftOut {
    let reason = match &error {
        PluginError::Failed {
            timed_out: true, ..
        } => match limit {
            Some(limit) => format!("{error} (no answer within the {limit:?} fingerprint limit)"),
            None => format!("{error} (timed out)"),
        },
        PluginError::Start { explanation, .. } if !explanation.is_empty() => {
            format!("{error} ({explanation})")
        }
        _ => error.to_string(),
    };
    LeftOut {
        error: Some(error),
        reason,
    }
}

/// What `lstat` says about an entry, reduced to what discovery needs.
#[derive(Debug, Clone, Copy)]
struct EntryKind {
    is_dir: bool,
    mode: u32,
}

/// The names of the entries Nomad would probe, in file name order.
fn candidates(dir: &Path) -> Result<Vec<OsString>, DiscoveryError> {
    let read_dir_err = |source| DiscoveryError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_dir_err(e)),
    };
    // DirEntry::metadata does not follow symlinks: it is lstat.
    let listed = entries.map(|entry| {
        entry.map(|entry| {
            let kind = entry.metadata().map(|m| EntryKind {
                is_dir: m.is_dir(),
                mode: m.permissions().mode(),
            });
            (entry.file_name(), kind)
        })
    });
    select(dir, listed)
}

fn select(
    dir: &Path,
    listed: impl Iterator<Item = std::io::Result<(OsString, std::io::Result<EntryKind>)>>,
) -> Result<Vec<OsString>, DiscoveryError> {
    let mut names = Vec::new();
    for item in listed {
        let (name, kind) = item.map_err(|source| DiscoveryError::ReadDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let kind = kind.map_err(|source| DiscoveryError::Entry {
            path: dir.join(&name),
            source,
        })?;
        if kind.is_dir || kind.mode & 0o111 == 0 {
            continue;
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        name: &str,
        is_dir: bool,
        mode: u32,
    ) -> std::io::Result<(OsString, std::io::Result<EntryKind>)> {
        Ok((name.into(), Ok(EntryKind { is_dir, mode })))
    }

    #[test]
    fn only_executable_non_directories_are_probed() {
        let listed = vec![
            entry("b", false, 0o100755),
            entry(".hidden", false, 0o100700),
            entry("link", false, 0o120777),
            entry("plain", false, 0o100644),
            entry("group-x", false, 0o100610),
            entry("dir", true, 0o40755),
        ];
        let names = select(Path::new("/p"), listed.into_iter()).unwrap();
        assert_eq!(
            names,
            vec![
                OsString::from(".hidden"),
                "b".into(),
                "group-x".into(),
                "link".into()
            ]
        );
    }

    #[test]
    fn an_entry_that_cannot_be_inspected_aborts_the_scan() {
        let listed = vec![
            entry("a", false, 0o100755),
            Ok((
                OsString::from("gone"),
                Err(std::io::Error::from_raw_os_error(libc::EACCES)),
            )),
        ];
        let err = select(Path::new("/p"), listed.into_iter()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot inspect plugin /p/gone: "),
            "{err}"
        );
    }
}
