use super::*;
use crate::sample;
use crate::{Level, Status};
use std::fs;

fn no_variance(_: &str) -> Option<&'static str> {
    None
}

fn current(report: &Report) -> String {
    normalise(report, &Redactions::for_report(report), no_variance)
}

fn both(report: &Report) -> Normalised {
    Normalised::of(report, &Redactions::for_report(report), no_variance)
}

fn check(id: &str, level: Level, status: Status, message: &str) -> CheckResult {
    CheckResult {
        id: id.to_owned(),
        group: id.split('.').next().unwrap_or_default().to_owned(),
        level,
        status,
        message: message.to_owned(),
        duration_ms: 1,
        invocations: vec![],
        unpinned: None,
        needs: None,
        phase: None,
    }
}

fn by_id<'a>(report: &'a mut Report, id: &str) -> &'a mut CheckResult {
    report.checks.iter_mut().find(|c| c.id == id).unwrap()
}

fn stored(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("plugin.snap");
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn normalised_sample() {
    let report = sample::report(false);
    insta::assert_snapshot!(current(&report), @r#"
        schema: dhv-conform/report/v1
        spec: nomad-1.10
        harness: dhv-conform 0.1.0
        plugin version: 1.2.0
        verdict: non-conformant
        passed: 2 of 6 checks; the others are listed below

        create.idempotent must fail: the second create exited 1, expected 0
            the volume at [TMP]/volumes/x was left in place
        fingerprint.version-semver should warn: version "1.2" is accepted by go-version but is not SemVer 2.0 | use "1.2.0"
        process.no-orphans should skip: built-in plugin
        timing.profile info info: create: 4 calls, p50 [DURATION], p95 [DURATION], max [DURATION]
    "#);
}

#[test]
fn the_older_form_has_a_line_per_check() {
    let report = sample::report(false);
    insta::assert_snapshot!(normalise_older(&report, &Redactions::for_report(&report)), @r#"
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

/// The rules of the comparison, each on a run against one stored snapshot.
#[test]
fn a_new_passing_check_is_no_change_and_every_verdict_change_is() {
    let base = sample::report(false);
    let stored = current(&base);
    let with = |f: &dyn Fn(&mut Report)| {
        let mut r = base.clone();
        f(&mut r);
        current(&r)
    };
    // A new check that passes (the count moves; the count is not compared).
    let grown = with(&|r| {
        r.checks
            .push(check("create.brand-new", Level::Must, Status::Pass, "fine"))
    });
    assert_ne!(grown, stored);
    assert!(same_results(&stored, &grown), "{grown}");
    // A newer harness with the same results.
    let newer = with(&|r| r.tool.version = "9.9.9".into());
    assert!(same_results(&stored, &newer));
    // A new check that does not pass; a passing check that now fails; a
    // failing check that now passes; a warning whose message changed.
    let changed: [&dyn Fn(&mut Report); 4] = [
        &|r| {
            r.checks
                .push(check("create.brand-new", Level::Should, Status::Warn, "no"))
        },
        &|r| by_id(r, "create.succeeds").status = Status::Fail,
        &|r| by_id(r, "create.idempotent").status = Status::Pass,
        &|r| by_id(r, "fingerprint.version-semver").message = "another".into(),
    ];
    for f in changed {
        let run = with(f);
        assert!(!same_results(&stored, &run), "{run}");
    }
}

#[test]
fn compare_says_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let base = sample::report(false);
    let path = stored(&dir, &current(&base));
    let mut run = base.clone();
    by_id(&mut run, "create.succeeds").status = Status::Fail;
    by_id(&mut run, "create.idempotent").status = Status::Pass;
    run.checks
        .push(check("create.brand-new", Level::Must, Status::Pass, "fine"));
    match compare(&path, &both(&run)).unwrap() {
        SnapshotOutcome::Differs {
            changes,
            diff,
            older_form,
            other_harness,
            ..
        } => {
            assert_eq!(
                changes,
                [
                    "create.idempotent: fail before, passed or not run now",
                    "create.succeeds: passed or not run before, fail now",
                ],
                "{diff}"
            );
            assert!(!older_form);
            assert_eq!(other_harness, None);
            assert!(diff.contains("\n+create.succeeds must fail\n"), "{diff}");
            assert!(diff.contains("(this run)"), "{diff}");
        }
        other => panic!("expected Differs, got {other:?}"),
    }
}

/// A snapshot in the older form is compared as it was: a passing check's line
/// is pinned too, and a new check is a new line.
#[test]
fn the_older_form_is_compared_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let base = sample::report(false);
    let path = stored(
        &dir,
        &normalise_older(&base, &Redactions::for_report(&base)),
    );
    assert_eq!(
        compare(&path, &both(&base)).unwrap(),
        SnapshotOutcome::MatchedOlder { path: path.clone() }
    );
    let mut grown = base.clone();
    grown
        .checks
        .push(check("create.brand-new", Level::Must, Status::Pass, "fine"));
    match compare(&path, &both(&grown)).unwrap() {
        SnapshotOutcome::Differs {
            changes,
            older_form,
            ..
        } => {
            assert!(older_form);
            assert_eq!(changes, ["create.brand-new: not run before, pass now"]);
        }
        other => panic!("expected Differs, got {other:?}"),
    }
}

#[test]
fn a_check_not_pinned_on_either_side_is_not_compared() {
    let head = "schema: x\npassed: 1 of 3 checks; the others are listed below\n\n";
    let stored = format!("{head}a.b must fail: no\nt.m should warn: slow\n    detail\n");
    let near = format!("{head}a.b must fail: no\nt.m should [not pinned: near]\n");
    // The run near its bound matches the stored warning, and the other way round.
    assert_eq!(pin_as_stored(&stored, &near), stored);
    assert_eq!(pin_as_stored(&near, &stored), near);
    assert!(same_results(&stored, &near) && same_results(&near, &stored));
    // Stored passing (not listed), run near its bound: not compared either way.
    let passed = format!("{head}a.b must fail: no\n");
    assert!(same_results(&passed, &near) && same_results(&near, &passed));
    // A pinned check that changed still differs, beside an unpinned one.
    let changed = near.replace("a.b must fail: no", "a.b must fail: other");
    assert!(!same_results(&stored, &changed));
    assert_eq!(
        pin_as_stored(&stored, &changed),
        stored.replace("a.b must fail: no", "a.b must fail: other")
    );
    // Nothing unpinned: the run as it is; no trailing line end kept as it was.
    assert_eq!(
        pin_as_stored("a.b must pass: ok\n", "a.b must pass"),
        "a.b must pass"
    );
    assert_eq!(pin_as_stored(&stored, near.trim_end()), stored.trim_end());
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
    assert_eq!(both(&a), both(&b));
}

#[test]
fn multi_line_messages_indent_continuations() {
    let mut report = sample::report(false);
    report.checks = vec![check(
        "delete.isolated",
        Level::Must,
        Status::Fail,
        "first\r\n\nthird took 12ms  \n\n",
    )];
    let text = normalise(&report, &Redactions::new(), no_variance);
    assert!(
        text.ends_with("\n\ndelete.isolated must fail: first\n\n    third took [DURATION]\n"),
        "{text:?}"
    );
    // The blank line inside the message stays inside its check.
    assert!(same_results(&text, &text));
}

#[test]
fn an_unpinned_verdict_shows_only_that_it_is_not_pinned() {
    let mut report = sample::report(false);
    let mut near = check("timing.margin", Level::Should, Status::Warn, "p95 520 ms");
    near.unpinned = Some("the p95 of fingerprint is within 25% of half its limit".into());
    report.checks = vec![near.clone()];
    let warned = normalise(&report, &Redactions::new(), no_variance);
    near.status = Status::Pass;
    near.message = "p95 480 ms".to_owned();
    report.checks = vec![near];
    // Listed when it passed too: what is not pinned is said to be.
    assert_eq!(warned, normalise(&report, &Redactions::new(), no_variance));
    assert!(
        warned.ends_with(
            "timing.margin should [not pinned: the p95 of fingerprint is within 25% of half its limit]\n"
        ),
        "{warned:?}"
    );
}

/// A check that declares its message varies is pinned by its status only when
/// it fails or warns: a skip keeps its reason, a pass is counted as any other.
#[test]
fn a_varying_message_is_pinned_by_its_status() {
    let report = sample::report(false);
    let varies = |id: &str| (id == "create.idempotent").then_some("names which call lost");
    let text = normalise(&report, &Redactions::for_report(&report), varies);
    assert!(
        text.contains("\ncreate.idempotent must fail: [VARIES: names which call lost]\n"),
        "{text}"
    );
    assert!(!text.contains("the volume at"), "{text}");
    let all = |_: &str| Some("anything");
    let text = normalise(&report, &Redactions::for_report(&report), all);
    assert!(text.contains("passed: 2 of 6"), "{text}");
    assert!(
        text.contains("\nprocess.no-orphans should skip: built-in plugin\n"),
        "{text}"
    );
    assert!(
        text.contains("\nfingerprint.version-semver should warn: [VARIES: anything]\n"),
        "{text}"
    );
}

#[test]
fn compare_missing_matched_differs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.snap");
    let report = sample::report(false);
    assert_eq!(
        compare(&path, &both(&report)).unwrap(),
        SnapshotOutcome::Missing { path: path.clone() }
    );
    fs::write(&path, current(&report)).unwrap();
    assert_eq!(
        compare(&path, &both(&report)).unwrap(),
        SnapshotOutcome::Matched
    );
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
    assert_eq!(both(&lenient), both(&strict));
}

#[test]
fn a_snapshot_from_another_harness_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let report = sample::report(false);
    let now = current(&report);
    // Only the harness changed: still a match.
    let path = stored(&dir, &now.replace("0.1.0", "0.0.9"));
    assert_eq!(harness_of(&now), Some("dhv-conform 0.1.0"));
    assert_eq!(
        compare(&path, &both(&report)).unwrap(),
        SnapshotOutcome::Matched
    );
    // The harness and a line changed: the outcome names the old harness.
    fs::write(
        &path,
        now.replace("0.1.0", "0.0.9")
            .replace("skip: built-in plugin", "pass"),
    )
    .unwrap();
    match compare(&path, &both(&report)).unwrap() {
        SnapshotOutcome::Differs { other_harness, .. } => {
            assert_eq!(other_harness.as_deref(), Some("dhv-conform 0.0.9"));
        }
        other => panic!("expected Differs, got {other:?}"),
    }
    // A snapshot older than the harness line.
    let unnamed: String = now
        .lines()
        .filter(|l| !l.starts_with("harness:"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&path, unnamed.replace("skip: built-in plugin", "pass")).unwrap();
    match compare(&path, &both(&report)).unwrap() {
        SnapshotOutcome::Differs { other_harness, .. } => {
            assert_eq!(other_harness.as_deref(), Some("an unnamed harness"));
        }
        other => panic!("expected Differs, got {other:?}"),
    }
}

#[test]
fn compare_ignores_crlf_checkouts() {
    let dir = tempfile::tempdir().unwrap();
    let report = sample::report(false);
    let path = stored(&dir, &current(&report).replace('\n', "\r\n"));
    assert_eq!(
        compare(&path, &both(&report)).unwrap(),
        SnapshotOutcome::Matched
    );
}

#[test]
fn compare_read_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: exists, but cannot be read as text.
    let err = compare(dir.path(), &both(&sample::report(false))).unwrap_err();
    assert!(matches!(err, SnapshotError::Read { .. }));
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
}

/// Garbage where a snapshot should be is a difference, never a panic.
#[test]
fn a_malformed_snapshot_differs() {
    let dir = tempfile::tempdir().unwrap();
    let report = sample::report(false);
    for junk in [
        "",
        "\n\n\n",
        "schema:",
        "schema: x\n\n    indented\n\n",
        "日本\n\n語",
    ] {
        let path = stored(&dir, junk);
        match compare(&path, &both(&report)).unwrap() {
            SnapshotOutcome::Differs { older_form, .. } => {
                assert_eq!(older_form, junk.starts_with("schema: "), "{junk:?}")
            }
            other => panic!("{junk:?}: expected Differs, got {other:?}"),
        }
    }
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
