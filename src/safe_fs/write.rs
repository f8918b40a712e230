//! The crate's one writer of files it is asked to produce (reports,
//! snapshots, the manager's state).
//!
//! What a path names decides how it is written:
//! - nothing yet: a new file, made whole under a temporary name beside it and
//!   renamed into place, mode `0644` less the umask (or the mode asked for);
//! - a regular file: replaced the same way, atomically, keeping its mode, so a
//!   reader sees the old content or the new, never a mix;
//! - a symlink: followed, and its target written by these same rules (the
//!   link survives); `/dev/stdout`, `/dev/fd/N` and `/proc/self/fd/N` are our
//!   own descriptor N, written where it stands;
//! - anything else that exists (a device such as `/dev/null`, a FIFO, a
//!   socket): opened and written in place, never replaced;
//! - a directory: an error.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// How [`write_file`] writes.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Mode of a new file, before the umask.
    pub mode: u32,
    /// fsync the file and its dir, so the write survives a crash.
    pub durable: bool,
    /// Prefix of the temporary file's name (a reader may clean up stale ones).
    pub temp_prefix: &'static str,
    /// Suffix of the temporary file's name.
    pub temp_suffix: &'static str,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            mode: 0o644,
            durable: false,
            temp_prefix: ".dhv-conform-",
            temp_suffix: ".tmp",
        }
    }
}

/// A file could not be written; names it.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct WriteError {
    /// The path asked for.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Where a write goes, once links are resolved.
enum Target {
    /// A regular file, or nothing yet: write beside it and rename.
    Replace(PathBuf),
    /// Something that exists and is not a regular file: write in place.
    InPlace(PathBuf),
    /// One of our own descriptors (`/dev/stdout`, `/proc/self/fd/1`).
    Fd(i32),
}

/// Writes `bytes` to `path` by the rules in the module docs.
pub fn write_file(path: &Path, bytes: &[u8], opts: &WriteOptions) -> Result<(), WriteError> {
    let fail = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    match resolve(path).map_err(fail)? {
        Target::Replace(real) => replace(&real, bytes, opts).map_err(fail),
        Target::InPlace(real) => in_place(&real, bytes).map_err(fail),
        Target::Fd(n) => to_fd(n, bytes).map_err(fail),
    }
}

/// Writes `bytes` to `path` as a regular file in its own dir, replaced
/// atomically, never followed: a symlink, device, FIFO or directory at
/// `path` is an error (`ELOOP` for a link) and is left as it is. For files
/// the crate owns (the manager's state), where anything but a regular file
/// is something planted.
pub fn replace_file(path: &Path, bytes: &[u8], opts: &WriteOptions) -> Result<(), WriteError> {
    let fail = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(m) if m.file_type().is_symlink() => {
            return Err(fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it is a symbolic link, never written through",
            )));
        }
        Ok(_) => {
            return Err(fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it is not a regular file",
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    // A link planted between the look and the rename is replaced by the
    // rename itself, not followed.
    replace(path, bytes, opts).map_err(fail)
}

/// Checks, before any work, that `path` can be written: it is not a
/// directory, and a file that would be made or replaced has an existing,
/// writable directory to go in.
pub fn check_target(path: &Path) -> Result<(), WriteError> {
    let fail = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    match resolve(path).map_err(fail)? {
        Target::Replace(real) => {
            let dir = parent_of(&real);
            let meta = fs::metadata(&dir).map_err(|e| {
                fail(io::Error::new(
                    e.kind(),
                    format!("directory {}: {e}", dir.display()),
                ))
            })?;
            if !meta.is_dir() {
                return Err(fail(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", dir.display()),
                )));
            }
            nix::unistd::access(
                &dir,
                nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
            )
            .map_err(|e| {
                fail(io::Error::new(
                    io::Error::from(e).kind(),
                    format!("directory {} is not writable: {e}", dir.display()),
                ))
            })
        }
        Target::InPlace(real) => nix::unistd::access(&real, nix::unistd::AccessFlags::W_OK)
            .map_err(|e| fail(io::Error::from(e))),
        Target::Fd(_) => Ok(()),
    }
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Follows symlinks (at most 40, as the kernel does) to what `path` names.
fn resolve(path: &Path) -> io::Result<Target> {
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        if let Some(n) = own_fd(&cur) {
            return Ok(Target::Fd(n));
        }
        let meta = match fs::symlink_metadata(&cur) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Target::Replace(cur)),
            Err(e) => return Err(e),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let to = fs::read_link(&cur)?;
            cur = parent_of(&cur).join(to);
        } else if kind.is_file() {
            return Ok(Target::Replace(cur));
        } else if kind.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        } else {
            return Ok(Target::InPlace(cur));
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` or `/proc/self/fd/N`: our fd N.
fn own_fd(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let own = format!("/proc/{}/fd/", std::process::id());
    ["/dev/fd/", "/proc/self/fd/", &own]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .and_then(|n| n.parse().ok())
}

fn to_fd(n: i32, bytes: &[u8]) -> io::Result<()> {
    use std::os::fd::BorrowedFd;
    // SAFETY: fd n is open in this process (the path named it), and it is
    // only borrowed for the write: it stays open.
    let fd = unsafe { BorrowedFd::borrow_raw(n) };
    let mut f = File::from(fd.try_clone_to_owned()?);
    f.write_all(bytes)?;
    f.flush()
}

/// Writes into an existing non-regular file. A FIFO with no reader is an
/// error, not a hang: it is opened without blocking, then written blocking.
fn in_place(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let fd = std::os::fd::AsFd::as_fd(&f);
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).map_err(io::Error::from)?;
    let blocking = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(blocking)).map_err(io::Error::from)?;
    f.write_all(bytes)
}

/// Writes a temporary file beside `path` and renames it over `path`.
fn replace(path: &Path, bytes: &[u8], opts: &WriteOptions) -> io::Result<()> {
    let dir = parent_of(path);
    let existing = fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_file());
    let mut tmp = tempfile::Builder::new()
        .prefix(opts.temp_prefix)
        .suffix(opts.temp_suffix)
        // Created with this mode, so the umask applies as to any new file.
        .permissions(fs::Permissions::from_mode(opts.mode))
        .tempfile_in(&dir)?;
    if let Some(old) = &existing {
        // A replaced file keeps its mode, and its owner where we may set it.
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))?;
        let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(old.uid()), Some(old.gid()));
    }
    tmp.write_all(bytes)?;
    if opts.durable {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if opts.durable {
        // The rename is only durable once the directory entry is on disk.
        File::open(&dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn a_new_file_is_0644_less_the_umask() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("report.json");
        write_file(&path, b"{}", &WriteOptions::default()).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        let umask = {
            // SAFETY: umask is process-wide but set straight back.
            let old = unsafe { libc::umask(0o022) };
            unsafe { libc::umask(old) };
            old
        };
        let mode = fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o644 & !(umask as u32));
    }

    #[test]
    fn a_regular_file_is_replaced_and_keeps_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("out");
        fs::write(&path, "old and longer").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let before = fs::metadata(&path).unwrap().ino();
        write_file(&path, b"new", &WriteOptions::default()).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        let after = fs::metadata(&path).unwrap();
        assert_ne!(after.ino(), before, "replaced, not rewritten");
        assert_eq!(after.mode() & 0o777, 0o600);
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn a_symlink_survives_and_its_target_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("real")).unwrap();
        let target = tmp.path().join("real/junit.xml");
        fs::write(&target, "old").unwrap();
        let link = tmp.path().join("link.xml");
        std::os::unix::fs::symlink("real/junit.xml", &link).unwrap();
        write_file(&link, b"new", &WriteOptions::default()).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_dangling_symlink_creates_its_target() {
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink("made", &link).unwrap();
        write_file(&link, b"x", &WriteOptions::default()).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(tmp.path().join("made")).unwrap(), b"x");
    }

    #[test]
    fn a_device_is_written_in_place() {
        write_file(Path::new("/dev/null"), b"x", &WriteOptions::default()).unwrap();
        let meta = fs::metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device());
    }

    #[test]
    fn a_fifo_without_a_reader_is_an_error_not_a_hang() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = write_file(&fifo, b"x", &WriteOptions::default()).unwrap_err();
        assert_eq!(err.source.raw_os_error(), Some(libc::ENXIO));
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(write_file(tmp.path(), b"x", &WriteOptions::default()).is_err());
        assert!(check_target(tmp.path()).is_err());
    }

    #[test]
    fn check_target_wants_an_existing_parent() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(check_target(&tmp.path().join("new.json")).is_ok());
        let err = check_target(&tmp.path().join("missing/new.json")).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert!(check_target(Path::new("/dev/null")).is_ok());
    }
}
