//! Folding node reports into the fleet matrix, one report at a time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::FleetError;
use super::model::{
    Build, FLEET_SCHEMA, FleetCheck, FleetNode, FleetReport, FleetSummary, Problem, StatusCounts,
};
use super::read::NodeReport;
use crate::model::{Level, Status, ToolInfo, Verdict};

/// Collects node reports into a [`FleetReport`].
///
/// Checks and builds are numbered in the order they are first met, so a node costs one
/// byte per check plus its problems; [`Merger::finish`] sorts everything once at the end.
#[derive(Debug, Default)]
pub struct Merger {
    checks: Vec<(String, Level)>,
    check_index: HashMap<String, usize>,
    builds: Vec<BuildKey>,
    build_index: HashMap<BuildKey, usize>,
    columns: Vec<Column>,
    /// (node, plugin) → index in `columns`, to refuse a second report for the same pair.
    seen: HashMap<(String, String), usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct BuildKey {
    plugin: String,
    sha256: Option<String>,
    version: Option<String>,
}

/// A node as merged so far; `statuses` is indexed by the merger's check numbers.
#[derive(Debug)]
struct Column {
    name: String,
    plugin: String,
    build: usize,
    tool_version: String,
    strict: bool,
    verdict: Verdict,
    source: PathBuf,
    started_at: Option<String>,
    duration_ms: Option<u64>,
    statuses: Vec<Option<Status>>,
    problems: Vec<(usize, Status, String, Option<String>)>,
}

impl Merger {
    /// An empty merger.
    pub fn new() -> Merger {
        Merger::default()
    }

    /// How many node reports were added.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether no report was added yet.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Adds one node's report, read from `source`.
    ///
    /// A second report for the same node and plugin is an error naming both files: which
    /// one is current cannot be told from the reports, and keeping either could hide a
    /// failing node.
    pub fn add(&mut self, source: &Path, report: NodeReport) -> Result<(), FleetError> {
        let key = (report.name, report.plugin);
        if let Some(&first) = self.seen.get(&key) {
            return Err(FleetError::Duplicate {
                node: key.0,
                plugin: key.1,
                first: self.columns[first].source.clone(),
                second: source.to_owned(),
            });
        }
        let build = self.build_number(BuildKey {
            plugin: key.1.clone(),
            sha256: report.sha256,
            version: report.version,
        });
        let mut statuses = vec![None; self.checks.len()];
        let mut problems = Vec::new();
        for cell in report.checks {
            let index = self.check_number(cell.id, cell.level);
            if statuses.len() <= index {
                statuses.resize(index + 1, None);
            }
            statuses[index] = Some(cell.status);
            if let Some(message) = cell.message {
                problems.push((index, cell.status, message, cell.reproduce));
            }
        }
        self.seen.insert(key.clone(), self.columns.len());
        self.columns.push(Column {
            name: key.0,
            plugin: key.1,
            build,
            tool_version: report.tool_version,
            strict: report.strict,
            verdict: report.verdict,
            source: source.to_owned(),
            started_at: report.started_at,
            duration_ms: report.duration_ms,
            statuses,
            problems,
        });
        Ok(())
    }

    fn check_number(&mut self, id: String, level: Level) -> usize {
        if let Some(&index) = self.check_index.get(&id) {
            return index;
        }
        let index = self.checks.len();
        self.check_index.insert(id.clone(), index);
        self.checks.push((id, level));
        index
    }

    fn build_number(&mut self, key: BuildKey) -> usize {
        if let Some(&index) = self.build_index.get(&key) {
            return index;
        }
        let index = self.builds.len();
        self.build_index.insert(key.clone(), index);
        self.builds.push(key);
        index
    }

    /// The fleet report: checks sorted by id, builds by plugin with the most common build
    /// first, nodes non-conformant first and then by name and plugin.
    pub fn finish(self) -> FleetReport {
        let Merger {
            checks,
            builds,
            columns,
            ..
        } = self;
        let (mut rows, check_rank) = sorted_checks(&checks);
        let (builds, build_rank) = rank_builds(builds, &columns);
        let mut nodes: Vec<FleetNode> = columns
            .into_iter()
            .map(|column| {
                let build = build_rank[column.build];
                column.into_node(&check_rank, &rows, build)
            })
            .collect();
        for node in &nodes {
            for (row, status) in rows.iter_mut().zip(&node.statuses) {
                row.counts.add(*status);
            }
        }
        nodes.sort_by(|a, b| {
            (a.verdict == Verdict::Conformant, &a.name, &a.plugin).cmp(&(
                b.verdict == Verdict::Conformant,
                &b.name,
                &b.plugin,
            ))
        });
        FleetReport {
            schema: FLEET_SCHEMA.to_owned(),
            tool: ToolInfo::current(),
            summary: summary(&nodes, builds.len()),
            checks: rows,
            builds,
            nodes,
        }
    }
}

/// The fleet's rows, sorted by check id and not yet counted, and each check number's
/// rank among them.
fn sorted_checks(checks: &[(String, Level)]) -> (Vec<FleetCheck>, Vec<usize>) {
    let mut check_order: Vec<usize> = (0..checks.len()).collect();
    check_order.sort_by(|&a, &b| checks[a].0.cmp(&checks[b].0));
    let mut check_rank = vec![0; checks.len()];
    for (rank, &index) in check_order.iter().enumerate() {
        check_rank[index] = rank;
    }
    let rows = check_order
        .iter()
        .map(|&i| FleetCheck {
            id: checks[i].0.clone(),
            level: checks[i].1,
            counts: StatusCounts::default(),
        })
        .collect();
    (rows, check_rank)
}

/// The nodes' verdicts counted, and the fleet's verdict from them.
fn summary(nodes: &[FleetNode], builds: usize) -> FleetSummary {
    let non_conformant = nodes
        .iter()
        .filter(|n| n.verdict == Verdict::NonConformant)
        .count();
    let conformant = nodes
        .iter()
        .filter(|n| n.verdict == Verdict::Conformant)
        .count();
    FleetSummary {
        nodes: nodes.len(),
        conformant,
        non_conformant,
        builds,
        // A node whose plugin changed mid-run vouches for nothing.
        verdict: if non_conformant > 0 {
            Verdict::NonConformant
        } else if conformant < nodes.len() {
            Verdict::Inconclusive
        } else {
            Verdict::Conformant
        },
    }
}

impl Column {
    fn into_node(self, check_rank: &[usize], rows: &[FleetCheck], build: usize) -> FleetNode {
        let mut statuses = vec![None; rows.len()];
        for (index, status) in self.statuses.into_iter().enumerate() {
            statuses[check_rank[index]] = status;
        }
        let mut problems: Vec<Problem> = self
            .problems
            .into_iter()
            .map(|(index, status, message, reproduce)| Problem {
                id: rows[check_rank[index]].id.clone(),
                status,
                message,
                reproduce,
            })
            .collect();
        problems.sort_by(|a, b| a.id.cmp(&b.id));
        FleetNode {
            name: self.name,
            plugin: self.plugin,
            build,
            tool_version: self.tool_version,
            strict: self.strict,
            verdict: self.verdict,
            source: self.source.display().to_string(),
            started_at: self.started_at,
            duration_ms: self.duration_ms,
            statuses,
            problems,
        }
    }
}

/// The builds with their node counts, sorted by plugin, then most nodes first; and each
/// build number's position in that order.
fn rank_builds(keys: Vec<BuildKey>, columns: &[Column]) -> (Vec<Build>, Vec<usize>) {
    let mut builds: Vec<Build> = keys
        .into_iter()
        .map(|key| Build {
            plugin: key.plugin,
            sha256: key.sha256,
            version: key.version,
            nodes: 0,
            non_conformant: 0,
            most_common: false,
        })
        .collect();
    for column in columns {
        let build = &mut builds[column.build];
        build.nodes += 1;
        if column.verdict == Verdict::NonConformant {
            build.non_conformant += 1;
        }
    }
    let mut order: Vec<usize> = (0..builds.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&builds[a], &builds[b]);
        (&a.plugin, std::cmp::Reverse(a.nodes), &a.version, &a.sha256).cmp(&(
            &b.plugin,
            std::cmp::Reverse(b.nodes),
            &b.version,
            &b.sha256,
        ))
    });
    let mut rank = vec![0; builds.len()];
    for (position, &index) in order.iter().enumerate() {
        rank[index] = position;
    }
    let mut slots: Vec<Option<Build>> = builds.into_iter().map(Some).collect();
    let mut sorted: Vec<Build> = order.iter().filter_map(|&i| slots[i].take()).collect();
    // The first build of a plugin is the most common one, unless the next one ties
    // with it: then no build has the majority, and none is marked.
    for i in 0..sorted.len() {
        let first = i == 0 || sorted[i - 1].plugin != sorted[i].plugin;
        let tied = sorted
            .get(i + 1)
            .is_some_and(|next| next.plugin == sorted[i].plugin && next.nodes == sorted[i].nodes);
        sorted[i].most_common = first && !tied;
    }
    (sorted, rank)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::sample::{self, cell, node};

    #[test]
    fn the_matrix_is_checks_by_nodes_sorted() {
        let fleet = sample::fleet();
        let ids: Vec<&str> = fleet.checks.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "create.succeeds",
                "delete.succeeds",
                "fingerprint.version-semver",
                "timing.profile"
            ]
        );
        let columns: Vec<(&str, &str)> = fleet
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.plugin.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("node-c", "lvm"),
                ("node-a", "lvm"),
                ("node-a", "zfs"),
                ("node-b", "lvm")
            ]
        );
        use Status::*;
        assert_eq!(
            fleet.nodes[0].statuses,
            [Some(Fail), Some(Skip), Some(Pass), Some(Info)]
        );
        assert_eq!(
            fleet.nodes[2].statuses,
            [Some(Pass), None, Some(Warn), None]
        );
        let create = &fleet.checks[0].counts;
        assert_eq!((create.pass, create.fail, create.absent), (3, 1, 0));
        let delete = &fleet.checks[1].counts;
        assert_eq!((delete.pass, delete.skip, delete.absent), (2, 1, 1));
        assert_eq!(fleet.checks[3].level, Level::Info);
        assert_eq!(
            (
                fleet.summary.nodes,
                fleet.summary.non_conformant,
                fleet.summary.builds
            ),
            (4, 1, 3)
        );
        assert_eq!(fleet.summary.verdict, Verdict::NonConformant);
        assert_eq!(fleet.schema, FLEET_SCHEMA);
    }

    #[test]
    fn builds_group_nodes_and_the_odd_one_stands_out() {
        let fleet = sample::fleet();
        let builds: Vec<(&str, Option<&str>, usize, usize, bool)> = fleet
            .builds
            .iter()
            .map(|b| {
                let v = b.version.as_deref();
                (
                    b.plugin.as_str(),
                    v,
                    b.nodes,
                    b.non_conformant,
                    b.most_common,
                )
            })
            .collect();
        assert_eq!(
            builds,
            [
                ("lvm", Some("1.1.0"), 2, 0, true),
                ("lvm", Some("1.0.0"), 1, 1, false),
                ("zfs", Some("0.3"), 1, 0, true),
            ]
        );
        let old = &fleet.nodes[0];
        assert_eq!(old.name, "node-c");
        assert_eq!(old.build, 1);
        assert_eq!(fleet.nodes[1].build, 0);
        assert_eq!(fleet.nodes[2].build, 2);
    }

    /// One node per build: a tie has no majority, so no build is the odd one out.
    #[test]
    fn a_tie_has_no_most_common_build() {
        let mut merger = Merger::new();
        let fail = vec![cell("create.succeeds", Level::Must, Status::Fail)];
        let pass = vec![cell("create.succeeds", Level::Must, Status::Pass)];
        merger
            .add(
                Path::new("a.json"),
                node("node-a", "lvm", "aa", "1.0.0", pass),
            )
            .unwrap();
        merger
            .add(
                Path::new("b.json"),
                node("node-b", "lvm", "bb", "1.1.0", fail),
            )
            .unwrap();
        let fleet = merger.finish();
        assert!(
            fleet.builds.iter().all(|b| !b.most_common),
            "{:?}",
            fleet.builds
        );
        let md = crate::fleet::to_fleet_markdown(&fleet);
        assert!(!md.contains("not the most common build"), "{md}");
        assert_eq!(md.matches("⚠️ builds of `lvm` differ").count(), 2, "{md}");
    }

    #[test]
    fn problems_keep_the_message_and_the_reproduce_line() {
        let fleet = sample::fleet();
        let old = &fleet.nodes[0];
        assert_eq!(old.source, "reports/1.json");
        let problems: Vec<(&str, Status, bool)> = old
            .problems
            .iter()
            .map(|p| (p.id.as_str(), p.status, p.reproduce.is_some()))
            .collect();
        assert_eq!(
            problems,
            [
                ("create.succeeds", Status::Fail, true),
                ("delete.succeeds", Status::Skip, false)
            ]
        );
        let failing: Vec<&str> = old.failing().map(|p| p.id.as_str()).collect();
        assert_eq!(failing, ["create.succeeds"]);
        let warned = &fleet.nodes[2];
        assert_eq!(warned.failing().count(), 0);
        let strict = FleetNode {
            strict: true,
            ..warned.clone()
        };
        assert_eq!(strict.failing().count(), 1);
    }

    #[test]
    fn a_second_report_for_a_node_and_plugin_is_refused() {
        let mut merger = Merger::new();
        let pass = || vec![cell("create.succeeds", Level::Must, Status::Pass)];
        merger
            .add(Path::new("a.json"), node("n1", "lvm", "aa", "1", pass()))
            .unwrap();
        // The same node with another plugin is another column.
        merger
            .add(Path::new("b.json"), node("n1", "zfs", "aa", "1", pass()))
            .unwrap();
        let err = merger
            .add(Path::new("c.json"), node("n1", "lvm", "bb", "2", pass()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "node \"n1\" has two reports for plugin \"lvm\": a.json and c.json (give each node its own --node-name, or merge one report per node)"
        );
        assert_eq!(merger.len(), 2);
    }

    #[test]
    fn an_empty_fleet_is_conformant_and_empty() {
        let fleet = Merger::new().finish();
        assert_eq!(fleet.summary.nodes, 0);
        assert_eq!(fleet.summary.verdict, Verdict::Conformant);
        assert!(fleet.checks.is_empty() && fleet.builds.is_empty());
    }
}
