//! The snapshot: a normalised text form of a report, compared with a stored file
//! (`--snapshot`) or written over it (`--bless`).
//!
//! It exists so that a CI gate can say "behaviour changed" with a readable diff. It is
//! plain text rather than JSON because it is read by people in code review, one line per
//! check, and it holds nothing that varies between machines or runs (durations, timing,
//! hashes, paths, ids: see [`Redactions`]), so any diff means the plugin's behaviour changed.
//! Writes are atomic, so an interrupted `--bless` never leaves half a snapshot behind.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use similar::TextDiff;

use super::model::Report;
use super::redact::Redactions;

/// Lines of unchanged context around each change in a diff.
const DIFF_CONTEXT: usize = 3;

/// Indent of a message's continuation lines, setting them apart from check lines.
const CONTINUATION: &str = "    ";

/// The normalised text of a report: a header (schema, spec, plugin version, strict flag,
/// verdict), a blank line, then one line per check sorted by id,
/// `<id> <level> <status>: <message>`, with the message redacted and any further lines of
/// it indented below.
pub fn normalise(report: &Report, redactions: &Redactions) -> String {
    let version = report
        .plugin
        .version
        .as_ref()
        .and_then(|v| v.canonical.as_deref())
        .unwrap_or("none");
    let mut out = format!(
        "schema: {}\nspec: {}\nplugin version: {}\nstrict: {}\nverdict: {}\n\n",
        report.schema,
        report.spec,
        redactions.apply(version),
        report.options.strict,
        report.summary.verdict,
    );
    for check in report.checks_by_id() {
        if let Some(why) = &check.unpinned {
            // Reported in full elsewhere; pinned here is only that it is not.
            out.push_str(&format!(
                "{} {} [not pinned: {}]\n",
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
    /// The stored snapshot equals the normalised report.
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
    /// The directory to hold the snapshot could not be created.
    #[error("cannot create directory {} for snapshot {}", dir.display(), path.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
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

/// Compares `normalised` with the snapshot stored at `path`.
///
/// A missing file is an outcome, not an error: CI reports it (exit 3) and `--bless`
/// creates it. Line endings are compared as `\n`, so a checkout that turned them into
/// `\r\n` does not count as a change.
pub fn compare(path: &Path, normalised: &str) -> Result<SnapshotOutcome, SnapshotError> {
    let stored = match fs::read_to_string(path) {
        Ok(stored) => stored,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(SnapshotOutcome::Missing {
                path: path.to_owned(),
            });
        }
        Err(source) => {
            return Err(SnapshotError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let stored = stored.replace("\r\n", "\n");
    if stored == normalised {
        return Ok(SnapshotOutcome::Matched);
    }
    let old_name = path.display().to_string();
    let new_name = format!("{old_name} (this run)");
    Ok(SnapshotOutcome::Differs {
        path: path.to_owned(),
        diff: diff(&stored, normalised, &old_name, &new_name),
    })
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
/// kept. Missing parent directories are created.
pub fn bless(path: &Path, normalised: &str) -> Result<(), SnapshotError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|source| SnapshotError::CreateDir {
        dir: dir.clone(),
        path: path.to_owned(),
        source,
    })?;
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
    use crate::report::sample;
    use crate::report::{CheckResult, Level, Status};

    #[test]
    fn normalised_sample() {
        let report = sample::report(false);
        insta::assert_snapshot!(normalise(&report, &Redactions::for_report(&report)), @r#"
            schema: dhv-conform/report/v1
            spec: nomad-1.10
            plugin version: 1.2.0
            strict: false
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
            SnapshotOutcome::Differs { path: p, diff } => {
                assert_eq!(p, path);
                assert!(diff.contains("\n-b\n"), "{diff}");
                assert!(diff.contains("\n+c\n"), "{diff}");
                assert!(diff.contains("(this run)"), "{diff}");
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
        let path = dir.path().join("nested/deeper/plugin.snap");
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
        assert!(matches!(err, SnapshotError::CreateDir { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.starts_with("cannot create directory"), "{text}");
        assert!(text.contains("plugin.snap"), "{text}");
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
