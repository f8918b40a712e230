//! How an executable plugin is found: by id in a plugin dir, as Nomad 2.0.5
//! looks it up (and starts it), or by path.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::{ExternalPlugin, PluginError};

impl ExternalPlugin {
    /// Finds plugin `id` in `plugin_dir` as Nomad 2.0.5 does (`os.Root` of
    /// the dir, `Stat` of the id in it, then `helper.IsExecutable`): an
    /// empty or absolute id, a missing entry, and one that leads outside the
    /// dir (`..`, a symlink, an absolute symlink even to a file inside, more
    /// than 8 symlinks, as Go's `os.Root` has it) are "no such
    /// plugin" (CVE-2026-7474); a
    /// directory (or a symlink to one) and an entry without an execute bit
    /// are "not executable". Anything else with an execute bit passes, a FIFO
    /// or a device too: starting it fails with `EACCES`, as Nomad's
    /// `fork/exec` does.
    ///
    /// It is started as `<plugin_dir>/<id>` (Go's `filepath.Join`: `argv[0]`,
    /// and `$0` of a script), and by default what runs is the file checked
    /// here, symlinks resolved, not that path looked up again at exec time
    /// (Nomad's way, which a symlink swapped in between can lead outside the
    /// dir); [`exec_by_path`](Self::exec_by_path) runs the path, as Nomad.
    pub fn lookup(plugin_dir: &Path, id: impl AsRef<OsStr>) -> Result<ExternalPlugin, PluginError> {
        let id = id.as_ref();
        let no_such = || PluginError::NoSuchPlugin {
            id: id.to_os_string(),
        };
        let dir = plugin_dir.canonicalize().map_err(|_| no_such())?;
        if !dir.is_dir() {
            return Err(no_such());
        }
        let resolved = super::go_root::stat_in_root(&dir, id).ok_or_else(no_such)?;
        let meta = std::fs::metadata(&resolved).map_err(|_| no_such())?;
        use std::os::unix::fs::PermissionsExt;
        if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
            return Err(PluginError::NotExecutable {
                id: id.to_os_string(),
            });
        }
        // Nomad refuses a relative plugin dir; a relative one here is the
        // same dir from where we are (symlinks in it kept, as configured).
        let given = std::path::absolute(plugin_dir).unwrap_or_else(|_| plugin_dir.to_path_buf());
        let executable = go_join(&given, id);
        Ok(ExternalPlugin::new(id, executable, resolved, given))
    }

    /// A plugin found by a lookup of `id` in `plugin_dir`: started as
    /// `executable` (`argv[0]`), running the file the lookup checked, `checked`.
    pub(crate) fn found(
        id: &OsStr,
        executable: &Path,
        checked: &Path,
        plugin_dir: &Path,
    ) -> ExternalPlugin {
        ExternalPlugin::new(
            id,
            executable.to_path_buf(),
            checked.to_path_buf(),
            plugin_dir.to_path_buf(),
        )
    }

    /// A plugin given by path (for `check` and `run`): its id is the file name,
    /// its plugin dir the parent. Nothing is checked here, so that a file that
    /// cannot run is reported by the call that tries.
    pub fn from_path(path: &Path) -> ExternalPlugin {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let id = absolute.file_name().unwrap_or_default().to_os_string();
        let dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
        ExternalPlugin::new(&id, absolute.clone(), absolute, dir)
    }
}
/// Go's `filepath.Join(dir, id)` of any bytes: cleaning only looks at `/`
/// and `.`, so each byte is carried as the char of the same value (Latin-1)
/// through [`go_os::join`](super::go_os::join) and back, unchanged.
fn go_join(dir: &Path, id: &OsStr) -> PathBuf {
    let latin1 = |b: &[u8]| b.iter().map(|&b| char::from(b)).collect::<String>();
    let joined = super::go_os::join(&latin1(dir.as_os_str().as_bytes()), &latin1(id.as_bytes()));
    let bytes: Vec<u8> = joined.chars().map(|c| c as u8).collect();
    PathBuf::from(OsString::from_vec(bytes))
}
