//! What can go wrong in the manager, as one typed enum.
//!
//! Where Nomad has a text for a failure, `Display` is that text byte for byte, so
//! that a person comparing our output with a Nomad agent's log sees the same words.
//! Every other variant names the volume, plugin or file it is about.

use std::path::PathBuf;

use super::state::StateError;
use crate::plugin::{PluginError, go_quote};

/// A failed manager operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// Another volume with this name (and a different id) exists or is being
    /// created on this node. The text is Nomad's `ErrVolumeNameExists`.
    #[error("volume name already exists on this node")]
    NameConflict {
        /// The name asked for.
        name: String,
        /// The id asked for.
        id: String,
        /// The id of the volume that holds the name.
        existing_id: String,
    },
    /// The plugin could not be found, or its call failed (Nomad's text).
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The plugin exited 0 but its output is not what Nomad accepts. Nomad's text for
    /// it is Go's bare `encoding/json` error, which names neither the plugin nor the
    /// operation; this names both, then gives Nomad's text. For a create, `cleanup`
    /// says what was done about what the plugin may have made (it exited 0).
    #[error("{operation} of volume {} with plugin {}: {source}{}", go_quote(.id), go_quote(.plugin_id), cleanup_note(.cleanup))]
    Response {
        /// `create` or `delete`.
        operation: &'static str,
        /// The volume's id.
        id: String,
        /// The plugin.
        plugin_id: String,
        /// The plugin layer's error (Nomad's text).
        #[source]
        source: PluginError,
        /// For a create: the compensating delete of a first create (see
        /// [`HostVolumeManager`](super::HostVolumeManager)); `None` for a delete.
        cleanup: Option<Box<Cleanup>>,
    },
    /// A volume id that is not a lower-case UUID: plugins build paths from it.
    #[error("invalid volume id {}: expected a lower-case UUID (8-4-4-4-12 hex digits)", go_quote(.id))]
    InvalidVolumeId {
        /// The id given.
        id: String,
    },
    /// `create` needs a volumes dir and none was configured.
    #[error("cannot create volume {}: no volumes dir is configured", go_quote(.id))]
    NoVolumesDir {
        /// The volume being created.
        id: String,
    },
    /// Register: the host path cannot be stat'ed (Nomad's text).
    #[error("could not verify host path for {}: stat {}: {}", go_quote(.name), .path.display(), go_io_text(.source))]
    HostPath {
        /// The volume's name.
        name: String,
        /// The path given.
        path: PathBuf,
        /// Why stat failed.
        #[source]
        source: std::io::Error,
    },
    /// Create was asked to update a volume that was registered, not created.
    #[error("volume {} is a registered volume, not one created by a plugin: it cannot be updated with create", go_quote(.id))]
    NotCreated {
        /// The volume's id.
        id: String,
    },
    /// Register was asked to replace a volume that a plugin created.
    #[error("volume {} was created by plugin {}: delete it before registering a path under its id", go_quote(.id), go_quote(.plugin_id))]
    NotRegistered {
        /// The volume's id.
        id: String,
        /// The plugin that created it.
        plugin_id: String,
    },
    /// An update named another plugin than the one that created the volume.
    #[error("volume {} was created by plugin {}, not {}", go_quote(.id), go_quote(.created_by), go_quote(.requested))]
    PluginChanged {
        /// The volume's id.
        id: String,
        /// The plugin that created the volume.
        created_by: String,
        /// The plugin the update named.
        requested: String,
    },
    /// Create returned the volumes dir itself, one of its parents (`/`), or a
    /// path that is not absolute. Nomad saves any path; we refuse these (see
    /// [`deletable`](super::volume::deletable)), never save them and never send
    /// a delete with them. As Nomad undoes a first create it cannot keep, a
    /// compensating delete was sent, with the volume's own path
    /// `<volumes_dir>/<id>` (`cleanup` says how it went).
    #[error("volume {} was not saved: plugin {} returned path {}, which is the volumes dir {}, one of its parents or not an absolute path (a delete sent with it would remove every volume); {cleanup}", go_quote(.id), go_quote(.plugin_id), go_quote(.path), .volumes_dir.display())]
    PathRefused {
        /// The volume's id.
        id: String,
        /// The plugin that returned it.
        plugin_id: String,
        /// The path returned.
        path: String,
        /// The volumes dir.
        volumes_dir: PathBuf,
        /// What was done about the volume the plugin made.
        cleanup: Box<Cleanup>,
    },
    /// A volume in state has a path no delete may be sent with (only a
    /// hand-edited state holds one: create never saves it).
    #[error("volume {} has path {} in state, which is the volumes dir {}, one of its parents or not an absolute path: no delete is sent with it (plugin {})", go_quote(.id), go_quote(.path), .volumes_dir.display(), go_quote(.plugin_id))]
    PathOutsideVolumesDir {
        /// The volume's id.
        id: String,
        /// The plugin that returned it.
        plugin_id: String,
        /// The path returned.
        path: String,
        /// The volumes dir.
        volumes_dir: PathBuf,
    },
    /// The plugin created the volume but it could not be saved in state.
    /// `cleanup` says what happened to the volume afterwards.
    #[error("volume {} was created by plugin {} but could not be saved: {source}; {cleanup}", go_quote(.id), go_quote(.plugin_id))]
    NotSaved {
        /// The volume's id.
        id: String,
        /// The plugin that created it.
        plugin_id: String,
        /// Why saving failed.
        #[source]
        source: Box<ManagerError>,
        /// What was done about the volume the plugin made.
        cleanup: Cleanup,
    },
    /// The state file could not be read, parsed, locked or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// A background task of the manager panicked (a bug in the manager).
    #[error("internal error while {what}: {message}")]
    Internal {
        /// What the task was doing.
        what: String,
        /// The panic's message.
        message: String,
    },
}

impl ManagerError {
    /// Whether the failure comes from bad input (a malformed id, an unusable or
    /// corrupt state file, a missing setting) rather than from the operation:
    /// the CLI exits 2 for these and 1 for the rest.
    pub fn is_input_error(&self) -> bool {
        match self {
            ManagerError::InvalidVolumeId { .. } | ManagerError::NoVolumesDir { .. } => true,
            ManagerError::Plugin(PluginError::InputTooLarge { .. }) => true,
            ManagerError::State(e) => e.is_input_error(),
            _ => false,
        }
    }
}

/// What the manager did with a volume that a plugin created but that could not
/// be saved.
#[derive(Debug)]
#[non_exhaustive]
pub enum Cleanup {
    /// The first create of the volume: the plugin's delete removed it again,
    /// sent for the volume's own path.
    Deleted,
    /// The first create, but the plugin's delete failed too.
    DeleteFailed(PluginError),
    /// The volume is in state (an update, or another create of the same id
    /// saved it meanwhile, as read under the state's lock): it was left as it
    /// is, since the state still describes it.
    KeptExisting,
}

/// `; ` and the cleanup, when there is one, for an error's text.
fn cleanup_note(cleanup: &Option<Box<Cleanup>>) -> String {
    cleanup
        .as_ref()
        .map_or_else(String::new, |c| format!("; {c}"))
}

impl std::fmt::Display for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cleanup::Deleted => f.write_str("the plugin deleted it again"),
            Cleanup::DeleteFailed(e) => write!(f, "deleting it again failed too: {e}"),
            Cleanup::KeptExisting => f.write_str(
                "the volume is in state (an update, or saved meanwhile by another create), so it was left in place",
            ),
        }
    }
}

/// Go's text for an I/O error (`no such file or directory`), as Nomad prints
/// `os.Stat` failures: the C library's words, lower-cased, without Rust's
/// ` (os error N)` suffix.
pub(crate) fn go_io_text(err: &std::io::Error) -> String {
    let text = match err.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => err.to_string(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_read_like_go() {
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(go_io_text(&e), "no such file or directory");
        let e = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        assert_eq!(go_io_text(&e), "not a directory");
    }

    #[test]
    fn name_conflict_is_nomads_text() {
        let e = ManagerError::NameConflict {
            name: "n".into(),
            id: "a".into(),
            existing_id: "b".into(),
        };
        assert_eq!(e.to_string(), "volume name already exists on this node");
    }
}
