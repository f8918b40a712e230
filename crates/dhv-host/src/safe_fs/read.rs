//! The crate's one reader of files it did not just write: inputs named by the
//! user (fixtures, snapshots, reports to merge), the manager's state, plugin
//! files, and the canaries and probe files of a run.
//!
//! Such a file may have been swapped for something that never ends: a FIFO
//! (an open for reading waits for a writer forever), `/dev/zero` (read until
//! memory runs out), a terminal. So every read here
//! - opens with `O_NONBLOCK` (a FIFO opens at once instead of waiting) and,
//!   when the caller says the last component must not be a link, `O_NOFOLLOW`;
//! - decides by `fstat` of what was opened, not by a look at the path before
//!   (which a swap after the look would defeat): anything but a regular file
//!   is refused, named by its kind;
//! - reads at most a stated number of bytes, and a file longer than that (or
//!   one that grows past it while read) is an error saying the limit.
//!
//! Inputs the user names may be symlinks to regular files ([`Links::Follow`]):
//! a link is how many people keep a snapshot or a fixture, and the target
//! is held to the same rules. Files inside a run's sandbox, and the manager's
//! state file, are read with [`Links::Refuse`]: there a link is what a plugin
//! (or another user) planted.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Whether the last component of a path may be a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Follow a symlink to its target (inputs the user names).
    Follow,
    /// A symlink is an error (`O_NOFOLLOW`): sandbox files, the state file.
    Refuse,
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The path names something other than a regular file.
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is ("a FIFO", "a character device", "a symbolic link", ...).
        kind: &'static str,
    },
    /// The file holds more than the reader allows.
    #[error("{} is larger than {limit} bytes, the most read from such a file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
}

impl ReadError {
    /// Whether the file does not exist (a missing state or snapshot is no error).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// Why, without the path (for callers whose messages name the file).
    pub fn reason(&self) -> String {
        match self {
            ReadError::Io { source, .. } => source.to_string(),
            ReadError::NotRegular { kind, .. } => format!("it is {kind}, not a regular file"),
            ReadError::TooLarge { limit, .. } => {
                format!("it is larger than {limit} bytes, the most read from such a file")
            }
        }
    }

    /// The error as an `io::Error` saying [`reason`](Self::reason), for
    /// callers whose errors carry one.
    pub fn into_io(self) -> io::Error {
        let kind = match self {
            ReadError::Io { source, .. } => return source,
            ReadError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            ReadError::NotRegular { .. } => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, self.reason())
    }
}

/// Opens `path` for reading if, once open, it is a regular file; never waits.
pub fn open_regular(path: &Path, links: Links) -> Result<File, ReadError> {
    if links == Links::Refuse {
        // A device or FIFO is refused without being opened at all: opening
        // a device can act (a tape rewinds, a watchdog arms).
        if let Ok(m) = std::fs::symlink_metadata(path) {
            let kind = m.file_type();
            if !kind.is_file() && !kind.is_symlink() {
                return Err(not_regular(path, kind_name(&kind)));
            }
        }
    }
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular(path, "a symbolic link"));
        }
        Err(source) => {
            return Err(ReadError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let meta = file.metadata().map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(not_regular(path, kind_name(&kind)))
}

/// The whole content of the regular file `path`, at most `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64, links: Links) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path, links)?;
    let too_large = || ReadError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // One byte past the limit tells a file that grew while read from one that fits.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: u64, links: Links) -> Result<String, ReadError> {
    let bytes = read_bounded(path, limit, links)?;
    String::from_utf8(bytes).map_err(|_| ReadError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    })
}

/// What a file that is not a regular one is, in an error's words.
pub fn kind_name(kind: &std::fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

fn not_regular(path: &Path, kind: &'static str) -> ReadError {
    ReadError::NotRegular {
        path: path.to_path_buf(),
        kind,
    }
}

/// A directory's permission bits and entry names (sorted, without `.` and
/// `..`), opened never through a symlink at its last component: what a
/// plugin made at a path it named, looked at without following it elsewhere.
pub fn list_dir(path: &Path) -> std::io::Result<(u32, Vec<std::ffi::OsString>)> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = super::fd::open_dir(path)?;
    let mut names = super::fd::entries(std::os::fd::AsFd::as_fd(&dir))?;
    let mode = File::from(dir).metadata()?.permissions().mode() & 0o7777;
    names.sort();
    Ok((mode, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_regular_file_reads_whole_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_bounded(&path, 5, Links::Refuse).unwrap(), b"12345");
        let err = read_bounded(&path, 4, Links::Refuse).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { limit: 4, .. }), "{err}");
        assert!(err.to_string().contains("larger than 4 bytes"), "{err}");
    }

    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let started = Instant::now();
        let err = read_bounded(&fifo, 100, Links::Follow).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            err.to_string(),
            format!("{} is a FIFO, not a regular file", fifo.display())
        );
    }

    #[test]
    fn dev_zero_and_a_link_to_it_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for (path, links, kind) in [
            (Path::new("/dev/zero"), Links::Follow, "a character device"),
            (link.as_path(), Links::Follow, "a character device"),
            (link.as_path(), Links::Refuse, "a symbolic link"),
        ] {
            match read_bounded(path, 100, links) {
                Err(ReadError::NotRegular { kind: k, .. }) => assert_eq!(k, kind, "{path:?}"),
                other => panic!("{path:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_link_to_a_regular_file_is_followed_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real"), b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        assert_eq!(read_bounded(&link, 10, Links::Follow).unwrap(), b"x");
        assert!(read_bounded(&link, 10, Links::Refuse).is_err());
        assert!(
            read_bounded(&dir.path().join("none"), 10, Links::Follow)
                .unwrap_err()
                .is_not_found()
        );
    }
}
