//! The snapshot: a normalised text form of a report, compared with a stored file
//! (`check --snapshot`); `--bless` writes it beside that file as a pending one
//! (`FILE.new`) that `dhv-conform snapshot review` or `accept` moves into place.
//!
//! It exists so that a CI gate can say "behaviour changed" with a readable diff. It is
//! plain text rather than JSON because it is read by people in code review, and it
//! holds nothing that varies between machines or runs (durations, timing, hashes,
//! paths, ids: see [`Redactions`]), so any difference means the plugin's behaviour
//! changed.
//!
//! **The form.** A header (schema, spec, the harness that wrote it, plugin version,
//! verdict, and `passed: N of M checks`), a blank line, then only the checks that did
//! not pass (fail, warn, skip, info, or not pinned), one line each, sorted by id. The
//! checks that passed are pinned by their count and the harness version, not one by
//! one, so a harness whose catalogue grew by a check that passes changes no snapshot.
//! A snapshot without the `passed:` line is in the older form, one line per check
//! ([`normalise_older`]); it is compared as it was, and `--bless` rewrites it in the
//! current form.
//!
//! **The comparison** ([`compare`]) is of results, not of bytes: the harness line and
//! the count are left out (a new passing check, a newer harness with the same
//! verdicts: no change); a check not pinned on either side is not compared; every
//! other line must be the same. So a check that did not pass and now passes is a
//! change (its line went), and so is a check that now does not pass, new or not (a
//! line came).
//!
//! Writes are atomic, so an interrupted `--bless` or `accept` never leaves half a
//! snapshot behind.

mod compare;
#[cfg(feature = "files")]
mod files;
mod form;
mod pending;
#[cfg(test)]
mod tests;

pub use compare::{SnapshotOutcome, changes, compare_stored, diff, pin_as_stored, same_results};
#[cfg(feature = "files")]
pub use files::{accept, bless, compare, find_pending, reject, write_pending};
pub use form::harness_of;
pub use pending::{MAX_SNAPSHOT_BYTES, Pending, SnapshotError, pending_path};

use super::model::{CheckResult, Report, Status, Summary};
use super::redact::Redactions;

/// Indent of a message's continuation lines, setting them apart from check lines.
const CONTINUATION: &str = "    ";

/// The first header line: a text that starts with it has a header.
const SCHEMA_KEY: &str = "schema: ";

/// The header line naming the harness that wrote a snapshot.
const HARNESS_KEY: &str = "harness: ";

/// The header line counting the checks that passed; only the current form has it.
const PASSED_KEY: &str = "passed: ";

/// What follows `<id> <level> ` on the line of a check that is not pinned.
const UNPINNED: &str = "[not pinned: ";

/// What a check's message becomes when the check declares that it varies between
/// runs of one plugin: the status stays pinned, the message is the reason.
const VARIES: &str = "[VARIES: ";

/// A report's snapshot in both forms: the current one, written by `--bless`, and
/// the older one, for comparing a snapshot stored in it as it was compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalised {
    /// The current form ([`normalise`]).
    pub text: String,
    /// The older form ([`normalise_older`]).
    pub older: String,
}

impl Normalised {
    /// Both forms of `report`'s snapshot; `varies` as for [`normalise`].
    pub fn of(
        report: &Report,
        redactions: &Redactions,
        varies: impl Fn(&str) -> Option<&'static str>,
    ) -> Normalised {
        Normalised {
            text: normalise(report, redactions, varies),
            older: normalise_older(report, redactions),
        }
    }
}

/// The normalised text of a report in the current form: the header, a blank line,
/// then one line per check that did not pass, sorted by id,
/// `<id> <level> <status>: <message>`, with the message redacted and any further lines
/// of it indented below.
///
/// `varies` answers, for a check id, why that check's message can differ between two
/// runs of one plugin (the check's declaration in the catalogue), or `None`: a check
/// that declares it and fails or warns shows `[VARIES: <why>]` for its message, so only
/// its status is pinned. Its skips keep their reason (`needs create.succeeds`), which
/// names no call and so never varies.
///
/// What the plugin did, not how the run was gated: `--strict` is left out, and the
/// verdict is the one without it (a warning is a warning line either way), so the same
/// snapshot serves a strict and a lenient gate.
pub fn normalise(
    report: &Report,
    redactions: &Redactions,
    varies: impl Fn(&str) -> Option<&'static str>,
) -> String {
    let listed: Vec<&CheckResult> = report
        .checks_by_id()
        .into_iter()
        .filter(|c| c.status != Status::Pass || c.unpinned.is_some())
        .collect();
    let passed = format!(
        "{PASSED_KEY}{} of {} checks; the others are listed below\n",
        report.checks.len() - listed.len(),
        report.checks.len()
    );
    let mut out = header(report, redactions, &passed);
    for check in listed {
        let finding = matches!(check.status, Status::Fail | Status::Warn);
        match varies(&check.id) {
            Some(why) if finding && check.unpinned.is_none() => {
                let mut pinned = check.clone();
                pinned.message = format!("{VARIES}{why}]");
                push_check(&mut out, &pinned, redactions);
            }
            _ => push_check(&mut out, check, redactions),
        }
    }
    out
}

/// The normalised text of a report in the older form, one line per check, passed
/// or not: what `--snapshot` compared before the current form, and still compares
/// with a snapshot stored in it.
pub fn normalise_older(report: &Report, redactions: &Redactions) -> String {
    let mut out = header(report, redactions, "");
    for check in report.checks_by_id() {
        push_check(&mut out, check, redactions);
    }
    out
}

/// The header and the blank line after it; `extra` (whole lines) goes last.
fn header(report: &Report, redactions: &Redactions, extra: &str) -> String {
    let version = report
        .plugin
        .version
        .as_ref()
        .and_then(|v| v.canonical.as_deref())
        .unwrap_or("none");
    let mut out = format!(
        "{SCHEMA_KEY}{}\nspec: {}\n{HARNESS_KEY}{} {}\nplugin version: {}\nverdict: {}\n",
        report.schema,
        report.spec,
        report.tool.name,
        report.tool.version,
        redactions.apply(version),
        Summary::from_checks(&report.checks, false).verdict,
    );
    if report.plugin_changed.is_some() {
        // What changed is machine-specific; that it changed is no behaviour
        // to bless: a run whose plugin changed never matches a snapshot.
        out.push_str("plugin changed mid-run: the verdict is inconclusive\n");
    }
    out.push_str(extra);
    out.push('\n');
    out
}

/// One check's line (and its message's further lines, indented).
fn push_check(out: &mut String, check: &CheckResult, redactions: &Redactions) {
    if let Some(why) = &check.unpinned {
        // Reported in full elsewhere; pinned here is only that it is not.
        out.push_str(&format!(
            "{} {} {UNPINNED}{}]\n",
            check.id,
            check.level,
            redactions.apply(why)
        ));
        return;
    }
    let message = redactions.apply(&check.message);
    let mut lines = message.lines().map(str::trim_end);
    let first = lines.next().unwrap_or_default();
    out.push_str(&format!("{} {} {}", check.id, check.level, check.status));
    if !first.is_empty() {
        out.push_str(": ");
        out.push_str(first);
    }
    out.push('\n');
    let rest: Vec<&str> = lines.collect();
    // Trailing blank lines carry nothing and would only make the diff noisier.
    let keep = rest
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    for line in &rest[..keep] {
        if !line.is_empty() {
            out.push_str(CONTINUATION);
            out.push_str(line);
        }
        out.push('\n');
    }
}
