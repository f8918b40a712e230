//! The fleet page (`report merge --html`): the checks × nodes matrix as a heat map, the
//! plugin builds with the ones that differ marked, and each node linking to its first
//! finding.

use std::fmt::Write as _;

use super::escape::{attr, text};
use super::{foot, head};
use crate::fleet::{FleetCheck, FleetNode, FleetReport, StatusCounts};
use crate::model::Status;

/// The most node columns the heat map draws; the node list below it has them all (the
/// non-conformant ones come first, so the odd nodes are always drawn).
const MAX_COLUMNS: usize = 400;

/// Renders the fleet report as one self-contained HTML page.
pub fn to_fleet_html(fleet: &FleetReport) -> String {
    let s = &fleet.summary;
    let verdict = s.verdict.as_str();
    let title = format!("dhv-conform fleet: {verdict} — {} nodes", s.nodes);
    let mut out = head(&title);
    let _ = write!(
        out,
        "<body data-verdict=\"{verdict}\">\n<header class=\"top {verdict}\"><h1 id=\"verdict\">{}</h1>\
         <p class=\"counts\"><span id=\"nodes\">{} nodes</span><span>{} conformant</span>\
         <span>{} non-conformant</span><span>{} builds</span></p></header>\n\
         <nav><a href=\"#builds\">builds</a><a href=\"#matrix\">checks × nodes</a><a href=\"#node-list\">nodes</a></nav>\n",
        verdict.to_uppercase(),
        s.nodes,
        s.conformant,
        s.non_conformant,
        s.builds,
    );
    builds(&mut out, fleet);
    matrix(&mut out, fleet);
    nodes(&mut out, fleet);
    out.push_str(&foot(&fleet.tool, &fleet.schema));
    out
}

fn short(sha: Option<&str>) -> String {
    match sha {
        Some(sha) => sha.chars().take(12).collect(),
        None => "none".to_owned(),
    }
}

/// The builds, per plugin, the most common first; the others marked.
fn builds(out: &mut String, fleet: &FleetReport) {
    out.push_str(
        "<section id=\"builds\"><h2>Plugin builds</h2>\n<table class=\"builds\"><tr><th>plugin</th>\
         <th>sha256</th><th>version</th><th>nodes</th><th>non-conformant</th><th></th></tr>\n",
    );
    for (i, b) in fleet.builds.iter().enumerate() {
        let (class, mark) = if b.most_common {
            ("", "most common build")
        } else {
            (" class=\"differs\"", "◆ differs from the most common build")
        };
        let _ = writeln!(
            out,
            "<tr id=\"build-{i}\"{class}><td>{}</td><td><code title=\"{}\">{}</code></td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{mark}</td></tr>",
            text(&b.plugin),
            attr(b.sha256.as_deref().unwrap_or("none")),
            text(&short(b.sha256.as_deref())),
            text(b.version.as_deref().unwrap_or("none")),
            b.nodes,
            b.non_conformant,
        );
    }
    out.push_str("</table></section>\n");
}

/// Where a node's column header links: its first finding, else its card.
fn first_finding(i: usize, node: &FleetNode) -> String {
    if node.problems.is_empty() {
        format!("#node-{i}")
    } else {
        format!("#node-{i}-finding-0")
    }
}

fn odd_build(fleet: &FleetReport, node: &FleetNode) -> bool {
    fleet.builds.get(node.build).is_some_and(|b| !b.most_common)
}

fn letter(status: Option<Status>) -> (&'static str, &'static str) {
    match status {
        Some(Status::Pass) => ("st-pass", ""),
        Some(Status::Fail) => ("st-fail", "F"),
        Some(Status::Warn) => ("st-warn", "W"),
        Some(Status::Skip) => ("st-skip", "S"),
        Some(Status::Info) => ("st-info", "i"),
        None => ("st-absent", ""),
    }
}

/// The heat map: a row per check, a column per node.
fn matrix(out: &mut String, fleet: &FleetReport) {
    let shown = &fleet.nodes[..fleet.nodes.len().min(MAX_COLUMNS)];
    out.push_str("<section id=\"matrix\"><h2>Checks × nodes</h2>\n");
    out.push_str(
        "<p class=\"legend\"><span class=\"swatch st-pass\"></span>pass<span class=\"swatch st-fail\"></span>fail (F)\
         <span class=\"swatch st-warn\"></span>warn (W)<span class=\"swatch st-skip\"></span>skip (S)\
         <span class=\"swatch st-info\"></span>info<span class=\"swatch st-absent\"></span>absent; \
         non-conformant nodes come first, in red; ◆ marks a node on a build that differs from its plugin's most common one. \
         A node's name links to its first finding.</p>\n",
    );
    if shown.len() < fleet.nodes.len() {
        let _ = writeln!(
            out,
            "<p class=\"note\">The map draws the first {} of {} nodes; the list below has every node.</p>",
            shown.len(),
            fleet.nodes.len()
        );
    }
    matrix_head(out, fleet, shown);
    for (row, check) in fleet.checks.iter().enumerate() {
        matrix_row(out, row, check, shown);
    }
    out.push_str("</tbody></table></section>\n");
}

/// The table's head: a column per node shown, named and linked to its first finding.
fn matrix_head(out: &mut String, fleet: &FleetReport, shown: &[FleetNode]) {
    out.push_str("<table class=\"heat\"><thead><tr><th></th><th></th>");
    for (i, node) in shown.iter().enumerate() {
        let odd = odd_build(fleet, node);
        let _ = write!(
            out,
            "<th class=\"node {}{}\"><a href=\"{}\" title=\"{} ({}, build {})\">{}{}</a></th>",
            node.verdict.as_str(),
            if odd { " odd-build" } else { "" },
            first_finding(i, node),
            attr(&node.name),
            attr(&node.plugin),
            node.build,
            if odd { "◆ " } else { "" },
            text(&node.name),
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
}

/// One check's row: its id, level and counts, then its status on each node shown.
fn matrix_row(out: &mut String, row: usize, check: &FleetCheck, shown: &[FleetNode]) {
    let _ = write!(
        out,
        "<tr data-check=\"{}\"><th class=\"check\"><code>{}</code> <span class=\"lvl\">{}</span></th>\
         <td class=\"cnt\">{}</td>",
        attr(&check.id),
        text(&check.id),
        check.level,
        counts(&check.counts)
    );
    for node in shown {
        let status = node.statuses.get(row).copied().flatten();
        let (class, mark) = letter(status);
        let _ = write!(
            out,
            "<td class=\"{class}\" title=\"{}: {}\">{mark}</td>",
            attr(&node.name),
            status.map_or("absent", |s| s.as_str())
        );
    }
    out.push_str("</tr>\n");
}

/// A check's non-zero counts, failures first: "2 fail, 5 pass".
fn counts(c: &StatusCounts) -> String {
    let mut counts = Vec::new();
    for (n, word) in [
        (c.fail, "fail"),
        (c.warn, "warn"),
        (c.skip, "skip"),
        (c.info, "info"),
        (c.pass, "pass"),
        (c.absent, "absent"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {word}"));
        }
    }
    counts.join(", ")
}

/// Every node: its build, its verdict, and the checks that did not pass.
fn nodes(out: &mut String, fleet: &FleetReport) {
    out.push_str("<section id=\"node-list\"><h2>Nodes</h2>\n");
    for (i, node) in fleet.nodes.iter().enumerate() {
        let build = fleet.builds.get(node.build);
        let _ = writeln!(
            out,
            "<div class=\"node-card\" id=\"node-{i}\" data-verdict=\"{}\"><h3>{}{} \
             <span class=\"badge st-{}\">{}</span></h3><p class=\"note\">plugin {}, build {} (sha256 {}, version {}), \
             harness {}{}, from {}</p>",
            node.verdict.as_str(),
            if odd_build(fleet, node) { "◆ " } else { "" },
            text(&node.name),
            if node.verdict.exit_code() == 0 {
                "pass"
            } else {
                "fail"
            },
            node.verdict.as_str(),
            text(&node.plugin),
            node.build,
            text(&short(build.and_then(|b| b.sha256.as_deref()))),
            text(build.and_then(|b| b.version.as_deref()).unwrap_or("none")),
            text(&node.tool_version),
            if node.strict { ", strict" } else { "" },
            text(&node.source),
        );
        if !node.problems.is_empty() {
            out.push_str("<ul>\n");
        }
        for (j, p) in node.problems.iter().enumerate() {
            let _ = write!(
                out,
                "<li id=\"node-{i}-finding-{j}\"><span class=\"badge st-{}\">{}</span> <code>{}</code>: {}",
                p.status.as_str(),
                p.status.as_str(),
                text(&p.id),
                text(&p.message)
            );
            if let Some(line) = &p.reproduce {
                let _ = write!(out, "<pre class=\"reproduce\">{}</pre>", text(line));
            }
            out.push_str("</li>\n");
        }
        if !node.problems.is_empty() {
            out.push_str("</ul>\n");
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
}
