//! The page of one run: verdict and counts, the run's facts, the checks grouped by
//! group (failures and warnings first, each expandable to its calls), the timeline and
//! the duration distributions.

use std::fmt::Write as _;

use super::escape::{attr, push_text, text};
use super::style::outcome_class;
use super::{distribution, foot, head, ms, timeline};
use crate::SandboxOutcome;
use crate::model::{CheckResult, Invocation, Report, RunOptions, Status};

/// Renders the report as one self-contained HTML page.
pub fn to_html(report: &Report) -> String {
    let verdict = report.summary.verdict.as_str();
    let title = format!("dhv-conform: {verdict} — {}", report.plugin.path);
    let mut out = head(&title);
    let _ = writeln!(out, "<body data-verdict=\"{verdict}\">");
    top(&mut out, report);
    out.push_str(
        "<nav><a href=\"#run\">run</a><a href=\"#checks\">checks</a>\
         <a href=\"#timeline\">timeline</a><a href=\"#durations\">durations</a></nav>\n",
    );
    facts(&mut out, report);
    checks(&mut out, report);
    out.push_str(&timeline::section(report));
    out.push_str(&distribution::section(report));
    out.push_str(&foot(&report.tool, &report.schema));
    out
}

/// The verdict and the counts.
fn top(out: &mut String, report: &Report) {
    let s = &report.summary;
    let verdict = s.verdict.as_str();
    let _ = writeln!(
        out,
        "<header class=\"top {verdict}\"><h1 id=\"verdict\">{}</h1>\
         <p class=\"counts\"><span id=\"total\">{} checks</span><span>{} passed</span>\
         <span>{} failed</span><span>{} warnings</span><span>{} skipped</span><span>{} info</span></p>\
         <p>{}</p></header>",
        verdict.to_uppercase(),
        s.total,
        s.passed,
        s.failed,
        s.warned,
        s.skipped,
        s.info,
        text(&report.plugin.path),
    );
    if let Some(change) = &report.plugin_changed {
        let _ = writeln!(
            out,
            "<p class=\"plugin-changed\" id=\"plugin-changed\"><strong>Plugin changed mid-run</strong>: {}</p>",
            text(&change.describe())
        );
    }
}

/// The plugin, the node, the conditions and the options the run was made with.
fn facts(out: &mut String, report: &Report) {
    let mut rows = plugin_facts(report);
    rows.extend(run_facts(report));
    rows.push(("config", config_fact(&report.options)));
    if let Some(sb) = &report.sandbox {
        rows.push(("temp dir", sandbox_fact(sb)));
    }
    out.push_str("<section id=\"run\"><h2>Run</h2><dl class=\"facts\">\n");
    for (key, value) in rows {
        let _ = writeln!(out, "<dt>{key}</dt><dd>{value}</dd>");
    }
    out.push_str("</dl></section>\n");
}

/// The plugin's path, digest and version, and the contract it was checked against.
fn plugin_facts(report: &Report) -> Vec<(&'static str, String)> {
    let p = &report.plugin;
    let version = match &p.version {
        Some(v) => format!(
            "{} (canonical {}, {})",
            text(&v.raw),
            text(v.canonical.as_deref().unwrap_or("none")),
            if v.semver { "SemVer" } else { "not SemVer" }
        ),
        None => "none: fingerprint failed".to_owned(),
    };
    vec![
        (
            "plugin",
            text(&p.path) + if p.builtin { " (built-in)" } else { "" },
        ),
        ("sha256", text(p.sha256.as_deref().unwrap_or("none"))),
        ("version", version),
        ("contract", text(&report.spec)),
    ]
}

/// The node, when and how long the run was, and the machine's cores and load.
fn run_facts(report: &Report) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(node) = &report.node {
        rows.push(("node", text(&node.name)));
    }
    if let Some(at) = &report.started_at {
        rows.push(("started", text(at)));
    }
    if let Some(d) = report.duration_ms {
        rows.push(("wall time", ms(d as f64)));
    }
    if let Some(c) = &report.conditions {
        let load = |l: &Option<[f64; 3]>| match l {
            Some([a, b, c]) => format!("{a:.2} {b:.2} {c:.2}"),
            None => "unknown".to_owned(),
        };
        rows.push(("cores", c.cores.to_string()));
        rows.push((
            "load average",
            format!(
                "{} at the start, {} at the end (1, 5, 15 min)",
                load(&c.load_average_start),
                load(&c.load_average_end)
            ),
        ));
    }
    rows
}

/// The options the run was made with.
fn config_fact(o: &RunOptions) -> String {
    format!(
        "strict {}, timeout scale {}, fixture {}{}",
        o.strict,
        o.timeout_scale,
        text(o.fixture.as_deref().unwrap_or("none (the default request)")),
        if o.filtered {
            ", filtered: some checks were left out"
        } else {
            ""
        }
    )
}

/// Whether the run's temp dir went, and what a delete left in it.
fn sandbox_fact(sb: &SandboxOutcome) -> String {
    let mut what = vec![if sb.removed { "removed" } else { "not removed" }.to_owned()];
    for (list, name) in [
        (&sb.mounts_left, "mounts a delete left"),
        (&sb.loops_left, "loop devices a delete left"),
        (&sb.kept, "still there"),
    ] {
        if !list.is_empty() {
            what.push(format!("{name}: {}", text(&list.join(", "))));
        }
    }
    what.join("; ")
}

/// Where a status sorts: failures first, passes last.
fn rank(status: Status) -> u8 {
    match status {
        Status::Fail => 0,
        Status::Warn => 1,
        Status::Skip => 2,
        Status::Info => 3,
        Status::Pass => 4,
    }
}

/// The checks, grouped by group: the groups with the worst result first, and in each
/// group failures and warnings first.
fn checks(out: &mut String, report: &Report) {
    let mut groups: Vec<(&str, Vec<&CheckResult>)> = Vec::new();
    for check in report.checks_by_id() {
        match groups.iter_mut().find(|(g, _)| *g == check.group) {
            Some((_, list)) => list.push(check),
            None => groups.push((&check.group, vec![check])),
        }
    }
    for (_, list) in &mut groups {
        list.sort_by_key(|c| rank(c.status));
    }
    let worst = |list: &[&CheckResult]| list.iter().map(|c| rank(c.status)).min().unwrap_or(9);
    groups.sort_by(|a, b| worst(&a.1).cmp(&worst(&b.1)).then(a.0.cmp(b.0)));
    out.push_str("<section id=\"checks\"><h2>Checks</h2>\n");
    let mut budget = DETAILED_CALLS;
    for (group, list) in groups {
        let _ = writeln!(
            out,
            "<h3 class=\"group\">{} <span class=\"note\">({} checks)</span></h3>",
            text(group),
            list.len()
        );
        for check in list {
            one_check(out, check, &mut budget);
        }
    }
    out.push_str("</section>\n");
}

/// How many calls a page shows with their output and reproduce line, in the order the
/// checks are shown (failures first); an unclean call of a finding always is. A run
/// lists fewer (at most 20 per check); past it, a synthetic or merged report of tens of
/// thousands of calls keeps a page a browser opens in a second or two, and the JSON
/// report has the rest.
const DETAILED_CALLS: usize = 2_000;

fn one_check(out: &mut String, check: &CheckResult, budget: &mut usize) {
    let status = check.status.as_str();
    let open = if check.status == Status::Fail {
        " open"
    } else {
        ""
    };
    let first = check.message.lines().next().unwrap_or_default();
    let _ = write!(
        out,
        "<details class=\"check\" id=\"check-{}\" data-status=\"{status}\"{open}><summary>\
         <span class=\"badge st-{status}\">{status}</span><code class=\"id\">{}</code>\
         <span class=\"lvl\">{}</span><span class=\"dur\">{}</span>\
         <span class=\"ncalls\">{} calls</span><span class=\"first\">{}</span></summary>\n<div class=\"body\">",
        attr(&check.id),
        text(&check.id),
        check.level,
        ms(check.duration_ms as f64),
        check.invocations.len(),
        text(first),
    );
    out.push_str("<pre class=\"msg\">");
    push_text(out, &check.message);
    out.push_str("</pre>\n");
    if !check.invocations.is_empty() {
        out.push_str(
            "<table class=\"calls\"><tr><th>#</th><th>operation</th><th>outcome</th>\
             <th>start</th><th>duration</th><th>in flight</th></tr>\n",
        );
        // A finding's unclean calls show their output at once: it is the evidence.
        let finding = matches!(check.status, Status::Fail | Status::Warn);
        let mut left_out = false;
        for (i, call) in check.invocations.iter().enumerate() {
            let evidence = finding && !call.is_clean();
            let detail = if evidence || *budget > 0 {
                *budget = budget.saturating_sub(1);
                Detail::Shown { open: evidence }
            } else {
                left_out = true;
                Detail::InTheJson
            };
            one_call(out, i + 1, call, detail);
        }
        out.push_str("</table>\n");
        if left_out {
            let _ = writeln!(
                out,
                "<p class=\"note\">The page shows the output and reproduce line of the first \
                 {DETAILED_CALLS} calls (and of every unclean call of a finding); the JSON report \
                 has those of the calls above without them.</p>"
            );
        }
    }
    out.push_str("</div></details>\n");
}

/// Whether a call's output and reproduce line are in the page.
#[derive(Clone, Copy)]
enum Detail {
    /// Shown, open at once or on a click.
    Shown { open: bool },
    /// Past [`DETAILED_CALLS`]: only in the JSON report.
    InTheJson,
}

fn one_call(out: &mut String, n: usize, call: &Invocation, detail: Detail) {
    let start = call.started_ms.map_or_else(|| "?".to_owned(), ms);
    let in_flight = call
        .in_flight
        .map_or_else(|| "not counted".to_owned(), |n| n.to_string());
    let _ = writeln!(
        out,
        "<tr class=\"call\"><td>{n}</td><td><code>{}</code></td>\
         <td><span class=\"swatch {}\"></span>{}</td><td>{start}</td><td>{}</td><td>{in_flight}</td></tr>",
        text(&call.operation),
        outcome_class(call),
        text(&call.outcome()),
        ms(call.duration_ms),
    );
    let open = match detail {
        Detail::Shown { open } => open,
        Detail::InTheJson => return,
    };
    let _ = write!(
        out,
        "<tr><td></td><td class=\"out\" colspan=\"5\"><details class=\"io\"{}><summary>output and reproduce line</summary>",
        if open { " open" } else { "" },
    );
    for s in call.streams() {
        let (name, body) = (s.name, s.text);
        if body.is_empty() {
            let _ = write!(out, "<div class=\"note\">{name}: empty</div>");
            continue;
        }
        let cut = if s.truncated {
            " (cut at the capture cap)"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<div class=\"note\">{name}{cut}:</div><pre class=\"{name}\">"
        );
        push_text(out, body);
        out.push_str("</pre>");
    }
    if !call.leftovers.is_empty() {
        out.push_str("<div class=\"note\">left behind:</div><pre class=\"orphans\">");
        push_text(out, &call.leftovers.join("\n"));
        out.push_str("</pre>");
    }
    out.push_str("<div class=\"note\">reproduce:</div><pre class=\"reproduce\">");
    push_text(out, &call.reproduce);
    out.push_str("</pre></details></td></tr>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Level, PluginInfo, RunOptions};

    fn check(id: &str, status: Status, calls: usize, exit: i32) -> CheckResult {
        CheckResult {
            id: id.to_owned(),
            group: "g".to_owned(),
            level: Level::Must,
            status,
            message: "m".to_owned(),
            duration_ms: 1,
            invocations: vec![
                Invocation {
                    operation: "create".to_owned(),
                    exit_code: Some(exit),
                    reproduce: "env -i x".to_owned(),
                    ..Invocation::default()
                };
                calls
            ],
            unpinned: None,
            needs: None,
            phase: None,
        }
    }

    #[test]
    fn past_the_budget_calls_keep_their_rows_and_findings_their_evidence() {
        let checks = vec![
            check("a.pass", Status::Pass, 1500, 0),
            check("b.pass", Status::Pass, 1500, 0),
            check("c.fail", Status::Fail, 3, 1),
        ];
        let report = Report::new(
            "nomad-1.10",
            PluginInfo::default(),
            RunOptions::default(),
            checks,
            Vec::new(),
        );
        let page = to_html(&report);
        assert_eq!(page.matches("<tr class=\"call\">").count(), 3003);
        // The failure's three calls come first, open; then 1,997 more: all of
        // a.pass, 497 of b.pass.
        assert_eq!(page.matches("<details class=\"io\" open>").count(), 3);
        assert_eq!(
            page.matches("<details class=\"io\"").count(),
            DETAILED_CALLS
        );
        assert_eq!(
            page.matches("the JSON report has those").count(),
            1,
            "b.pass only"
        );
    }
}
