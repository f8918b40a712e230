//! `dhv-conform`: a conformance harness for Nomad dynamic host volume (DHV) plugins,
//! built on a Nomad-compatible host volume plugin manager.
//!
//! # The public surface
//!
//! What an integrator builds on, documented and kept stable as the report schemas are
//! (added to, never renamed):
//!
//! - [`suite`]: the conformance suite as a library, [`suite::run`] (async) and
//!   [`suite::run_blocking`] (sync), with its own [`suite::SuiteConfig`] and the types
//!   its hooks and results use.
//! - [`manager`]: what a Nomad client does around plugins: discovery,
//!   fingerprinting, create / register / delete / restore, state and locks. Its
//!   module docs have a runnable example.
//! - [`plugin`]: the built-in `mkdir` plugin and plugin executables, run exactly as
//!   Nomad runs them, with Nomad's decoding and error texts.
//! - [`report`]: the report schema (`dhv-conform/report/v1`, the fleet's
//!   `dhv-conform/fleet/v1`) and its renderers: JSON, JUnit, Markdown, terminal text
//!   and normalised snapshots.
//! - [`contract`] and [`version`]: the facts of Nomad's plugin contract the types
//!   above speak in (requests, responses, `DHV_*` names, go-version parsing).
//!
//! The rest is the harness's own machinery, hidden from these docs and not part of
//! the surface: the CLI (`cli`), the check engine (`conformance`, whose public types
//! [`suite`] re-exports), the process runner (`exec`) and the filesystem layer
//! (`safe_fs`). They stay reachable only for the crate's binary, tests and benches.
//!
//! The crate is layered, and the arrows go one way:
//! `cli → conformance → manager → plugin → exec`. [`contract`] and
//! [`version`] depend on nothing; [`report`] depends only on its own result
//! model. Only `exec` starts or signals processes: plugins, and the one
//! developer's tool the crate runs (`dhv-conform new`'s `go build` of a Go
//! skeleton).
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
#![warn(missing_docs)]

pub mod contract;
pub mod manager;
pub mod plugin;
pub mod report;
pub mod suite;
pub mod version;

mod locking;
pub(crate) use locking::{lock, panic_text, read, write};

// The harness's machinery: not part of the public surface (see the crate docs).
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod conformance;
#[doc(hidden)]
pub mod exec;
#[doc(hidden)]
pub mod safe_fs;
