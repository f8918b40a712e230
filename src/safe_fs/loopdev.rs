//! Loop devices whose backing file lies below a dir. A plugin that attaches
//! an image with `losetup` and never detaches it leaves a kernel device
//! behind, still holding the image (even once the file is removed: the
//! device keeps it open, and `backing_file` reads "… (deleted)"). Every
//! machine has only a few; a run must not use them up. The run's end detaches
//! those backed by files of its own temp dir, after unmounting, and names
//! them: nothing else is touched.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// `LOOP_CLR_FD` (linux/loop.h): detach the backing file.
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;

/// An attached loop device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopDevice {
    /// `/dev/loopN`.
    pub device: PathBuf,
    /// The backing file as the kernel names it (it may have been removed).
    pub backing_file: PathBuf,
}

impl std::fmt::Display for LoopDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (backing file {})",
            self.device.display(),
            self.backing_file.display()
        )
    }
}

/// The attached loop devices whose backing file is at or below `dir`, as
/// `/sys/block` lists them (none where there is no sysfs).
pub fn loops_backed_under(dir: &Path) -> Vec<LoopDevice> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let Ok(blocks) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found: Vec<LoopDevice> = blocks
        .flatten()
        .filter(|b| b.file_name().to_string_lossy().starts_with("loop"))
        .filter_map(|b| {
            let text = std::fs::read_to_string(b.path().join("loop/backing_file")).ok()?;
            let backing = PathBuf::from(backing_path(&text));
            backing.starts_with(&dir).then(|| LoopDevice {
                device: Path::new("/dev").join(b.file_name()),
                backing_file: backing,
            })
        })
        .collect();
    found.sort_by(|a, b| a.device.cmp(&b.device));
    found
}

/// The path in a `backing_file`, without its line end and the kernel's
/// " (deleted)" mark for a removed file.
fn backing_path(text: &str) -> &str {
    let text = text.trim_end_matches('\n');
    text.strip_suffix(" (deleted)").unwrap_or(text)
}

/// Detaches `dev`. A device that is still in use (mounted elsewhere) is
/// marked to detach when it is let go, as `losetup -d` does.
pub fn detach(dev: &LoopDevice) -> io::Result<()> {
    let file = std::fs::File::open(&dev.device)?;
    // SAFETY: LOOP_CLR_FD takes no argument and reads no memory of ours; the
    // descriptor is open for the whole call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), LOOP_CLR_FD as _, 0) };
    match rc {
        0 => Ok(()),
        _ => match io::Error::last_os_error() {
            // Already detached (by the plugin, between the listing and now).
            e if e.raw_os_error() == Some(libc::ENXIO) => Ok(()),
            e => Err(e),
        },
    }
}

/// Whether `path` is a block device node (symlinks followed, as a mount of
/// it would follow them).
pub fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// The file a loop device node is attached to, as the kernel names it, when
/// `path` is a loop device that is attached; `None` for anything else (not a
/// block device, another kind of device, or a loop device with no backing
/// file: detached).
pub fn loop_backing(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    if !is_block_device(path) {
        return None;
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let text = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/loop/backing_file"))
        .ok()?;
    Some(PathBuf::from(backing_path(&text)))
}

/// A loop device's marker: `bytes` written at its start, when `path` is a
/// loop device attached to a file below `root` (the run's own, so that the
/// harness never writes to a device it did not see a plugin make there).
/// A marker is how a check tells that a block-device volume kept its data.
pub fn write_marker(path: &Path, root: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let root = root.canonicalize()?;
    match loop_backing(path) {
        Some(backing) if backing.starts_with(&root) => {
            let mut dev = std::fs::OpenOptions::new().write(true).open(path)?;
            dev.write_all(bytes)?;
            dev.sync_all()
        }
        _ => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a loop device backed by a file of the run's own: the harness writes nothing there",
                path.display()
            ),
        )),
    }
}

/// Whether the first bytes of the device at `path` are `bytes`.
pub fn has_marker(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Read as _;
    let mut head = vec![0; bytes.len()];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backing_paths_lose_the_deleted_mark_and_the_line_end() {
        assert_eq!(backing_path("/tmp/x/img\n"), "/tmp/x/img");
        assert_eq!(backing_path("/tmp/x/img (deleted)\n"), "/tmp/x/img");
        assert_eq!(backing_path("/tmp/a (deleted) b\n"), "/tmp/a (deleted) b");
    }

    #[test]
    fn nothing_is_backed_by_a_fresh_dir() {
        let dir = tempfile::tempdir().unwrap();
        assert!(loops_backed_under(dir.path()).is_empty());
    }
}
