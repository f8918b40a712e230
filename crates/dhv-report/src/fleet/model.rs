//! The fleet report's schema types: `dhv-conform/fleet/v1`.
//!
//! The matrix *is* the model: each node keeps one status per check, aligned with
//! [`FleetReport::checks`], plus the text of the checks that did not pass. Nothing else
//! of a node's report is kept, so a fleet of 10,000 nodes costs about what its matrix
//! does. As with [`crate::Report`], fields are added, never renamed or retyped.

use serde::{Deserialize, Serialize};

use crate::model::{Level, Status, ToolInfo, Verdict};

/// The schema identifier written into every fleet report.
pub const FLEET_SCHEMA: &str = "dhv-conform/fleet/v1";

/// Many nodes' conformance reports merged: the root of the fleet JSON schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// Always [`FLEET_SCHEMA`].
    pub schema: String,
    /// The harness that merged the reports.
    pub tool: ToolInfo,
    /// The totals and the fleet's verdict.
    pub summary: FleetSummary,
    /// The matrix's rows: every check any node ran, sorted by id.
    pub checks: Vec<FleetCheck>,
    /// The plugin builds found, per plugin the most common build first.
    pub builds: Vec<Build>,
    /// The matrix's columns: non-conformant nodes first, then by name and plugin.
    pub nodes: Vec<FleetNode>,
}

/// The fleet's totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetSummary {
    /// Node reports merged (one per node and plugin).
    pub nodes: usize,
    /// Of those, the conformant ones.
    pub conformant: usize,
    /// Of those, the non-conformant ones.
    pub non_conformant: usize,
    /// Distinct plugin builds (plugin, sha256, version).
    pub builds: usize,
    /// Non-conformant when any node is.
    pub verdict: Verdict,
}

/// One row of the matrix: a check and how many nodes got each status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetCheck {
    /// The check id, e.g. `create.idempotent`.
    pub id: String,
    /// Its level, as the first report naming it had it.
    pub level: Level,
    /// Nodes per status.
    pub counts: StatusCounts,
}

/// How many nodes got each status for one check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    /// Nodes where the check passed.
    pub pass: usize,
    /// Nodes where the check failed.
    pub fail: usize,
    /// Nodes where the check warned.
    pub warn: usize,
    /// Nodes where the check was skipped.
    pub skip: usize,
    /// Nodes where the check measured something.
    pub info: usize,
    /// Nodes whose report has no result for the check (a filtered run, another harness).
    pub absent: usize,
}

impl StatusCounts {
    /// Counts one node's status (`None`: absent).
    pub fn add(&mut self, status: Option<Status>) {
        match status {
            Some(Status::Pass) => self.pass += 1,
            Some(Status::Fail) => self.fail += 1,
            Some(Status::Warn) => self.warn += 1,
            Some(Status::Skip) => self.skip += 1,
            Some(Status::Info) => self.info += 1,
            None => self.absent += 1,
        }
    }
}

/// One build of one plugin, and the nodes running it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The plugin's id: its file name (Nomad's plugin id), or `mkdir` for the built-in.
    pub plugin: String,
    /// Hex SHA-256 of the executable; `None` for the built-in or when unreadable.
    pub sha256: Option<String>,
    /// The version the plugin fingerprinted with, as printed; `None` when it failed.
    pub version: Option<String>,
    /// Nodes running this build.
    pub nodes: usize,
    /// Of those, the non-conformant ones.
    pub non_conformant: usize,
    /// Whether this is the build most nodes run of this plugin. The others stand out:
    /// a node left on an old build, or one built differently. When the plugin's top
    /// builds tie (one node per build, say), no build has the majority and none is.
    pub most_common: bool,
}

/// One column of the matrix: one node's report for one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetNode {
    /// The node's name (`check --node-name`; for older reports, the file name).
    pub name: String,
    /// The plugin's id, as in [`Build::plugin`].
    pub plugin: String,
    /// Index of the node's plugin build in [`FleetReport::builds`].
    pub build: usize,
    /// The harness version that wrote the node's report.
    pub tool_version: String,
    /// Whether the node's run was `--strict` (a warning then fails it).
    pub strict: bool,
    /// The node's verdict, as its report gave it.
    pub verdict: Verdict,
    /// The file the report was read from.
    pub source: String,
    /// When the node's run started (RFC 3339); `None` in reports without it.
    #[serde(default)]
    pub started_at: Option<String>,
    /// The node's run's wall time in milliseconds; `None` in reports without it.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// One status per check, aligned with [`FleetReport::checks`]; `None`: absent.
    pub statuses: Vec<Option<Status>>,
    /// The checks that did not pass (fail, warn, skip), in check order.
    pub problems: Vec<Problem>,
}

impl FleetNode {
    /// The checks that make this node non-conformant: failures, and warnings under strict.
    pub fn failing(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.status == Status::Fail || (self.strict && p.status == Status::Warn))
    }
}

/// A check that did not pass on a node, with what the node's report said about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The check id.
    pub id: String,
    /// Fail, warn or skip.
    pub status: Status,
    /// The first line of the check's message (the node's report has the rest).
    pub message: String,
    /// The reproduce line of the first call behind the result; `None` for a skip, or
    /// when the check made no call of its own.
    pub reproduce: Option<String>,
}
