//! One root cause, one finding. What a plain create and delete leave behind
//! (a state file beside the volumes, a metadata dir beside the volumes dir) is
//! `delete.no-residue`'s finding. The run's delete probe records it as a
//! *footprint*: the shapes of the entries its create added beside the volumes
//! dir, and of those its delete left, with volume ids and names abstracted
//! away. Other checks that find the same shapes in their own dirs cite that
//! finding instead of reporting it again, and judge only what is left over
//! that the footprint does not explain.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::{Prereqs, listing};
use crate::conformance::host::Host;

/// A volume id as the harness makes them (UUID v4, lower case).
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").expect("valid regex")
});

/// A default volume name (`conformance-` and the id's first 8 hex digits).
static DEFAULT_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("conformance-[0-9a-f]{8}").expect("valid regex"));

/// What a plain create and delete of one volume leave in and beside its
/// volumes dir, as shapes (see [`Prereqs::shape`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Footprint {
    /// Beside the volumes dir (`../…`), right after create.
    pub created_beside: BTreeSet<String>,
    /// In and beside the volumes dir, after delete.
    pub left: BTreeSet<String>,
}

impl Footprint {
    /// Whether `shape` is something every create or delete leaves.
    fn explains(&self, shape: &str) -> bool {
        self.left.contains(shape) || self.created_beside.contains(shape)
    }
}

/// Everything in the volumes dir (relative to it) and beside it (`../name`,
/// relative to its parent), the volumes dir itself left out.
pub(crate) fn around(host: &dyn Host, volumes: &Path) -> BTreeSet<String> {
    let mut out = listing(host, volumes);
    let (Some(parent), Some(own)) = (volumes.parent(), volumes.file_name()) else {
        return out;
    };
    let own = own.to_string_lossy();
    let inside = format!("{own}/");
    out.extend(
        listing(host, parent)
            .into_iter()
            .filter(|e| *e != own && !e.starts_with(&inside))
            .map(|e| format!("../{e}")),
    );
    out
}

/// What a check found left over in and beside a volumes dir (entries, not
/// processes: those are a call's [`Leftover`](crate::exec::Leftover)s), split by cause.
#[derive(Debug, Default)]
pub(crate) struct Residue {
    /// Not explained by the footprint: the check's own finding.
    pub own: Vec<String>,
    /// What every create and delete leaves: `delete.no-residue` reports it.
    pub cited: Vec<String>,
}

impl Residue {
    /// " (left …, as every delete does: see delete.no-residue)", or nothing
    /// when nothing was cited.
    pub fn citation(&self) -> String {
        if self.cited.is_empty() {
            String::new()
        } else {
            format!(
                " (left {}, as every delete does: see delete.no-residue)",
                self.cited.join(", ")
            )
        }
    }
}

/// A run of 8 or more hex digits (a part of a volume id, its first 8 say), or
/// of decimal digits (a date, a time, a pid, a counter).
static VARYING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("[0-9a-f]{8,}|[0-9]+").expect("valid regex"));

/// The shape of an entry: volume ids become `{id}`, volume names `{name}`
/// (the default names, or `fixture`, `fixture-1`, … when a fixture names them),
/// what remains of 8 hex digits or more `{hex}` (a part of an id) and of
/// decimal digits `{n}` (a date, a pid): what differs from one volume to the
/// next, however a plugin spells it (`20261205-0b9c8f6e-data.img`).
pub(super) fn shape(entry: &str, fixture: Option<&str>) -> String {
    let text = UUID.replace_all(entry, "{id}");
    let text = DEFAULT_NAME.replace_all(&text, "{name}");
    let fixture =
        fixture.and_then(|base| Regex::new(&format!("{}(-[0-9]+)?", regex::escape(base))).ok());
    let text = match fixture {
        Some(re) => re.replace_all(&text, "{name}").into_owned(),
        None => text.into_owned(),
    };
    VARYING
        .replace_all(&text, |m: &regex::Captures| {
            match m[0].bytes().all(|b| b.is_ascii_digit()) {
                true => "{n}",
                false => "{hex}",
            }
        })
        .into_owned()
}

impl Prereqs<'_> {
    /// The shape of an entry of this run (see [`shape`]).
    pub(crate) fn shape(&self, entry: &str) -> String {
        shape(entry, self.run.settings.template.name.as_deref())
    }

    /// Splits entries left in or beside a volumes dir (as [`around`] names
    /// them) into the check's own finding and what every create and delete
    /// leaves. With no footprint (the delete probe did not pass), all are the
    /// check's own.
    pub(crate) async fn leftovers(&self, entries: impl IntoIterator<Item = String>) -> Residue {
        let footprint = self.delete_probe().await.footprint.clone();
        let mut split = Residue::default();
        for entry in entries {
            let explained = footprint
                .as_ref()
                .is_some_and(|f| f.explains(&self.shape(&entry)));
            if explained {
                split.cited.push(entry);
            } else {
                split.own.push(entry);
            }
        }
        split
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_abstract_ids_and_names_only() {
        let id = "0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69";
        assert_eq!(shape(&format!(".state-{id}"), None), ".state-{id}");
        assert_eq!(
            shape("../.meta/conformance-0b9c8f6e.json", None),
            "../.meta/{name}.json"
        );
        assert_eq!(shape("pg-data-12/lock", Some("pg-data")), "{name}/lock");
        assert_eq!(shape("pg-data/lock", Some("pg-data")), "{name}/lock");
        // What a traversal makes keeps its own word: it is never explained
        // by what a plain create leaves.
        assert_eq!(shape("escape-1f2d3c4b", None), "escape-{hex}");
        // A date, a part of the id and the name, however a plugin spells them.
        assert_eq!(
            shape("20261205-0b9c8f6e-conformance-0b9c8f6e.img", None),
            "{n}-{hex}-{name}.img"
        );
        assert_eq!(
            shape("20261206-3f1d4c4e-conformance-3f1d4c4e.img", None),
            shape("20261205-0b9c8f6e-conformance-0b9c8f6e.img", None)
        );
        assert_eq!(shape("mkfs.4242.log", None), "mkfs.{n}.log");
    }

    #[test]
    fn around_names_what_lies_beside_the_volumes_dir_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let volumes = dir.path().join("volumes");
        std::fs::create_dir_all(volumes.join("v1")).unwrap();
        std::fs::create_dir_all(dir.path().join(".meta")).unwrap();
        std::fs::write(dir.path().join(".meta/v1.json"), "{}").unwrap();
        std::fs::write(volumes.join(".state-v1"), "").unwrap();
        let got: Vec<String> = around(&crate::conformance::host::LocalHost::new(), &volumes)
            .into_iter()
            .collect();
        assert_eq!(
            got,
            ["../.meta", "../.meta/v1.json", ".state-v1", "v1"],
            "{got:?}"
        );
    }
}
