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

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
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
    Output::open(path, opts.clone())?.write(bytes)
}

/// An output opened before the work that produces it, and written later
/// through what was opened, never by its path again.
///
/// A run's outputs are opened before the first plugin call, while every
/// name on their paths is still the user's; a plugin that then turns the
/// output into a symlink, or swaps its directory for one, redirects nothing:
/// a regular file (or a name not yet made) is replaced by a rename relative
/// to its held directory, which replaces a planted link rather than following
/// it; a device or FIFO is reopened through its held descriptor; one of our
/// own descriptors was duplicated at open.
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    kind: Kind,
    resolved: PathBuf,
    existing: Option<super::FileId>,
    opts: WriteOptions,
}

#[derive(Debug)]
enum Kind {
    /// The dir the file is replaced in, its name there, and the mode and
    /// owner of the file that was there at open (kept by the replacement).
    Replace {
        dir: OwnedFd,
        name: OsString,
        keep: Option<(u32, u32, u32)>,
    },
    /// A device, FIFO or socket, held by an `O_PATH` descriptor: opened for
    /// writing only when written, so a FIFO's reader may come late.
    InPlace(OwnedFd),
    /// A duplicate of one of our own descriptors.
    Fd(OwnedFd),
}

impl Output {
    /// Opens `path` for a later [`write`](Self::write), by the rules in the
    /// module docs; fails as a write would (a directory, a missing or
    /// unwritable parent dir), before any work is done.
    pub fn open(path: &Path, opts: WriteOptions) -> Result<Output, WriteError> {
        let fail = |source| WriteError {
            path: path.to_path_buf(),
            source,
        };
        let (kind, resolved, existing) = match resolve(path).map_err(fail)? {
            Target::Replace(real) => open_replace(&real).map_err(fail)?,
            Target::InPlace(real) => {
                nix::unistd::access(&real, nix::unistd::AccessFlags::W_OK)
                    .map_err(|e| fail(io::Error::from(e)))?;
                let held = open_path(&real).map_err(fail)?;
                let id = super::FileId::of(held.as_fd()).map_err(fail)?;
                (Kind::InPlace(held), canonical(&real), Some(id))
            }
            Target::Fd(n) => {
                // SAFETY: fd n is open in this process (the path named it);
                // it is only borrowed to duplicate it.
                let fd = unsafe { BorrowedFd::borrow_raw(n) };
                let dup = fd.try_clone_to_owned().map_err(fail)?;
                let id = super::FileId::of(dup.as_fd()).ok();
                (Kind::Fd(dup), path.to_path_buf(), id)
            }
        };
        Ok(Output {
            path: path.to_path_buf(),
            kind,
            resolved,
            existing,
            opts,
        })
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it resolved at open, links followed and its dir canonical (a
    /// descriptor's path as given).
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }

    /// The identity of the file it named at open, if one existed.
    pub fn existing(&self) -> Option<super::FileId> {
        self.existing
    }

    /// Writes `bytes` to it: see [`Output`].
    pub fn write(&self, bytes: &[u8]) -> Result<(), WriteError> {
        let fail = |source| WriteError {
            path: self.path.clone(),
            source,
        };
        match &self.kind {
            Kind::Replace { dir, name, keep } => {
                replace_at(dir.as_fd(), name, *keep, bytes, &self.opts).map_err(fail)
            }
            Kind::InPlace(held) => in_place(held.as_fd(), bytes).map_err(fail),
            Kind::Fd(fd) => {
                let mut f = File::from(fd.try_clone().map_err(fail)?);
                f.write_all(bytes).and_then(|()| f.flush()).map_err(fail)
            }
        }
    }
}

/// `path` as [`Output::resolved`] has it: links followed as far as they
/// lead, its dir canonical. For comparing an output with the run's inputs.
pub fn resolved_path(path: &Path) -> PathBuf {
    match resolve(path) {
        Ok(Target::Replace(real) | Target::InPlace(real)) => canonical(&real),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

fn canonical(path: &Path) -> PathBuf {
    let p = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    super::fd::canonical_parent(&p)
}

/// Holds the dir a regular file (or a name yet to be made) is replaced in.
/// The dir's path is followed now, before any plugin ran: it is the user's.
fn open_replace(real: &Path) -> io::Result<(Kind, PathBuf, Option<super::FileId>)> {
    let dir_path = parent_of(real);
    let name = real
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?
        .to_os_string();
    let in_dir =
        |e: io::Error| io::Error::new(e.kind(), format!("directory {}: {e}", dir_path.display()));
    let dir = open_dir_following(&dir_path).map_err(in_dir)?;
    nix::unistd::access(
        &dir_path,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .map_err(|e| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("directory {} is not writable: {e}", dir_path.display()),
        )
    })?;
    let (keep, existing) = match nix::sys::stat::fstatat(
        dir.as_fd(),
        name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => (
            Some((st.st_mode & 0o7777, st.st_uid, st.st_gid)),
            Some(super::FileId {
                dev: st.st_dev,
                ino: st.st_ino,
            }),
        ),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "changed while it was opened",
            ));
        }
        Err(nix::errno::Errno::ENOENT) => (None, None),
        Err(e) => return Err(io::Error::from(e)),
    };
    let resolved = canonical(real);
    Ok((Kind::Replace { dir, name, keep }, resolved, existing))
}

fn open_dir_following(path: &Path) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
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
    Output::open(path, WriteOptions::default()).map(drop)
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

/// Writes into an existing non-regular file, reopened through its held
/// `O_PATH` descriptor. A FIFO with no reader is an error, not a hang: it is
/// opened without blocking, then written blocking.
fn in_place(held: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<()> {
    let again = format!("/proc/self/fd/{}", held.as_raw_fd());
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(again)?;
    if super::FileId::of(f.as_fd())? != super::FileId::of(held)? {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not the file opened before the run",
        ));
    }
    let fd = f.as_fd();
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).map_err(io::Error::from)?;
    let blocking = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(blocking)).map_err(io::Error::from)?;
    f.write_all(bytes)
}

/// Writes a new temporary file in `dir` and renames it over `name` there,
/// both relative to the held dir: whatever now stands at `name` (a link a
/// plugin planted included) is replaced, never followed.
fn replace_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    keep: Option<(u32, u32, u32)>,
    bytes: &[u8],
    opts: &WriteOptions,
) -> io::Result<()> {
    let (mut file, tmp) = new_temp_at(dir, opts)?;
    let done = (|| {
        if let Some((mode, uid, gid)) = keep {
            // A replaced file keeps its mode, and its owner where we may set it.
            file.set_permissions(fs::Permissions::from_mode(mode))?;
            let _ = std::os::unix::fs::fchown(&file, Some(uid), Some(gid));
        }
        file.write_all(bytes)?;
        if opts.durable {
            file.sync_all()?;
        }
        nix::fcntl::renameat(dir, tmp.as_os_str(), dir, name).map_err(io::Error::from)
    })();
    if let Err(e) = done {
        let _ = nix::unistd::unlinkat(
            dir,
            tmp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        return Err(e);
    }
    if opts.durable {
        // The rename is only durable once the directory entry is on disk.
        nix::unistd::fsync(dir).map_err(io::Error::from)?;
    }
    Ok(())
}

/// A new, empty file in `dir` under a fresh temporary name, mode
/// `opts.mode` less the umask; the file and its name.
fn new_temp_at(dir: BorrowedFd<'_>, opts: &WriteOptions) -> io::Result<(File, OsString)> {
    for _ in 0..16 {
        let random = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{}{}{}", opts.temp_prefix, &random[..12], opts.temp_suffix);
        let c = std::ffi::CString::new(name.as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid dir fd, a NUL-terminated name and a mode (read
        // because of O_CREAT); the result is a new descriptor we own.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY
                    | libc::O_CREAT
                    | libc::O_EXCL
                    | libc::O_NOFOLLOW
                    | libc::O_NOCTTY
                    | libc::O_CLOEXEC,
                opts.mode as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::AlreadyExists || e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: just returned by openat, owned by nobody else.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        return Ok((file, OsString::from(name)));
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
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
#[path = "write_tests.rs"]
mod tests;
