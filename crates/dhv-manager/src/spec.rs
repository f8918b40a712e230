//! What a caller asks for: the user's part of a create or register request.
//! The manager adds what the node knows (dirs, node id, node pool).

use std::path::{Path, PathBuf};

use crate::contract::{CreateRequest, Parameters};

/// The namespace of a volume when none is given, as in Nomad.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The node pool when none is given, as in Nomad.
pub const DEFAULT_NODE_POOL: &str = "default";

/// What to create: the parts of Nomad's create request that come from the user.
/// The manager adds the volumes dir, plugin dir, node id and node pool.
#[derive(Debug, Clone)]
pub struct VolumeSpec {
    /// The plugin to create it with (`mkdir`, or an executable in the plugin dir).
    pub plugin_id: String,
    /// The volume name, unique on the node.
    pub name: String,
    /// The volume id, a lower-case UUID; the same id again is an update.
    pub id: String,
    /// The Nomad namespace.
    pub namespace: String,
    /// `capacity_min` in bytes (0: unset).
    pub capacity_min_bytes: i64,
    /// `capacity_max` in bytes (0: unset).
    pub capacity_max_bytes: i64,
    /// The `parameters` block (`None`: no block, sent as `null`).
    pub parameters: Option<Parameters>,
}

impl VolumeSpec {
    /// A volume `name` made by plugin `plugin_id`, with a fresh id, in the
    /// `default` namespace, with no capacity and no parameters.
    pub fn new(plugin_id: impl Into<String>, name: impl Into<String>) -> VolumeSpec {
        VolumeSpec {
            plugin_id: plugin_id.into(),
            name: name.into(),
            id: uuid::Uuid::new_v4().to_string(),
            namespace: DEFAULT_NAMESPACE.to_string(),
            capacity_min_bytes: 0,
            capacity_max_bytes: 0,
            parameters: None,
        }
    }

    /// Uses this id (to update a volume, or to choose the id).
    pub fn with_id(mut self, id: impl Into<String>) -> VolumeSpec {
        self.id = id.into();
        self
    }

    /// Uses this namespace.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> VolumeSpec {
        self.namespace = namespace.into();
        self
    }

    /// Asks for this capacity range, in bytes.
    pub fn with_capacity(mut self, min_bytes: i64, max_bytes: i64) -> VolumeSpec {
        self.capacity_min_bytes = min_bytes;
        self.capacity_max_bytes = max_bytes;
        self
    }

    /// Sends these parameters.
    pub fn with_parameters(mut self, parameters: Parameters) -> VolumeSpec {
        self.parameters = Some(parameters);
        self
    }

    /// Nomad's create request for this volume on a node: the node adds its
    /// volumes dir, plugin dir (none for the built-in alone), pool and id.
    pub fn request(
        &self,
        volumes_dir: &Path,
        plugin_dir: Option<&Path>,
        node_pool: &str,
        node_id: &str,
    ) -> CreateRequest {
        CreateRequest {
            volumes_dir: volumes_dir.to_string_lossy().into_owned(),
            plugin_dir: plugin_dir
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_default(),
            node_pool: node_pool.to_owned(),
            namespace: self.namespace.clone(),
            volume_name: self.name.clone(),
            volume_id: self.id.clone(),
            capacity_min_bytes: self.capacity_min_bytes,
            capacity_max_bytes: self.capacity_max_bytes,
            node_id: node_id.to_owned(),
            parameters: self.parameters.clone(),
        }
    }
}

/// What to register: an existing path, managed by no plugin.
#[derive(Debug, Clone)]
pub struct RegisterSpec {
    /// The volume name, unique on the node.
    pub name: String,
    /// The volume id, a lower-case UUID.
    pub id: String,
    /// The Nomad namespace.
    pub namespace: String,
    /// The existing path on the host.
    pub host_path: PathBuf,
}

impl RegisterSpec {
    /// Registers `host_path` as volume `name`, with a fresh id, in the `default`
    /// namespace.
    pub fn new(name: impl Into<String>, host_path: impl Into<PathBuf>) -> RegisterSpec {
        RegisterSpec {
            name: name.into(),
            id: uuid::Uuid::new_v4().to_string(),
            namespace: DEFAULT_NAMESPACE.to_string(),
            host_path: host_path.into(),
        }
    }

    /// Uses this id.
    pub fn with_id(mut self, id: impl Into<String>) -> RegisterSpec {
        self.id = id.into();
        self
    }

    /// Uses this namespace.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> RegisterSpec {
        self.namespace = namespace.into();
        self
    }
}
