//! File-system safety: what the crate uses to remove, unmount and write files
//! without ever touching what is not its own.
//!
//! The harness runs as root, next to plugins that mount things. A plain
//! recursive removal of a run's temp dir would follow a mount a plugin left
//! behind and delete the files of whatever was mounted there; a plain
//! "write a temp file and rename it" would replace `/dev/null` with a regular
//! file. This module is the one place that does those operations, carefully:
//!
//! - [`HeldDir`] is a dir the harness made new and holds open: what it
//!   makes, writes and removes in it goes through its descriptor, never
//!   again by a path a plugin may have covered; [`create_new`] makes a file
//!   that did not exist, and [`remove_if_same`] removes it only while it is
//!   still that file;
//! - [`mountinfo`] reads `/proc/self/mountinfo`: which mounts lie under a dir;
//! - [`MountGuard`] watches the mount table and at once detaches a mount
//!   a plugin put over one of the harness's held dirs, saying what it was;
//! - [`unmount_under`] unmounts them, deepest first, each verified to be the
//!   very mount that was listed before it is touched, and made private
//!   first, so the unmount of a plugin's copy of a shared tree never
//!   propagates to the original;
//! - [`remove_tree`] removes a tree without ever crossing into another mount,
//!   to any depth, clearing immutable and append-only flags of its own files;
//! - [`loops_backed_under`] finds the loop devices a plugin left attached to
//!   files of a dir, and [`detach`] lets them go;
//! - [`HeldApart`] holds a file open where no process we start can inherit it;
//! - [`read_bounded`] is the crate's one reader of files it did not just
//!   write: regular files only, never waiting on a FIFO, at most a stated size;
//! - [`write_file`] is the crate's one writer of output files: regular files
//!   are replaced atomically, anything else (a device, a FIFO, a symlink's
//!   target) is written in place; [`Output`] does the same for an output
//!   opened before the work, written later through what was opened.
//!
//! It depends on nothing else in the crate.

mod apart;
mod fd;
mod filler;
mod held;
mod loopdev;
mod mount_guard;
pub mod mountinfo;
mod read;
mod remove;
mod unmount;
mod write;

pub use apart::HeldApart;
pub use filler::{MountFiller, private_namespace};
pub use held::{
    AlreadyThere, FileId, HeldDir, create_dir, create_new, create_new_file, create_symlink,
    remove_if_same,
};
pub use loopdev::{
    LoopDevice, attach, block_device_size, detach, detach_and_wait, detach_deferred, has_marker,
    held_by, hold, is_attached, is_block_device, loop_backing, loops_backed_under,
    sized_loops_backed_under, wait_detached, write_marker,
};
pub use mount_guard::MountGuard;
pub use mountinfo::{Mount, mounts_under};
pub use read::kind_name;
pub use read::{Links, ReadError, list_dir, open_regular, read_bounded, read_text_bounded};
pub use remove::{Removal, empty_held, remove_held, remove_tree};
pub use unmount::{Unmounted, unmount_under, unmount_under_held};
pub use write::{
    Output, WriteError, WriteOptions, check_target, replace_file, resolved_path, write_file,
};
