//! Small descriptor-level helpers: opening without following symlinks, and
//! asking the kernel which mount an open file is on.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

fn cstr(name: &std::ffi::OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The mode of every file the harness makes through [`open_at`], before the
/// umask: its owner reads and writes it, others read it.
const NEW_FILE_MODE: libc::c_uint = 0o644;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens `name` in `dir` with `flags` plus `O_NOFOLLOW | O_CLOEXEC`: a
/// symlink is never followed, whoever swapped it in. A file that `O_CREAT`
/// makes gets mode 0644 less the umask: `openat` reads a mode argument
/// whenever `O_CREAT` is set, and without one it would take whatever the
/// register held (a file its own owner may not read back).
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    let name = cstr(name)?;
    loop {
        // SAFETY: a valid dir fd and a NUL-terminated name; the mode is
        // always passed (read only with O_CREAT or O_TMPFILE); the result is
        // a new descriptor we own.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                NEW_FILE_MODE,
            )
        };
        match check(fd) {
            // SAFETY: just returned by openat, owned by nobody else.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Opens the directory `path` itself (its last component never a symlink).
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cstr(path.as_os_str())?;
    // SAFETY: NUL-terminated path; the result is a new descriptor we own.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: just returned by open.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a subdirectory of `dir` for reading, never through a symlink.
pub fn open_subdir(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> io::Result<OwnedFd> {
    open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY)
}

/// Walks `rel` (relative, plain names only) down from `root` with `O_PATH`,
/// following no symlink at any step: what it reaches lies below `root`.
pub fn walk_beneath(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let mut cur = root.try_clone_to_owned()?;
    let mut parts = rel.components().peekable();
    while let Some(part) = parts.next() {
        let Component::Normal(name) = part else {
            if part == Component::CurDir {
                continue;
            }
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let dir_flag = if parts.peek().is_some() {
            libc::O_DIRECTORY
        } else {
            0
        };
        cur = open_at(cur.as_fd(), name, libc::O_PATH | dir_flag)?;
    }
    Ok(cur)
}

/// What statx tells about an open file: its device, and its mount id where
/// the kernel reports one (Linux 5.8+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Where {
    /// `st_dev`.
    pub dev: u64,
    /// The id of the mount the file is on (as in mountinfo).
    pub mount_id: Option<u64>,
    /// The file is the root of a mount (a mount point), where known.
    pub mount_root: Option<bool>,
}

/// Where the open file `fd` lives.
pub fn locate(fd: BorrowedFd<'_>) -> io::Result<Where> {
    // SAFETY: statx fills the zeroed struct; the empty path with
    // AT_EMPTY_PATH means "fd itself".
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the path is a NUL-terminated static string, `fd` is open for
    // the call (borrowed), and `stx` is a valid, writable statx.
    let ret = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS | libc::STATX_MNT_ID,
            &mut stx,
        )
    };
    if ret < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(e);
        }
        let st = nix::sys::stat::fstat(fd).map_err(io::Error::from)?;
        return Ok(Where {
            dev: st.st_dev,
            mount_id: None,
            mount_root: None,
        });
    }
    let dev = libc::makedev(stx.stx_dev_major, stx.stx_dev_minor);
    let mount_id = (stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id);
    let root_bit = libc::STATX_ATTR_MOUNT_ROOT as u64;
    let mount_root =
        (stx.stx_attributes_mask & root_bit != 0).then_some(stx.stx_attributes & root_bit != 0);
    Ok(Where {
        dev,
        mount_id,
        mount_root,
    })
}

/// The entry names of the open dir `dir` (without `.` and `..`), read to the
/// end so no extra descriptor stays open while the caller works on them.
pub fn entries(dir: BorrowedFd<'_>) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt as _;
    let own = open_at(
        dir,
        std::ffi::OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
    )?;
    let mut d = nix::dir::Dir::from_fd(own).map_err(io::Error::from)?;
    let mut names = Vec::new();
    for entry in d.iter() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsString::from_vec(name.to_vec()));
        }
    }
    Ok(names)
}

/// The mode bits (`S_IFMT` included) of `name` in `dir`, not following a symlink.
pub fn kind_at(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> io::Result<libc::mode_t> {
    let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .map_err(io::Error::from)?;
    Ok(st.st_mode & libc::S_IFMT)
}

/// Removes `name` from `dir`: a directory (which must be empty) or anything else.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &std::ffi::OsStr, is_dir: bool) -> io::Result<()> {
    let flag = if is_dir {
        nix::unistd::UnlinkatFlags::RemoveDir
    } else {
        nix::unistd::UnlinkatFlags::NoRemoveDir
    };
    nix::unistd::unlinkat(dir, name, flag).map_err(io::Error::from)
}

/// `path` with its parent dir made canonical and its last component kept as
/// it is: canonical for comparing with mountinfo, without resolving `path`
/// itself if it is a symlink.
pub fn canonical_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            parent
                .canonicalize()
                .map(|p| p.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}
