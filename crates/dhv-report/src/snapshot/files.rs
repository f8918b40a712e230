//! Snapshot files on disk (the `files` feature): reading the stored one,
//! writing it and the pending one `--bless` writes beside it (`FILE.new`),
//! finding pending ones, and accepting or rejecting them, through the host
//! layer's safe reads and atomic writes.

use std::io;
use std::path::{Path, PathBuf};

use super::compare::{SnapshotOutcome, compare_stored};
use super::pending::{MAX_SNAPSHOT_BYTES, PENDING_SUFFIX, Pending, SnapshotError, pending_path};
use super::{Normalised, SCHEMA_KEY};

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

/// Writes `normalised` as the pending snapshot of `path` ([`pending_path`]), as
/// [`bless`] writes a snapshot; `path` itself is left as it is.
pub fn write_pending(path: &Path, normalised: &str) -> Result<(), SnapshotError> {
    bless(&pending_path(path), normalised)
}

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

fn is_pending_name(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(PENDING_SUFFIX))
}

/// The pending file `FILE.new` of `FILE`.
fn of_pending(pending: PathBuf) -> Pending {
    use std::os::unix::ffi::OsStrExt as _;
    let name = pending.as_os_str().as_bytes();
    let stem = name.strip_suffix(PENDING_SUFFIX.as_bytes()).unwrap_or(name);
    let snapshot = PathBuf::from(std::ffi::OsStr::from_bytes(stem));
    Pending { snapshot, pending }
}

/// Whether `file` starts as a dhv-conform snapshot does: only those are taken
/// from a directory, which may hold other `.new` files.
fn holds_a_snapshot(file: &Path) -> bool {
    let start = format!("{SCHEMA_KEY}{}/", crate::TOOL_NAME);
    read_stored(file).is_ok_and(|text| text.is_some_and(|t| t.starts_with(&start)))
}

/// Moves the pending snapshot over its snapshot ([`bless`]: atomically, a
/// symlink's target written), then removes the pending file.
pub fn accept(pending: &Pending) -> Result<(), SnapshotError> {
    let text = pending.proposed()?;
    bless(&pending.snapshot, &text)?;
    reject(pending)
}

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

/// Compares `run` with the snapshot stored at `path`, in the stored snapshot's form.
///
/// A missing file is an outcome, not an error: CI reports it (exit 3) and `--bless`
/// creates it. Line endings are compared as `\n`, so a checkout that turned them into
/// `\r\n` does not count as a change.
pub fn compare(path: &Path, run: &Normalised) -> Result<SnapshotOutcome, SnapshotError> {
    Ok(compare_stored(path, read_stored(path)?.as_deref(), run))
}

#[cfg(test)]
#[path = "pending_tests.rs"]
mod tests;
