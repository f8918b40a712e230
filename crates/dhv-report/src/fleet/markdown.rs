//! The fleet Markdown summary (`report merge --markdown`, and stdout by default), sized
//! for a CI step summary or a ticket.
//!
//! A reader wants the verdict, then the nodes to fix, then whether a build differs; the
//! full matrix only fits a small fleet, so beyond [`MATRIX_COLUMNS`] nodes it shows the
//! first ones (non-conformant first) and the JSON report has the rest. Every text that
//! came from a report is escaped: messages and reproduce lines hold plugin output.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::model::{Build, FleetNode, FleetReport};
use crate::markdown::{code_span, escape};
use crate::model::{Status, Verdict};

/// Non-conformant nodes listed before the list is cut (a step summary holds 1 MiB).
pub const LISTED_NODES: usize = 50;
/// Node columns in the matrix before it is cut.
pub const MATRIX_COLUMNS: usize = 20;
/// Failing check ids shown per node before the rest are counted.
const LISTED_CHECKS: usize = 8;
/// How much of a SHA-256 identifies a build to a reader.
const SHORT_SHA: usize = 12;

/// Renders the verdict line, the non-conformant nodes, the plugin builds, the counts per
/// check and the matrix.
pub fn to_fleet_markdown(fleet: &FleetReport) -> String {
    let mut md = String::new();
    headline(&mut md, fleet);
    failing_nodes(&mut md, fleet);
    builds(&mut md, fleet);
    check_counts(&mut md, fleet);
    matrix(&mut md, fleet);
    md
}

fn headline(md: &mut String, fleet: &FleetReport) {
    let s = &fleet.summary;
    let builds = if s.builds == 1 { "build" } else { "builds" };
    let _ = writeln!(
        md,
        "**dhv-conform fleet**: **{}** — {} of {} node reports non-conformant, {} plugin {builds}\n",
        s.verdict, s.non_conformant, s.nodes, s.builds
    );
    let mut harnesses: BTreeMap<&str, usize> = BTreeMap::new();
    for node in &fleet.nodes {
        *harnesses.entry(node.tool_version.as_str()).or_default() += 1;
    }
    if harnesses.len() > 1 {
        let list: Vec<String> = harnesses
            .iter()
            .map(|(version, n)| format!("{} ({n})", code_span(version)))
            .collect();
        let _ = writeln!(
            md,
            "The reports come from {} harness versions: {}.\n",
            harnesses.len(),
            list.join(", ")
        );
    }
}

fn failing_nodes(md: &mut String, fleet: &FleetReport) {
    if fleet.summary.non_conformant == 0 {
        md.push_str("Every node is conformant.\n\n");
        return;
    }
    md.push_str("## Non-conformant nodes\n\n");
    md.push_str("| Node | Plugin | Build | Failing checks | Reproduce (first failing check) |\n");
    md.push_str("|---|---|---|---|---|\n");
    let failing = fleet
        .nodes
        .iter()
        .filter(|n| n.verdict == Verdict::NonConformant);
    for node in failing.clone().take(LISTED_NODES) {
        let ids: Vec<&str> = node.failing().map(|p| p.id.as_str()).collect();
        let mut shown: Vec<String> = ids
            .iter()
            .take(LISTED_CHECKS)
            .map(|id| code_span(id))
            .collect();
        if ids.len() > LISTED_CHECKS {
            shown.push(format!("and {} more", ids.len() - LISTED_CHECKS));
        }
        let reproduce = node
            .failing()
            .find_map(|p| p.reproduce.as_deref())
            .map_or("—".to_owned(), code_span);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {reproduce} |",
            code_span(&node.name),
            code_span(&node.plugin),
            fleet
                .builds
                .get(node.build)
                .map_or("unknown".to_owned(), build_label),
            shown.join(", "),
        );
    }
    let rest = failing.count().saturating_sub(LISTED_NODES);
    if rest > 0 {
        let _ = writeln!(
            md,
            "\n… and {rest} more non-conformant nodes: see the JSON report."
        );
    }
    md.push('\n');
}

fn builds(md: &mut String, fleet: &FleetReport) {
    md.push_str("## Plugin builds\n\n| Plugin | Version | SHA-256 | Nodes | Non-conformant | |\n");
    md.push_str("|---|---|---|---|---|---|\n");
    for build in &fleet.builds {
        let majority = fleet
            .builds
            .iter()
            .any(|b| b.plugin == build.plugin && b.most_common);
        let note = if build.most_common {
            "most common".to_owned()
        } else if !majority {
            format!(
                "⚠️ builds of {} differ (no build runs on most nodes)",
                code_span(&build.plugin)
            )
        } else {
            format!(
                "⚠️ not the most common build of {}",
                code_span(&build.plugin)
            )
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {note} |",
            code_span(&build.plugin),
            build
                .version
                .as_deref()
                .map_or("none".to_owned(), code_span),
            build
                .sha256
                .as_deref()
                .map_or("none".to_owned(), |s| code_span(short(s))),
            build.nodes,
            build.non_conformant,
        );
    }
    md.push('\n');
}

fn check_counts(md: &mut String, fleet: &FleetReport) {
    md.push_str("## Checks\n\n| Check | Level | pass | fail | warn | skip | info | absent |\n");
    md.push_str("|---|---|---|---|---|---|---|---|\n");
    for check in &fleet.checks {
        let c = &check.counts;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            code_span(&check.id),
            check.level,
            c.pass,
            c.fail,
            c.warn,
            c.skip,
            c.info,
            c.absent
        );
    }
    md.push('\n');
}

fn matrix(md: &mut String, fleet: &FleetReport) {
    let columns: Vec<&FleetNode> = fleet.nodes.iter().take(MATRIX_COLUMNS).collect();
    if columns.is_empty() {
        return;
    }
    let many_plugins = fleet.nodes.iter().any(|n| n.plugin != columns[0].plugin);
    md.push_str("## Matrix\n\n");
    if fleet.nodes.len() > columns.len() {
        let _ = writeln!(
            md,
            "The first {} of {} node reports, non-conformant first; the JSON report has them all.\n",
            columns.len(),
            fleet.nodes.len()
        );
    }
    md.push_str("| Check |");
    for node in &columns {
        let label = if many_plugins {
            format!("{}<br>{}", escape(&node.name), escape(&node.plugin))
        } else {
            escape(&node.name)
        };
        let _ = write!(md, " {label} |");
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(columns.len()));
    md.push('\n');
    for (row, check) in fleet.checks.iter().enumerate() {
        let _ = write!(md, "| {} |", code_span(&check.id));
        for node in &columns {
            let _ = write!(
                md,
                " {} |",
                symbol(node.statuses.get(row).copied().flatten())
            );
        }
        md.push('\n');
    }
    md.push_str("\n✅ pass · ❌ fail · ⚠️ warn · ⏭️ skip · ℹ️ info · — no result\n");
}

fn symbol(status: Option<Status>) -> &'static str {
    match status {
        Some(Status::Pass) => "✅",
        Some(Status::Fail) => "❌",
        Some(Status::Warn) => "⚠️",
        Some(Status::Skip) => "⏭️",
        Some(Status::Info) => "ℹ️",
        None => "—",
    }
}

fn build_label(build: &Build) -> String {
    let version = build
        .version
        .as_deref()
        .map_or("no version".to_owned(), code_span);
    match &build.sha256 {
        Some(sha) => format!("{version} {}", code_span(short(sha))),
        None => version,
    }
}

fn short(sha: &str) -> &str {
    sha.get(..SHORT_SHA).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Merger;
    use crate::fleet::sample::{self, cell, node};
    use crate::model::Level;
    use std::path::Path;

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_fleet_markdown(&sample::fleet()), @r#"
            **dhv-conform fleet**: **non-conformant** — 1 of 4 node reports non-conformant, 3 plugin builds

            ## Non-conformant nodes

            | Node | Plugin | Build | Failing checks | Reproduce (first failing check) |
            |---|---|---|---|---|
            | `node-c` | `lvm` | `1.0.0` `60303ae22b99` | `create.succeeds` | `env -i DHV_OPERATION=create /p/create.succeeds create` |

            ## Plugin builds

            | Plugin | Version | SHA-256 | Nodes | Non-conformant | |
            |---|---|---|---|---|---|
            | `lvm` | `1.1.0` | `9f86d081884c` | 2 | 0 | most common |
            | `lvm` | `1.0.0` | `60303ae22b99` | 1 | 1 | ⚠️ not the most common build of `lvm` |
            | `zfs` | `0.3` | `9f86d081884c` | 1 | 0 | most common |

            ## Checks

            | Check | Level | pass | fail | warn | skip | info | absent |
            |---|---|---|---|---|---|---|---|
            | `create.succeeds` | must | 3 | 1 | 0 | 0 | 0 | 0 |
            | `delete.succeeds` | must | 2 | 0 | 0 | 1 | 0 | 1 |
            | `fingerprint.version-semver` | should | 3 | 0 | 1 | 0 | 0 | 0 |
            | `timing.profile` | info | 0 | 0 | 0 | 0 | 3 | 1 |

            ## Matrix

            | Check | node-c<br>lvm | node-a<br>lvm | node-a<br>zfs | node-b<br>lvm |
            |---|---|---|---|---|
            | `create.succeeds` | ❌ | ✅ | ✅ | ✅ |
            | `delete.succeeds` | ⏭️ | ✅ | — | ✅ |
            | `fingerprint.version-semver` | ✅ | ✅ | ⚠️ | ✅ |
            | `timing.profile` | ℹ️ | ℹ️ | — | ℹ️ |

            ✅ pass · ❌ fail · ⚠️ warn · ⏭️ skip · ℹ️ info · — no result
        "#);
    }

    #[test]
    fn a_conformant_fleet_says_so_and_lists_no_node() {
        let mut merger = Merger::new();
        let pass = vec![cell("create.succeeds", Level::Must, Status::Pass)];
        merger
            .add(Path::new("a.json"), node("n|1", "lvm", "aa", "1", pass))
            .unwrap();
        let md = to_fleet_markdown(&merger.finish());
        assert!(md.starts_with("**dhv-conform fleet**: **conformant** — 0 of 1 node reports non-conformant, 1 plugin build\n"), "{md}");
        assert!(md.contains("Every node is conformant."));
        assert!(!md.contains("## Non-conformant nodes"));
        // A node name cannot break the matrix's header row.
        assert!(md.contains(r"| Check | n\|1 |"), "{md}");
    }

    #[test]
    fn a_hand_edited_fleet_renders_without_panicking() {
        let mut fleet = sample::fleet();
        fleet.nodes[0].build = 99;
        fleet.nodes[1].statuses.clear();
        let md = to_fleet_markdown(&fleet);
        assert!(md.contains("| `node-c` | `lvm` | unknown |"), "{md}");
        let xml = crate::fleet::to_fleet_junit(&fleet);
        assert!(xml.contains(r#"<property name="plugin.sha256" value="none"/>"#));
    }

    #[test]
    fn a_large_fleet_is_cut_and_says_where_the_rest_is() {
        let mut merger = Merger::new();
        for i in 0..LISTED_NODES + 10 {
            let cells = vec![cell("create.succeeds", Level::Must, Status::Fail)];
            let report = node(&format!("n{i:03}"), "lvm", "aa", "1", cells);
            merger.add(Path::new(&format!("{i}.json")), report).unwrap();
        }
        let md = to_fleet_markdown(&merger.finish());
        assert_eq!(
            md.matches("| `create.succeeds` | `env -i").count(),
            LISTED_NODES
        );
        assert!(md.contains("… and 10 more non-conformant nodes: see the JSON report."));
        assert!(md.contains(&format!("The first {MATRIX_COLUMNS} of 60 node reports")));
        let header = md
            .lines()
            .find(|l| l.starts_with("| Check | n000"))
            .unwrap();
        assert_eq!(header.matches(" |").count(), MATRIX_COLUMNS + 1);
    }
}
