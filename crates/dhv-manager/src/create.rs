//! [`HostVolumeManager::create`]: a volume made (or updated) through its
//! plugin, kept only where its path is the manager's to delete, and undone
//! by a compensating delete when it cannot be kept.

use std::path::Path;

use super::error::{Cleanup, ManagerError};
use super::spec::VolumeSpec;
use super::state::State;
use super::volume::{Volume, deletable, own_path};
use super::volumes::{HostVolumeManager, check_id, named};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest};
use crate::plugin::{HostVolumePlugin, PluginError};

impl HostVolumeManager {
    /// Creates a volume, or updates it when its id exists: the plugin's create
    /// runs (again) with the new request, which is then stored.
    ///
    /// Fails with `volume name already exists on this node` when another id has
    /// the name. See the type's docs for what happens when the state cannot be
    /// written.
    pub async fn create(&self, spec: VolumeSpec) -> Result<Volume, ManagerError> {
        check_id(&spec.id)?;
        let Some(volumes_dir) = &self.volumes_dir else {
            return Err(ManagerError::NoVolumesDir { id: spec.id });
        };
        let plugin = self.plugin(&spec.plugin_id)?;
        let (_reservation, state) = self.reserve_name(&spec.name, &spec.id).await?;
        may_update(&state, &spec)?;
        let req = spec.request(
            volumes_dir,
            self.plugin_dir.as_deref(),
            &self.node_pool,
            &self.node_id,
        );
        let resp = self
            .created_here(&*plugin, &req, volumes_dir, &spec)
            .await?;
        self.keep(&*plugin, spec, req, resp).await
    }

    /// The plugin's create, its response kept only when the path it names is
    /// the manager's to delete; a volume made and then refused is undone.
    async fn created_here(
        &self,
        plugin: &dyn HostVolumePlugin,
        req: &CreateRequest,
        volumes_dir: &Path,
        spec: &VolumeSpec,
    ) -> Result<CreateResponse, ManagerError> {
        let resp = match plugin.create(req).await.result {
            Ok(resp) => resp,
            Err(source @ PluginError::Response { .. }) => {
                // It exited 0: it may well have made the volume, which no
                // state will ever name.
                let cleanup = self.undo_unsaved(plugin, req, volumes_dir, &spec.id).await;
                return Err(ManagerError::Response {
                    operation: "create",
                    id: spec.id.clone(),
                    plugin_id: spec.plugin_id.clone(),
                    source,
                    cleanup: Some(Box::new(cleanup)),
                });
            }
            Err(e) => return Err(named("create", &spec.id, &spec.plugin_id, e)),
        };
        if !deletable(&resp.path, volumes_dir) {
            let cleanup = self.undo_unsaved(plugin, req, volumes_dir, &spec.id).await;
            return Err(ManagerError::PathRefused {
                id: spec.id.clone(),
                plugin_id: spec.plugin_id.clone(),
                path: resp.path,
                volumes_dir: volumes_dir.to_path_buf(),
                cleanup: Box::new(cleanup),
            });
        }
        Ok(resp)
    }

    /// Saves the volume the plugin made; when it cannot be saved, undoes it if
    /// this was its first create.
    async fn keep(
        &self,
        plugin: &dyn HostVolumePlugin,
        spec: VolumeSpec,
        req: CreateRequest,
        resp: CreateResponse,
    ) -> Result<Volume, ManagerError> {
        let volume = Volume {
            id: spec.id.clone(),
            name: spec.name.clone(),
            namespace: spec.namespace.clone(),
            plugin_id: Some(spec.plugin_id.clone()),
            host_path: resp.path.clone(),
            bytes: resp.bytes,
            create_request: Some(req.clone()),
        };
        let (saved, first_create) = self.save(volume).await;
        let source = match saved {
            Ok(v) => return Ok(v),
            Err(source) => source,
        };
        // Decided from the state read under the lock: another create of this
        // id may have saved it while our plugin call ran, and deleting it then
        // would destroy a saved volume.
        let cleanup = if first_create == Some(true) {
            undo(plugin, &DeleteRequest::for_created(&req, &resp.path)).await
        } else {
            Cleanup::KeptExisting
        };
        Err(ManagerError::NotSaved {
            id: spec.id,
            plugin_id: spec.plugin_id,
            source: Box::new(source),
            cleanup,
        })
    }

    /// Undoes a create that will not be saved, with the volume's own path
    /// `<volumes_dir>/<id>`, when it was the volume's first: the state is read
    /// again, since another create of this id may have saved it while our
    /// plugin call ran, and undoing it then would destroy it.
    async fn undo_unsaved(
        &self,
        plugin: &dyn HostVolumePlugin,
        req: &CreateRequest,
        volumes_dir: &Path,
        id: &str,
    ) -> Cleanup {
        let first_create = self
            .state
            .load_async()
            .await
            .is_ok_and(|s| !s.volumes.contains_key(id));
        if !first_create {
            return Cleanup::KeptExisting;
        }
        undo(
            plugin,
            &DeleteRequest::for_created(req, &own_path(volumes_dir, id)),
        )
        .await
    }
}

/// Whether `spec` may create, or update, its id as the state has it: not a
/// registered volume, nor one another plugin made.
fn may_update(state: &State, spec: &VolumeSpec) -> Result<(), ManagerError> {
    match state.volumes.get(&spec.id).map(|v| &v.plugin_id) {
        Some(None) => Err(ManagerError::NotCreated {
            id: spec.id.clone(),
        }),
        Some(Some(p)) if *p != spec.plugin_id => Err(ManagerError::PluginChanged {
            id: spec.id.clone(),
            created_by: p.clone(),
            requested: spec.plugin_id.clone(),
        }),
        _ => Ok(()),
    }
}

/// The compensating delete of a create that is not kept, and how it went.
async fn undo(plugin: &dyn HostVolumePlugin, req: &DeleteRequest) -> Cleanup {
    match plugin.delete(req).await.result {
        Ok(()) => Cleanup::Deleted,
        Err(e) => Cleanup::DeleteFailed(e),
    }
}
