//! The Markdown summary (`--markdown`), sized for `$GITHUB_STEP_SUMMARY` and PR comments.
//!
//! A reviewer wants the verdict in one line and only what needs attention below it, so
//! passing checks are counted, not listed. Messages come from plugins and hostile-input
//! checks, so every piece of report text is escaped before it reaches the Markdown.

use std::fmt::Write as _;

use super::escape::printable;
use super::model::{CheckResult, Invocation, Report, Status, Summary};

/// Renders the verdict line, a table of failed and warned checks (failures first, then by
/// id), a collapsed list of skips with their reasons, and the counts.
pub fn to_markdown(report: &Report) -> String {
    let checks = report.checks_by_id();
    let mut md = String::new();
    headline(&mut md, report);
    if let Some(signal) = &report.interrupted {
        let _ = writeln!(
            md,
            "**Interrupted by {}**: the checks it cut short are skipped (`interrupted`); the verdict covers only the checks that finished.\n",
            escape(signal)
        );
    }
    if let Some(change) = &report.plugin_changed {
        let _ = writeln!(
            md,
            "**Plugin changed mid-run**: {}.\n",
            escape(&change.describe())
        );
    }
    if report.options.filtered {
        filtered_note(&mut md, &checks);
    }
    problems(&mut md, &checks);
    skips(&mut md, &checks);
    counts_table(&mut md, &report.summary);
    md
}

/// The verdict line, and the plugin's version when it reported one.
fn headline(md: &mut String, report: &Report) {
    let verdict = report.summary.verdict.as_str();
    let strict = if report.options.strict {
        ", strict"
    } else {
        ""
    };
    let _ = writeln!(
        md,
        "**dhv-conform**: {} is **{verdict}** ({}{strict}) — {}\n",
        code_span(&report.plugin.path),
        escape(&report.spec),
        counts_phrase(&report.summary),
    );
    if let Some(version) = &report.plugin.version {
        let canonical = version
            .canonical
            .as_deref()
            .map_or("none".to_owned(), code_span);
        let semver = if version.semver {
            "SemVer"
        } else {
            "not SemVer"
        };
        let _ = writeln!(
            md,
            "Plugin version {} (canonical {canonical}, {semver}).\n",
            code_span(&version.raw)
        );
    }
}

/// A filtered run's verdict covers only what ran, so the reader is told which checks.
fn filtered_note(md: &mut String, checks: &[&CheckResult]) {
    let ran: Vec<String> = checks.iter().map(|c| code_span(&c.id)).collect();
    let _ = writeln!(
        md,
        "Filtered run: only these {} checks ran: {}.\n",
        ran.len(),
        ran.join(", ")
    );
}

/// The table of failed and warned checks, then how to reproduce each.
fn problems(md: &mut String, checks: &[&CheckResult]) {
    let mut problems: Vec<&CheckResult> = checks
        .iter()
        .copied()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .collect();
    // Failures decide the verdict, so they lead; the sort is stable, keeping id order.
    problems.sort_by_key(|c| c.status != Status::Fail);
    if problems.is_empty() {
        md.push_str("No check failed or warned.\n\n");
        return;
    }
    md.push_str("| Check | Level | Status | Message |\n|---|---|---|---|\n");
    for c in &problems {
        let status = match c.status {
            Status::Fail => "❌ fail",
            _ => "⚠️ warn",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {status} | {} |",
            code_span(&c.id),
            c.level,
            escape(&cell(&c.message))
        );
    }
    md.push('\n');
    for c in &problems {
        details(md, c);
    }
}

/// A message as a table cell: one line, never a block of output. A message of several
/// lines keeps its first; output quoted into it (Nomad's error texts quote a plugin's
/// stderr, a traceback's newlines as `\n`) is cut at its opening quote. The whole
/// message, and the output as the plugin printed it, are in the details block below.
fn cell(message: &str) -> String {
    let message = message.trim_end();
    let first = message.lines().next().unwrap_or_default().trim_end();
    let cut = first
        .find("\\n")
        .map(|at| first[..at].rfind('"').unwrap_or(at));
    match cut {
        Some(at) => format!("{} … (output in the details below)", first[..at].trim_end()),
        None if first.len() < message.len() => format!("{first} … (more in the details below)"),
        None => first.to_owned(),
    }
}

/// Skips, collapsed, each with its reason: no skip goes unexplained.
fn skips(md: &mut String, checks: &[&CheckResult]) {
    let skips: Vec<&CheckResult> = checks
        .iter()
        .copied()
        .filter(|c| c.status == Status::Skip)
        .collect();
    if skips.is_empty() {
        return;
    }
    // The blank line after </summary> is what makes GitHub render the list inside.
    let _ = writeln!(md, "<details><summary>{} skipped</summary>\n", skips.len());
    for c in skips {
        let _ = writeln!(
            md,
            "- {}: {}",
            code_span(&c.id),
            escape(c.message.trim_end())
        );
    }
    md.push_str("\n</details>\n\n");
}

/// The closing table of counts.
fn counts_table(md: &mut String, s: &Summary) {
    let _ = writeln!(
        md,
        "| passed | failed | warnings | skipped | info | total |\n|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} | {} |",
        s.passed, s.failed, s.warned, s.skipped, s.info, s.total
    );
}

/// A collapsed block per failure or warning: the full message, and for each call
/// behind it the reproduce line and what the plugin printed.
fn details(md: &mut String, c: &CheckResult) {
    let _ = writeln!(
        md,
        "<details><summary>{} <code>{}</code>: how to reproduce</summary>\n",
        if c.status == Status::Fail {
            "❌"
        } else {
            "⚠️"
        },
        html(&c.id)
    );
    md.push_str(&fenced("text", c.message.trim_end()));
    for inv in c.evidence() {
        invocation(md, inv);
    }
    let _ = writeln!(md, "See `dhv-conform explain {}`.\n\n</details>\n", c.id);
}

fn invocation(md: &mut String, inv: &Invocation) {
    let _ = writeln!(
        md,
        "{} ({}):\n",
        escape(&inv.operation),
        escape(&inv.outcome())
    );
    md.push_str(&fenced("sh", &inv.reproduce));
    for (name, text) in [("stdout", &inv.stdout), ("stderr", &inv.stderr)] {
        if !text.is_empty() {
            let _ = writeln!(md, "{name}:\n");
            md.push_str(&fenced("text", text.trim_end()));
        }
    }
}

/// A fenced code block that `text` cannot close early: the fence is longer than
/// any backtick run inside. Control characters are escaped first.
fn fenced(lang: &str, text: &str) -> String {
    let text = printable(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{text}\n{fence}\n\n")
}

/// Text for inside HTML tags.
fn html(text: &str) -> String {
    printable(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn counts_phrase(s: &Summary) -> String {
    let warnings = if s.warned == 1 { "warning" } else { "warnings" };
    format!(
        "{} passed, {} failed, {} {warnings}, {} skipped",
        s.passed, s.failed, s.warned, s.skipped
    )
}

/// Escapes text for a table cell or list item: Markdown punctuation that could start
/// formatting, links, HTML or a new cell is backslash-escaped, and line breaks become
/// `<br>` because a raw newline would end the row.
pub(super) fn escape(text: &str) -> String {
    // A CRLF is a line break, not a control character to show.
    let text = text.replace("\r\n", "\n");
    let text = printable(&text);
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        for ch in line.chars() {
            if matches!(
                ch,
                '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '&' | '~' | '#'
            ) {
                out.push('\\');
            }
            out.push(ch);
        }
        if lines.peek().is_some() {
            out.push_str("<br>");
        }
    }
    out
}

/// A code span that survives backticks inside `text`: the fence is one backtick longer
/// than the longest run inside, as CommonMark requires. Pipes are escaped too, because
/// GitHub splits table cells on `|` even inside code spans.
pub(super) fn code_span(text: &str) -> String {
    let text = printable(text);
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run + 1);
    let text = text.replace('\n', " ").replace('|', "\\|");
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    #[test]
    fn escape_table() {
        let cases = [
            ("plain text", "plain text"),
            ("a | b", r"a \| b"),
            ("line one\nline two", "line one<br>line two"),
            ("crlf\r\nline", "crlf<br>line"),
            ("esc\x1b[2Jnul\0", r"esc\\u{1b}\[2Jnul\\u{0}"),
            ("<script>&amp;", r"\<script\>\&amp;"),
            ("$(touch *x*)", r"$(touch \*x\*)"),
            (r"back\slash", r"back\\slash"),
            ("esc\x1b[2Jnul\0", r"esc\\u{1b}\[2Jnul\\u{0}"),
        ];
        for (input, want) in cases {
            assert_eq!(escape(input), want, "{input:?}");
        }
    }

    #[test]
    fn code_span_table() {
        let cases = [
            ("plugin", "`plugin`"),
            ("a`b", "``a`b``"),
            ("`x", "`` `x ``"),
            ("a|b", r"`a\|b`"),
        ];
        for (input, want) in cases {
            assert_eq!(code_span(input), want, "{input:?}");
        }
    }

    /// A traceback quoted into a message (as Nomad's error text quotes stderr) or a
    /// message of several lines never spills into a cell; the details block has it.
    #[test]
    fn multi_line_output_is_in_the_details_never_in_a_cell() {
        let mut report = sample::report(false);
        let check = report
            .checks
            .iter_mut()
            .find(|c| c.id == "create.idempotent")
            .unwrap();
        check.message = "create exited 1; stderr: \"Traceback (most recent call last):\\n  File \\\"/p\\\", line 3\\nValueError: bad\"".to_owned();
        let md = to_markdown(&report);
        let row = md
            .lines()
            .find(|l| l.starts_with("| `create.idempotent`"))
            .unwrap();
        assert_eq!(
            row,
            "| `create.idempotent` | must | ❌ fail | create exited 1; stderr: … (output in the details below) |"
        );
        assert!(
            md.contains("```text\ncreate exited 1; stderr: \"Traceback"),
            "{md}"
        );
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
        assert!(
            rows.iter()
                .all(|r| !r.contains("<br>") && !r.contains(r"\n")),
            "{rows:?}"
        );

        let two_lines = to_markdown(&sample::report(false));
        assert!(
            two_lines.contains(
                "| the second create exited 1, expected 0 … (more in the details below) |"
            ),
            "{two_lines}"
        );
        assert!(
            two_lines.contains("the volume at /tmp/.tmpAbC123/volumes/x was left in place\n```")
        );
    }

    #[test]
    fn verdict_line_and_problem_rows() {
        let md = to_markdown(&sample::report(false));
        assert!(md.starts_with(
            "**dhv-conform**: `/opt/nomad/plugins/example` is **non-conformant** (nomad-1.10) — 2 passed, 1 failed, 1 warning, 1 skipped\n"
        ), "{md}");
        let fail = md.find("| `create.idempotent` | must | ❌ fail |").unwrap();
        let warn = md
            .find("| `fingerprint.version-semver` | should | ⚠️ warn |")
            .unwrap();
        assert!(fail < warn);
        assert!(md.contains(r"SemVer 2.0 \| use"));
        assert!(md.contains("- `process.no-orphans`: built-in plugin"));
    }

    #[test]
    fn clean_run_has_no_table() {
        let mut report = sample::report(false);
        report.checks.retain(|c| c.status == Status::Pass);
        report.summary = Summary::from_checks(&report.checks, false);
        let md = to_markdown(&report);
        assert!(md.contains("is **conformant**"));
        assert!(md.contains("No check failed or warned."));
        assert!(!md.contains("<details>"));
    }

    #[test]
    fn filtered_run_says_which_checks_ran() {
        let mut report = sample::report(false);
        assert!(!to_markdown(&report).contains("Filtered run"));
        report.options.filtered = true;
        let md = to_markdown(&report);
        assert!(
            md.contains(
                "Filtered run: only these 6 checks ran: `create.idempotent`, `create.succeeds`,"
            ),
            "{md}"
        );
    }

    #[test]
    fn plugin_text_reaches_the_markdown_without_control_characters() {
        let mut report = sample::report(false);
        let failed = report
            .checks
            .iter_mut()
            .find(|c| c.status == Status::Fail)
            .unwrap();
        failed.message = "bad\x1b]0;title\x07 \0 output".into();
        failed.invocations[1].stderr = "\x1b[31mred\x1b[0m ```\n".into();
        failed.invocations[1].reproduce = "env -i A=\x1b[2J plugin create".into();
        let md = to_markdown(&report);
        assert!(!md.chars().any(|c| c.is_control() && c != '\n'), "{md:?}");
        assert!(md.contains(r"\u{1b}[31mred"), "{md}");
        // The stderr excerpt holds a fence; the block around it is longer.
        assert!(md.contains("````text\n\\u{1b}[31mred"), "{md}");
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_markdown(&sample::report(true)), @r#"
            **dhv-conform**: `/opt/nomad/plugins/example` is **non-conformant** (nomad-1.10, strict) — 2 passed, 1 failed, 1 warning, 1 skipped

            Plugin version `1.2` (canonical `1.2.0`, not SemVer).

            | Check | Level | Status | Message |
            |---|---|---|---|
            | `create.idempotent` | must | ❌ fail | the second create exited 1, expected 0 … (more in the details below) |
            | `fingerprint.version-semver` | should | ⚠️ warn | version "1.2" is accepted by go-version but is not SemVer 2.0 \| use "1.2.0" |

            <details><summary>❌ <code>create.idempotent</code>: how to reproduce</summary>

            ```text
            the second create exited 1, expected 0
            the volume at /tmp/.tmpAbC123/volumes/x was left in place
            ```

            create (exit 1):

            ```sh
            env -i DHV_OPERATION=create DHV_VOLUMES_DIR=/tmp/.tmpAbC123/volumes DHV_VOLUME_ID=0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 DHV_VOLUME_NAME=conformance-0b9c8f6e /opt/nomad/plugins/example create
            ```

            stderr:

            ```text
            mkdir: cannot create directory: File exists
            ```

            See `dhv-conform explain create.idempotent`.

            </details>

            <details><summary>⚠️ <code>fingerprint.version-semver</code>: how to reproduce</summary>

            ```text
            version "1.2" is accepted by go-version but is not SemVer 2.0 | use "1.2.0"
            ```

            See `dhv-conform explain fingerprint.version-semver`.

            </details>

            <details><summary>1 skipped</summary>

            - `process.no-orphans`: built-in plugin

            </details>

            | passed | failed | warnings | skipped | info | total |
            |---|---|---|---|---|---|
            | 2 | 1 | 1 | 1 | 1 | 6 |
        "#);
    }
}
