//! A volume as the manager knows it: what is stored in state and what `list`
//! returns.

use serde::{Deserialize, Serialize};

use crate::contract::CreateRequest;

/// A volume on this node: created by a plugin, or registered by hand.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Volume {
    /// The volume id, a lower-case UUID.
    pub id: String,
    /// The volume name, unique on the node.
    pub name: String,
    /// The Nomad namespace.
    pub namespace: String,
    /// The plugin that created it; `None` for a registered volume.
    pub plugin_id: Option<String>,
    /// Where the volume is on the host: what create returned, or the path given
    /// to register.
    pub host_path: String,
    /// The size the plugin reported (0 when unknown, and for registered volumes).
    pub bytes: i64,
    /// The request the volume was last created (or updated) with, sent again on
    /// restore and used for delete; `None` for a registered volume.
    pub create_request: Option<CreateRequest>,
}

impl Volume {
    /// Whether the volume was registered (no plugin manages it).
    pub fn is_registered(&self) -> bool {
        self.create_request.is_none()
    }
}
