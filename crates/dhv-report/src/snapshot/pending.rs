//! Snapshot files: reading the stored one, and the pending one `--bless` writes
//! beside it (`FILE.new`), which a review accepts (moved over `FILE`) or
//! rejects (removed), as insta does with its `.snap.new` files.

use std::io;
use std::path::{Path, PathBuf};

#[cfg(feature = "files")]
use super::SCHEMA_KEY;

/// What a pending file's name adds to its snapshot's.
const PENDING_SUFFIX: &str = ".new";

/// The most read from a stored snapshot: a regular file (or a symlink to
/// one) only, so a FIFO or `/dev/zero` given as `--snapshot` is an error, not
/// a hang. A snapshot holds one short line per check.
pub const MAX_SNAPSHOT_BYTES: u64 = 16 << 20;

/// A snapshot file could not be read or written; names the file and the action.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot exists (or might) but could not be read.
    #[error("cannot read snapshot {}", path.display())]
    Read {
        /// The snapshot file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The new snapshot could not be written (or renamed into place).
    #[error("cannot write snapshot {} (in {})", path.display(), dir.display())]
    Write {
        /// The directory the temporary file was made in.
        dir: PathBuf,
        /// The snapshot file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A pending snapshot could not be removed once accepted or rejected.
    #[error("cannot remove pending snapshot {}", path.display())]
    Remove {
        /// The pending file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Neither the snapshot nor a pending one exists at a path given to review.
    #[error("no snapshot {} and no pending {}", path.display(), pending_path(path).display())]
    NoSnapshot {
        /// The path given.
        path: PathBuf,
    },
}

#[cfg(feature = "files")]
/// The stored snapshot at `path`, line ends made `\n`; `None` when there is none.
pub(super) fn read_stored(path: &Path) -> Result<Option<String>, SnapshotError> {
    match dhv_host::safe_fs::read_text_bounded(
        path,
        MAX_SNAPSHOT_BYTES,
        dhv_host::safe_fs::Links::Follow,
    ) {
        Ok(stored) => Ok(Some(stored.replace("\r\n", "\n"))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(SnapshotError::Read {
            path: path.to_owned(),
            source: e.into_io(),
        }),
    }
}

/// Where `--bless` writes the snapshot it proposes for `path`: `path` with `.new`
/// added (`conformance.snap.new`), beside it.
pub fn pending_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(PENDING_SUFFIX);
    PathBuf::from(name)
}

#[cfg(feature = "files")]
/// Writes `normalised` to `path` with the crate's one writer
/// ([`dhv_host::safe_fs::write_file`]): a regular file is replaced atomically (a temporary
/// file in the same directory, flushed to disk and renamed over it), so readers see the
/// old snapshot or the new one, never a mix; a symlink's target is written and the link
/// kept. A missing parent dir is an error, as for every other output: a typo in
/// the path must not quietly make a tree somewhere.
pub fn bless(path: &Path, normalised: &str) -> Result<(), SnapshotError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let opts = dhv_host::safe_fs::WriteOptions {
        durable: true,
        temp_prefix: ".snapshot",
        ..Default::default()
    };
    dhv_host::safe_fs::write_file(path, normalised.as_bytes(), &opts).map_err(|e| {
        SnapshotError::Write {
            dir,
            path: path.to_owned(),
            source: e.source,
        }
    })
}

#[cfg(feature = "files")]
/// Writes `normalised` as the pending snapshot of `path` ([`pending_path`]), as
/// [`bless`] writes a snapshot; `path` itself is left as it is.
pub fn write_pending(path: &Path, normalised: &str) -> Result<(), SnapshotError> {
    bless(&pending_path(path), normalised)
}

/// A snapshot proposed by `--bless` and not yet reviewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The snapshot it would replace (or create).
    pub snapshot: PathBuf,
    /// The pending file, `snapshot` with `.new` added.
    pub pending: PathBuf,
}

#[cfg(feature = "files")]
impl Pending {
    /// The snapshot now, if there is one.
    pub fn stored(&self) -> Result<Option<String>, SnapshotError> {
        read_stored(&self.snapshot)
    }

    /// The snapshot proposed.
    pub fn proposed(&self) -> Result<String, SnapshotError> {
        read_stored(&self.pending)?.ok_or_else(|| SnapshotError::NoSnapshot {
            path: self.snapshot.clone(),
        })
    }
}

#[cfg(feature = "files")]
/// The pending snapshots at `path`: a snapshot file (its pending file, if any),
/// a pending file itself (`FILE.new`), or a directory (each of its files named
/// `*.new` that holds a dhv-conform snapshot; not its subdirectories). Nothing
/// pending is an empty list; a path that is neither a snapshot, a pending file
/// nor a directory is [`SnapshotError::NoSnapshot`].
pub fn find_pending(path: &Path) -> Result<Vec<Pending>, SnapshotError> {
    let read_error = |source| SnapshotError::Read {
        path: path.to_owned(),
        source,
    };
    if path.is_dir() {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(path).map_err(read_error)? {
            let entry = entry.map_err(read_error)?;
            let file = entry.path();
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file && is_pending_name(&file) && holds_a_snapshot(&file) {
                found.push(of_pending(file));
            }
        }
        found.sort_by(|a, b| a.pending.cmp(&b.pending));
        return Ok(found);
    }
    let pending = pending_path(path);
    if pending.exists() {
        return Ok(vec![Pending {
            snapshot: path.to_owned(),
            pending,
        }]);
    }
    if is_pending_name(path) && path.exists() {
        return Ok(vec![of_pending(path.to_owned())]);
    }
    if path.exists() {
        return Ok(Vec::new());
    }
    Err(SnapshotError::NoSnapshot {
        path: path.to_owned(),
    })
}

#[cfg(feature = "files")]
fn is_pending_name(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(PENDING_SUFFIX))
}

#[cfg(feature = "files")]
/// The pending file `FILE.new` of `FILE`.
fn of_pending(pending: PathBuf) -> Pending {
    use std::os::unix::ffi::OsStrExt as _;
    let name = pending.as_os_str().as_bytes();
    let stem = name.strip_suffix(PENDING_SUFFIX.as_bytes()).unwrap_or(name);
    let snapshot = PathBuf::from(std::ffi::OsStr::from_bytes(stem));
    Pending { snapshot, pending }
}

#[cfg(feature = "files")]
/// Whether `file` starts as a dhv-conform snapshot does: only those are taken
/// from a directory, which may hold other `.new` files.
fn holds_a_snapshot(file: &Path) -> bool {
    let start = format!("{SCHEMA_KEY}{}/", crate::TOOL_NAME);
    read_stored(file).is_ok_and(|text| text.is_some_and(|t| t.starts_with(&start)))
}

#[cfg(feature = "files")]
/// Moves the pending snapshot over its snapshot ([`bless`]: atomically, a
/// symlink's target written), then removes the pending file.
pub fn accept(pending: &Pending) -> Result<(), SnapshotError> {
    let text = pending.proposed()?;
    bless(&pending.snapshot, &text)?;
    reject(pending)
}

#[cfg(feature = "files")]
/// Removes the pending snapshot; the snapshot stays as it is.
pub fn reject(pending: &Pending) -> Result<(), SnapshotError> {
    match std::fs::remove_file(&pending.pending) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SnapshotError::Remove {
            path: pending.pending.clone(),
            source,
        }),
    }
}

#[cfg(all(test, feature = "files"))]
#[path = "pending_tests.rs"]
mod tests;
