//! A Nomad-compatible host volume plugin manager, usable as a library: what an
//! integrator depends on, without the conformance engine, its CLI or the
//! report renderers.
//!
//! - The crate root is the volume manager.
//! - [`plugin`]: the built-in `mkdir` plugin and plugin executables, run exactly
//!   as Nomad runs them, with Nomad's decoding and error texts.
//! - [`contract`] and [`version`] (from `dhv-contract`, re-exported so that one
//!   dependency is enough): the facts of Nomad's plugin contract the types
//!   above speak in.
//!
//! Processes and files are touched through `dhv-host` only (its `exec` starts
//! and signals every plugin process; its `safe_fs` does every write and
//! removal under a volumes dir).
//!
//! This is what a Nomad client does around its plugins, without the rest of
//! Nomad: [discover and fingerprint](discovery) a plugin dir, and create,
//! register, delete, list and restore volumes with [`HostVolumeManager`], keeping
//! them in a [state dir](state). Plugins get Nomad's exact environment, and
//! errors carry Nomad's exact texts, so a plugin behaves here as it will under
//! Nomad. Where Nomad is unsafe, the manager does better, and its docs say how.
//!
//! Several processes may share a state dir (the `dhv-conform volume` commands
//! do): every change to the state is made under a file lock.
//!
//! # Example
//!
//! Create a volume with the built-in `mkdir` plugin, list it, delete it:
//!
//! ```
//! use dhv_manager::{DeleteOutcome, HostVolumeManager, VolumeSpec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state_dir = tempfile::tempdir()?;
//! let volumes_dir = tempfile::tempdir()?;
//! let manager = HostVolumeManager::open(state_dir.path())?.with_volumes_dir(volumes_dir.path());
//! let rt = tokio::runtime::Runtime::new()?;
//!
//! let volume = rt.block_on(manager.create(VolumeSpec::new("mkdir", "data")))?;
//! assert_eq!(volume.host_path, volumes_dir.path().join(&volume.id).to_string_lossy());
//! assert!(std::path::Path::new(&volume.host_path).is_dir());
//!
//! let names: Vec<String> = rt.block_on(manager.list())?.into_iter().map(|v| v.name).collect();
//! assert_eq!(names, ["data"]);
//!
//! // Another id may not take the name while the volume exists.
//! let clash = rt.block_on(manager.create(VolumeSpec::new("mkdir", "data")));
//! assert_eq!(clash.unwrap_err().to_string(), "volume name already exists on this node");
//!
//! let outcome = rt.block_on(manager.delete(&volume.id))?;
//! assert!(matches!(outcome, DeleteOutcome::Deleted(_)));
//! assert!(!std::path::Path::new(&volume.host_path).exists());
//! assert!(rt.block_on(manager.list())?.is_empty());
//! # Ok(())
//! # }
//! ```

pub use dhv_contract as contract;
pub use dhv_contract::version;

mod create;
pub mod discovery;
mod error;
mod locks;
pub mod plugin;
mod restore;
mod spec;
pub mod state;
mod state_error;
mod volume;
mod volumes;

pub use discovery::{Discovery, DiscoveryError, Fingerprinter, LeftOut, NodeFingerprint};
pub use error::{Cleanup, ManagerError};
pub use restore::Restored;
pub use spec::{DEFAULT_NAMESPACE, DEFAULT_NODE_POOL, RegisterSpec, VolumeSpec};
pub use state::StateError;
pub use volume::{Volume, deletable, own_path, strictly_inside};
pub use volumes::{DeleteOutcome, HostVolumeManager};
