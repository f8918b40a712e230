//! The one parser from what a user names (`mkdir`, a path, or an id in a
//! plugin dir) to a callable plugin, and the options a caller runs it with.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::mkdir::MKDIR_ID;
use super::{ExternalPlugin, HostVolumePlugin, MkdirPlugin, PluginError, Recorder, Timeouts};
use dhv_host::exec::{KillMode, Supervisor};

/// Where a plugin comes from: the built-in, or an executable.
///
/// Exhaustive on purpose: every user of it (the engine's checks among them)
/// must decide what a new kind of plugin means for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// The built-in `mkdir` plugin.
    Builtin,
    /// A plugin executable, by path (its id is the file name, its plugin dir
    /// the parent).
    Executable(PathBuf),
    /// A plugin found in a plugin dir by [`lookup`](Self::lookup): the path
    /// Nomad starts it by, and the file the lookup checked, which is what runs
    /// by default (so that a symlink swapped after the check cannot lead
    /// outside the dir; [`CallOptions::exec_by_path`] runs the path, as Nomad).
    Found {
        /// `<plugin_dir>/<id>` as Go's `filepath.Join` makes it: `argv[0]`.
        executable: PathBuf,
        /// The file confined to the plugin dir, symlinks resolved.
        checked: PathBuf,
        /// The id it was looked up by.
        id: OsString,
        /// The plugin dir, as given (`DHV_PLUGIN_DIR`).
        plugin_dir: PathBuf,
    },
}

/// How calls of a plugin are made: what every call of it shares, from which
/// [`ExternalPlugin`] describes each call (an [`exec::Call`](dhv_host::exec::Call))
/// in one place. The built-in ignores what only applies to a process (kill
/// mode, working directory, extra variables, ...).
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Time limits (default: Nomad's).
    pub timeouts: Timeouts,
    /// How an overrunning call is killed (default: its whole process group).
    pub kill_mode: Option<KillMode>,
    /// The working directory, when not ours.
    pub cwd: Option<PathBuf>,
    /// Variables added to Nomad's environment. Not what Nomad does: the
    /// conformance checks use it to diagnose plugins that depend on `PATH`.
    pub extra_env: Vec<(String, String)>,
    /// Keeps every raw call.
    pub recorder: Option<Recorder>,
    /// Runs every call under this supervisor, so its owner can cancel them
    /// (default: one of the plugin's own).
    pub supervisor: Option<Supervisor>,
    /// When a descendant keeps stdout or stderr open after the plugin
    /// exits, keeps reading for up to this long (then kills it), so that the
    /// answer is judged on what Nomad, which waits for EOF, would read; the
    /// call is still recorded as a leak. Default: zero (killed at the
    /// wait-delay).
    pub follow: std::time::Duration,
    /// Refuses every call a family of system calls (they fail with `EPERM`,
    /// see [`Refusal`](dhv_host::exec::Refusal)), as some hosts do: every mount
    /// without `CAP_SYS_ADMIN`, say. Not what Nomad does: the conformance
    /// checks use it to see a plugin's failure paths. Default: none.
    pub refuse: Option<dhv_host::exec::Refusal>,
    /// Watches every call's changes of state (see
    /// [`Call::at_changes`](dhv_host::exec::Call::at_changes)): held for a
    /// burst of racing calls, recorded, or a crash at one. Not what Nomad
    /// does: the concurrency and crash checks use it to meet a plugin's
    /// races and crash windows by design. Default: not.
    pub at_changes: Option<dhv_host::exec::AtChanges>,
    /// A plugin found by lookup runs by its path in the plugin dir, as
    /// Nomad runs it (see [`ExternalPlugin::exec_by_path`]); default: the
    /// file the lookup checked.
    pub exec_by_path: bool,
    /// The plugin file pinned for the run: looked at before every call
    /// (see [`PluginPin`](super::PluginPin)); default: not pinned.
    pub pin: Option<std::sync::Arc<super::PluginPin>>,
    /// Where an executable's processes run (see
    /// [`ExternalPlugin::with_transport`]); default: a local process.
    pub transport: Option<Arc<dyn super::transport::Transport>>,
}

impl CallOptions {
    /// Calls under `timeouts`, everything else as [`Default`] has it: the
    /// start every caller builds its options from.
    pub fn new(timeouts: Timeouts) -> CallOptions {
        CallOptions {
            timeouts,
            ..CallOptions::default()
        }
    }

    /// Every call runs under `supervisor` (`None`: one of the plugin's own).
    pub fn under(mut self, supervisor: impl Into<Option<Supervisor>>) -> CallOptions {
        self.supervisor = supervisor.into();
        self
    }

    /// Every raw call is kept in `recorder` too.
    pub fn recorded_in(mut self, recorder: &Recorder) -> CallOptions {
        self.recorder = Some(recorder.clone());
        self
    }

    /// Every call first looks at the pinned plugin file (`None`: not pinned).
    pub fn pinned(mut self, pin: Option<Arc<super::PluginPin>>) -> CallOptions {
        self.pin = pin;
        self
    }

    /// A pipe held open after the plugin exits is read for up to `follow`.
    pub fn following(mut self, follow: std::time::Duration) -> CallOptions {
        self.follow = follow;
        self
    }
}

impl PluginSource {
    /// `mkdir` means the built-in; anything else is a path. Nothing is checked
    /// here, so that a file that cannot run is reported by the call that tries.
    pub fn parse(arg: impl AsRef<OsStr>) -> PluginSource {
        let arg = arg.as_ref();
        if arg == MKDIR_ID {
            PluginSource::Builtin
        } else {
            PluginSource::Executable(PathBuf::from(arg))
        }
    }

    /// Plugin `id` as a Nomad client finds it: the built-in `mkdir`, or an
    /// executable of `plugin_dir`, confined to it (see [`ExternalPlugin::lookup`]).
    pub fn lookup(
        plugin_dir: Option<&Path>,
        id: impl AsRef<OsStr>,
    ) -> Result<PluginSource, PluginError> {
        let id = id.as_ref();
        if id == MKDIR_ID {
            return Ok(PluginSource::Builtin);
        }
        let Some(dir) = plugin_dir else {
            return Err(PluginError::NoSuchPlugin {
                id: id.to_os_string(),
            });
        };
        let found = ExternalPlugin::lookup(dir, id)?;
        Ok(PluginSource::Found {
            executable: found.executable().to_path_buf(),
            checked: found.program().to_path_buf(),
            id: id.to_os_string(),
            plugin_dir: dir.to_path_buf(),
        })
    }

    /// Whether this is the in-process built-in.
    pub fn is_builtin(&self) -> bool {
        matches!(self, PluginSource::Builtin)
    }

    /// The executable's path, if it is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            PluginSource::Builtin => None,
            PluginSource::Executable(path) => Some(path),
            PluginSource::Found { executable, .. } => Some(executable),
        }
    }

    /// A plugin that makes its calls with `opts`.
    pub fn open(&self, opts: &CallOptions) -> Arc<dyn HostVolumePlugin> {
        let plugin = match self {
            PluginSource::Builtin => return Arc::new(MkdirPlugin),
            PluginSource::Executable(path) => ExternalPlugin::from_path(path),
            PluginSource::Found {
                executable,
                checked,
                id,
                plugin_dir,
            } => ExternalPlugin::found(id, executable, checked, plugin_dir),
        };
        Arc::new(plugin.with_options(opts.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mkdir_is_the_builtin_and_anything_else_a_path() {
        assert_eq!(PluginSource::parse("mkdir"), PluginSource::Builtin);
        assert_eq!(
            PluginSource::parse("./mkdir"),
            PluginSource::Executable(PathBuf::from("./mkdir"))
        );
        assert!(
            PluginSource::parse("mkdir")
                .open(&CallOptions::default())
                .is_builtin()
        );
        let ext = PluginSource::parse("/bin/true").open(&CallOptions::default());
        assert!(!ext.is_builtin());
        assert_eq!(ext.id(), "true");
        assert_eq!(ext.plugin_dir(), Some(Path::new("/bin")));
    }

    #[test]
    fn lookup_finds_the_builtin_without_a_dir_and_nothing_else() {
        assert_eq!(
            PluginSource::lookup(None, "mkdir"),
            Ok(PluginSource::Builtin)
        );
        assert!(matches!(
            PluginSource::lookup(None, "other"),
            Err(PluginError::NoSuchPlugin { .. })
        ));
    }
}
