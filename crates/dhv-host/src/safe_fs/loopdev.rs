//! Loop devices whose backing file lies below a dir. A plugin that attaches
//! an image with `losetup` and never detaches it leaves a kernel device
//! behind, still holding the image (even once the file is removed: the
//! device keeps it open, and `backing_file` reads "… (deleted)"). Every
//! machine has only a few; a run must not use them up. The run's end detaches
//! those backed by files of its own temp dir, after unmounting, and names
//! them: nothing else is touched.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// `LOOP_CLR_FD` (linux/loop.h): detach the backing file.
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
/// `LOOP_SET_FD` (linux/loop.h): attach the file open at the argument.
const LOOP_SET_FD: libc::c_ulong = 0x4C00;
/// `LOOP_CTL_GET_FREE` (linux/loop.h), on `/dev/loop-control`: the number of
/// a free loop device (made when there is none).
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;

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

/// Where sysfs keeps every loop device: `/sys/block/loopN` is a symlink to
/// `loopN` here, and a probe that goes through the link costs twice as much.
const LOOP_NODES: &str = "/sys/devices/virtual/block";

/// The dir of the loop nodes in sysfs, open (`/sys/block` where the first
/// is missing); `None` where there is no sysfs.
fn loop_nodes() -> Option<OwnedFd> {
    [LOOP_NODES, "/sys/block"]
        .iter()
        .find_map(|d| super::fd::open_dir(Path::new(d)).ok())
}

/// The file the loop device `name` is attached to, as the kernel names it
/// (its `loop/backing_file`, which only an attached device has), read from
/// the loop nodes' dir `nodes` by one `openat`.
fn backing_at(nodes: BorrowedFd<'_>, name: &OsStr) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut rel = name.to_os_string();
    rel.push("/loop/backing_file");
    // Only the last component is never followed: `loopN` is a symlink in
    // the `/sys/block` fallback, as the kernel made it.
    let file = super::fd::open_at(nodes, &rel, libc::O_RDONLY).ok()?;
    let mut text = String::new();
    std::fs::File::from(file).read_to_string(&mut text).ok()?;
    Some(PathBuf::from(backing_path(&text)))
}

/// The devices of `(name, backing file)` whose file lies at or below `dir`,
/// in device order.
fn under(dir: &Path, attached: impl Iterator<Item = (OsString, PathBuf)>) -> Vec<LoopDevice> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut found: Vec<LoopDevice> = attached
        .filter(|(_, backing)| backing.starts_with(&dir))
        .map(|(name, backing_file)| LoopDevice {
            device: Path::new("/dev").join(name),
            backing_file,
        })
        .collect();
    found.sort_by(|a, b| a.device.cmp(&b.device));
    found
}

/// The attached loop devices whose backing file is at or below `dir`, as
/// sysfs lists them (none where there is no sysfs).
///
/// Every loop node is probed (a host may have a hundred and more, nearly
/// all unbound): only a bound device has `loop/backing_file`, and a bound
/// one may have no size (an image attached while empty), so no cheaper list
/// (`/proc/partitions` leaves out devices of size 0) would do. Each probe is
/// one `openat` from the nodes' dir, held open for the scan.
pub fn loops_backed_under(dir: &Path) -> Vec<LoopDevice> {
    let Some(nodes) = loop_nodes() else {
        return Vec::new();
    };
    let Ok(names) = super::fd::entries(nodes.as_fd()) else {
        return Vec::new();
    };
    let attached = names
        .into_iter()
        .filter(|n| n.as_encoded_bytes().starts_with(b"loop"))
        .filter_map(|name| Some((name.clone(), backing_at(nodes.as_fd(), &name)?)));
    under(dir, attached)
}

/// The attached loop devices of some size whose backing file is at or below
/// `dir`: those a volume can live on (a device of size 0 holds no file
/// system). One read of `/proc/partitions`, which lists every block device
/// of some size, then one of `backing_file` for each loop device there: a
/// tenth of [`loops_backed_under`]'s cost on a host with a hundred unbound
/// loop nodes. For what a run must never leave behind (a device of size 0
/// included), [`loops_backed_under`]; where `/proc/partitions` cannot be
/// read, what that finds (devices of size 0 too: more, never fewer).
pub fn sized_loops_backed_under(dir: &Path) -> Vec<LoopDevice> {
    let Ok(partitions) = std::fs::read_to_string("/proc/partitions") else {
        return loops_backed_under(dir);
    };
    let Some(nodes) = loop_nodes() else {
        return Vec::new();
    };
    let attached = sized_loop_names(&partitions).filter_map(|name| {
        let name = OsString::from(name);
        Some((name.clone(), backing_at(nodes.as_fd(), &name)?))
    });
    under(dir, attached)
}

/// The loop devices (`loopN`, not their partitions) of `/proc/partitions`'
/// text whose size is not 0.
fn sized_loop_names(partitions: &str) -> impl Iterator<Item = &str> {
    partitions.lines().filter_map(|line| {
        // major minor #blocks name
        let mut fields = line.split_whitespace();
        let blocks = fields.nth(2)?;
        let name = fields.next()?;
        let number = name.strip_prefix("loop")?;
        let whole = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        (whole && blocks != "0").then_some(name)
    })
}

/// The path in a `backing_file`, without its line end and the kernel's
/// " (deleted)" mark for a removed file.
fn backing_path(text: &str) -> &str {
    let text = text.trim_end_matches('\n');
    text.strip_suffix(" (deleted)").unwrap_or(text)
}

/// Attaches a free loop device to the regular file `image`, which must lie
/// below `root` (the run's own temp dir: the harness attaches nothing else),
/// as `losetup` would, without autoclear: the device stays until detached
/// (the run's end detaches every device backed by a file of its temp dir).
/// The checks use it to leave what a call killed between `losetup` and
/// `mount` leaves.
pub fn attach(image: &Path, root: &Path) -> io::Result<LoopDevice> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(image)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", image.display()),
        ));
    }
    // Judged by what was opened, not by the path (a link swapped in after a look).
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let root = root.canonicalize()?;
    if !opened.starts_with(&root) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} lies outside {}", opened.display(), root.display()),
        ));
    }
    let control = std::fs::File::open("/dev/loop-control")?;
    // Another process may take the free device between the two calls: ask
    // again (on a host attaching many at once, as a test run of loop plugins
    // does, ten tries were seen to lose every race).
    for _ in 0..100 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and reads no memory of ours.
        let n = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE as _, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let device = PathBuf::from(format!("/dev/loop{n}"));
        let node = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&device)?;
        // SAFETY: LOOP_SET_FD takes a descriptor by value; both stay open for the call.
        let rc = unsafe { libc::ioctl(node.as_raw_fd(), LOOP_SET_FD as _, file.as_raw_fd()) };
        if rc == 0 {
            return Ok(LoopDevice {
                device,
                backing_file: opened,
            });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) {
            return Err(e);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::ResourceBusy,
        "every free loop device was taken by another process first",
    ))
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

/// Detaches `dev` and waits, up to `bound`, until the kernel shows it
/// detached: a device held open elsewhere is only marked to detach, and the
/// kernel may clear it later, from a work queue. A caller that acts on "no
/// longer attached" (a reboot, then attach again) needs the clearing done,
/// not scheduled: a `losetup -j` made in between still names the device.
pub fn detach_and_wait(dev: &LoopDevice, bound: std::time::Duration) -> io::Result<()> {
    detach(dev)?;
    wait_detached(dev, std::time::Instant::now() + bound)
}

/// Waits, until `deadline`, for the kernel to show `dev` detached (see
/// [`detach_and_wait`]): for a caller that detaches several devices first,
/// then waits for all of them under one bound.
pub fn wait_detached(dev: &LoopDevice, deadline: std::time::Instant) -> io::Result<()> {
    let started = std::time::Instant::now();
    let bound = deadline.saturating_duration_since(started);
    while is_attached(dev) {
        if std::time::Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "still attached {} s after the detach ({})",
                    bound.as_secs(),
                    held_by(dev)
                ),
            ));
        }
        // The kernel tells no one when a deferred clear is done: look again.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

/// Who holds `dev` open, in words: "held by PID 12 (blkid /dev/loop3;
/// another program) has /dev/loop3 open", or "something holds it open" when
/// no holder is seen (it let go between the look and now, or it is in a
/// process this one cannot read).
pub fn held_by(dev: &LoopDevice) -> String {
    let Ok(device) = crate::exec::HeldDevice::at(&dev.device, Some(&dev.backing_file)) else {
        return "something holds it open".into();
    };
    let (processes, kernel) = crate::exec::device_holders(&[device]);
    let words: Vec<String> = processes
        .iter()
        .map(ToString::to_string)
        .chain(kernel)
        .collect();
    match words.is_empty() {
        true => "something holds it open".into(),
        false => format!("held by {}", words.join("; ")),
    }
}

/// Whether `dev` is still attached to its backing file: detached once the
/// kernel names no backing file, or another one (the freed device attached
/// anew by someone else).
pub fn is_attached(dev: &LoopDevice) -> bool {
    let name = dev.device.file_name().unwrap_or_default();
    loop_nodes()
        .and_then(|nodes| backing_at(nodes.as_fd(), name))
        .is_some_and(|backing| backing == dev.backing_file)
}

/// Opens the loop device `dev` read-only and keeps it open for as long as
/// the file lives, as a probe or a backup reading the device does: the
/// kernel then defers its detach until the file is closed. Nothing is read
/// or written. Refused unless the node opened is a loop device still
/// attached to `dev`'s backing file (a device freed and reused by someone
/// else since it was listed is not held).
pub fn hold(dev: &LoopDevice) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    /// The block major of loop devices (linux/major.h).
    const LOOP_MAJOR: u64 = 7;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(&dev.device)?;
    let meta = file.metadata()?;
    let major = libc::major(meta.rdev()) as u64;
    if !meta.file_type().is_block_device() || major != LOOP_MAJOR {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a loop device", dev.device.display()),
        ));
    }
    if !is_attached(dev) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} is no longer attached to {}",
                dev.device.display(),
                dev.backing_file.display()
            ),
        ));
    }
    Ok(file)
}

/// Whether `path` is a block device node (symlinks followed, as a mount of
/// it would follow them).
pub fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// The size in bytes of the block device at `path` (`BLKGETSIZE64`); the
/// device is opened without waiting (`O_NONBLOCK`), so a FIFO or a tape put in
/// its place is an error, not a hang.
pub fn block_device_size(path: &Path) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt as _;
    // Non-blocking: opening must not wait (a tape, a FIFO planted in its place).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let mut size: u64 = 0;
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    // SAFETY: the fd is open for the call and `size` is a valid u64 to write.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64 as _, &mut size) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
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

/// Whether the detach of the loop device at `path` is only deferred: the
/// device is told to go at its last close (its `autoclear` flag, which a
/// detach of a busy device sets, as `mount -o loop` does) and no mount holds
/// it. What keeps it then is an opener that is not a mount (a probe, a
/// neighbour's starting process), or the kernel's work queue that clears it
/// after the last close: on a loaded host either can take its time, and
/// neither is the doing of whoever asked it to go.
pub fn detach_deferred(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !is_block_device(path) {
        return false;
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let autoclear =
        std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/loop/autoclear"))
            .is_ok_and(|t| t.trim() == "1");
    let mounted =
        super::mountinfo::read().map_or(true, |all| all.iter().any(|m| m.device == (major, minor)));
    autoclear && !mounted
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
///
/// Read past the page cache (`O_DIRECT`): a loop device number is reused when
/// a plugin attaches its image again (after a reboot, say), and the cache of
/// the device node may still hold what the number's last file had at its
/// start, another volume's marker. Where `O_DIRECT` is refused, the cache of
/// the node is dropped before a plain read.
pub fn has_marker(path: &Path, bytes: &[u8]) -> bool {
    read_head(path, bytes.len()).is_ok_and(|head| head == bytes)
}

/// The first `len` bytes of the device at `path`, as its backing store holds them.
fn read_head(path: &Path, len: usize) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(mut dev) => {
            // O_DIRECT reads whole, aligned blocks into an aligned buffer.
            const BLOCK: usize = 4096;
            let size = len.div_ceil(BLOCK).max(1) * BLOCK;
            let mut buffer = AlignedBlocks::new(size);
            dev.read_exact(buffer.as_mut_slice())?;
            Ok(buffer.as_mut_slice()[..len].to_vec())
        }
        Err(_) => {
            let mut dev = std::fs::File::open(path)?;
            // SAFETY: a plain advice call on a descriptor this function owns.
            unsafe { libc::posix_fadvise(dev.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            let mut head = vec![0; len];
            dev.read_exact(&mut head)?;
            Ok(head)
        }
    }
}

/// A zeroed buffer aligned to 4096 bytes, as `O_DIRECT` wants it.
struct AlignedBlocks {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AlignedBlocks {
    fn new(size: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(size, 4096).expect("a valid layout");
        // SAFETY: the layout has a non-zero size (at least one block).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBlocks { ptr, layout }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBlocks {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
#[path = "loopdev_tests.rs"]
mod tests;
