//! Go's `os.Root.Stat` (Go 1.26, as Nomad 2.0.5's plugin lookup uses it):
//! a name resolved one component at a time inside a directory, never
//! leaving it.
//!
//! Its rules, which `realpath` and a prefix test do not give: a name or a
//! symlink target that is absolute escapes (even one pointing back inside);
//! `..` is resolved on the name as rewritten so far (symlinks substituted),
//! and escapes when it would climb above the root; at most 8 symlinks are
//! followed; a name ending in `/` must be a directory. Any failure is just
//! "not found" to the caller, as Nomad turns every `Stat` error into `no
//! such plugin`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Go's `rootMaxSymlinks`.
const MAX_SYMLINKS: usize = 8;
/// Go's bounds on a walk: both must be passed for it to be refused.
const MAX_STEPS: usize = 255;
const MAX_RESTARTS: usize = 8;

/// The components of `name` inside a root, after `prefix` and before
/// `suffix`, and the separators that end it; `None` when it escapes (empty or
/// absolute). `.` components go, except the last of `name`.
fn split(name: &[u8], prefix: &[Vec<u8>], suffix: &[Vec<u8>]) -> Option<(Vec<Vec<u8>>, Vec<u8>)> {
    if name.is_empty() || name[0] == b'/' {
        return None;
    }
    let mut parts: Vec<Vec<u8>> = prefix.to_vec();
    let trimmed_len = name.len() - name.iter().rev().take_while(|&&b| b == b'/').count();
    let trailing = name[trimmed_len..].to_vec();
    let pieces: Vec<&[u8]> = name[..trimmed_len]
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let last = pieces.len().saturating_sub(1);
    for (i, piece) in pieces.iter().enumerate() {
        if *piece != b"." || i == last {
            parts.push(piece.to_vec());
        }
    }
    parts.extend(suffix.iter().cloned());
    Some((parts, trailing))
}

fn join(root: &Path, parts: &[Vec<u8>]) -> PathBuf {
    let mut path = root.to_path_buf();
    for p in parts {
        path.push(OsStr::from_bytes(p));
    }
    path
}

/// Where `name` leads inside `root` (an absolute, symlink-free directory),
/// following symlinks as `os.Root.Stat` does; `None` when Go's `Stat` fails
/// (missing, not a directory on the way, escaping, too many links).
pub(crate) fn stat_in_root(root: &Path, name: &OsStr) -> Option<PathBuf> {
    let (mut parts, mut trailing) = split(name.as_bytes(), &[], &[])?;
    let (mut i, mut steps, mut restarts, mut symlinks) = (0usize, 0usize, 0usize, 0usize);
    loop {
        steps += 1;
        if steps > MAX_STEPS && restarts > MAX_RESTARTS {
            return None;
        }
        if parts[i] == b".." {
            restarts += 1;
            let end = i + parts[i..].iter().take_while(|p| *p == b"..").count();
            let count = end - i;
            if count > i {
                return None;
            }
            parts.drain(i - count..end);
            if parts.is_empty() {
                parts.push(b".".to_vec());
            }
            i = 0;
            continue;
        }
        let last = i == parts.len() - 1;
        let mut here = join(root, &parts[..=i]).into_os_string().into_vec();
        if last {
            here.extend_from_slice(&trailing);
        }
        let here = PathBuf::from(OsString::from_vec(here));
        let meta = std::fs::symlink_metadata(&here).ok()?;
        if meta.file_type().is_symlink() {
            symlinks += 1;
            if symlinks > MAX_SYMLINKS {
                return None;
            }
            let target = std::fs::read_link(&here).ok()?;
            let (new_parts, new_trailing) =
                split(target.as_os_str().as_bytes(), &parts[..i], &parts[i + 1..])?;
            if last {
                trailing = new_trailing;
            }
            if new_parts.len() < i || new_parts[..i] != parts[..i] {
                i = 0;
            }
            parts = new_parts;
            continue;
        }
        if last {
            return Some(here);
        }
        if !meta.is_dir() {
            return None;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn names_resolve_inside_the_root_as_gos_root_stat_resolves_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("good"), "").unwrap();
        std::fs::write(root.join("a/b/deep"), "").unwrap();
        symlink("good", root.join("rel")).unwrap();
        symlink(root.join("good"), root.join("abs")).unwrap();
        symlink("a/b", root.join("ab")).unwrap();
        symlink("../outside", root.join("out")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        for i in 0..9 {
            symlink(format!("c{}", i + 1), root.join(format!("c{i}"))).unwrap();
        }
        std::fs::write(root.join("c9"), "").unwrap();
        let at = |name: &str| stat_in_root(&root, OsStr::new(name));
        assert_eq!(at("good"), Some(root.join("good")));
        assert_eq!(at("rel"), Some(root.join("good")));
        assert_eq!(at("./good"), Some(root.join("good")));
        assert_eq!(at("a/../good"), Some(root.join("good")));
        assert_eq!(at("ab/deep"), Some(root.join("a/b/deep")));
        // `..` after a link climbs the rewritten name: ab/.. is a/b/.. = a.
        assert_eq!(at("ab/../b/deep"), Some(root.join("a/b/deep")));
        assert_eq!(at("."), Some(root.join(".")));
        assert_eq!(at("a/"), Some(root.join("a/")));
        for refused in [
            "",
            "/good",
            "abs",
            "..",
            "../x",
            "a/../../x",
            "out",
            "loop",
            "missing",
            "good/",
            "good/x",
            "c0",
        ] {
            assert_eq!(at(refused), None, "{refused:?}");
        }
        // Eight links are followed, a ninth is not.
        assert_eq!(at("c1"), Some(root.join("c9")));
    }
}
