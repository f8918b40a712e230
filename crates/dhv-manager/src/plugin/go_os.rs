//! The pieces of Go's `os` and `path/filepath` that Nomad's built-in `mkdir`
//! plugin is made of, step for step, with Go's `*PathError` texts
//! (`mkdir /v/x: file exists`): which path an error names, and which errors
//! there are at all, follow from the steps, so the steps are Go's.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;

use super::exec_failure::go_errno_text;

/// Go's `*os.PathError`: `<op> <path>: <errno text>`.
#[derive(Debug)]
pub(crate) struct PathError {
    op: &'static str,
    path: String,
    err: io::Error,
}

impl PathError {
    pub(crate) fn new(op: &'static str, path: &str, err: io::Error) -> PathError {
        PathError {
            op,
            path: path.to_owned(),
            err,
        }
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path, go_errno_text(&self.err))
    }
}

/// `filepath.Join(dir, name)`: the non-empty elements joined by `/`, cleaned.
pub(crate) fn join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, true) => String::new(),
        (true, false) => clean(name),
        (false, true) => clean(dir),
        (false, false) => clean(&format!("{dir}/{name}")),
    }
}

/// `filepath.Clean`: one `/` between elements, no `.`, each `..` with the
/// element before it gone (at the root, just gone); `.` for nothing.
pub(crate) fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            _ => parts.push(part),
        }
    }
    match (rooted, parts.is_empty()) {
        (true, _) => format!("/{}", parts.join("/")),
        (false, true) => ".".to_owned(),
        (false, false) => parts.join("/"),
    }
}

/// The mode bits the kernel gets for a Go `os.FileMode` (Go's `syscallMode`):
/// the permission bits, and setuid, setgid and sticky from *Go's* bits for them
/// (1<<23, 1<<22, 1<<20). The Unix bits 0o7000 of a mode written in octal are
/// no Go mode bits, so `4755` makes a 0755 directory in Nomad.
pub(crate) fn syscall_mode(mode: u32) -> u32 {
    let mut bits = mode & 0o777;
    for (go_bit, unix_bit) in [(1 << 23, 0o4000), (1 << 22, 0o2000), (1 << 20, 0o1000)] {
        if mode & go_bit != 0 {
            bits |= unix_bit;
        }
    }
    bits
}

/// `os.MkdirAll(path, mode)`: done when `path` is a directory (symlinks
/// followed); `ENOTDIR` when it is something else; otherwise the parent first,
/// then `mkdir`, whose failure does not count when `path` is a directory by
/// then (made concurrently). Every directory made gets `mode` less the umask.
pub(crate) fn mkdir_all(path: &str, mode: u32) -> Result<(), PathError> {
    if let Ok(meta) = fs::metadata(path) {
        if meta.is_dir() {
            return Ok(());
        }
        return Err(PathError::new(
            "mkdir",
            path,
            io::Error::from_raw_os_error(libc::ENOTDIR),
        ));
    }
    let bytes = path.as_bytes();
    let mut i = bytes.len();
    while i > 0 && bytes[i - 1] == b'/' {
        i -= 1;
    }
    while i > 0 && bytes[i - 1] != b'/' {
        i -= 1;
    }
    // `i` is now just past the last separator: the parent is what precedes it.
    let parent = &path[..i.saturating_sub(1)];
    if !parent.is_empty() {
        mkdir_all(parent, mode)?;
    }
    match fs::DirBuilder::new().mode(syscall_mode(mode)).create(path) {
        Ok(()) => Ok(()),
        Err(_) if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) => Ok(()),
        Err(e) => Err(PathError::new("mkdir", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_clean_are_gos() {
        let cases = [
            ("/v", "id", "/v/id"),
            ("/v/", "id", "/v/id"),
            ("//v//", "id", "/v/id"),
            ("/v/./a/..", "id", "/v/id"),
            ("/../v", "id", "/v/id"),
            ("v", "id", "v/id"),
            ("../v", "id", "../v/id"),
            ("", "id", "id"),
            ("/v", "", "/v"),
            ("", "", ""),
            ("/", "id", "/id"),
            ("a/../..", "id", "../id"),
        ];
        for (dir, name, want) in cases {
            assert_eq!(join(dir, name), want, "Join({dir:?}, {name:?})");
        }
        assert_eq!(clean(""), ".");
        assert_eq!(clean("/"), "/");
        assert_eq!(clean("a/.."), ".");
        assert_eq!(clean("/.."), "/");
        assert_eq!(clean("../../a/"), "../../a");
    }

    #[test]
    fn go_mode_bits_map_to_the_kernels() {
        let cases = [
            (0o700, 0o700),
            (0o4755, 0o755),
            (0o1777, 0o777),
            ((1 << 23) | 0o755, 0o4755),
            ((1 << 22) | 0o750, 0o2750),
            ((1 << 20) | 0o777, 0o1777),
            ((1 << 31) | 0o700, 0o700),
            (0xffff_ffff, 0o7777),
        ];
        for (go, unix) in cases {
            assert_eq!(syscall_mode(go), unix, "{go:#o}");
        }
    }

    #[test]
    fn mkdir_all_fails_in_gos_words() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let deep = format!("{root}/a/b/c");
        mkdir_all(&deep, 0o700).unwrap();
        assert!(fs::metadata(&deep).unwrap().is_dir());
        mkdir_all(&deep, 0o700).unwrap();

        let file = format!("{root}/file");
        fs::write(&file, b"x").unwrap();
        assert_eq!(
            mkdir_all(&file, 0o700).unwrap_err().to_string(),
            format!("mkdir {file}: not a directory")
        );
        assert_eq!(
            mkdir_all(&format!("{file}/x/y"), 0o700)
                .unwrap_err()
                .to_string(),
            format!("mkdir {file}: not a directory")
        );

        let dangling = format!("{root}/dangling");
        std::os::unix::fs::symlink(format!("{root}/nowhere"), &dangling).unwrap();
        assert_eq!(
            mkdir_all(&dangling, 0o700).unwrap_err().to_string(),
            format!("mkdir {dangling}: file exists")
        );

        let to_dir = format!("{root}/to-dir");
        std::os::unix::fs::symlink(&deep, &to_dir).unwrap();
        mkdir_all(&to_dir, 0o700).unwrap();
    }
}
