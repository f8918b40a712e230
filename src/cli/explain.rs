//! `dhv-conform explain <ID>`: the rule behind one check, why Nomad cares, and
//! how to fix a failure; `--all --markdown` renders `docs/checks.md`.
//!
//! The rules travel with the tool: a plugin author reading a failure in a CI
//! log has the binary, not necessarily the project's docs.

use std::fmt::Write as _;

use super::{CliError, CliResult, EXIT_OK};
use crate::conformance::{CATALOGUE, CheckSpec};

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The check id, e.g. `create.idempotent`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub id: Option<String>,
    /// Explain every check.
    #[arg(long)]
    pub all: bool,
    /// Markdown instead of plain text (`--all --markdown` is docs/checks.md).
    #[arg(long)]
    pub markdown: bool,
}

/// Runs `explain`.
pub fn run(args: ExplainArgs) -> CliResult {
    let entries: Vec<&CheckSpec> = match &args.id {
        None => CATALOGUE.iter().collect(),
        Some(id) => match CATALOGUE.iter().find(|s| s.id == id.as_str()) {
            Some(spec) => vec![spec],
            None => return Err(unknown(id)),
        },
    };
    let text = if args.markdown && args.all {
        checks_markdown()
    } else if args.markdown {
        entries.iter().map(|s| markdown_entry(s)).collect()
    } else {
        let parts: Vec<String> = entries.iter().map(|s| plain_entry(s)).collect();
        parts.join("\n")
    };
    super::print_stdout(&text);
    Ok(EXIT_OK)
}

/// Exit 2 naming the ids a typo was probably meant to be.
fn unknown(id: &str) -> CliError {
    let close = close_ids(id);
    let hint = if close.is_empty() {
        "; `dhv-conform check --list` lists every check".to_owned()
    } else {
        format!("; did you mean {}?", close.join(", "))
    };
    CliError::usage(format!("no check has the id {id:?}{hint}"))
}

/// Catalogue ids that contain `id`, share its group, or are a few edits away.
pub fn close_ids(id: &str) -> Vec<&'static str> {
    let group = id.split('.').next().unwrap_or(id);
    let mut close: Vec<(usize, &'static str)> = CATALOGUE
        .iter()
        .filter_map(|s| {
            let d = distance(id, s.id);
            let related = (!id.is_empty() && s.id.contains(id)) || d <= 3;
            related.then_some((d, s.id))
        })
        .collect();
    if close.is_empty() {
        close = CATALOGUE
            .iter()
            .filter(|s| s.group() == group)
            .map(|s| (0, s.id))
            .collect();
    }
    close.sort();
    close.into_iter().map(|(_, id)| id).take(6).collect()
}

/// Levenshtein distance, over chars; ids are short, so the quadratic cost is nothing.
pub(super) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

fn plain_entry(spec: &CheckSpec) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} ({})", spec.id, spec.level);
    let _ = writeln!(out, "  rule: {}", spec.rule);
    let _ = writeln!(out, "  why Nomad cares: {}", spec.why);
    let _ = writeln!(out, "  how to fix it: {}", spec.fix);
    if let Some(why) = spec.varies {
        let _ = writeln!(
            out,
            "  in a snapshot: [VARIES: {why}] for its message when it fails or warns"
        );
    }
    let _ = writeln!(
        out,
        "  sample plugins with this fault: {}",
        samples(spec, false)
    );
    out
}

fn samples(spec: &CheckSpec, links: bool) -> String {
    if spec.samples.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<String> = spec
        .samples
        .iter()
        .map(|s| {
            if links {
                format!("[`{s}`](../sample-plugins/{s})")
            } else {
                format!("sample-plugins/{s}")
            }
        })
        .collect();
    names.join(", ")
}

fn markdown_entry(spec: &CheckSpec) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### `{}` ({})\n", spec.id, spec.level);
    let _ = writeln!(out, "- **Rule:** {}", spec.rule);
    let _ = writeln!(out, "- **Why Nomad cares:** {}", spec.why);
    let _ = writeln!(out, "- **How to fix it:** {}", spec.fix);
    if let Some(why) = spec.varies {
        // Its words differ between runs of one plugin: a snapshot pins its status only.
        let _ = writeln!(
            out,
            "- **In a snapshot:** when it fails or warns, its status; its message reads `[VARIES: {why}]`"
        );
    }
    let _ = writeln!(out, "- **Sample plugin:** {}\n", samples(spec, true));
    out
}

/// The whole of `docs/checks.md`.
pub fn checks_markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "<!-- Generated by `dhv-conform explain --all --markdown` from the check definitions \
         in src/conformance/checks/; a test keeps it in sync. Do not edit by hand. -->\n\n",
    );
    out.push_str("# The conformance checks\n\n");
    out.push_str(introduction());
    out.push_str("| id | level | rule |\n|---|---|---|\n");
    for spec in CATALOGUE {
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | {} | {} |",
            spec.id,
            anchor(spec),
            spec.level,
            spec.rule.replace('|', "\\|")
        );
    }
    let mut group = "";
    for spec in CATALOGUE {
        if spec.group() != group {
            group = spec.group();
            let _ = writeln!(out, "\n## {group}");
        }
        out.push('\n');
        out.push_str(&markdown_entry(spec));
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// What every check shares, before the list: how a plugin is run, the
/// levels and statuses, the default request, skips and findings.
fn introduction() -> &'static str {
    "What `dhv-conform check PLUGIN` verifies. Every check runs the plugin exactly as a \
     Nomad client does (cleared environment, the `DHV_*` variables, stdin `/dev/null`), \
     with its own volumes dir and fresh volume ids. Ids are stable: filters, reports and \
     snapshots use them. `dhv-conform explain ID` prints one entry.\n\n\
     Levels: **must** failures make the plugin non-conformant (exit 1); **should** \
     failures are warnings (failures under `--strict`); **info** is a measurement.\n\n\
     Statuses: **pass**; **fail** (a must, or a should under `--strict`); **warn** (a \
     should that failed); **skip**, always with its reason; **info**, a measurement.\n\n\
     The default request, which every check starts from and a `--fixture` replaces: \
     volume name `conformance-` and the first 8 hex digits of the volume id (a fresh \
     lower-case UUID per volume), namespace `default`, node pool `default`, \
     capacity_min 50000000 and capacity_max 100000000 bytes, no parameters.\n\n\
     A check is skipped, with its reason, when it cannot judge: `needs X` when a check \
     it builds on did not pass (that check reports the cause once), and `inconclusive: \
     … timed out alone too` when a call it compares or diagnoses timed out and timed out \
     again when made alone. Calls are made many at once; one that times out only under \
     the run's own load is made again with no other call of the run in flight, and the \
     verdict rests on that call. A call of the operation a check is about that fails \
     beside other calls is made again alone too: when it then succeeds, the check goes on \
     from it and cites `process.repeatable`, which reports that race once (the concurrency \
     checks, whose question is the company itself, keep what they met). Once a plugin \
     is seen touching the process that runs it (moving it into a cgroup, freezing its \
     cgroup, tracing it), the harness undoes it, `process.agent-untouched` fails (even \
     when a filter left it out), and every check that had not started is skipped \
     `skipped: the plugin interfered with the harness (see process.agent-untouched)`.\n\n\
     One root cause gives one finding. A delete that fails on a volume holding data is \
     `delete.succeeds`'s; a create that fails for an existing volume is \
     `create.idempotent`'s; volumes that share a path are `create.distinct`'s; what every \
     create and delete leaves behind is `delete.no-residue`'s; an overrun confirmed alone is \
     the deadline check's. The other checks that meet the same cause skip `needs X` or \
     cite X in their message instead of failing again.\n\n"
}

/// GitHub's heading anchor for an entry: lower case, punctuation but `-` dropped.
fn anchor(spec: &CheckSpec) -> String {
    format!("{} {}", spec.id, spec.level)
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_ascii_alphanumeric() || c == '-' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_ids_table() {
        assert_eq!(close_ids("create.idempotnt"), ["create.idempotent"]);
        assert!(close_ids("idempotent").contains(&"delete.idempotent"));
        assert!(close_ids("timing.nothing").contains(&"timing.margin"));
        assert!(close_ids("zzz").is_empty());
    }

    #[test]
    fn anchors_match_github() {
        let spec = CATALOGUE
            .iter()
            .find(|s| s.id == "create.idempotent")
            .unwrap();
        assert_eq!(anchor(spec), "createidempotent-must");
    }

    /// The skip a plugin that touched the harness gives the checks not yet
    /// started is the one the introduction quotes.
    #[test]
    fn the_introduction_quotes_the_interference_skip() {
        let skip = crate::conformance::INTERFERED_SKIP;
        assert!(introduction().contains(&format!("`{skip}`")), "{skip}");
    }
}
