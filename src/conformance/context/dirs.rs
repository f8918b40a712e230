//! A check's dirs as it sees them ([`Dirs`]): its own dir and volumes dir,
//! dirs made below them, and the files it writes there, each made new and
//! removed at the end of the check (see [`sandbox`](super::sandbox) for how).
//! Each is written and removed inside the descriptor fence ([`fence`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dhv_host::fence;

use super::{Sandbox, Shared};

/// One check's dirs and the files it writes: its [`Sandbox`], and its token
/// for the files it writes in the run ([`Planted`](super::Planted)).
pub(crate) struct Dirs {
    /// The check's own dirs.
    pub(super) sandbox: Sandbox,
    /// The run, for its temp dir (every file is written inside it) and the
    /// record of the files written there.
    run: Arc<Shared>,
    /// Its token for the files it writes: [`remove_canaries`](Self::remove_canaries)
    /// removes them.
    owner: u64,
}

impl Dirs {
    /// Makes the new dir `name` in the run's temp dir, and its volumes dir.
    pub(super) fn new(run: Arc<Shared>, name: &str) -> std::io::Result<Dirs> {
        Ok(Dirs {
            sandbox: Sandbox::new(&run.root_dir, name)?,
            owner: run.planted.owner(),
            run,
        })
    }

    /// The check's own dir; its volumes dir and any canaries live below it.
    pub fn dir(&self) -> &Path {
        &self.sandbox.dir
    }

    /// DHV_VOLUMES_DIR for this check.
    pub fn volumes(&self) -> &Path {
        &self.sandbox.volumes
    }

    /// The run's temp dir, which holds every check's dir.
    pub fn run_root(&self) -> &Path {
        &self.run.root
    }

    /// Makes `rel` (plain names) below the check's dir (see [`Sandbox::make_dirs`]).
    pub fn make_dirs(&self, rel: &Path) -> std::io::Result<PathBuf> {
        self.sandbox.make_dirs(rel)
    }

    /// Makes `rel` below the check's dir, as [`make_dirs`](Self::make_dirs),
    /// and returns a path that reaches it through the harness's descriptor
    /// (see [`Sandbox::make_dirs_through_fd`]).
    pub fn make_dirs_through_fd(&self, rel: &Path) -> std::io::Result<PathBuf> {
        self.sandbox.make_dirs_through_fd(rel)
    }

    /// Writes a canary file with unique content into `dir`; returns its path.
    /// Only inside the run's sandbox (resolved, symlinks and all): a path a
    /// plugin returned may lead anywhere, and nothing outside is ours to write.
    /// The file is made new: a name that exists (a hard link to a file
    /// elsewhere, say) is never written through, and is an error whose
    /// kind is `AlreadyExists`.
    pub fn plant(&self, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
        fence::within(|| {
            self.sandbox
                .plant(&self.run.root_dir, &self.run.planted, self.owner, dir, name)
        })
    }

    /// Leaves a symbolic link `name` in `dir` pointing at `target`, as a
    /// task could leave one in its volume; only inside the run's sandbox,
    /// made new as [`plant`](Self::plant) makes a file, and removed at the
    /// end of the check. Returns its path.
    pub fn plant_link(&self, dir: &Path, name: &str, target: &Path) -> std::io::Result<PathBuf> {
        fence::within(|| {
            self.sandbox.plant_link(
                &self.run.root_dir,
                &self.run.planted,
                self.owner,
                dir,
                name,
                target,
            )
        })
    }

    /// Makes the new dir `name` in `dir`, as a task could make one in its
    /// volume (see [`Sandbox::plant_dir`]); removed, when empty, at the end
    /// of the check. Returns its path.
    pub fn plant_dir(&self, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
        fence::within(|| {
            self.sandbox
                .plant_dir(&self.run.root_dir, &self.run.planted, self.owner, dir, name)
        })
    }

    /// Makes a new file `name` in `dir` (see [`Sandbox::create_file`]) and
    /// hands it to `write`, on a blocking thread (a write may take long),
    /// all inside the descriptor fence ([`fence`]): the file is closed before
    /// a plugin is started again, so no plugin's clone keeps a copy of it (a
    /// copy keeps a volume's mount busy). The file is removed at the end of
    /// the check, or earlier by [`remove_file`](Self::remove_file).
    pub async fn write_new_in<R: Send + 'static>(
        &self,
        dir: &Path,
        name: &str,
        write: impl FnOnce(std::fs::File) -> std::io::Result<R> + Send + 'static,
    ) -> std::io::Result<R> {
        let (sandbox, run, owner) = (self.sandbox.clone(), self.run.clone(), self.owner);
        let (dir, name) = (dir.to_path_buf(), name.to_string());
        tokio::task::spawn_blocking(move || {
            fence::within(|| {
                let file = sandbox.create_file(&run.root_dir, &run.planted, owner, &dir, &name)?;
                write(file)
            })
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
    }

    /// Removes a file this check made (by name, only while it is the file
    /// that was made).
    pub fn remove_file(&self, path: &Path) -> Result<(), String> {
        fence::within(|| self.run.planted.remove_path(self.owner, path))
    }

    /// Removes the files this check wrote that are still the files it made
    /// (by name, in the dirs it made them in).
    pub(super) fn remove_canaries(&self) {
        let _ = fence::within(|| self.run.planted.remove(Some(self.owner)));
    }
}
