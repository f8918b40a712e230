//! What each of the run's shared first calls found ([`CreateProbe`],
//! [`DeleteProbe`], [`AgainProbe`], [`DistinctProbe`]), and how a fresh
//! volume looks ([`FreshVolume`], [`is_mount_point`]): the records `probes.rs`
//! makes once and derives the checks' prerequisites from.

use std::path::{Path, PathBuf};

use super::Finding;
use super::residue::Footprint;
use crate::conformance::host::Host;
use crate::contract::{CreateRequest, CreateResponse};
use crate::plugin::PluginCall;

/// The first default create.
#[derive(Debug, Clone)]
pub(crate) struct CreateProbe {
    pub request: CreateRequest,
    pub call: PluginCall<CreateResponse>,
    /// Whether the path existed right after create.
    pub path_existed: bool,
    /// What the new volume held right after create, when it is a directory.
    pub fresh: Option<FreshVolume>,
    /// Something was mounted at its path right after create.
    pub mounted: bool,
}

/// Whether something is mounted at `path` (by `host`'s mount table).
pub(crate) fn is_mount_point(host: &dyn Host, path: &Path) -> bool {
    host.mounts()
        .is_ok_and(|mounts| mounts.iter().any(|m| m.mount_point == path))
}

/// A volume directory as a create leaves it, before anyone writes into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FreshVolume {
    /// The names in it, sorted.
    pub entries: Vec<String>,
    /// Its permission bits.
    pub mode: u32,
}

impl FreshVolume {
    /// The directory at `path` (never through a symlink at its last
    /// component), or `None` when it is no directory or cannot be read.
    pub fn at(host: &dyn Host, path: &Path) -> Option<FreshVolume> {
        let list = host.list_dir(path).ok()?;
        let mode = list.mode;
        let entries = list
            .names
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        Some(FreshVolume { entries, mode })
    }

    /// How it reads in a finding: its mode and what it holds.
    pub fn describe(&self) -> String {
        match self.entries.is_empty() {
            true => format!("mode {:04o}, empty", self.mode),
            false => format!(
                "mode {:04o}, holding [{}]",
                self.mode,
                self.entries.join(", ")
            ),
        }
    }
}

/// The first delete of a created volume (in a sandbox of its own).
#[derive(Debug, Clone)]
pub(crate) struct DeleteProbe {
    /// The create before it, and its path when it succeeded.
    pub create: PluginCall<CreateResponse>,
    /// The delete, when the create succeeded. The volume holds a file by
    /// then, as a volume in use does.
    pub delete: Option<PluginCall<()>>,
    /// What the create and delete left in and beside the volumes dir, when
    /// the delete passed (see [`residue`](super::residue)).
    pub footprint: Option<Footprint>,
    /// Why the harness wrote no file into the volume before the delete,
    /// when its name already existed there.
    pub no_data: Option<String>,
}

impl DeleteProbe {
    pub(super) fn passed(&self) -> bool {
        self.delete.as_ref().is_some_and(PluginCall::ok)
    }
}

/// A create made again for a volume that exists, as Nomad's restore and an
/// update do (in a sandbox of its own). Non-idempotent create is one root
/// cause: `create.idempotent` reports it, and the checks that create an
/// existing volume again skip "needs create.idempotent".
/// `create.idempotent` judges it (and deletes its volume).
#[derive(Debug, Clone)]
pub(crate) struct AgainProbe {
    /// The request, sent twice.
    pub request: CreateRequest,
    /// The first create.
    pub first: PluginCall<CreateResponse>,
    /// A file written into the volume between the creates, or the finding
    /// when that could not be done.
    pub canary: Result<PathBuf, Finding>,
    /// The same request again, when the first succeeded.
    pub again: Option<PluginCall<CreateResponse>>,
}

/// Two volumes, two creates (in a sandbox of its own), a file written into
/// the first before the second is made. Volumes that share one path are one
/// root cause: `create.distinct` judges this probe (and deletes its volumes),
/// and the checks whose volumes collide skip "needs create.distinct".
#[derive(Debug, Clone)]
pub(crate) struct DistinctProbe {
    /// The requests of volumes A and B.
    pub requests: [CreateRequest; 2],
    /// The create of A.
    pub a: PluginCall<CreateResponse>,
    /// A file written into A, or the finding when that could not be done.
    pub canary: Result<PathBuf, Finding>,
    /// The create of B, when A's succeeded.
    pub b: Option<PluginCall<CreateResponse>>,
}

impl DistinctProbe {
    /// Whether both volumes were made, at one path.
    pub(super) fn shared_path(&self) -> bool {
        match (&self.a.result, self.b.as_ref().map(|b| &b.result)) {
            (Ok(a), Some(Ok(b))) => a.path == b.path,
            _ => false,
        }
    }
}
