//! The terminal summary printed after the libtest-style progress lines.
//!
//! libtest-mimic already prints one line per check as it finishes; what a plugin author
//! needs afterwards is the whole picture by group, and under each failure the exact
//! command to rerun and what the plugin printed. Plugin output is untrusted, so control
//! characters in it are shown escaped rather than sent to the terminal.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape::{printable, printable_line};
use super::model::{CheckResult, Invocation, Report, Status, Verdict};

/// Longest message shown in the table before it is cut; the full text follows below.
const SHORT_MESSAGE_CHARS: usize = 72;

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// Renders the grouped result table, the details of every failure and warning (full
/// message, reproduce commands, output excerpts) and the final counts and verdict line.
///
/// ANSI colour is used only when `color` is true.
pub fn summary_table(report: &Report, color: bool) -> String {
    summary_table_noted(report, color, None)
}

/// [`summary_table`] with a note after the failures and warnings (say, whether the
/// dirs their reproduce lines name still exist), shown only when there are some.
pub fn summary_table_noted(report: &Report, color: bool, note: Option<&str>) -> String {
    let paint = Paint(color);
    let checks = report.checks_by_id();
    let mut out = String::new();
    write_groups(&mut out, &checks, paint);
    let skipped: Vec<&CheckResult> = checks
        .iter()
        .copied()
        .filter(|c| c.status == Status::Skip)
        .collect();
    write_skipped(&mut out, &skipped, paint);
    write_problems(&mut out, &checks, paint, note);
    write_verdict(&mut out, report, paint);
    out
}

/// The checks that ran, a line each, under their group's name.
fn write_groups(out: &mut String, checks: &[&CheckResult], paint: Paint) {
    let id_width = checks
        .iter()
        .map(|c| c.id.chars().count())
        .max()
        .unwrap_or(0);
    let mut groups: BTreeMap<&str, Vec<&CheckResult>> = BTreeMap::new();
    for check in checks {
        groups.entry(check.group.as_str()).or_default().push(check);
    }
    for (group, members) in &groups {
        // Skipped checks are listed once, below, grouped by why.
        let members: Vec<_> = members
            .iter()
            .filter(|c| c.status != Status::Skip)
            .collect();
        if members.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{}", paint.apply(BOLD, group));
        for c in members {
            let line = format!(
                "  {}  {:<id_width$}  {:<6}  {}",
                status_tag(c.status, paint),
                c.id,
                c.level.as_str(),
                short(&c.message)
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}

/// Each failure and warning in full, with its calls and where to read about it, then
/// the note when there were some.
fn write_problems(out: &mut String, checks: &[&CheckResult], paint: Paint, note: Option<&str>) {
    let problems: Vec<&CheckResult> = checks
        .iter()
        .copied()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .collect();
    let problems_empty = problems.is_empty();
    if !problems_empty {
        out.push_str("\nfailures and warnings:\n");
    }
    for c in problems {
        let _ = writeln!(
            out,
            "\n---- {} ({}, {}) ----",
            paint.apply(status_colour(c.status), &c.id),
            c.level,
            c.status
        );
        let _ = writeln!(out, "{}", printable(c.message.trim_end()));
        for inv in c.evidence() {
            write_invocation(out, inv);
        }
        let _ = writeln!(out, "see: dhv-conform explain {}", c.id);
    }
    if let Some(note) = note.filter(|_| !problems_empty) {
        let _ = writeln!(out, "\n{note}");
    }
}

/// A mid-run change of the plugin, then the counts and the verdict line.
fn write_verdict(out: &mut String, report: &Report, paint: Paint) {
    let s = &report.summary;
    let verdict = match (&report.interrupted, s.verdict) {
        // A run cut short has no verdict: what it skipped was never judged.
        (Some(signal), _) => paint.apply(YELLOW, &format!("none, interrupted by {signal}")),
        (None, Verdict::Conformant) => paint.apply(GREEN, "conformant"),
        (None, Verdict::NonConformant) => paint.apply(RED, "NON-CONFORMANT"),
        (None, Verdict::Inconclusive) => paint.apply(YELLOW, "INCONCLUSIVE"),
    };
    if let Some(change) = &report.plugin_changed {
        let _ = writeln!(
            out,
            "\n{}",
            paint.apply(YELLOW, &printable_line(&change.describe()))
        );
    }
    if let Some(space) = &report.space_limited {
        let _ = writeln!(
            out,
            "\n{}",
            paint.apply(YELLOW, &printable_line(&space.describe()))
        );
    }
    let _ = writeln!(
        out,
        "\npassed: {}, failed: {}, warnings: {}, skipped: {}, info: {} — verdict: {verdict}",
        s.passed, s.failed, s.warned, s.skipped, s.info
    );
}

/// Widest line of the skipped list before it wraps.
const SKIPPED_LINE_CHARS: usize = 100;

/// The skipped checks, each once, grouped by reason: the reason is the
/// message up to a parenthesised detail (`needs create.succeeds`, `not
/// claimed`), which stays beside its check. Reasons come in the order their
/// first check comes.
fn write_skipped(out: &mut String, skipped: &[&CheckResult], paint: Paint) {
    if skipped.is_empty() {
        return;
    }
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for c in skipped {
        let first = printable_line(c.message.lines().next().unwrap_or_default()).into_owned();
        let (reason, entry) = match first.split_once(" (") {
            Some((reason, detail)) => (
                reason.to_owned(),
                format!("{} ({}", c.id, short(detail.trim_end())),
            ),
            None if first.trim().is_empty() => ("no reason given".to_owned(), c.id.clone()),
            None => (first.trim().to_owned(), c.id.clone()),
        };
        match reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, entries)) => entries.push(entry),
            None => reasons.push((reason, vec![entry])),
        }
    }
    let _ = writeln!(out, "{}", paint.apply(BOLD, "skipped, by reason"));
    for (reason, entries) in reasons {
        let mut line = format!("  {}  {reason}:", status_tag(Status::Skip, paint));
        // What the terminal shows of the line: the tag is 4 wide, painted or not.
        let mut width = 2 + 4 + 2 + reason.chars().count() + 1;
        for (i, entry) in entries.iter().enumerate() {
            let sep = if i + 1 < entries.len() { "," } else { "" };
            let piece = format!(" {entry}{sep}");
            if width + piece.chars().count() > SKIPPED_LINE_CHARS && width > 8 {
                let _ = writeln!(out, "{line}");
                line = " ".repeat(8);
                width = line.len();
            }
            width += piece.chars().count();
            line.push_str(&piece);
        }
        let _ = writeln!(out, "{line}");
    }
}

fn write_invocation(out: &mut String, inv: &Invocation) {
    let _ = writeln!(out, "  {} ({}):", inv.operation, inv.outcome());
    let _ = writeln!(out, "    {}", printable_line(&inv.reproduce));
    for orphan in &inv.leftovers {
        let _ = writeln!(out, "    left behind: {}", printable_line(orphan));
    }
    for s in inv.streams() {
        if s.text.is_empty() {
            continue;
        }
        let cut = if s.truncated { " (truncated)" } else { "" };
        let _ = writeln!(out, "    {}{cut}:", s.name);
        for line in printable(s.text.trim_end()).lines() {
            let _ = writeln!(out, "      | {line}");
        }
    }
}

/// The fixed-width tag for a status, coloured when painting is on.
fn status_tag(status: Status, paint: Paint) -> String {
    let tag = match status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Warn => "WARN",
        Status::Skip => "SKIP",
        Status::Info => "INFO",
    };
    paint.apply(status_colour(status), tag)
}

fn status_colour(status: Status) -> &'static str {
    match status {
        Status::Pass => GREEN,
        Status::Fail => RED,
        Status::Warn => YELLOW,
        Status::Skip => DIM,
        Status::Info => "",
    }
}

/// Whether to emit ANSI colour; carried as a type so no call site can forget the check.
#[derive(Clone, Copy)]
struct Paint(bool);

impl Paint {
    fn apply(self, colour: &str, text: &str) -> String {
        if self.0 && !colour.is_empty() {
            format!("{colour}{text}{RESET}")
        } else {
            text.to_owned()
        }
    }
}

/// The first line of a message, cut to fit the table.
fn short(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let first = printable_line(first);
    if first.chars().count() <= SHORT_MESSAGE_CHARS {
        first.into_owned()
    } else {
        let cut: String = first.chars().take(SHORT_MESSAGE_CHARS - 1).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    /// A call's streams show in order, each said cut where it was, an
    /// empty one not at all.
    #[test]
    fn a_cut_stream_is_said_truncated() {
        let mut inv = sample::ended(Some(0), None, false, false, 0);
        inv.stdout = "out".into();
        inv.stdout_truncated = true;
        let mut text = String::new();
        write_invocation(&mut text, &inv);
        assert!(
            text.contains("    stdout (truncated):\n      | out\n"),
            "{text}"
        );
        assert!(!text.contains("stderr"), "{text}");
        inv.stderr = "err".into();
        let mut text = String::new();
        write_invocation(&mut text, &inv);
        let (out, err) = (text.find("stdout (truncated)"), text.find("    stderr:\n"));
        assert!(out.is_some() && err.is_some() && out < err, "{text}");
    }

    #[test]
    fn without_colour_there_are_no_escape_bytes() {
        let text = summary_table(&sample::report(false), false);
        assert!(!text.contains('\x1b'), "{text}");
        insta::assert_snapshot!(text, @r#"
            create
              FAIL  create.idempotent           must    the second create exited 1, expected 0
              PASS  create.succeeds             must
            fingerprint
              PASS  fingerprint.runs            must
              WARN  fingerprint.version-semver  should  version "1.2" is accepted by go-version but is not SemVer 2.0 | use "1.…
            timing
              INFO  timing.profile              info    create: 4 calls, p50 7ms, p95 9ms, max 9ms
            skipped, by reason
              SKIP  built-in plugin: process.no-orphans

            failures and warnings:

            ---- create.idempotent (must, fail) ----
            the second create exited 1, expected 0
            the volume at /tmp/.tmpAbC123/volumes/x was left in place
              create (exit 1):
                env -i DHV_OPERATION=create DHV_VOLUMES_DIR=/tmp/.tmpAbC123/volumes DHV_VOLUME_ID=0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 DHV_VOLUME_NAME=conformance-0b9c8f6e /opt/nomad/plugins/example create
                stderr:
                  | mkdir: cannot create directory: File exists
            see: dhv-conform explain create.idempotent

            ---- fingerprint.version-semver (should, warn) ----
            version "1.2" is accepted by go-version but is not SemVer 2.0 | use "1.2.0"
            see: dhv-conform explain fingerprint.version-semver

            passed: 2, failed: 1, warnings: 1, skipped: 1, info: 1 — verdict: NON-CONFORMANT
        "#);
    }

    #[test]
    fn with_colour_statuses_are_painted() {
        let text = summary_table(&sample::report(false), true);
        assert!(text.contains("\x1b[32mPASS\x1b[0m"));
        assert!(text.contains("\x1b[31mFAIL\x1b[0m"));
        assert!(text.contains("\x1b[33mWARN\x1b[0m"));
        assert!(text.contains("\x1b[2mSKIP\x1b[0m"));
        assert!(text.contains("verdict: \x1b[31mNON-CONFORMANT\x1b[0m"));
    }

    #[test]
    fn skipped_checks_are_listed_once_grouped_by_reason() {
        let mut report = sample::report(false);
        let template = report.checks[0].clone();
        for (id, message) in [
            ("input.name-injection", "needs create.succeeds"),
            ("lifecycle.restore", "needs create.succeeds"),
            (
                "volume.block-device",
                "not claimed (attachment = \"block-device\")",
            ),
            ("volume.parameters", "not claimed (no [claims.parameters])"),
        ] {
            let mut c = template.clone();
            c.id = id.into();
            c.group = id.split('.').next().unwrap().into();
            c.status = Status::Skip;
            c.message = message.into();
            report.checks.push(c);
        }
        let text = summary_table(&report, false);
        let skipped = &text[text.find("skipped, by reason\n").expect(&text)..];
        assert!(
            skipped.contains(
                "  SKIP  needs create.succeeds: input.name-injection, lifecycle.restore\n"
            ),
            "{skipped}"
        );
        assert!(
            // Past 100 columns a reason's list wraps, indented under it.
            skipped.contains("  SKIP  not claimed: volume.block-device (attachment = \"block-device\"),\n         volume.parameters (no [claims.parameters])\n"),
            "{skipped}"
        );
        // Each once: no group lists a skipped check above.
        assert_eq!(text.matches("input.name-injection").count(), 1, "{text}");
        assert!(
            !text.contains("\nlifecycle\n"),
            "a group of skips only has no heading: {text}"
        );
    }

    #[test]
    fn final_line_counts_and_verdict() {
        let text = summary_table(&sample::report(false), false);
        assert!(text.ends_with(
            "passed: 2, failed: 1, warnings: 1, skipped: 1, info: 1 — verdict: NON-CONFORMANT\n"
        ));
    }

    #[test]
    fn failure_shows_reproduce_and_output_of_the_failing_call_only() {
        let text = summary_table(&sample::report(false), false);
        let details = &text[text.find("---- create.idempotent").unwrap()..];
        assert!(details.contains("  create (exit 1):\n    env -i DHV_OPERATION=create"));
        assert!(details.contains("      | mkdir: cannot create directory: File exists"));
        assert!(!details.contains("create (exit 0)"));
    }

    #[test]
    fn long_messages_are_cut_in_the_table() {
        let long = "x".repeat(100);
        let cut = short(&long);
        assert_eq!(cut.chars().count(), SHORT_MESSAGE_CHARS);
        assert!(cut.ends_with('…'));
    }
}
