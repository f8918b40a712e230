//! Directories the harness made and holds open.
//!
//! A path is looked up again at every use, so whatever a plugin mounts or
//! links over it later (a bind mount over the run's temp dir, a check's dir
//! pre-made as a symlink, a decoy mounted over `TMPDIR`) would redirect a
//! write or a removal made by path. A [`HeldDir`] is made new (`mkdirat`,
//! which never follows a symlink and fails on a name that exists), opened at
//! once without following a symlink, checked to be the very dir just made
//! (device and inode), and from then on used through its descriptor only:
//! what it holds is made and removed relative to it.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::fd;

/// A file's identity: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileId {
    /// The identity of the open file `fd`.
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<FileId> {
        let st = nix::sys::stat::fstat(fd).map_err(io::Error::from)?;
        Ok(FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }

    /// The identity of `name` in `dir` (a symlink itself, not its target),
    /// with its `S_IFMT` bits.
    pub fn at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(FileId, libc::mode_t)> {
        let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(io::Error::from)?;
        Ok((
            FileId {
                dev: st.st_dev,
                ino: st.st_ino,
            },
            st.st_mode & libc::S_IFMT,
        ))
    }
}

/// A directory this process made, held open (see the module docs).
#[derive(Debug)]
pub struct HeldDir {
    /// Where it was made, as given (for messages and for the plugin).
    path: PathBuf,
    /// The same, its parent made canonical when it was made.
    canonical: PathBuf,
    fd: OwnedFd,
    id: FileId,
    /// The dir it was made in, held too, and its name there.
    parent: Arc<OwnedFd>,
    name: OsString,
    /// The guard that watches for mounts over it, when it is guarded: the
    /// dirs made in it are guarded too.
    guard: Option<super::MountGuard>,
}

/// A name the harness was to make already exists: made by someone else.
#[derive(Debug, thiserror::Error)]
#[error("{} already exists (not made by the harness): nothing was made or written there", .0.display())]
pub struct AlreadyThere(pub PathBuf);

impl HeldDir {
    /// Makes a new dir `prefix` + random suffix in the temp dir (`TMPDIR`),
    /// mode 0700.
    pub fn make_temp(prefix: &str) -> io::Result<HeldDir> {
        HeldDir::make_temp_in(&std::env::temp_dir(), prefix)
    }

    /// Makes a new dir `prefix` + random suffix in `dir`, mode 0700.
    pub fn make_temp_in(dir: &Path, prefix: &str) -> io::Result<HeldDir> {
        let tmp = dir.to_path_buf();
        let parent = Arc::new(fd::open_dir(&tmp)?);
        let canonical_tmp = tmp.canonicalize()?;
        for _ in 0..16 {
            // Six letters and digits, as mkdtemp and the report's redaction
            // have them.
            const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
            let random = uuid::Uuid::new_v4().into_bytes();
            let suffix: String = random[..6]
                .iter()
                .map(|b| char::from(CHARS[usize::from(*b) % CHARS.len()]))
                .collect();
            let name = format!("{prefix}{suffix}");
            match make(
                &parent,
                &tmp,
                &canonical_tmp,
                OsStr::new(&name),
                0o700,
                None,
            ) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                made => return made,
            }
        }
        Err(io::Error::from(io::ErrorKind::AlreadyExists))
    }

    /// Makes the new dir `name` in this one (mode 0755 less the umask). A
    /// name that exists, whatever it is, is an [`AlreadyThere`] error.
    pub fn make_subdir(&self, name: &OsStr) -> io::Result<HeldDir> {
        let parent = Arc::new(self.fd.try_clone()?);
        make(
            &parent,
            &self.path,
            &self.canonical,
            name,
            0o755,
            self.guard.as_ref(),
        )
    }

    /// This dir, guarded by `guard` from now on, and every dir made in it
    /// ([`make_subdir`](Self::make_subdir)) too: a mount a plugin puts over
    /// one of them is detached at the guard's next look (see
    /// [`MountGuard`](super::MountGuard)).
    pub fn guarded_by(mut self, guard: &super::MountGuard) -> HeldDir {
        guard.guard(&self.canonical, &self.parent, &self.name);
        self.guard = Some(guard.clone());
        self
    }

    /// Where it was made.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it was made, its parent canonical (as mountinfo names it).
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    /// Its descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A path that reaches this very dir through its descriptor
    /// (`/proc/self/fd/N`), for code that can only take a path (the
    /// manager's state): whatever a plugin mounts or links over [`path`]
    /// later, what is made below this one lands here. Valid while this
    /// value lives, and in this process only.
    ///
    /// [`path`]: Self::path
    pub fn through_fd(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Its identity.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The dir it was made in, and its name there.
    pub fn parent(&self) -> (BorrowedFd<'_>, &OsStr) {
        (self.parent.as_fd(), &self.name)
    }

    /// Whether its name in the dir it was made in still names it.
    pub fn still_named(&self) -> bool {
        FileId::at(self.parent.as_fd(), &self.name).is_ok_and(|(id, _)| id == self.id)
    }

    /// The part of `path` (canonical, or as given) below this dir, if it
    /// lies below it.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.canonical)
            .or_else(|_| path.strip_prefix(&self.path))
            .ok()
    }

    /// Opens the dir `rel` (plain names, relative) below this one, walking
    /// from its descriptor and following no symlink at any step.
    pub fn open_below(&self, rel: &Path) -> io::Result<OwnedFd> {
        let mut cur = self.fd.try_clone()?;
        for part in rel.components() {
            match part {
                Component::Normal(name) => cur = fd::open_subdir(cur.as_fd(), name)?,
                Component::CurDir => {}
                _ => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
            }
        }
        Ok(cur)
    }
}

fn make(
    parent: &Arc<OwnedFd>,
    parent_path: &Path,
    parent_canonical: &Path,
    name: &OsStr,
    mode: libc::mode_t,
    guard: Option<&super::MountGuard>,
) -> io::Result<HeldDir> {
    let path = parent_path.join(name);
    let c = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid dir fd and a NUL-terminated name; mkdirat reads both.
    if unsafe { libc::mkdirat(parent.as_raw_fd(), c.as_ptr(), mode) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::AlreadyExists {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                AlreadyThere(path),
            ));
        }
        return Err(e);
    }
    let made = FileId::at(parent.as_fd(), name)?.0;
    let fd = fd::open_subdir(parent.as_fd(), name)?;
    let id = FileId::of(fd.as_fd())?;
    if id != made {
        // Swapped between the mkdir and the open: not ours.
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            AlreadyThere(path),
        ));
    }
    let canonical = parent_canonical.join(name);
    if let Some(guard) = guard {
        guard.guard(&canonical, parent, &name.to_os_string());
    }
    Ok(HeldDir {
        canonical,
        path,
        fd,
        id,
        parent: parent.clone(),
        name: name.to_os_string(),
        guard: guard.cloned(),
    })
}

/// Creates the new regular file `name` in `dir` (`O_CREAT|O_EXCL|O_NOFOLLOW`,
/// mode 0644 less the umask) holding `bytes`; its identity. A name that
/// exists (a hard link, a symlink, anything) is never opened: the error's
/// kind is `AlreadyExists`.
pub fn create_new(dir: BorrowedFd<'_>, name: &OsStr, bytes: &[u8]) -> io::Result<FileId> {
    use std::io::Write as _;
    let (mut file, id) = create_new_file(dir, name)?;
    file.write_all(bytes)?;
    Ok(id)
}

/// Creates `name` in `dir`, new and empty, as [`create_new`] does, and hands
/// back the open file (to fill it) with its identity.
pub fn create_new_file(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(std::fs::File, FileId)> {
    let file = fd::open_at(
        dir,
        name,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY,
    )?;
    let id = FileId::of(file.as_fd())?;
    Ok((std::fs::File::from(file), id))
}

/// Makes the new symbolic link `name` in `dir`, pointing at `target`
/// (which is never followed or looked at); its identity (the link's own).
/// A name that exists is an error whose kind is `AlreadyExists`.
pub fn create_symlink(dir: BorrowedFd<'_>, name: &OsStr, target: &Path) -> io::Result<FileId> {
    let to = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let at = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: two NUL-terminated strings and a valid dir fd; symlinkat reads them.
    if unsafe { libc::symlinkat(to.as_ptr(), dir.as_raw_fd(), at.as_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileId::at(dir, name)?.0)
}

/// Makes the new directory `name` in `dir` (mode 0755 before the umask;
/// `mkdirat` never follows a symlink); its identity. A name that exists is
/// an error whose kind is `AlreadyExists`.
pub fn create_dir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<FileId> {
    nix::sys::stat::mkdirat(dir, name, nix::sys::stat::Mode::from_bits_truncate(0o755))
        .map_err(io::Error::from)?;
    Ok(FileId::at(dir, name)?.0)
}

/// Removes `name` from `dir` if it is still the regular file, symbolic
/// link or empty dir `id` (made by [`create_new`], [`create_symlink`] or
/// [`create_dir`]); whether it was removed. Anything else by that name is left alone.
pub fn remove_if_same(dir: BorrowedFd<'_>, name: &OsStr, id: FileId) -> io::Result<bool> {
    match FileId::at(dir, name) {
        Ok((now, libc::S_IFREG | libc::S_IFLNK)) if now == id => {
            fd::unlink_at(dir, name, false)?;
            Ok(true)
        }
        // A dir made by `create_dir`: removed only when empty (what is in
        // it is no file of the harness's any more, and is left).
        Ok((now, libc::S_IFDIR)) if now == id => match fd::unlink_at(dir, name, true) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Ok(false),
            Err(e) => Err(e),
        },
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subdir_is_made_new_and_a_name_that_exists_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let parent = Arc::new(fd::open_dir(&root).unwrap());
        let held = make(&parent, &root, &root, OsStr::new("run"), 0o700, None).unwrap();
        std::os::unix::fs::symlink(&outside, held.path().join("check")).unwrap();
        let err = held.make_subdir(OsStr::new("check")).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        let ok = held.make_subdir(OsStr::new("other")).unwrap();
        assert!(ok.still_named());
        assert!(
            held.open_below(Path::new("check")).is_err(),
            "no symlink followed"
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_path_through_the_descriptor_reaches_the_dir_whatever_took_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let parent = Arc::new(fd::open_dir(&root).unwrap());
        let held = make(&parent, &root, &root, OsStr::new("check"), 0o700, None).unwrap();
        // Its name now leads to another dir (as a mount over it would).
        std::fs::rename(held.path(), root.join("moved")).unwrap();
        std::fs::create_dir(held.path()).unwrap();
        std::fs::write(held.through_fd().join("state.json"), b"{}").unwrap();
        assert!(root.join("moved/state.json").exists());
        assert_eq!(std::fs::read_dir(held.path()).unwrap().count(), 0);
    }

    #[test]
    fn create_new_never_writes_through_an_existing_name() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside-file");
        std::fs::write(&outside, "outside").unwrap();
        std::fs::hard_link(&outside, tmp.path().join("canary")).unwrap();
        let dir = fd::open_dir(tmp.path()).unwrap();
        let err = create_new(dir.as_fd(), OsStr::new("canary"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside");
        let id = create_new(dir.as_fd(), OsStr::new("new"), b"x").unwrap();
        assert!(!remove_if_same(dir.as_fd(), OsStr::new("canary"), id).unwrap());
        assert!(remove_if_same(dir.as_fd(), OsStr::new("new"), id).unwrap());
        assert!(outside.exists());
    }

    #[test]
    fn a_dir_made_new_is_removed_only_while_it_is_the_same_and_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = fd::open_dir(tmp.path()).unwrap();
        std::fs::create_dir(tmp.path().join("there")).unwrap();
        let err = create_dir(dir.as_fd(), OsStr::new("there")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        let id = create_dir(dir.as_fd(), OsStr::new("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/kept"), "x").unwrap();
        assert!(!remove_if_same(dir.as_fd(), OsStr::new("sub"), id).unwrap());
        assert!(tmp.path().join("sub/kept").exists());
        assert!(!remove_if_same(dir.as_fd(), OsStr::new("there"), id).unwrap());
        std::fs::remove_file(tmp.path().join("sub/kept")).unwrap();
        assert!(remove_if_same(dir.as_fd(), OsStr::new("sub"), id).unwrap());
        assert!(!tmp.path().join("sub").exists());
        assert!(tmp.path().join("there").exists());
    }

    #[test]
    fn a_new_file_has_the_mode_it_means_whatever_the_register_held() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let dir = fd::open_dir(tmp.path()).unwrap();
        create_new(dir.as_fd(), OsStr::new("canary"), b"x").unwrap();
        let mode = std::fs::metadata(tmp.path().join("canary"))
            .unwrap()
            .permissions()
            .mode();
        // 0644 less the umask: its owner reads it back; nothing else is set.
        assert_eq!(mode & 0o600, 0o600, "mode {mode:o}");
        assert_eq!(mode & 0o7133, 0, "mode {mode:o}");
    }
}
