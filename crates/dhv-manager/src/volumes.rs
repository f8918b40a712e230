//! [`HostVolumeManager`]: create, register, delete and list volumes, with
//! Nomad's rules and Nomad's texts, and the safety Nomad lacks.
//! (Create is in [`create`](super::create), restore in
//! [`restore`](super::restore).)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::discovery::{self, DiscoveryError, NodeFingerprint};
use super::error::ManagerError;
use super::locks::{NameLocks, NameReservation};
use super::spec::{DEFAULT_NODE_POOL, RegisterSpec};
use super::state::{State, StateStore};
use super::volume::{Volume, deletable};
use crate::contract::{self, DeleteRequest};
use crate::plugin::{CallOptions, HostVolumePlugin, PluginError, PluginSource, Timeouts};

/// What a delete did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum DeleteOutcome {
    /// The plugin deleted the volume; it is gone from state.
    Deleted(Volume),
    /// A registered volume was forgotten; its path was not touched.
    Unregistered(Volume),
    /// No volume with this id is known on this node; nothing ran. (Nomad would
    /// still call the plugin named in the server's request; we have no request
    /// to go by, so doing nothing is the only safe choice.)
    NotFound {
        /// The id asked for.
        id: String,
    },
}

/// The host volume manager of one node: Nomad's `HostVolumeManager`, over a
/// state dir.
///
/// It behaves like Nomad's (`client/hostvolumemanager`; docs/nomad-fidelity.md
/// lists the behaviours and the differences), and is deliberately safer where
/// Nomad is not:
/// - **Compensating delete.** When a volume was created but cannot be saved,
///   and it was the volume's first create, Nomad deletes it with
///   `DHV_CREATED_PATH` set to the *volumes dir* and an empty name and namespace:
///   a naive plugin then wipes every volume. We send the delete for the volume's
///   own path (what create returned) with its real name and namespace. An update
///   that cannot be saved is left in place, since the state still describes it;
///   whether it was the first create is read from the state under its lock, so
///   a volume another create of the same id saved meanwhile is never deleted.
/// - **An unreadable create answer.** A create that exits 0 with an answer
///   Nomad cannot decode fails, and Nomad forgets it, leaving whatever the
///   plugin made. We undo a first create of the volume as Nomad undoes one it
///   cannot keep: a compensating delete with the volume's own path
///   `<volumes_dir>/<id>` (an update is left in place, as the state still
///   describes it).
/// - **Paths.** Nomad saves whatever path create returns, and so do we (a dir
///   in the volumes dir, a block device such as `/dev/loop3`, a dir
///   elsewhere), except the volumes dir itself, one of its parents or a path
///   that is not absolute (after resolving `.`, `..`, `//` and a trailing
///   `/`): such a path is never saved and no delete is ever sent with it (it
///   is how a plugin wipes every volume, or `/`). The create is undone as
///   Nomad undoes a first create it cannot keep, by a compensating delete,
///   sent with the volume's own path `<volumes_dir>/<id>`.
/// - **Name lock.** A failed update keeps the name (Nomad releases it, letting
///   another volume take the name of one that still exists). The lock also
///   holds across processes sharing the state dir: names of saved volumes come
///   from the state file, checked again under its lock when saving.
/// - **Restore** isolates failures per volume (a missing plugin fails only its
///   own volumes, where Nomad fails the whole restore) and runs a bounded number
///   of plugin calls at once (Nomad starts one per volume, all together).
/// - **State** is written atomically and never reset silently (see
///   [`state`](super::state)).
#[derive(Debug)]
pub struct HostVolumeManager {
    pub(super) state: StateStore,
    pub(super) names: Arc<NameLocks>,
    pub(super) plugin_dir: Option<PathBuf>,
    pub(super) volumes_dir: Option<PathBuf>,
    pub(super) node_id: String,
    pub(super) node_pool: String,
    pub(super) timeouts: Timeouts,
    pub(super) restore_timeout: Duration,
    pub(super) restore_concurrency: usize,
    /// A restore starts all its lanes at once rather than one per core.
    pub(super) restore_all_at_once: bool,
    pub(super) overrides: BTreeMap<String, Arc<dyn HostVolumePlugin>>,
    published: tokio::sync::Mutex<BTreeMap<String, String>>,
    /// Every plugin call of this manager runs under it, when given.
    supervisor: Option<dhv_host::exec::Supervisor>,
}

impl HostVolumeManager {
    /// Opens the manager over `state_dir` (created when missing). The state is
    /// read now, so a corrupt state file fails here, naming the file. The node
    /// id is the one stored in the state, generated once on first use.
    ///
    /// Without [`with_plugin_dir`](Self::with_plugin_dir) only the built-in
    /// `mkdir` (and any [`with_plugin`](Self::with_plugin)) exists; without
    /// [`with_volumes_dir`](Self::with_volumes_dir), `create` fails.
    pub fn open(state_dir: impl Into<PathBuf>) -> Result<HostVolumeManager, ManagerError> {
        let state = StateStore::open(state_dir)?;
        let node_id = state.node_id_blocking()?;
        Ok(HostVolumeManager {
            state,
            names: Arc::new(NameLocks::default()),
            plugin_dir: None,
            volumes_dir: None,
            node_id,
            node_pool: DEFAULT_NODE_POOL.to_string(),
            timeouts: Timeouts::default(),
            restore_timeout: contract::RESTORE_TIMEOUT,
            restore_concurrency: default_restore_concurrency(),
            restore_all_at_once: false,
            supervisor: None,
            overrides: BTreeMap::new(),
            published: tokio::sync::Mutex::new(BTreeMap::new()),
        })
    }

    /// Finds external plugins in `dir` (Nomad's `host_volume_plugin_dir`).
    pub fn with_plugin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.plugin_dir = Some(dir.into());
        self
    }

    /// Runs every plugin call under `supervisor`, so that its owner can kill
    /// them all at once (a signal) and start no more.
    pub fn with_supervisor(mut self, supervisor: dhv_host::exec::Supervisor) -> Self {
        self.supervisor = Some(supervisor);
        self
    }

    /// Creates volumes under `dir` (Nomad's `host_volumes_dir`, sent as
    /// `DHV_VOLUMES_DIR`).
    pub fn with_volumes_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.volumes_dir = Some(dir.into());
        self
    }

    /// Uses this node id instead of the stored one.
    pub fn with_node_id(mut self, node_id: impl Into<String>) -> Self {
        self.node_id = node_id.into();
        self
    }

    /// Uses this node pool (default `default`).
    pub fn with_node_pool(mut self, node_pool: impl Into<String>) -> Self {
        self.node_pool = node_pool.into();
        self
    }

    /// Runs external plugins with these limits (default: Nomad's). Scale them
    /// with [`Timeouts::scaled`] on slow machines.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Limits each create call of a restore to `limit` (default: Nomad's 50 s).
    pub fn with_restore_timeout(mut self, limit: Duration) -> Self {
        self.restore_timeout = limit;
        self
    }

    /// Runs at most `n` plugin calls at once during a restore (default: four per
    /// available core; at least 1), each lane of calls on a thread of the
    /// restore's own: one lane per core at first, and more, up to `n`, while
    /// the CPUs have room for them (plugins that wait on a disk or a network
    /// get all `n`; plugins that compute keep one per core).
    pub fn with_restore_concurrency(mut self, n: usize) -> Self {
        self.restore_concurrency = n.max(1);
        self
    }

    /// Starts a restore's lanes all at once, as many as
    /// [`with_restore_concurrency`](Self::with_restore_concurrency) allows,
    /// whatever the CPUs say: the volumes' creates then run together as
    /// Nomad runs them (all at once), and how many run together never
    /// depends on the host's load. The conformance checks restore this way.
    pub fn with_restore_all_at_once(mut self) -> Self {
        self.restore_all_at_once = true;
        self
    }

    /// Uses `plugin` for its [`id`](HostVolumePlugin::id), before the built-in and
    /// the plugin dir: how a caller drives a configured plugin instance (with its
    /// own limits or recorder) through the manager.
    pub fn with_plugin(mut self, plugin: Arc<dyn HostVolumePlugin>) -> Self {
        self.overrides.insert(plugin.id().to_string(), plugin);
        self
    }

    /// The node id sent as `DHV_NODE_ID`.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The node pool sent as `DHV_NODE_POOL`.
    pub fn node_pool(&self) -> &str {
        &self.node_pool
    }

    /// The state file.
    pub fn state_file(&self) -> PathBuf {
        self.state.file()
    }

    /// The plugin for `id`, looked up afresh: an override, the built-in `mkdir`,
    /// or an executable of the plugin dir (confined to it).
    pub fn plugin(&self, id: &str) -> Result<Arc<dyn HostVolumePlugin>, PluginError> {
        self.plugin_with(id, self.timeouts)
    }

    pub(super) fn plugin_with(
        &self,
        id: &str,
        timeouts: Timeouts,
    ) -> Result<Arc<dyn HostVolumePlugin>, PluginError> {
        if let Some(p) = self.overrides.get(id) {
            return Ok(Arc::clone(p));
        }
        let source = PluginSource::lookup(self.plugin_dir.as_deref(), id)?;
        Ok(source.open(&CallOptions::new(timeouts).under(self.supervisor.clone())))
    }

    /// Discovers and fingerprints the plugins like a client, and says which
    /// attributes published by the previous call are gone.
    pub async fn fingerprint_plugins(&self) -> Result<NodeFingerprint, DiscoveryError> {
        let mut published = self.published.lock().await;
        let overrides: Vec<_> = self.overrides.values().cloned().collect();
        let discovery =
            discovery::scan(self.plugin_dir.as_deref(), self.timeouts, &overrides).await?;
        let fp = NodeFingerprint::since(&published, discovery);
        *published = fp.attributes.clone();
        Ok(fp)
    }

    /// Registers an existing path as a volume; no plugin runs. The same id again
    /// replaces the registration.
    pub async fn register(&self, spec: RegisterSpec) -> Result<Volume, ManagerError> {
        check_id(&spec.id)?;
        let (_reservation, state) = self.reserve_name(&spec.name, &spec.id).await?;
        if let Some(Volume {
            plugin_id: Some(plugin_id),
            ..
        }) = state.volumes.get(&spec.id)
        {
            return Err(ManagerError::NotRegistered {
                id: spec.id,
                plugin_id: plugin_id.clone(),
            });
        }
        if let Err(source) = tokio::fs::metadata(&spec.host_path).await {
            return Err(ManagerError::HostPath {
                name: spec.name,
                path: spec.host_path,
                source,
            });
        }
        self.save(Volume {
            id: spec.id,
            name: spec.name,
            namespace: spec.namespace,
            plugin_id: None,
            host_path: spec.host_path.to_string_lossy().into_owned(),
            bytes: 0,
            create_request: None,
        })
        .await
        .0
    }

    /// Deletes volume `id`: a created volume through its plugin (with the stored
    /// request and path), a registered one by forgetting it (its path is left
    /// alone). A plugin error keeps the volume in state, with its name.
    pub async fn delete(&self, id: &str) -> Result<DeleteOutcome, ManagerError> {
        check_id(id)?;
        let state = self.state.load_async().await?;
        let Some(volume) = state.volumes.get(id).cloned() else {
            return Ok(DeleteOutcome::NotFound { id: id.to_string() });
        };
        if let Some(req) = &volume.create_request {
            let plugin_id = volume.plugin_id.as_deref().unwrap_or_default();
            if !deletable(&volume.host_path, Path::new(&req.volumes_dir)) {
                // Only a hand-edited state gets here (create never saves
                // such a path): never send a delete that could wipe it.
                return Err(ManagerError::PathOutsideVolumesDir {
                    id: volume.id.clone(),
                    plugin_id: plugin_id.to_string(),
                    path: volume.host_path.clone(),
                    volumes_dir: req.volumes_dir.clone().into(),
                });
            }
            let plugin = self.plugin(plugin_id)?;
            plugin
                .delete(&DeleteRequest::for_created(req, &volume.host_path))
                .await
                .result
                .map_err(|e| named("delete", &volume.id, plugin_id, e))?;
        }
        let key = id.to_string();
        self.state
            .update(move |s: &mut State| {
                s.volumes.remove(&key);
                Ok::<_, ManagerError>(())
            })
            .await?;
        Ok(if volume.is_registered() {
            DeleteOutcome::Unregistered(volume)
        } else {
            DeleteOutcome::Deleted(volume)
        })
    }

    /// Every volume in state, by namespace, name and id.
    pub async fn list(&self) -> Result<Vec<Volume>, ManagerError> {
        let state = self.state.load_async().await?;
        let mut volumes: Vec<Volume> = state.volumes.into_values().collect();
        volumes.sort_by(|a, b| (&a.namespace, &a.name, &a.id).cmp(&(&b.namespace, &b.name, &b.id)));
        Ok(volumes)
    }

    /// Volume `id`, if it is in state.
    pub async fn get(&self, id: &str) -> Result<Option<Volume>, ManagerError> {
        Ok(self.state.load_async().await?.volumes.remove(id))
    }

    /// Takes `name` for `id` in this process, then checks the saved volumes.
    /// Returns the state read, so the caller decides with what it checked.
    pub(super) async fn reserve_name(
        &self,
        name: &str,
        id: &str,
    ) -> Result<(NameReservation, State), ManagerError> {
        let conflict = |existing_id: String| ManagerError::NameConflict {
            name: name.to_string(),
            id: id.to_string(),
            existing_id,
        };
        let reservation = self.names.reserve(name, id).map_err(conflict)?;
        let state = self.state.load_async().await?;
        if let Some(holder) = state.name_holder(name, id) {
            return Err(conflict(holder.id.clone()));
        }
        Ok((reservation, state))
    }

    /// Stores `volume`, checking its name again under the file lock: another
    /// process may have saved the name since we looked. Also returns whether
    /// the state read under that lock lacked the id (`None`: it could not be
    /// read at all), which is what decides a compensating delete.
    pub(super) async fn save(
        &self,
        volume: Volume,
    ) -> (Result<Volume, ManagerError>, Option<bool>) {
        let first = Arc::new(std::sync::Mutex::new(None));
        let seen = first.clone();
        let id = volume.id.clone();
        let saved = self
            .state
            .update(move |s: &mut State| {
                *dhv_host::sync::lock(&seen) = Some(!s.volumes.contains_key(&volume.id));
                if let Some(holder) = s.name_holder(&volume.name, &volume.id) {
                    return Err(ManagerError::NameConflict {
                        name: volume.name.clone(),
                        id: volume.id.clone(),
                        existing_id: holder.id.clone(),
                    });
                }
                s.volumes.insert(volume.id.clone(), volume.clone());
                Ok(volume)
            })
            .await;
        let mut first = *dhv_host::sync::lock(&first);
        if first.is_none() {
            // The lock could not be taken: a plain read (a whole file, as
            // writes rename) is the best view left.
            first = self
                .state
                .load_async()
                .await
                .ok()
                .map(|s| !s.volumes.contains_key(&id));
        }
        (saved, first)
    }
}

/// Four plugin calls per core: plugins mostly wait on the disk, but a node
/// restoring thousands of volumes must not start thousands of processes. (A
/// restore uses them only while the CPUs have room: see `restore.rs`.)
fn default_restore_concurrency() -> usize {
    4 * cores()
}

/// The cores this process may run on (at least 1).
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub(super) fn check_id(id: &str) -> Result<(), ManagerError> {
    if contract::is_valid_volume_id(id) {
        Ok(())
    } else {
        Err(ManagerError::InvalidVolumeId { id: id.to_string() })
    }
}

/// A plugin error as the manager returns it: Nomad's text as it is where it names
/// what failed, and with the operation, volume and plugin named where it does not
/// (Go's bare JSON error for an output Nomad cannot read).
pub(super) fn named(
    operation: &'static str,
    id: &str,
    plugin_id: &str,
    e: PluginError,
) -> ManagerError {
    match e {
        PluginError::Response { .. } => ManagerError::Response {
            operation,
            id: id.to_owned(),
            plugin_id: plugin_id.to_owned(),
            source: e,
            cleanup: None,
        },
        other => ManagerError::Plugin(other),
    }
}
