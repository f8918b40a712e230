//! How a run is configured ([`Settings`]): the plugin under test, the
//! volume request every check starts from ([`RequestTemplate`]), the scale
//! of the time limits and the plugin's claims. Plain data, read by the run's
//! shared state and by the fixture loader.

use crate::contract::{CreateRequest, Parameters};
use crate::plugin::{PluginSource, Timeouts};

/// The volume request every check starts from: docs/checks.md's defaults, or a
/// user fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTemplate {
    /// Volume name; `None` means `conformance-<short id>` per volume. A
    /// fixture's name is the first volume's; the others of the run are
    /// `<name>-1`, `<name>-2`, … (Nomad refuses two volumes of one name on a node).
    pub name: Option<String>,
    /// DHV_NAMESPACE.
    pub namespace: String,
    /// DHV_NODE_POOL.
    pub node_pool: String,
    /// DHV_CAPACITY_MIN_BYTES.
    pub capacity_min: i64,
    /// DHV_CAPACITY_MAX_BYTES.
    pub capacity_max: i64,
    /// DHV_PARAMETERS (`None` is Nomad's `null`).
    pub parameters: Option<Parameters>,
}

impl Default for RequestTemplate {
    fn default() -> Self {
        RequestTemplate {
            name: None,
            namespace: "default".into(),
            node_pool: "default".into(),
            // Decimal, as Nomad's docs write them (`capacity_min = "50MB"`): a
            // MiB-aligned default would hide plugins that round down to whole MiB.
            capacity_min: 50_000_000,
            capacity_max: 100_000_000,
            parameters: None,
        }
    }
}

impl RequestTemplate {
    /// The create request this template makes for one volume: the one place a
    /// request is built from a template.
    pub fn request(
        &self,
        volumes_dir: &str,
        plugin_dir: &str,
        volume_name: String,
        volume_id: String,
        node_id: &str,
    ) -> CreateRequest {
        CreateRequest {
            volumes_dir: volumes_dir.to_owned(),
            plugin_dir: plugin_dir.to_owned(),
            node_pool: self.node_pool.clone(),
            namespace: self.namespace.clone(),
            volume_name,
            volume_id,
            capacity_min_bytes: self.capacity_min,
            capacity_max_bytes: self.capacity_max,
            node_id: node_id.to_owned(),
            parameters: self.parameters.clone(),
        }
    }
}

/// How a run is configured.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The plugin under test.
    pub target: PluginSource,
    /// The request checks start from.
    pub template: RequestTemplate,
    /// Multiplies every time limit.
    pub timeout_scale: f64,
    /// What the plugin claims its volumes are, and the checks its config skips.
    pub claims: crate::conformance::claims::Claims,
    /// The plugin file pinned for the run (shared by every round and request
    /// of one command, so a change between them shows too); `None`: the run
    /// pins it itself when it starts.
    pub pin: Option<std::sync::Arc<crate::plugin::PluginPin>>,
}

impl Settings {
    /// `target` tested with the default request, Nomad's limits as they are,
    /// no claims, and the file pinned by the run itself.
    pub fn new(target: PluginSource) -> Settings {
        Settings {
            target,
            template: RequestTemplate::default(),
            timeout_scale: 1.0,
            claims: Default::default(),
            pin: None,
        }
    }

    /// Nomad's limits, scaled.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts::default().scaled(self.timeout_scale)
    }
}
