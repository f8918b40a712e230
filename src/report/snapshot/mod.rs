//! The snapshot: a normalised text form of a report, compared with a stored file
//! (`--snapshot`) or written over it (`--bless`).
//!
//! It exists so that a CI gate can say "behaviour changed" with a readable diff. It is
//! plain text rather than JSON because it is read by people in code review, one line per
//! check, and it holds nothing that varies between machines or runs (durations, timing,
//! hashes, paths, ids: see [`Redactions`]), so any diff means the plugin's behaviour changed.
//! Writes are atomic, so an interrupted `--bless` never leaves half a snapshot behind.

use std::io;
use std::path::{Path, PathBuf};

use similar::TextDiff;

use super::model::{Report, Summary};
use super::redact::Redactions;

/// Lines of unchanged context around each change in a diff.
const DIFF_CONTEXT: usize = 3;

/// Indent of a message's continuation lines, setting them apart from check lines.
const CONTINUATION: &str = "    ";

/// The header line naming the harness that wrote a snapshot.
const HARNESS_KEY: &str = "harness: ";

/// What follows `<id> <level> ` on the line of a check that is not pinned.
const UNPINNED: &str = "[not pinned: ";

/// The normalised text of a report: a header (schema, spec, the harness that wrote it,
/// plugin version, verdict), a blank line, then one line per check sorted by id,
/// `<id> <level> <status>: <message>`, with the message redacted and any further lines of
/// it indented below.
///
/// What the plugin did, not how the run was gated: `--strict` is left out, and the
/// verdict is the one without it (a warning is a warning line either way), so the same
/// snapshot serves a strict and a lenient gate.
pub fn normalise(report: &Report, redactions: &Redactions) -> String {
    let version = report
        .plugin
        .version
        .as_ref()
        .and_then(|v| v.canonical.as_deref())
        .unwrap_or("none");
    let mut out = format!(
        "schema: {}\nspec: {}\n{HARNESS_KEY}{} {}\nplugin version: {}\nverdict: {}\n\n",
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
        out.insert_str(
            out.len() - 1,
            "plugin changed mid-run: the verdict is inconclusive\n",
        );
    }
    for check in report.checks_by_id() {
        if let Some(why) = &check.unpinned {
            // Reported in full elsewhere; pinned here is only that it is not.
            out.push_str(&format!(
                "{} {} {UNPINNED}{}]\n",
                check.id,
                check.level,
                redactions.apply(why)
            ));
            continue;
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
    out
}

/// The result of comparing a normalised report with a stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotOutcome {
    /// The stored snapshot equals the normalised report (but for the harness that
    /// wrote it: see [`harness_of`]).
    Matched,
    /// There is no snapshot file yet.
    Missing {
        /// The snapshot file that was looked for.
        path: PathBuf,
    },
    /// The stored snapshot differs from the normalised report.
    Differs {
        /// The snapshot file compared with.
        path: PathBuf,
        /// A unified diff from the stored snapshot to this run.
        diff: String,
        /// The harness that wrote the stored snapshot, when it is not this run's (or the
        /// snapshot names none): the difference may be the harness's wording, not the
        /// plugin's behaviour.
        other_harness: Option<String>,
    },
}

/// A snapshot file could not be read or written; names the file and the action.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot exists (or might) but could not be read.
    #[error("cannot read snapshot {}", path.display())]
    Read {
        /// The snapshot file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The new snapshot could not be written (or renamed into place).
    #[error("cannot write snapshot {} (in {})", path.display(), dir.display())]
    Write {
        /// The directory the temporary file was made in.
        dir: PathBuf,
        /// The snapshot file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The most read from a stored snapshot: a regular file (or a symlink to
/// one) only, so a FIFO or `/dev/zero` given as `--snapshot` is an error, not
/// a hang. A snapshot holds one short line per check.
pub const MAX_SNAPSHOT_BYTES: u64 = 16 << 20;

/// Compares `normalised` with the snapshot stored at `path`.
///
/// A missing file is an outcome, not an error: CI reports it (exit 3) and `--bless`
/// creates it. Line endings are compared as `\n`, so a checkout that turned them into
/// `\r\n` does not count as a change.
pub fn compare(path: &Path, normalised: &str) -> Result<SnapshotOutcome, SnapshotError> {
    let stored = match crate::safe_fs::read_text_bounded(
        path,
        MAX_SNAPSHOT_BYTES,
        crate::safe_fs::Links::Follow,
    ) {
        Ok(stored) => stored,
        Err(e) if e.is_not_found() => {
            return Ok(SnapshotOutcome::Missing {
                path: path.to_owned(),
            });
        }
        Err(e) => {
            return Err(SnapshotError::Read {
                path: path.to_owned(),
                source: e.into_io(),
            });
        }
    };
    let stored = stored.replace("\r\n", "\n");
    let normalised = &pin_as_stored(&stored, normalised);
    if without_harness(&stored) == without_harness(normalised) {
        return Ok(SnapshotOutcome::Matched);
    }
    let other_harness = match (harness_of(&stored), harness_of(normalised)) {
        (old, new) if old == new => None,
        (old, _) => Some(old.unwrap_or("an unnamed harness").to_owned()),
    };
    let old_name = path.display().to_string();
    let new_name = format!("{old_name} (this run)");
    Ok(SnapshotOutcome::Differs {
        path: path.to_owned(),
        diff: diff(&stored, normalised, &old_name, &new_name),
        other_harness,
    })
}

/// `run` (a normalised report) with every check that is not pinned on either
/// side (`<id> <level> [not pinned: …]`: a measurement near its bound, which
/// the host's load can move across it) given its block from `stored`: such a
/// check is not compared, so neither a quiet nor a busy machine makes a
/// difference of it. A check that is pinned on both sides is compared as it is.
pub fn pin_as_stored(stored: &str, run: &str) -> String {
    let stored_blocks = check_blocks(stored);
    let run_blocks = check_blocks(run);
    let unpinned: std::collections::HashSet<&str> = stored_blocks
        .iter()
        .chain(&run_blocks)
        .filter(|(key, block)| block[key.len()..].starts_with(&format!(" {UNPINNED}")))
        .map(|(key, _)| *key)
        .collect();
    if unpinned.is_empty() {
        return run.to_owned();
    }
    let stored_of = |key: &str| {
        stored_blocks
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, b)| *b)
    };
    let mut out = String::with_capacity(run.len());
    for (key, block) in run_blocks {
        match stored_of(key).filter(|_| unpinned.contains(key)) {
            // The stored block, with the run's line end (the last block may lack one).
            Some(stored) => {
                out.push_str(stored.strip_suffix('\n').unwrap_or(stored));
                if block.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(block),
        }
    }
    out
}

/// A normalised text cut into blocks: each line that does not start with the
/// continuation indent, with the indented lines below it, keyed by its first
/// two words (`<id> <level>` for a check; a header line keys itself).
fn check_blocks(text: &str) -> Vec<(&str, &str)> {
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if at > start && !line.starts_with(CONTINUATION) {
            blocks.push(&text[start..at]);
            start = at;
        }
        at += line.len();
    }
    if at > start {
        blocks.push(&text[start..at]);
    }
    blocks
        .into_iter()
        .map(|b| {
            let head = b.lines().next().unwrap_or_default();
            let key_end = head
                .match_indices(' ')
                .nth(1)
                .map_or(head.len(), |(i, _)| i);
            (&head[..key_end], b)
        })
        .collect()
}

/// The harness named in a snapshot's header (`dhv-conform 0.1.0`), if any.
pub fn harness_of(snapshot: &str) -> Option<&str> {
    snapshot
        .lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(HARNESS_KEY))
}

/// The snapshot without its harness line: a snapshot written by another version of the
/// harness still matches when nothing else changed.
fn without_harness(snapshot: &str) -> String {
    let mut header = true;
    let mut out = String::with_capacity(snapshot.len());
    for line in snapshot.split_inclusive('\n') {
        if line.trim_end().is_empty() {
            header = false;
        }
        if header && line.starts_with(HARNESS_KEY) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// A unified diff from `old` to `new` with three lines of context, headed
/// `--- old_name` / `+++ new_name`.
pub fn diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(old_name, new_name)
        .to_string()
}

/// Writes `normalised` to `path` with the crate's one writer
/// ([`crate::safe_fs::write_file`]): a regular file is replaced atomically (a temporary
/// file in the same directory, flushed to disk and renamed over it), so readers see the
/// old snapshot or the new one, never a mix; a symlink's target is written and the link
/// kept. A missing parent dir is an error, as for every other output: a typo in
/// the path must not quietly make a tree somewhere.
pub fn bless(path: &Path, normalised: &str) -> Result<(), SnapshotError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let opts = crate::safe_fs::WriteOptions {
        durable: true,
        temp_prefix: ".snapshot",
        ..Default::default()
    };
    crate::safe_fs::write_file(path, normalised.as_bytes(), &opts).map_err(|e| {
        SnapshotError::Write {
            dir,
            path: path.to_owned(),
            source: e.source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_not_pinned_on_either_side_is_not_compared() {
        let stored = "schema: x\n\na.b must pass: ok\nt.m should pass: fast\n    detail\nz.z must pass: ok\n";
        let near =
            "schema: x\n\na.b must pass: ok\nt.m should [not pinned: near]\nz.z must pass: ok\n";
        // The run near its bound matches the stored pass, and the other way round.
        assert_eq!(pin_as_stored(stored, near), stored);
        assert_eq!(pin_as_stored(near, stored), near);
        // A pinned check that changed still differs, beside an unpinned one.
        let changed =
            "schema: x\n\na.b must warn: slow\nt.m should [not pinned: near]\nz.z must pass: ok\n";
        assert_eq!(
            pin_as_stored(stored, changed),
            "schema: x\n\na.b must warn: slow\nt.m should pass: fast\n    detail\nz.z must pass: ok\n"
        );
        // And `check --snapshot` compares so.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        fs::write(&path, stored).unwrap();
        assert_eq!(compare(&path, near).unwrap(), SnapshotOutcome::Matched);
        assert!(matches!(
            compare(&path, changed).unwrap(),
            SnapshotOutcome::Differs { .. }
        ));
        // Nothing unpinned: the run as it is; no trailing line end kept as it was.
        assert_eq!(
            pin_as_stored(stored, "a.b must pass: ok"),
            "a.b must pass: ok"
        );
        assert_eq!(
            pin_as_stored(stored, "t.m should [not pinned: near]"),
            "t.m should pass: fast\n    detail"
        );
    }
    use crate::report::sample;
    use crate::report::{CheckResult, Level, Status};
    use std::fs;

    #[test]
    fn normalised_sample() {
        let report = sample::report(false);
        insta::assert_snapshot!(normalise(&report, &Redactions::for_report(&report)), @r#"
            schema: dhv-conform/report/v1
            spec: nomad-1.10
            harness: dhv-conform 0.1.0
            plugin version: 1.2.0
            verdict: non-conformant

            create.idempotent must fail: the second create exited 1, expected 0
                the volume at [TMP]/volumes/x was left in place
            create.succeeds must pass
            fingerprint.runs must pass
            fingerprint.version-semver should warn: version "1.2" is accepted by go-version but is not SemVer 2.0 | use "1.2.0"
            process.no-orphans should skip: built-in plugin
            timing.profile info info: create: 4 calls, p50 [DURATION], p95 [DURATION], max [DURATION]
        "#);
    }

    #[test]
    fn normalised_text_holds_nothing_machine_specific() {
        let mut a = sample::report(false);
        let mut b = sample::report(false);
        for check in &mut b.checks {
            check.duration_ms += 1000;
            check.invocations.clear();
        }
        b.timing.clear();
        b.plugin.sha256 = None;
        b.plugin.path = "/elsewhere/plugin".to_owned();
        a.checks.reverse();
        assert_eq!(
            normalise(&a, &Redactions::for_report(&a)),
            normalise(&b, &Redactions::for_report(&b))
        );
    }

    #[test]
    fn multi_line_messages_indent_continuations() {
        let mut report = sample::report(false);
        report.checks = vec![CheckResult {
            id: "delete.isolated".to_owned(),
            group: "delete".to_owned(),
            level: Level::Must,
            status: Status::Fail,
            message: "first\r\n\nthird took 12ms  \n\n".to_owned(),
            duration_ms: 1,
            invocations: vec![],
            unpinned: None,
            needs: None,
            phase: None,
        }];
        let text = normalise(&report, &Redactions::new());
        assert!(
            text.ends_with("\n\ndelete.isolated must fail: first\n\n    third took [DURATION]\n"),
            "{text:?}"
        );
    }

    #[test]
    fn an_unpinned_verdict_shows_only_that_it_is_not_pinned() {
        let mut report = sample::report(false);
        let mut near = CheckResult {
            id: "timing.margin".to_owned(),
            group: "timing".to_owned(),
            level: Level::Should,
            status: Status::Warn,
            message: "p95 520 ms".to_owned(),
            duration_ms: 1,
            invocations: vec![],
            unpinned: Some("the p95 of fingerprint is within 25% of half its limit".into()),
            needs: None,
            phase: None,
        };
        report.checks = vec![near.clone()];
        let warned = normalise(&report, &Redactions::new());
        near.status = Status::Pass;
        near.message = "p95 480 ms".to_owned();
        report.checks = vec![near];
        assert_eq!(warned, normalise(&report, &Redactions::new()));
        assert!(
            warned.ends_with(
                "timing.margin should [not pinned: the p95 of fingerprint is within 25% of half its limit]\n"
            ),
            "{warned:?}"
        );
    }

    #[test]
    fn compare_missing_matched_differs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        assert_eq!(
            compare(&path, "a\n").unwrap(),
            SnapshotOutcome::Missing { path: path.clone() }
        );

        fs::write(&path, "a\nb\n").unwrap();
        assert_eq!(compare(&path, "a\nb\n").unwrap(), SnapshotOutcome::Matched);

        match compare(&path, "a\nc\n").unwrap() {
            SnapshotOutcome::Differs {
                path: p,
                diff,
                other_harness,
            } => {
                assert_eq!(p, path);
                assert_eq!(other_harness, None);
                assert!(diff.contains("\n-b\n"), "{diff}");
                assert!(diff.contains("\n+c\n"), "{diff}");
                assert!(diff.contains("(this run)"), "{diff}");
            }
            other => panic!("expected Differs, got {other:?}"),
        }
    }

    #[test]
    fn strict_is_not_part_of_the_snapshot() {
        let only_a_warning = |strict: bool| {
            let mut r = sample::report(strict);
            r.checks.retain(|c| c.status != Status::Fail);
            r.summary = Summary::from_checks(&r.checks, strict);
            r
        };
        let (lenient, strict) = (only_a_warning(false), only_a_warning(true));
        assert_ne!(lenient.summary.verdict, strict.summary.verdict);
        assert_eq!(
            normalise(&lenient, &Redactions::for_report(&lenient)),
            normalise(&strict, &Redactions::for_report(&strict))
        );
    }

    #[test]
    fn a_snapshot_from_another_harness_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        let now = "schema: s\nharness: dhv-conform 0.2.0\nverdict: conformant\n\na pass\n";
        // Only the harness changed: still a match.
        fs::write(&path, now.replace("0.2.0", "0.1.0")).unwrap();
        assert_eq!(harness_of(now), Some("dhv-conform 0.2.0"));
        assert_eq!(compare(&path, now).unwrap(), SnapshotOutcome::Matched);
        // The harness and a line changed: the outcome names the old harness.
        fs::write(
            &path,
            now.replace("0.2.0", "0.1.0").replace("a pass", "a warn"),
        )
        .unwrap();
        match compare(&path, now).unwrap() {
            SnapshotOutcome::Differs { other_harness, .. } => {
                assert_eq!(other_harness.as_deref(), Some("dhv-conform 0.1.0"));
            }
            other => panic!("expected Differs, got {other:?}"),
        }
        // A snapshot older than the harness line.
        fs::write(&path, "schema: s\nverdict: conformant\n\na warn\n").unwrap();
        match compare(&path, now).unwrap() {
            SnapshotOutcome::Differs { other_harness, .. } => {
                assert_eq!(other_harness.as_deref(), Some("an unnamed harness"));
            }
            other => panic!("expected Differs, got {other:?}"),
        }
    }

    #[test]
    fn compare_ignores_crlf_checkouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        fs::write(&path, "a\r\nb\r\n").unwrap();
        assert_eq!(compare(&path, "a\nb\n").unwrap(), SnapshotOutcome::Matched);
    }

    #[test]
    fn compare_read_error_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: exists, but cannot be read as text.
        let err = compare(dir.path(), "a\n").unwrap_err();
        assert!(matches!(err, SnapshotError::Read { .. }));
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn bless_then_compare_matches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        let report = sample::report(false);
        let text = normalise(&report, &Redactions::for_report(&report));
        bless(&path, &text).unwrap();
        assert_eq!(compare(&path, &text).unwrap(), SnapshotOutcome::Matched);
        assert_eq!(
            fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn bless_replaces_an_existing_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        fs::write(&path, "old\nlonger than the new text\n").unwrap();
        bless(&path, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
    }

    #[cfg(unix)]
    #[test]
    fn blessed_snapshot_is_not_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.snap");
        bless(&path, "x\n").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_ne!(mode & 0o044, 0, "mode {mode:o}");
    }

    #[test]
    fn bless_error_names_the_file_and_action() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, "").unwrap();
        let path = blocker.join("plugin.snap");
        let err = bless(&path, "x\n").unwrap_err();
        assert!(matches!(err, SnapshotError::Write { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.starts_with("cannot write snapshot"), "{text}");
        assert!(text.contains("plugin.snap"), "{text}");
        let missing = dir.path().join("no-such-dir/plugin.snap");
        assert!(bless(&missing, "x\n").is_err());
        assert!(!missing.parent().unwrap().exists(), "no dir is made");
    }

    #[test]
    fn diff_is_unified_with_context() {
        let old: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 5\n", "line five\n");
        let d = diff(&old, &new, "stored", "current");
        assert!(d.starts_with("--- stored\n+++ current\n"), "{d}");
        assert!(d.contains("@@ -2,7 +2,7 @@"), "{d}");
        assert!(d.contains("\n-line 5\n+line five\n"), "{d}");
        assert!(!d.contains("line 1\n"), "three lines of context only: {d}");
    }
}
