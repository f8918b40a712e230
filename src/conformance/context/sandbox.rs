//! A check's own corner of the run's temp dir: its dir, the volumes dir inside
//! it, listings of what is there, and canary files that show whether anything
//! was touched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One check's dirs.
#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    /// The check's own dir; the volumes dir and any canaries live below it.
    pub dir: PathBuf,
    /// DHV_VOLUMES_DIR for this check.
    pub volumes: PathBuf,
}

impl Sandbox {
    /// Makes `dir` and its volumes dir.
    pub fn new(dir: PathBuf) -> std::io::Result<Sandbox> {
        let volumes = dir.join("volumes");
        std::fs::create_dir_all(&volumes)?;
        Ok(Sandbox { dir, volumes })
    }
}

/// A dir that resolves outside the run's sandbox: nothing is written there.
#[derive(Debug, thiserror::Error)]
#[error("{} is outside the run's sandbox: the harness writes nothing there", .0.display())]
pub(crate) struct OutsideSandbox(pub PathBuf);

/// Writes a canary file with unique content into `dir`, which must resolve
/// to a dir inside `root` (the run's sandbox); returns its path. The file
/// itself is never a symlink followed elsewhere.
///
/// A block-device volume (a loop device backed by a file below `root`) gets
/// its canary written at the start of the device instead: the canary's path
/// is then the device's.
pub(crate) fn plant(root: &Path, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if crate::safe_fs::is_block_device(dir) {
        crate::safe_fs::write_marker(dir, root, canary_text(dir).as_bytes()).map_err(
            |e| match e.kind() {
                std::io::ErrorKind::PermissionDenied => std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    OutsideSandbox(dir.to_path_buf()),
                ),
                _ => e,
            },
        )?;
        return Ok(dir.to_path_buf());
    }
    let resolved = dir.canonicalize()?;
    if !resolved.starts_with(root.canonicalize()?) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            OutsideSandbox(resolved),
        ));
    }
    let path = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?
        .write_all(canary_text(&path).as_bytes())?;
    Ok(path)
}

/// Creates the file `name` in `dir`, new (`O_CREAT|O_EXCL|O_NOFOLLOW`): a name
/// that exists already (a link a plugin planted) is an error, never written
/// through. Only inside the run's sandbox, as for [`plant`].
pub(crate) fn create_new(root: &Path, dir: &Path, name: &str) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let resolved = dir.canonicalize()?;
    if !resolved.starts_with(root.canonicalize()?) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            OutsideSandbox(resolved),
        ));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(resolved.join(name))
}

/// The bytes of the canary planted at `path`.
pub(crate) fn canary_bytes(path: &Path) -> Vec<u8> {
    canary_text(path).into_bytes()
}

/// The content of a canary file: its own path, so a moved or swapped file is caught.
pub(crate) fn canary_text(path: &Path) -> String {
    format!("dhv-conform canary {}\n", path.display())
}

/// Whether the canary at `path` is still there, unchanged.
pub(crate) fn canary_intact(path: &Path) -> bool {
    if crate::safe_fs::is_block_device(path) {
        return crate::safe_fs::has_marker(path, canary_text(path).as_bytes());
    }
    // Never through a link, never waiting on a FIFO, never past its own size:
    // whatever was put in the canary's place is evidence, not a hang.
    let want = canary_text(path);
    crate::safe_fs::read_bounded(path, want.len() as u64, crate::safe_fs::Links::Refuse)
        .is_ok_and(|t| t == want.as_bytes())
}

/// Every entry below `dir` (relative paths, `/`-separated, symlinks not
/// followed), capped so a runaway plugin cannot make us walk forever.
pub(crate) fn listing(dir: &Path) -> BTreeSet<String> {
    const CAP: usize = 20_000;
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
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(path);
            }
            out.insert(rel);
            if out.len() >= CAP {
                return out;
            }
        }
    }
    out
}
