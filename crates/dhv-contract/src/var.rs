//! Names of the `DHV_*` environment variables, the only ones a plugin gets.

/// The operation: `fingerprint`, `create` or `delete`.
pub const OPERATION: &str = "DHV_OPERATION";
/// The agent's directory for volumes (`client.host_volumes_dir`).
pub const VOLUMES_DIR: &str = "DHV_VOLUMES_DIR";
/// The agent's plugin directory (`client.host_volume_plugin_dir`).
pub const PLUGIN_DIR: &str = "DHV_PLUGIN_DIR";
/// The node's node pool.
pub const NODE_POOL: &str = "DHV_NODE_POOL";
/// The volume's namespace.
pub const NAMESPACE: &str = "DHV_NAMESPACE";
/// The volume's name, from the user: untrusted.
pub const VOLUME_NAME: &str = "DHV_VOLUME_NAME";
/// The volume's ID, a lower-case UUID.
pub const VOLUME_ID: &str = "DHV_VOLUME_ID";
/// `capacity_min` in bytes, `0` when unset.
pub const CAPACITY_MIN_BYTES: &str = "DHV_CAPACITY_MIN_BYTES";
/// `capacity_max` in bytes, `0` when unset.
pub const CAPACITY_MAX_BYTES: &str = "DHV_CAPACITY_MAX_BYTES";
/// The node's ID.
pub const NODE_ID: &str = "DHV_NODE_ID";
/// The volume's `parameters` as JSON, from the user: untrusted.
pub const PARAMETERS: &str = "DHV_PARAMETERS";
/// Delete only: the `path` that create returned.
pub const CREATED_PATH: &str = "DHV_CREATED_PATH";
