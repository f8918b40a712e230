//! What a volume really is, measured on the host: a block device and its size,
//! a mounted filesystem (its type, its size, the device behind it), or a plain
//! directory; and the mode and owner of its root. The `volume.*` checks hold
//! a plugin's answer and claims against these facts.

use std::path::{Path, PathBuf};

use super::host::{FileKind, Host, Mount};

/// What is at a volume's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A block device node.
    BlockDevice {
        /// Its size in bytes (`BLKGETSIZE64`).
        size: u64,
        /// Its device number.
        rdev: u64,
    },
    /// A mount point: the root of a mounted filesystem, or a bind mount.
    Mount {
        /// The filesystem type (`ext4`, `tmpfs`, …).
        fs_type: String,
        /// The mount's source (`/dev/loop3`, `tmpfs`).
        source: String,
        /// The filesystem's size as `df` shows it (blocks × fragment size).
        fs_bytes: u64,
        /// The size of the block device behind it, when there is one and the
        /// filesystem is the volume's own (see `own`): only then is it the
        /// volume's size.
        device_bytes: Option<u64>,
        /// The filesystem is the volume's own: the whole of one (its root
        /// mounted), on another device than the filesystem the volume's
        /// parent dir lies on. `false` for a bind mount of a directory (of
        /// the work filesystem, say) or of the parent's own filesystem: it
        /// has no size of its own, and is judged by what the plugin claims.
        own: bool,
    },
    /// A directory that is not a mount point.
    Directory {
        /// The type of the filesystem it lies on.
        fs_type: String,
        /// The size `statfs` gives for it (a project quota shows here).
        fs_bytes: u64,
        /// The size `statfs` gives for its parent directory: the same as
        /// `fs_bytes` when nothing limits this directory on its own.
        parent_fs_bytes: u64,
    },
    /// Anything else (a file, a socket).
    Other,
}

/// The facts of one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFacts {
    /// The path measured.
    pub path: PathBuf,
    /// What is there.
    pub kind: Kind,
    /// Permission bits of the root (`0o7777` mask).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

impl VolumeFacts {
    /// Measures what is at `path` on `host` (symlinks followed, as Nomad
    /// mounts the path it is given).
    pub fn measure(host: &dyn Host, path: &Path) -> std::io::Result<VolumeFacts> {
        let meta = host.entry_followed(path)?;
        let kind = match meta.kind {
            FileKind::BlockDevice => Kind::BlockDevice {
                size: host.block_device_size(path)?,
                rdev: meta.rdev,
            },
            FileKind::Dir => directory_kind(host, path)?,
            _ => Kind::Other,
        };
        Ok(VolumeFacts {
            path: path.to_path_buf(),
            kind,
            mode: meta.mode,
            uid: meta.uid,
            gid: meta.gid,
        })
    }

    /// In words, for a message: `a block device of 50000000 bytes`. Nothing
    /// that differs between machines or runs (device names, the host's
    /// filesystem) is named, so that snapshots hold.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::BlockDevice { size, .. } => format!("a block device of {size} bytes"),
            Kind::Mount { own: false, .. } => "a bind mount with no size of its own".into(),
            Kind::Mount {
                fs_type,
                fs_bytes,
                device_bytes: Some(dev),
                ..
            } => {
                format!("filesystem {fs_type} of {fs_bytes} bytes on a block device of {dev} bytes")
            }
            Kind::Mount {
                fs_type, fs_bytes, ..
            } => format!("filesystem {fs_type} of {fs_bytes} bytes"),
            Kind::Directory {
                fs_bytes,
                parent_fs_bytes,
                ..
            } if fs_bytes != parent_fs_bytes => {
                format!("a directory limited to {fs_bytes} bytes")
            }
            Kind::Directory { .. } => "a plain directory with no limit of its own".into(),
            Kind::Other => "neither a directory nor a block device".into(),
        }
    }

    /// Whether the volume is larger than the storage behind it can hold: a
    /// loop device (the volume, or the device its filesystem is mounted
    /// from) whose image is a sparse file on a filesystem without the room
    /// to fill it. The room is the blocks the image has and the free space of
    /// its filesystem as `df` shows it (the blocks a filesystem keeps in
    /// reserve are the administrator's, not the volumes'). Writes inside the
    /// volume then fail (an ext4 on it turns read-only) once the image's
    /// filesystem is full, long before the volume's size. `false` for a
    /// volume that is no loop device, nor mounted from one.
    pub fn is_overcommitted(&self, host: &dyn Host) -> bool {
        self.overcommitted(host)
    }

    /// The size of the device behind the volume, when it has one: a block
    /// device's, or that of the device a mounted filesystem is on. What a
    /// capacity request is met with, measured (a directory's room is not: a
    /// plain one has none of its own).
    pub fn device_bytes(&self) -> Option<u64> {
        match &self.kind {
            Kind::BlockDevice { size, .. } => Some(*size),
            Kind::Mount { device_bytes, .. } => *device_bytes,
            _ => None,
        }
    }

    fn overcommitted(&self, host: &dyn Host) -> bool {
        let (device, size) = match &self.kind {
            Kind::BlockDevice { size, .. } => (self.path.clone(), *size),
            Kind::Mount {
                source,
                device_bytes: Some(size),
                ..
            } => (PathBuf::from(source), *size),
            _ => return false,
        };
        let Some(image) = host.loop_backing(&device) else {
            return false;
        };
        // The kernel's name for the file it holds open; a name taken over by
        // a link or a removed file since tells nothing.
        let Ok(meta) = host.entry(&image) else {
            return false;
        };
        let Ok(space) = host.space(&image) else {
            return false;
        };
        let room = (meta.blocks * 512).saturating_add(space.available);
        meta.is_file() && room.saturating_add(ROOM_SLACK) < size
    }
}

/// What a loop device's image may lack of its device's size and still count
/// as held: a filesystem's own rounding and a block or two in flight.
const ROOM_SLACK: u64 = 1 << 20;

/// A mount point or a plain directory.
fn directory_kind(host: &dyn Host, path: &Path) -> std::io::Result<Kind> {
    let canonical = host.canonical(path)?;
    let mounts = host.mounts()?;
    // The last matching entry wins: a later mount over the same point hides
    // the earlier one.
    let on = mounts
        .iter()
        .filter(|m| canonical.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len());
    let fs_bytes = host.space(&canonical)?.total;
    match on {
        Some(m) if m.mount_point == canonical => {
            let own = own_filesystem(m, &mounts);
            Ok(Kind::Mount {
                fs_type: m.fstype.clone(),
                source: m.source.clone(),
                fs_bytes,
                device_bytes: own.then(|| block_source_size(host, &m.source)).flatten(),
                own,
            })
        }
        on => {
            let parent = canonical.parent().unwrap_or(&canonical);
            Ok(Kind::Directory {
                fs_type: on.map(|m| m.fstype.clone()).unwrap_or_default(),
                fs_bytes,
                parent_fs_bytes: host.space(parent)?.total,
            })
        }
    }
}

/// Whether the filesystem mounted as `m` is the volume's own: its root is
/// mounted (not a directory of it, as a bind mount of one shows), and its
/// device (`major:minor`) is not that of the filesystem `m` sits on in
/// `mounts` (the one the volume's parent dir lies on: the volumes dir's, or
/// the work dir's). A bind mount of a directory of the work filesystem shows
/// with that filesystem's device and a root other than `/`; a loop device's
/// filesystem mounted for the volume, with a device of its own and `/`.
fn own_filesystem(m: &Mount, mounts: &[Mount]) -> bool {
    let parent = m.mount_point.parent().unwrap_or(&m.mount_point);
    // The last matching entry wins, as for the volume's own mount point.
    let under = mounts
        .iter()
        .filter(|p| p.mount_point != m.mount_point && parent.starts_with(&p.mount_point))
        .max_by_key(|p| p.mount_point.as_os_str().len());
    m.root == Path::new("/") && under.is_none_or(|p| p.device != m.device)
}

/// The size of the block device a mount's source names, when it is one.
fn block_source_size(host: &dyn Host, source: &str) -> Option<u64> {
    let path = Path::new(source);
    let meta = host.entry_followed(path).ok()?;
    if meta.kind != FileKind::BlockDevice {
        return None;
    }
    host.block_device_size(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_has_its_parents_size_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("v");
        std::fs::create_dir(&vol).unwrap();
        std::fs::set_permissions(&vol, std::os::unix::fs::PermissionsExt::from_mode(0o750))
            .unwrap();
        let facts =
            VolumeFacts::measure(&crate::conformance::host::LocalHost::new(), &vol).unwrap();
        assert_eq!(facts.mode, 0o750);
        match facts.kind {
            Kind::Directory {
                fs_bytes,
                parent_fs_bytes,
                ..
            } => assert_eq!(fs_bytes, parent_fs_bytes),
            other => panic!("expected a directory, got {other:?}"),
        }
        assert!(facts.describe().contains("plain directory"));
    }

    fn mount(point: &str, root: &str, device: (u32, u32)) -> Mount {
        Mount {
            id: 0,
            parent: 0,
            mount_point: point.into(),
            fstype: "ext4".into(),
            source: "/dev/loop0".into(),
            root: root.into(),
            device,
            shared: false,
        }
    }

    #[test]
    fn only_a_whole_filesystem_on_a_device_of_its_own_is_the_volumes_own() {
        let work = mount("/work", "/", (7, 0));
        let root = mount("/", "/", (8, 1));
        for (volume, own, why) in [
            (
                mount("/work/run/volumes/v", "/run/pool/v", (7, 0)),
                false,
                "a bind mount of a directory of the work filesystem",
            ),
            (
                mount("/work/run/volumes/v", "/", (7, 0)),
                false,
                "the work filesystem itself, bound again",
            ),
            (
                mount("/work/run/volumes/v", "/pool/v", (9, 0)),
                false,
                "a bind mount of a directory of another filesystem",
            ),
            (
                mount("/work/run/volumes/v", "/", (7, 1)),
                true,
                "a loop device's filesystem mounted for the volume",
            ),
        ] {
            let mounts = [root.clone(), work.clone(), volume.clone()];
            assert_eq!(own_filesystem(&volume, &mounts), own, "{why}");
        }
    }

    #[test]
    fn a_file_is_other() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert_eq!(
            VolumeFacts::measure(&crate::conformance::host::LocalHost::new(), &f)
                .unwrap()
                .kind,
            Kind::Other
        );
    }
}
