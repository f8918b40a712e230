//! This machine as the run's host ([`LocalHost`]): plugin calls are local
//! processes ([`LocalProcess`]), and what the checks look at is read here,
//! through `safe_fs` where it has a careful reader, else `std::fs`. Every
//! look that opens a descriptor in a plugin's paths is made inside the
//! descriptor fence ([`fence`]), so that no plugin's clone copies it.

use std::collections::BTreeSet;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{
    DeviceHolder, DirList, FileKind, Held, HoldTarget, Host, LoopDevice, Mount, MountFill,
    PathInfo, Space,
};
use crate::plugin::transport::{LocalProcess, Transport};
use crate::safe_fs;
use dhv_host::fence;

/// The machine the harness runs on: its plugin calls are processes started
/// here, and its disks, mounts and loop devices are this machine's.
#[derive(Debug, Clone)]
pub struct LocalHost {
    transport: Arc<dyn Transport>,
}

impl LocalHost {
    /// This machine, its plugin calls local processes.
    pub fn new() -> LocalHost {
        LocalHost {
            transport: Arc::new(LocalProcess),
        }
    }
}

impl Default for LocalHost {
    fn default() -> Self {
        LocalHost::new()
    }
}

fn entry_of(meta: &std::fs::Metadata) -> PathInfo {
    let ft = meta.file_type();
    let kind = if ft.is_symlink() {
        FileKind::Symlink
    } else if ft.is_dir() {
        FileKind::Dir
    } else if ft.is_file() {
        FileKind::File
    } else if ft.is_block_device() {
        FileKind::BlockDevice
    } else if ft.is_char_device() {
        FileKind::CharDevice
    } else if ft.is_fifo() {
        FileKind::Fifo
    } else {
        FileKind::Socket
    };
    let born = meta.created().ok().or_else(|| {
        let secs = u64::try_from(meta.ctime()).ok()?;
        let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
        Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
    });
    PathInfo {
        kind,
        size: meta.size(),
        blocks: meta.blocks(),
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        id: (meta.dev(), meta.ino()),
        rdev: meta.rdev(),
        born,
    }
}

impl MountFill for safe_fs::MountFiller {
    fn renew(&mut self) -> std::io::Result<()> {
        safe_fs::MountFiller::renew(self)
    }
}

impl Host for LocalHost {
    fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    fn privileged(&self) -> bool {
        nix::unistd::Uid::effective().is_root()
    }

    fn can_refuse(&self) -> bool {
        crate::exec::can_refuse()
    }

    fn can_hold_changes(&self) -> bool {
        crate::exec::Rendezvous::available()
    }

    fn entry(&self, path: &Path) -> std::io::Result<PathInfo> {
        std::fs::symlink_metadata(path).map(|m| entry_of(&m))
    }

    fn entry_followed(&self, path: &Path) -> std::io::Result<PathInfo> {
        std::fs::metadata(path).map(|m| entry_of(&m))
    }

    fn link_target(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn canonical(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    fn list_dir(&self, path: &Path) -> std::io::Result<DirList> {
        fence::within(|| {
            let (mode, names) = safe_fs::list_dir(path)?;
            Ok(DirList { mode, names })
        })
    }

    fn dir_names(&self, dir: &Path, cap: usize) -> std::io::Result<Vec<std::ffi::OsString>> {
        fence::within(|| {
            Ok(std::fs::read_dir(dir)?
                .flatten()
                .take(cap)
                .map(|e| e.file_name())
                .collect())
        })
    }

    fn walk(&self, dir: &Path, cap: usize) -> BTreeSet<String> {
        fence::within(|| walk_tree(dir, cap))
    }

    fn read_small(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
        fence::within(|| {
            safe_fs::read_bounded(path, limit, safe_fs::Links::Refuse).map_err(|e| e.into_io())
        })
    }

    fn space(&self, path: &Path) -> std::io::Result<Space> {
        let st = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
        let fragment = st.fragment_size() as u64;
        Ok(Space {
            total: st.blocks() as u64 * fragment,
            available: st.blocks_available() as u64 * fragment,
        })
    }

    fn set_mode(&self, path: &Path, mode: u32) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }

    fn hold(&self, what: HoldTarget) -> std::io::Result<Held> {
        // On a thread of its own (see safe_fs::HeldApart): a copy of the
        // descriptor in a neighbour check's starting plugin would keep the
        // file open after the check let go of it.
        let held = match what {
            HoldTarget::File(path) => safe_fs::HeldApart::open(move || {
                safe_fs::open_regular(&path, safe_fs::Links::Refuse).map_err(std::io::Error::other)
            })?,
            HoldTarget::Loop(dev) => safe_fs::HeldApart::open(move || safe_fs::hold(&dev))?,
        };
        Ok(Held::new(held))
    }

    fn is_block_device(&self, path: &Path) -> bool {
        fence::within(|| safe_fs::is_block_device(path))
    }

    fn block_device_size(&self, path: &Path) -> std::io::Result<u64> {
        fence::within(|| safe_fs::block_device_size(path))
    }

    fn has_marker(&self, path: &Path, bytes: &[u8]) -> bool {
        fence::within(|| safe_fs::has_marker(path, bytes))
    }

    fn loop_backing(&self, path: &Path) -> Option<PathBuf> {
        safe_fs::loop_backing(path)
    }

    fn loops_backed_under(&self, dir: &Path) -> Vec<LoopDevice> {
        safe_fs::loops_backed_under(dir)
    }

    fn sized_loops_backed_under(&self, dir: &Path) -> Vec<LoopDevice> {
        safe_fs::sized_loops_backed_under(dir)
    }

    fn loop_attached(&self, dev: &LoopDevice) -> bool {
        safe_fs::is_attached(dev)
    }

    fn loop_detach_deferred(&self, path: &Path) -> bool {
        safe_fs::detach_deferred(path)
    }

    fn attach_loop(&self, image: &Path, root: &Path) -> std::io::Result<LoopDevice> {
        fence::within(|| safe_fs::attach(image, root))
    }

    fn detach_loop(&self, dev: &LoopDevice, bound: Duration) -> std::io::Result<()> {
        fence::within(|| safe_fs::detach_and_wait(dev, bound))
    }

    fn mounts(&self) -> std::io::Result<Vec<Mount>> {
        safe_fs::mountinfo::read()
    }

    fn holders_not_the_plugins(&self, dir: &Path) -> (Vec<DeviceHolder>, Vec<String>) {
        let (processes, kernel) = crate::exec::device_holders(&devices_below(dir));
        let others = processes.into_iter().filter(|h| !h.is_this_runs());
        (others.collect(), kernel)
    }

    fn wait_holders_let_go(&self, dir: &Path, bound: Duration) -> Vec<DeviceHolder> {
        crate::exec::wait_let_go(&devices_below(dir), |h| !h.is_this_runs(), bound)
    }

    fn mounts_under(&self, dir: &Path) -> std::io::Result<Vec<Mount>> {
        safe_fs::mounts_under(dir)
    }

    fn unmount_under(&self, dir: &Path) -> std::io::Result<safe_fs::Unmounted> {
        safe_fs::unmount_under(dir)
    }

    fn fill_mount_table(&self, dir: &Path, count: usize) -> std::io::Result<Box<dyn MountFill>> {
        Ok(Box::new(safe_fs::MountFiller::new(dir, count)?))
    }

    fn fill(&self, file: std::fs::File, bytes: u64) -> std::io::Result<()> {
        fence::within(|| fill_file(file, bytes))
    }

    fn device_round_trip(&self, path: &Path, size: u64, write: bool) -> std::io::Result<String> {
        fence::within(|| round_trip(path, size, write))
    }
}

/// Every path below `dir` (relative to it), at most `cap`, never through a symlink.
fn walk_tree(dir: &Path, cap: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            // The entry's own type (d_type): a symlink is never followed.
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(path);
            }
            out.insert(rel);
            if out.len() >= cap {
                return out;
            }
        }
    }
    out
}

/// Fills `file` with `bytes` bytes, allocated or written, and syncs it.
fn fill_file(file: std::fs::File, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is open for the call, and fallocate writes no memory of ours.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, bytes as libc::off_t) };
    if rc == 0 {
        return file.sync_all();
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
        return Err(err);
    }
    let block = vec![0xa5u8; 1 << 20];
    let mut file = file;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        std::io::Write::write_all(&mut file, &block[..n])?;
        left -= n as u64;
    }
    file.sync_all()
}

/// Reads the device at `path` (of `size` bytes), and when `write`, writes a
/// block near its end, reads it back and puts back what was there.
fn round_trip(path: &Path, size: u64, write: bool) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut block = vec![0u8; 4096.min(size as usize)];
    file.read_exact_at(&mut block, 0)?;
    if !write || size < 4096 {
        return Ok(
            "readable, opened for writing (not written: not backed by a file of this run)".into(),
        );
    }
    let at = size - 4096;
    let mut saved = vec![0u8; 4096];
    file.read_exact_at(&mut saved, at)?;
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 13) as u8).collect();
    file.write_all_at(&pattern, at)?;
    file.sync_data()?;
    let mut back = vec![0u8; 4096];
    file.read_exact_at(&mut back, at)?;
    file.write_all_at(&saved, at)?;
    file.sync_data()?;
    if back != pattern {
        return Err(std::io::Error::other("a block written read back different"));
    }
    Ok("readable and writable".into())
}

/// The devices of what lies below `dir`: each loop device backed by a file
/// there, and the device of each file system mounted there and nowhere else
/// (a bind mount of a dir of the host's own disk is no device of the
/// volume's: whoever holds a file of that disk does not hold the volume).
fn devices_below(dir: &Path) -> Vec<crate::exec::HeldDevice> {
    let loops = safe_fs::loops_backed_under(dir)
        .into_iter()
        .filter_map(|l| crate::exec::HeldDevice::at(&l.device, Some(&l.backing_file)).ok());
    let mut devices: Vec<crate::exec::HeldDevice> = loops.collect();
    let below = safe_fs::mounts_under(dir).unwrap_or_default();
    let all = safe_fs::mountinfo::read().unwrap_or_default();
    let only_below = |m: &Mount| {
        all.iter()
            .filter(|o| o.device == m.device)
            .all(|o| below.iter().any(|b| b.id == o.id))
    };
    for m in below.iter().filter(|m| only_below(m)) {
        if !devices.iter().any(|d| d.number == m.device) {
            devices.push(crate::exec::HeldDevice {
                number: m.device,
                node: None,
                backing: None,
            });
        }
    }
    devices
}
