//! A check's own corner of the run's temp dir: its dir, the volumes dir inside
//! it, listings of what is there, and canary files that show whether anything
//! was touched.
//!
//! Every dir here is made new and held open ([`HeldDir`]); every file the
//! harness writes is made new in a dir reached from a held one without
//! following a symlink ([`plant`]), and removed by name only while it is
//! still the file that was made ([`Planted::remove`]). A plugin that mounts
//! or links something over a path later redirects none of it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::conformance::host::Host;
use crate::safe_fs::{self, FileId, HeldDir};

/// One check's dirs.
#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    /// The check's own dir; the volumes dir and any canaries live below it.
    pub dir: PathBuf,
    /// DHV_VOLUMES_DIR for this check.
    pub volumes: PathBuf,
    /// Every dir the harness made here, held: the volumes dir, the check's
    /// dir, then those made on request ([`Sandbox::make_dirs`]).
    held: Arc<Mutex<Vec<Arc<HeldDir>>>>,
}

impl Sandbox {
    /// Makes the new dir `name` in the run's temp dir `root`, and its volumes
    /// dir. A name that exists (a plugin made it) is an error naming it.
    pub fn new(root: &HeldDir, name: &str) -> std::io::Result<Sandbox> {
        let dir = Arc::new(root.make_subdir(name.as_ref())?);
        let volumes = Arc::new(dir.make_subdir("volumes".as_ref())?);
        Ok(Sandbox {
            dir: dir.path().to_path_buf(),
            volumes: volumes.path().to_path_buf(),
            held: Arc::new(Mutex::new(vec![volumes, dir])),
        })
    }

    fn held(&self) -> Vec<Arc<HeldDir>> {
        crate::lock(&self.held).clone()
    }

    /// Makes `rel` (plain names) below the check's dir, each level new and
    /// held; a level that exists already is used only if the harness made it.
    /// Returns its path.
    pub fn make_dirs(&self, rel: &Path) -> std::io::Result<PathBuf> {
        Ok(self.make_held(rel)?.path().to_path_buf())
    }

    /// The same, and the path of the last level through its descriptor
    /// ([`HeldDir::through_fd`]): for what writes there by path while the
    /// check runs, so that a mount over the check's dir redirects nothing.
    pub fn make_dirs_through_fd(&self, rel: &Path) -> std::io::Result<PathBuf> {
        Ok(self.make_held(rel)?.through_fd())
    }

    fn make_held(&self, rel: &Path) -> std::io::Result<Arc<HeldDir>> {
        let mut held = self.held();
        let mut cur = held[1].clone();
        for name in rel.iter() {
            let path = cur.path().join(name);
            cur = match held.iter().find(|h| h.path() == path) {
                Some(h) => h.clone(),
                None => {
                    let made = Arc::new(cur.make_subdir(name)?);
                    held.push(made.clone());
                    crate::lock(&self.held).push(made.clone());
                    made
                }
            };
        }
        Ok(cur)
    }

    /// Writes a canary file with unique content into `dir`, which must
    /// resolve to a dir inside the run's temp dir `root`; the file is made
    /// new there, in a dir reached from one of this sandbox's held dirs (or
    /// the root) without following a symlink. Recorded in `planted`.
    pub fn plant(
        &self,
        root: &Arc<HeldDir>,
        planted: &Planted,
        owner: u64,
        dir: &Path,
        name: &str,
    ) -> std::io::Result<PathBuf> {
        // A block-device volume (a loop device backed by a file of the run)
        // gets its canary at the start of the device: the canary's path is
        // then the device's, and the device node is never removed.
        if safe_fs::is_block_device(dir) {
            safe_fs::write_marker(dir, root.path(), canary_text(dir).as_bytes()).map_err(|e| {
                match e.kind() {
                    std::io::ErrorKind::PermissionDenied => std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        OutsideSandbox(dir.to_path_buf()),
                    ),
                    _ => e,
                }
            })?;
            return Ok(dir.to_path_buf());
        }
        let reached = self.reach(root, dir)?;
        let path = dir.join(name);
        let at = reached.at.as_fd();
        let id = match safe_fs::create_new(at, name.as_ref(), canary_text(&path).as_bytes()) {
            Ok(id) => id,
            // The harness's own file (two volumes given one path): there as
            // it was written, as good as new.
            Err(e)
                if e.kind() == std::io::ErrorKind::AlreadyExists
                    && planted.holds(&reached.at, name.as_ref()) =>
            {
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(std::io::Error::new(e.kind(), safe_fs::AlreadyThere(path)));
            }
            Err(e) => return Err(e),
        };
        planted.add(reached.made(owner, name, id, path.clone())?);
        Ok(path)
    }

    /// The held dir `dir` lies deepest in (of this sandbox's, or the run's
    /// `root`), the way from it, and `dir` opened from it without following
    /// a symlink; a dir that resolves outside the run's temp dir is refused.
    fn reach(&self, root: &Arc<HeldDir>, dir: &Path) -> std::io::Result<Reached> {
        let resolved = dir.canonicalize()?;
        if root.relative(&resolved).is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                OutsideSandbox(resolved),
            ));
        }
        let mut anchors = self.held();
        anchors.push(root.clone());
        let (anchor, rel) = anchors
            .iter()
            .filter_map(|a| Some((a.clone(), a.relative(&resolved)?.to_path_buf())))
            .min_by_key(|(_, rel)| rel.components().count())
            .expect("the root holds it");
        let at = anchor.open_below(&rel)?;
        Ok(Reached { anchor, rel, at })
    }

    /// A new symbolic link `name` in `dir` pointing at `target` (never
    /// followed: it is what a task could leave in its volume), made as
    /// [`plant`](Self::plant) makes a canary and recorded in `planted`, so
    /// that it is removed by name whatever the check does.
    pub fn plant_link(
        &self,
        root: &Arc<HeldDir>,
        planted: &Planted,
        owner: u64,
        dir: &Path,
        name: &str,
        target: &Path,
    ) -> std::io::Result<PathBuf> {
        let made = |at: BorrowedFd<'_>| {
            safe_fs::create_symlink(at, name.as_ref(), target).map(|id| ((), id))
        };
        let ((), path) = self.make_new(root, planted, owner, dir, name, made)?;
        Ok(path)
    }

    /// A new directory `name` in `dir`, as a task could make in its volume;
    /// made as [`plant`](Self::plant) makes a canary, recorded in `planted`
    /// and removed (when empty) at the end of the check. Returns its path.
    pub fn plant_dir(
        &self,
        root: &Arc<HeldDir>,
        planted: &Planted,
        owner: u64,
        dir: &Path,
        name: &str,
    ) -> std::io::Result<PathBuf> {
        let made = |at: BorrowedFd<'_>| safe_fs::create_dir(at, name.as_ref()).map(|id| ((), id));
        let ((), path) = self.make_new(root, planted, owner, dir, name, made)?;
        Ok(path)
    }

    /// A new, empty file `name` in `dir` for a check to fill, made as
    /// [`plant`](Self::plant) makes a canary (a name that exists is an
    /// error, never written through) and recorded in `planted`, so that it
    /// is removed by name whatever the check does.
    pub fn create_file(
        &self,
        root: &Arc<HeldDir>,
        planted: &Planted,
        owner: u64,
        dir: &Path,
        name: &str,
    ) -> std::io::Result<std::fs::File> {
        let made = |at: BorrowedFd<'_>| safe_fs::create_new_file(at, name.as_ref());
        let (file, _) = self.make_new(root, planted, owner, dir, name, made)?;
        Ok(file)
    }

    /// Makes `name` new in `dir` (reached as [`reach`](Self::reach) reaches
    /// it) with `make`, and records it in `planted` as `owner`'s: what
    /// `make` gave, and the path. A name that exists is an
    /// [`AlreadyThere`](safe_fs::AlreadyThere) error naming it.
    fn make_new<T>(
        &self,
        root: &Arc<HeldDir>,
        planted: &Planted,
        owner: u64,
        dir: &Path,
        name: &str,
        make: impl FnOnce(BorrowedFd<'_>) -> std::io::Result<(T, FileId)>,
    ) -> std::io::Result<(T, PathBuf)> {
        let reached = self.reach(root, dir)?;
        let path = dir.join(name);
        let (made, id) = make(reached.at.as_fd()).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                std::io::Error::new(e.kind(), safe_fs::AlreadyThere(path.clone()))
            }
            _ => e,
        })?;
        planted.add(reached.made(owner, name, id, path.clone())?);
        Ok((made, path))
    }
}

/// A dir of the run reached from a held dir without following a symlink
/// ([`Sandbox::reach`]): where the harness makes its files.
struct Reached {
    /// The held dir it was reached from, and the way from there.
    anchor: Arc<HeldDir>,
    rel: PathBuf,
    /// The dir itself, open.
    at: std::os::fd::OwnedFd,
}

impl Reached {
    /// The record of the file `name` (identity `id`, shown as `path`) that
    /// `owner` just made here.
    fn made(
        self,
        owner: u64,
        name: &str,
        id: FileId,
        path: PathBuf,
    ) -> std::io::Result<PlantedFile> {
        Ok(PlantedFile {
            owner,
            dir_id: FileId::of(self.at.as_fd())?,
            anchor: self.anchor,
            rel: self.rel,
            name: name.into(),
            id,
            path,
        })
    }
}

/// A dir that resolves outside the run's sandbox: nothing is written there.
#[derive(Debug, thiserror::Error)]
#[error("{} is outside the run's sandbox: the harness writes nothing there", .0.display())]
pub(crate) struct OutsideSandbox(pub PathBuf);

/// A file the harness wrote, and how to find it again without a path.
#[derive(Debug)]
pub(crate) struct PlantedFile {
    /// The context that wrote it ([`Planted::owner`]).
    owner: u64,
    /// The held dir it was reached from, and the way from there.
    anchor: Arc<HeldDir>,
    rel: PathBuf,
    /// The dir it is in, and its name and identity there.
    dir_id: FileId,
    name: OsString,
    id: FileId,
    /// Its path, for messages.
    path: PathBuf,
}

impl PlantedFile {
    /// Removes it if it is still there, the very file that was made, in the
    /// very dir it was made in. `Err` says why it was left.
    fn remove(&self) -> Result<(), String> {
        let fail = |why: String| format!("{}: {why}", self.path.display());
        let dir = match self.anchor.open_below(&self.rel) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(fail(e.to_string())),
        };
        if FileId::of(dir.as_fd()).ok() != Some(self.dir_id) {
            // Its dir was removed or replaced: the file went with it, or is
            // no longer where the harness can reach it by name.
            return Ok(());
        }
        safe_fs::remove_if_same(dir.as_fd(), &self.name, self.id)
            .map(|_| ())
            .map_err(|e| fail(e.to_string()))
    }
}

/// Every file the harness wrote in a run that is not removed yet.
#[derive(Debug, Default)]
pub(crate) struct Planted {
    files: Mutex<Vec<PlantedFile>>,
    owners: std::sync::atomic::AtomicU64,
}

impl Planted {
    /// A new owner's token, for the files one context writes.
    pub fn owner(&self) -> u64 {
        self.owners
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    fn add(&self, file: PlantedFile) {
        crate::lock(&self.files).push(file);
    }

    /// Whether `name` in the open dir `dir` is a file the harness wrote
    /// there and has not removed.
    fn holds(&self, dir: &std::os::fd::OwnedFd, name: &std::ffi::OsStr) -> bool {
        let (Ok(dir_id), Ok((id, _))) = (FileId::of(dir.as_fd()), FileId::at(dir.as_fd(), name))
        else {
            return false;
        };
        crate::lock(&self.files)
            .iter()
            .any(|f| f.dir_id == dir_id && f.name == name && f.id == id)
    }

    /// Removes the file of `owner` made at `path`, if it is still as the
    /// harness made it (a check done with a file before its end).
    pub fn remove_path(&self, owner: u64, path: &Path) -> Result<(), String> {
        let file = {
            let mut all = crate::lock(&self.files);
            let Some(i) = all.iter().position(|f| f.owner == owner && f.path == path) else {
                return Ok(());
            };
            all.remove(i)
        };
        file.remove()
    }

    /// Removes the files of `owner` (all with `None`) that are still as the
    /// harness made them; what could not be removed, one line each.
    pub fn remove(&self, owner: Option<u64>) -> Vec<String> {
        let files: Vec<PlantedFile> = {
            let mut all = crate::lock(&self.files);
            let (mine, rest) = std::mem::take(&mut *all)
                .into_iter()
                .partition(|f| owner.is_none_or(|o| f.owner == o));
            *all = rest;
            mine
        };
        // Newest first: a file in a dir the harness made goes before its dir.
        files
            .iter()
            .rev()
            .filter_map(|f| f.remove().err())
            .collect()
    }
}

/// The bytes of the canary planted at `path`.
pub(crate) fn canary_bytes(path: &Path) -> Vec<u8> {
    canary_text(path).into_bytes()
}

/// The content of a canary file: its own path, so a moved or swapped file is caught.
pub(crate) fn canary_text(path: &Path) -> String {
    format!("dhv-conform canary {}\n", path.display())
}

/// Whether the canary at `path` is still there, unchanged, as `host` sees it.
pub(crate) fn canary_intact(host: &dyn Host, path: &Path) -> bool {
    if host.is_block_device(path) {
        return host.has_marker(path, canary_text(path).as_bytes());
    }
    // Never through a link, never waiting on a FIFO, never past its own size:
    // whatever was put in the canary's place is evidence, not a hang.
    let want = canary_text(path);
    host.read_small(path, want.len() as u64)
        .is_ok_and(|t| t == want.as_bytes())
}

/// Every entry below `dir` (relative paths, `/`-separated, symlinks not
/// followed), capped so a runaway plugin cannot make us walk forever.
pub(crate) fn listing(host: &dyn Host, dir: &Path) -> BTreeSet<String> {
    const CAP: usize = 20_000;
    host.walk(dir, CAP)
}
