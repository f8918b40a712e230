//! A small fleet shared by the fleet renderers' tests: three nodes of one plugin on two
//! builds (one node left on the old build fails), and one node of a second plugin that
//! only warns, with a check absent from one report.

use std::path::Path;

use super::merge::Merger;
use super::model::FleetReport;
use super::read::{CheckCell, NodeReport};
use crate::model::{Level, Status, Verdict};

const NEW: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const OLD: &str = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

/// One check cell; fail and warn carry a reproduce line, fail, warn and skip a message.
pub(crate) fn cell(id: &str, level: Level, status: Status) -> CheckCell {
    let noted = matches!(status, Status::Fail | Status::Warn | Status::Skip);
    let explained = matches!(status, Status::Fail | Status::Warn);
    CheckCell {
        id: id.to_owned(),
        level,
        status,
        message: noted.then(|| format!("{id} {status} | <why>")),
        reproduce: explained.then(|| format!("env -i DHV_OPERATION=create /p/{id} create")),
    }
}

/// One node's report of `plugin`; the verdict follows the cells (strict off).
pub(crate) fn node(
    name: &str,
    plugin: &str,
    sha: &str,
    version: &str,
    cells: Vec<CheckCell>,
) -> NodeReport {
    let failed = cells.iter().any(|c| c.status == Status::Fail);
    NodeReport {
        name: name.to_owned(),
        plugin: plugin.to_owned(),
        sha256: Some(sha.to_owned()),
        version: Some(version.to_owned()),
        tool_version: "0.1.0".to_owned(),
        strict: false,
        verdict: if failed {
            Verdict::NonConformant
        } else {
            Verdict::Conformant
        },
        started_at: Some("2026-12-01T13:05:09Z".to_owned()),
        duration_ms: Some(2345),
        checks: cells,
    }
}

fn all_pass() -> Vec<CheckCell> {
    vec![
        cell("create.succeeds", Level::Must, Status::Pass),
        cell("delete.succeeds", Level::Must, Status::Pass),
        cell("fingerprint.version-semver", Level::Should, Status::Pass),
        cell("timing.profile", Level::Info, Status::Info),
    ]
}

/// The sample fleet, added in an order the merge must not keep.
pub(crate) fn fleet() -> FleetReport {
    let mut merger = Merger::new();
    let old = vec![
        cell("create.succeeds", Level::Must, Status::Fail),
        cell("delete.succeeds", Level::Must, Status::Skip),
        cell("fingerprint.version-semver", Level::Should, Status::Pass),
        cell("timing.profile", Level::Info, Status::Info),
    ];
    let warns = vec![
        cell("create.succeeds", Level::Must, Status::Pass),
        cell("fingerprint.version-semver", Level::Should, Status::Warn),
    ];
    let nodes = [
        node("node-b", "lvm", NEW, "1.1.0", all_pass()),
        node("node-c", "lvm", OLD, "1.0.0", old),
        node("node-a", "lvm", NEW, "1.1.0", all_pass()),
        node("node-a", "zfs", NEW, "0.3", warns),
    ];
    for (i, node) in nodes.into_iter().enumerate() {
        merger
            .add(Path::new(&format!("reports/{i}.json")), node)
            .unwrap();
    }
    merger.finish()
}
