//! A volume as the manager knows it: what is stored in state and what `list`
//! returns.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::contract::CreateRequest;

/// A volume on this node: created by a plugin, or registered by hand.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Volume {
    /// The volume id, a lower-case UUID.
    pub id: String,
    /// The volume name, unique on the node.
    pub name: String,
    /// The Nomad namespace.
    pub namespace: String,
    /// The plugin that created it; `None` for a registered volume.
    pub plugin_id: Option<String>,
    /// Where the volume is on the host: what create returned, or the path given
    /// to register.
    pub host_path: String,
    /// The size the plugin reported (0 when unknown, and for registered volumes).
    pub bytes: i64,
    /// The request the volume was last created (or updated) with, sent again on
    /// restore and used for delete; `None` for a registered volume.
    pub create_request: Option<CreateRequest>,
}

impl Volume {
    /// Whether the volume was registered (no plugin manages it).
    pub fn is_registered(&self) -> bool {
        self.create_request.is_none()
    }
}

/// `path` with `.`, `..`, repeated and trailing `/` resolved by the text
/// alone (no symlink is followed): what the kernel would reach if nothing
/// on the way were a link. `None` for a relative path.
fn normalised(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::Prefix(_) => return None,
        }
    }
    out.has_root().then_some(out)
}

/// Whether `path` lies strictly inside `dir` (not `dir` itself), both
/// normalised first. The manager saves, and sends deletes for, only such
/// paths.
pub fn strictly_inside(path: &str, dir: &Path) -> bool {
    match (normalised(Path::new(path)), normalised(dir)) {
        (Some(p), Some(d)) => p != d && p.starts_with(&d),
        _ => false,
    }
}

/// Whether a delete may be sent with `path` as `DHV_CREATED_PATH` for a
/// volume of `volumes_dir`: an absolute path that is neither the volumes dir
/// nor one of its parents (both normalised first). Any other path a plugin
/// returns (inside the volumes dir, a block device such as `/dev/loop3`, a
/// dir elsewhere) is saved, as Nomad saves it; these are not, since a delete
/// sent with one is how a naive plugin wipes every volume, or `/`.
pub fn deletable(path: &str, volumes_dir: &Path) -> bool {
    match (normalised(Path::new(path)), normalised(volumes_dir)) {
        (Some(p), Some(d)) => !d.starts_with(&p),
        _ => false,
    }
}

/// The volume's own path as the built-in plugin makes it,
/// `<volumes_dir>/<id>`: what a compensating delete is sent with when the
/// path the plugin returned cannot safely be.
pub fn own_path(volumes_dir: &Path, id: &str) -> String {
    volumes_dir.join(id).to_string_lossy().into_owned()
}

/// Why `path` cannot be a volume's host path, if it cannot: empty, relative,
/// or the root dir once `.`, `..` and `//` are resolved. A state holding such
/// a path would have the manager act on the whole machine (or on wherever it
/// was started).
pub fn unusable_host_path(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("is empty");
    }
    match normalised(Path::new(path)) {
        None => Some("is not an absolute path"),
        Some(p) if p == Path::new("/") => Some("is the root dir"),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_absolute_path_but_the_volumes_dir_and_its_parents_is_deletable() {
        let dir = Path::new("/srv/volumes");
        for ok in [
            "/srv/volumes/a",
            "/dev/loop3",
            "/mnt/data",
            "/srv/volumes-other",
        ] {
            assert!(deletable(ok, dir), "{ok}");
        }
        for refused in [
            "/srv/volumes",
            "/srv/volumes/",
            "/srv/volumes/a/..",
            "/srv",
            "/",
            "/srv/volumes/../..",
            "relative",
            "",
        ] {
            assert!(!deletable(refused, dir), "{refused}");
        }
    }

    #[test]
    fn the_root_empty_and_relative_paths_are_unusable() {
        for (path, why) in [
            ("/", Some("is the root dir")),
            ("//", Some("is the root dir")),
            ("/srv/..", Some("is the root dir")),
            ("/./", Some("is the root dir")),
            ("", Some("is empty")),
            ("srv/data", Some("is not an absolute path")),
            ("/srv/data", None),
        ] {
            assert_eq!(unusable_host_path(path), why, "{path:?}");
        }
    }

    #[test]
    fn strictly_inside_after_normalising() {
        let dir = Path::new("/srv/volumes");
        for inside in [
            "/srv/volumes/a",
            "/srv/volumes//a/",
            "/srv/volumes/./a/b/..",
            "/srv//volumes/x",
        ] {
            assert!(strictly_inside(inside, dir), "{inside}");
        }
        for outside in [
            "/srv/volumes",
            "/srv/volumes/",
            "/srv/volumes/.",
            "/srv/volumes//",
            "/srv/volumes/a/..",
            "/srv/volumes/../volumes",
            "/srv",
            "/",
            "/srv/volumes-other/a",
            "/srv/volumes/../../etc",
            "volumes/a",
            "",
        ] {
            assert!(!strictly_inside(outside, dir), "{outside}");
        }
        assert!(strictly_inside(
            "/srv/volumes/a",
            Path::new("/srv/volumes/")
        ));
    }
}
