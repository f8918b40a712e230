//! What a snapshot's files are called and what can go wrong with them: the
//! pending one `--bless` writes beside a snapshot (`FILE.new`), which a review
//! accepts (moved over `FILE`) or rejects (removed), as insta does with its
//! `.snap.new` files, and the errors of reading and writing them (done in
//! `files.rs`, with the `files` feature).

use std::io;
use std::path::{Path, PathBuf};

/// What a pending file's name adds to its snapshot's.
pub(super) const PENDING_SUFFIX: &str = ".new";

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

/// Where `--bless` writes the snapshot it proposes for `path`: `path` with `.new`
/// added (`conformance.snap.new`), beside it.
pub fn pending_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(PENDING_SUFFIX);
    PathBuf::from(name)
}

/// A snapshot proposed by `--bless` and not yet reviewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The snapshot it would replace (or create).
    pub snapshot: PathBuf,
    /// The pending file, `snapshot` with `.new` added.
    pub pending: PathBuf,
}
