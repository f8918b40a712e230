//! Host volume plugins: the [`HostVolumePlugin`] trait, the built-in `mkdir`
//! plugin ([`MkdirPlugin`]) and executables run exactly as Nomad runs them
//! ([`ExternalPlugin`]).
//!
//! The trait is what the manager needs (fingerprint, create, delete, with Nomad's
//! error texts). Every call returns its result together with its evidence
//! ([`PluginCall`]: the request sent, the duration, and for executables the raw
//! process record, [`PluginRun`]), for the built-in and external plugins alike:
//! that evidence is what the conformance checks judge (exit, output, leaks and
//! timings), not just the decoded result. [`PluginSource`] is the one parser
//! that turns `mkdir` or a path into a plugin; [`transport`] is where an
//! executable's process runs (a local process today).
//!
//! One call spec in, one call record out: how a plugin's calls are made is one
//! [`CallOptions`], from which [`ExternalPlugin`] describes each call as one
//! [`exec::Call`](dhv_host::exec::Call) (in `ExternalPlugin::call`, the only
//! place), handed to the transport as it is; what came of it is one
//! [`PluginRun`], the record every reader takes it from, up to the reports.

mod exec_failure;
mod fingerprint_decode;
mod pin;
mod plugin_call;
pub use fingerprint_decode::{decode_fingerprint, shown_version};
pub mod external;
mod go_os;
mod go_root;
mod go_strconv;
mod lookup;
pub mod mkdir;
mod record;
mod source;
mod timeouts;
pub mod transport;

use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::pin::Pin;

pub use crate::contract::go_quote;
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, ExitReason};
use crate::version::VersionInfo;

pub use dhv_host::exec::{KillMode, Supervisor};
pub use external::{ExternalPlugin, PluginRun, Recorder, Timeouts};
pub use mkdir::MkdirPlugin;
pub use pin::{PluginChange, PluginPin, sha256_of};
pub use plugin_call::PluginCall;
pub use record::env_lines;
pub use source::{CallOptions, PluginSource};

/// A boxed, sendable future: keeps [`HostVolumePlugin`] object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a successful fingerprint tells the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The version the plugin reported, with its canonical form.
    pub version: VersionInfo,
}

/// A host volume plugin, as the manager drives it.
pub trait HostVolumePlugin: Send + Sync + std::fmt::Debug {
    /// The plugin id: `mkdir`, or the executable's file name in the plugin dir.
    fn id(&self) -> &str;

    /// Whether the plugin runs in-process (no executable to inspect).
    fn is_builtin(&self) -> bool {
        false
    }

    /// The plugin dir an executable is run with (`DHV_PLUGIN_DIR`); `None`
    /// for the built-in.
    fn plugin_dir(&self) -> Option<&std::path::Path> {
        None
    }

    /// Asks the plugin for its version.
    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>>;

    /// Creates (or, for an existing id, updates) a volume.
    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>>;

    /// Deletes a volume.
    fn delete<'a>(&'a self, req: &'a DeleteRequest) -> BoxFuture<'a, PluginCall<()>>;

    /// Runs an operation Nomad does not have (`PLUGIN <op>` with `env`), to see
    /// that the plugin refuses it. `None` when the plugin has no process to
    /// run it in (the built-in).
    fn run_unknown<'a>(
        &'a self,
        op: &'a str,
        env: Vec<(String, String)>,
    ) -> BoxFuture<'a, Option<PluginRun>> {
        let _ = (op, env);
        Box::pin(async { None })
    }
}

/// Why a plugin call failed. `Display` is Nomad's own text where Nomad has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The id does not name an entry of the plugin dir (or escapes it).
    #[error("no such plugin: {}", crate::contract::go_quote_bytes(id.as_bytes()))]
    NoSuchPlugin {
        /// The plugin id asked for (any bytes, as Nomad takes any Go string).
        id: std::ffi::OsString,
    },
    /// The entry is a directory or has no execute bit.
    #[error("plugin not executable: {}", crate::contract::go_quote_bytes(id.as_bytes()))]
    NotExecutable {
        /// The plugin id asked for.
        id: std::ffi::OsString,
    },
    /// The plugin could not be started at all (no shebang, missing interpreter…).
    #[error("{message}")]
    Start {
        /// Nomad's error text, ending in Go's `fork/exec PATH: REASON`.
        message: String,
        /// What is wrong with the file, in words.
        explanation: String,
    },
    /// The request is too large for the kernel to hand to the plugin
    /// (`E2BIG`: one variable over 128 KiB, or all of them over the system's
    /// limit). The input's fault: no plugin could have started.
    #[error("{message}")]
    InputTooLarge {
        /// Nomad's error text, ending in Go's `fork/exec PATH: argument list too long`.
        message: String,
    },
    /// The plugin ran and failed: non-zero exit, killed, or timed out.
    #[error("{message}")]
    Failed {
        /// Nomad's error text (with the plugin's `{"error"}` text when it gave one).
        message: String,
        /// How the plugin ended.
        exit: ExitReason,
        /// It was killed for running past its time limit.
        timed_out: bool,
    },
    /// The plugin exited 0 but its output is not what Nomad accepts.
    #[error("{message}")]
    Response {
        /// Nomad's error text (Go's `encoding/json` error, or the version error).
        message: String,
    },
    /// The plugin exited 0 but printed more on stdout than dhv-conform
    /// decodes ([`external::DECODE_LIMIT`]): what Nomad, which reads it all,
    /// would make of it is not known. Never a decoding error.
    #[error("{message}")]
    OutputTooLarge {
        /// Says so, with the size.
        message: String,
        /// How many bytes stdout carried.
        bytes: u64,
    },
    /// The built-in plugin failed (bad parameter, file system error).
    #[error("{0}")]
    Builtin(String),
}
