//! The one host seam: how the checks run plugin calls and look at the
//! machine around them ([`Host`]).
//!
//! A check sees the run through its `ctx`, and the machine through
//! `ctx.host()`: what is at a path, a bounded walk of a dir, a small file's
//! bytes, the mount table, loop devices and their backing files, free space,
//! and the few things a check does to the host around a plugin on purpose
//! (hold a file open, take away what a reboot takes away, fill the mount
//! table). The plugin's calls go through the host's
//! [`Transport`], which the engine hands
//! to every plugin handle of the run. [`LocalHost`] (this machine, through
//! `safe_fs` and `exec`) is the one implementation; a plugin run inside a
//! container or on a remote node is one more, with the same checks.
//!
//! A call's processes are the transport's to watch: what they left running,
//! the pipes they held and the changes they made come back in the call's
//! outcome, so a check sees processes through its calls.
//!
//! Where the line is: what the harness makes and removes in its own temp
//! dir (its held dirs and the files it plants there, in `context/sandbox.rs`)
//! and the run's end (`teardown.rs`, `leftovers.rs`: unmount, detach,
//! remove) stay on `safe_fs`, the layer whose point is removing only what is
//! the harness's own; the run's conditions in the report (`evidence.rs`:
//! cores, load) are this machine's. Everything a check or the context
//! *observes* goes through [`Host`]. A host elsewhere would also need the
//! harness's own files made there (the sandbox), which is the next step of
//! such a host, not of this seam.
//!
//! Values come back as owned plain data ([`PathInfo`], [`Space`], and the
//! mount-table and loop-device records [`Mount`], [`LoopDevice`],
//! [`Unmounted`]).

mod local;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use local::LocalHost;

pub use crate::exec::DeviceHolder;
pub use crate::plugin::transport::Transport;
pub use crate::safe_fs::{LoopDevice, Mount, Unmounted};

/// What kind of file is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only when not followed).
    Symlink,
    /// A block device node.
    BlockDevice,
    /// A character device node.
    CharDevice,
    /// A FIFO.
    Fifo,
    /// A socket.
    Socket,
}

/// What is at a path: its kind, size and owner, as `stat` tells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathInfo {
    /// Its kind.
    pub kind: FileKind,
    /// Its size in bytes.
    pub size: u64,
    /// The 512-byte blocks it has on disk.
    pub blocks: u64,
    /// Its permission bits (`0o7777` mask).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// The device it lies on, and its inode: what tells two names of one file.
    pub id: (u64, u64),
    /// For a device node, the device it is.
    pub rdev: u64,
    /// When it was made (its birth time, or its change time where the file
    /// system keeps none).
    pub born: Option<SystemTime>,
}

impl PathInfo {
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }

    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
}

/// The space of the file system a path lies on, as `df` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Its size (blocks × fragment size).
    pub total: u64,
    /// What an unprivileged writer may still use (the blocks kept in
    /// reserve are the administrator's).
    pub available: u64,
}

/// A dir's permission bits and entry names (sorted, without `.` and `..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirList {
    /// Its permission bits (`0o7777` mask).
    pub mode: u32,
    /// Its entries' names.
    pub names: Vec<OsString>,
}

/// What a check holds open while a plugin call runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum HoldTarget {
    /// A regular file (never through a symlink).
    File(PathBuf),
    /// A loop device.
    Loop(LoopDevice),
}

/// A file held open by [`Host::hold`]: closed (and waited for) on drop.
pub struct Held(#[allow(dead_code)] Box<dyn Send + Sync>);

impl Held {
    /// Holds whatever `guard` is until dropped.
    pub fn new(guard: impl Send + Sync + 'static) -> Held {
        Held(Box::new(guard))
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held(..)")
    }
}

/// Mounts that fill a node's mount table ([`Host::fill_mount_table`]),
/// unmounted when dropped.
pub trait MountFill: Send + Sync {
    /// Unmounts every filler and mounts it again: the fillers then follow
    /// every mount made since in the table.
    fn renew(&mut self) -> std::io::Result<()>;
}

/// The machine a run's plugin calls run on, and everything the checks look
/// at there (see the [module docs](self)). Shared by every check of a run
/// (`Arc<dyn Host>`); a path is as the host names it.
pub trait Host: Send + Sync + std::fmt::Debug {
    /// What runs the plugin's calls: every plugin handle of the run is opened
    /// with it.
    fn transport(&self) -> Arc<dyn Transport>;

    /// Whether the harness has the host's privileges (root).
    fn privileged(&self) -> bool;

    /// Whether its plugin calls can be refused a family of system calls
    /// (`CallOptions::refuse`): a verdict that needs a refusal skips where not.
    fn can_refuse(&self) -> bool;

    /// Whether its plugin calls can be held at their changes of state for a
    /// burst of racing calls (`AtChanges::Hold`); where not, a burst's calls
    /// are only started aligned.
    fn can_hold_changes(&self) -> bool;

    // ----- paths -----

    /// What is at `path`, a final symlink not followed (`lstat`).
    fn entry(&self, path: &Path) -> std::io::Result<PathInfo>;

    /// What `path` leads to, symlinks followed (`stat`).
    fn entry_followed(&self, path: &Path) -> std::io::Result<PathInfo>;

    /// Whether something is at `path`, symlinks followed (as `Path::exists`).
    fn exists(&self, path: &Path) -> bool {
        self.entry_followed(path).is_ok()
    }

    /// Whether a dir is at `path`, symlinks followed.
    fn is_dir(&self, path: &Path) -> bool {
        self.entry_followed(path).is_ok_and(|e| e.is_dir())
    }

    /// Where the symlink at `path` points.
    fn link_target(&self, path: &Path) -> std::io::Result<PathBuf>;

    /// `path` with every symlink resolved.
    fn canonical(&self, path: &Path) -> std::io::Result<PathBuf>;

    /// A dir's mode and names, never through a symlink at its last component.
    fn list_dir(&self, path: &Path) -> std::io::Result<DirList>;

    /// Up to `cap` names of `dir`'s entries, in the order the dir gives them
    /// (a symlink to a dir is followed, as `read_dir`).
    fn dir_names(&self, dir: &Path, cap: usize) -> std::io::Result<Vec<OsString>>;

    /// Every entry below `dir`, as relative `/`-separated paths (symlinks not
    /// followed), at most `cap` of them.
    fn walk(&self, dir: &Path, cap: usize) -> BTreeSet<String>;

    /// A regular file's bytes, at most `limit` of them (more is an error),
    /// never through a symlink and never waiting on a FIFO.
    fn read_small(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>>;

    /// The space of the file system `path` lies on.
    fn space(&self, path: &Path) -> std::io::Result<Space>;

    /// Sets the permission bits of `path` (a dir of the harness's own).
    fn set_mode(&self, path: &Path, mode: u32) -> std::io::Result<()>;

    /// Holds `what` open where no plugin process can inherit it, until the
    /// [`Held`] is dropped.
    fn hold(&self, what: HoldTarget) -> std::io::Result<Held>;

    // ----- block devices, loop devices, mounts -----

    /// Whether `path` is a block device node (symlinks followed).
    fn is_block_device(&self, path: &Path) -> bool;

    /// The size of the block device at `path`.
    fn block_device_size(&self, path: &Path) -> std::io::Result<u64>;

    /// Whether the first bytes of the device at `path` are `bytes` (read past
    /// any cache).
    fn has_marker(&self, path: &Path, bytes: &[u8]) -> bool;

    /// The file the loop device at `path` is attached to.
    fn loop_backing(&self, path: &Path) -> Option<PathBuf>;

    /// The loop devices attached to files below `dir`.
    fn loops_backed_under(&self, dir: &Path) -> Vec<LoopDevice>;

    /// The same, less those of size 0 (which hold no volume).
    fn sized_loops_backed_under(&self, dir: &Path) -> Vec<LoopDevice>;

    /// Whether `dev` is still attached.
    fn loop_attached(&self, dev: &LoopDevice) -> bool;

    /// Whether the detach of the loop device at `path` is only deferred to
    /// its last close (see `safe_fs::detach_deferred`).
    fn loop_detach_deferred(&self, path: &Path) -> bool;

    /// Attaches a loop device to `image`, a file below `root`.
    fn attach_loop(&self, image: &Path, root: &Path) -> std::io::Result<LoopDevice>;

    /// Detaches `dev`, and waits up to `bound` for it to be gone.
    fn detach_loop(&self, dev: &LoopDevice, bound: Duration) -> std::io::Result<()>;

    /// Every mount of the host, in mount-table order.
    fn mounts(&self) -> std::io::Result<Vec<Mount>>;

    /// The processes, other than the plugin's own (this run's calls and
    /// what they started), that hold a device of what lies below `dir`: a
    /// loop device backed by a file there, or a file system mounted there
    /// (a descriptor on the device, a file or working dir on it, its backing
    /// file, a mount of it in another mount namespace), and the kernel's
    /// holders of those devices, in words. A host that cannot tell names none.
    fn holders_not_the_plugins(&self, dir: &Path) -> (Vec<DeviceHolder>, Vec<String>) {
        let _ = dir;
        (Vec::new(), Vec::new())
    }

    /// Waits, up to `bound`, until no process but the plugin's holds a
    /// device of what lies below `dir` (see
    /// [`holders_not_the_plugins`](Self::holders_not_the_plugins)); those
    /// still holding one then.
    fn wait_holders_let_go(&self, dir: &Path, bound: Duration) -> Vec<DeviceHolder> {
        let _ = (dir, bound);
        Vec::new()
    }

    /// The mounts at or below `dir`.
    fn mounts_under(&self, dir: &Path) -> std::io::Result<Vec<Mount>>;

    /// Unmounts every mount at or below `dir`, deepest first.
    fn unmount_under(&self, dir: &Path) -> std::io::Result<Unmounted>;

    /// `count` empty mounts below `dir` (the harness's own, new), so that the
    /// mount table is a node's size.
    fn fill_mount_table(&self, dir: &Path, count: usize) -> std::io::Result<Box<dyn MountFill>>;

    /// Fills the harness's own file `file` with `bytes` (allocated where the
    /// file system can, else written): what a task writing into a volume does.
    fn fill(&self, file: std::fs::File, bytes: u64) -> std::io::Result<()>;

    /// Reads the first block of the device at `path` and, when `write` says
    /// so, writes and restores its last block of `size`: what a task does
    /// with a block-device volume. In words, for the finding.
    fn device_round_trip(&self, path: &Path, size: u64, write: bool) -> std::io::Result<String>;
}

/// The host every run uses unless told otherwise.
pub fn local() -> Arc<dyn Host> {
    Arc::new(LocalHost::new())
}
