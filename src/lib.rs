//! `dhv-conform`: a conformance harness for Nomad dynamic host volume (DHV) plugins,
//! built on a Nomad-compatible host volume plugin manager.
//!
//! # A workspace of crates, one per audience
//!
//! | crate | who depends on it | what it holds |
//! |---|---|---|
//! | `dhv-manager` | an integrator of the manager | the volume manager, [`plugin`], and (re-exported from `dhv-contract`) [`contract`] and [`version`]; no CLI, engine or renderers |
//! | `dhv-report` | a reader or writer of reports | the report model, its schema (`dhv-conform/report/v1`, `dhv-conform/fleet/v1`) and renderers; without its `files` feature, neither tokio nor nix |
//! | `dhv-contract` | both of the above | the facts of Nomad's plugin contract (requests, responses, `DHV_*` names, exit texts, go-version's rules) |
//! | `dhv-host` | the manager and the engine | the one layer that touches this host: the process runner (`exec`) and the filesystem layer (`safe_fs`) |
//! | `dhv-conform` (this one) | the harness's users | the conformance engine and its catalogue ([`conformance`]), the suite as a library ([`suite`]), and the command line ([`cli`]) |
//!
//! This crate re-exports the manager's crates under the names they had when
//! they were its modules ([`manager`], [`plugin`], [`contract`], [`version`],
//! [`report`]), so `dhv_conform::manager::HostVolumeManager` still names the
//! manager. Every name public here is documented and kept stable as the report
//! schemas are (added to, never renamed).
//!
//! The crates are layered, and the arrows go one way:
//! `dhv-conform → dhv-manager → dhv-host → dhv-contract`, and
//! `dhv-conform → dhv-report → dhv-contract`. Within this crate, [`cli`] and
//! [`suite`] build on [`conformance`]. Only `dhv-host`'s `exec` starts or signals
//! processes: plugins, and the one developer's tool the harness runs
//! (`dhv-conform new`'s `go build` of a Go skeleton).
//!
//! # Example: run one plugin operation as Nomad would
//!
//! ```
//! use dhv_conform::contract::{CreateRequest, DeleteRequest};
//! use dhv_conform::plugin::ExternalPlugin;
//! use std::os::unix::fs::PermissionsExt;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let script = dir.path().join("hello");
//! std::fs::write(&script, "#!/bin/sh\nmkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"\n\
//!     echo \"{\\\"path\\\": \\\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\\\"}\"\n")?;
//! std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
//!
//! let request = CreateRequest {
//!     volumes_dir: dir.path().join("volumes").display().to_string(),
//!     plugin_dir: dir.path().display().to_string(),
//!     node_pool: "default".into(),
//!     namespace: "default".into(),
//!     volume_name: "data".into(),
//!     volume_id: "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10".into(),
//!     capacity_min_bytes: 0,
//!     capacity_max_bytes: 0,
//!     node_id: "node-1".into(),
//!     parameters: None,
//! };
//! let plugin = ExternalPlugin::from_path(&script);
//! let rt = tokio::runtime::Runtime::new()?;
//! let (run, response) = rt.block_on(plugin.create_run(&request));
//! let response = response?;
//! assert!(std::path::Path::new(&response.path).is_dir());
//! // Everything Nomad would have seen, and the line that repeats it by hand:
//! assert_eq!(run.env[0], ("DHV_OPERATION".to_string(), "create".to_string()));
//! assert!(run.reproduce().starts_with("env -i DHV_OPERATION=create"));
//! # let _ = DeleteRequest::for_created(&request, &response.path);
//! # Ok(())
//! # }
//! ```
pub use dhv_manager as manager;
pub use dhv_manager::{contract, plugin, version};
pub use dhv_report as report;
pub mod suite;

// The host layer, as the engine's own paths name it (`crate::exec`, ...).
use dhv_host::sync::{lock, panic_text};
use dhv_host::{exec, safe_fs};

pub mod cli;
pub mod conformance;
