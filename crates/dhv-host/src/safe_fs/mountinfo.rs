//! `/proc/self/mountinfo`: the mounts this process sees, one per line
//! (proc(5)): `id parent major:minor root mount-point options [optional...] -
//! fstype source super-options`, with space, tab, newline and backslash in
//! paths escaped as three octal digits.

use std::path::{Path, PathBuf};

/// One line of mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount's unique id.
    pub id: u64,
    /// The id of the mount it sits on.
    pub parent: u64,
    /// Where it is mounted, in this process's view.
    pub mount_point: PathBuf,
    /// The file system type (`ext4`, `tmpfs`, ...).
    pub fstype: String,
    /// The mount source (a device, or `none`).
    pub source: String,
    /// The dir of the source file system that is mounted (`/` unless a bind
    /// mount of a subdir).
    pub root: PathBuf,
    /// The device of the file system (`major:minor`).
    pub device: (u32, u32),
    /// It is shared with a peer group (`shared:N`): mounts made below it
    /// propagate to the other namespaces of the group.
    pub shared: bool,
}

impl std::fmt::Display for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} from {}",
            self.mount_point.display(),
            self.fstype,
            self.source
        )?;
        if self.root != Path::new("/") {
            write!(f, ", {}", self.root.display())?;
        }
        write!(f, ")")
    }
}

/// Parses mountinfo text; lines that do not parse are skipped (the kernel
/// writes them, but a truncated read must not make us panic).
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mount> {
    let mut fields = line.split(' ');
    let id = fields.next()?.parse().ok()?;
    let parent = fields.next()?.parse().ok()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let device = (major.parse().ok()?, minor.parse().ok()?);
    let root = unescape(fields.next()?);
    let mount_point = unescape(fields.next()?);
    let _options = fields.next()?;
    // Optional fields (shared:N, master:N, ...) end at a lone "-".
    let mut shared = false;
    for f in fields.by_ref() {
        match f {
            "-" => break,
            f => shared |= f.starts_with("shared:"),
        }
    }
    let fstype = fields.next()?.to_string();
    let source = unescape(fields.next().unwrap_or("none"));
    Some(Mount {
        id,
        parent,
        mount_point,
        fstype,
        source: source.to_string_lossy().into_owned(),
        root,
        device,
        shared,
    })
}

/// Undoes the kernel's `\ooo` escapes; bytes, not UTF-8, are what paths are.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Every mount of this process.
pub fn read() -> std::io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

/// The mounts whose mount point is `dir` or lies below it, in mountinfo
/// order (a mount comes after the one it sits on). `dir` is compared as
/// given: pass a canonical path.
pub fn select_under(mounts: Vec<Mount>, dir: &Path) -> Vec<Mount> {
    mounts
        .into_iter()
        .filter(|m| m.mount_point.starts_with(dir))
        .collect()
}

/// The mounts at or below `dir` (its parent canonicalised first), as this
/// process sees them.
pub fn mounts_under(dir: &Path) -> std::io::Result<Vec<Mount>> {
    let dir = super::fd::canonical_parent(dir);
    Ok(select_under(read()?, &dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 0:33 / /tmp rw,nosuid shared:14 - tmpfs tmpfs rw
97 35 8:1 /srv/data /tmp/dhv-conform-x/a\\040b rw master:3 - ext4 /dev/sda1 rw
98 97 7:0 / /tmp/dhv-conform-x/a\\040b/v rw - ext4 /dev/loop0 rw
99 35 0:40 / /tmp/dhv-conform-xy rw - tmpfs none rw
garbage line
";

    #[test]
    fn parses_fields_and_octal_escapes() {
        let all = parse(SAMPLE);
        assert_eq!(all.len(), 5);
        assert_eq!(all[2].id, 97);
        assert_eq!(all[2].parent, 35);
        assert_eq!(all[2].mount_point, Path::new("/tmp/dhv-conform-x/a b"));
        assert_eq!(all[2].root, Path::new("/srv/data"));
        assert_eq!(all[2].fstype, "ext4");
        assert_eq!(all[3].source, "/dev/loop0");
        assert_eq!((all[3].device, all[2].device), ((7, 0), (8, 1)));
        let shared: Vec<bool> = all.iter().map(|m| m.shared).collect();
        assert_eq!(shared, [true, true, false, false, false]);
    }

    #[test]
    fn under_means_path_components_not_string_prefix() {
        let under = select_under(parse(SAMPLE), Path::new("/tmp/dhv-conform-x"));
        let ids: Vec<u64> = under.iter().map(|m| m.id).collect();
        assert_eq!(ids, [97, 98]);
    }

    #[test]
    fn display_names_the_mount_and_what_it_shows() {
        let m = &parse(SAMPLE)[2];
        assert_eq!(
            m.to_string(),
            "/tmp/dhv-conform-x/a b (ext4 from /dev/sda1, /srv/data)"
        );
    }

    #[test]
    fn bad_escapes_are_kept_as_text() {
        assert_eq!(unescape("a\\9b\\"), Path::new("a\\9b\\"));
        assert_eq!(unescape("\\134x"), Path::new("\\x"));
    }

    #[test]
    fn this_process_has_a_root_mount() {
        let all = read().unwrap();
        assert!(all.iter().any(|m| m.mount_point == Path::new("/")));
    }
}
