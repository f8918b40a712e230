//! Unit tests of the result model (kept beside it so model.rs stays one thing).

use super::*;

fn check(id: &str, status: Status) -> CheckResult {
    CheckResult {
        id: id.to_owned(),
        group: id.split('.').next().unwrap_or_default().to_owned(),
        level: Level::Must,
        status,
        message: String::new(),
        duration_ms: 0,
        invocations: Vec::new(),
        unpinned: None,
        needs: None,
        phase: None,
    }
}

#[test]
fn verdict_follows_failures_and_strict_warnings() {
    let cases = [
        (
            vec![Status::Pass, Status::Skip, Status::Info],
            false,
            Verdict::Conformant,
        ),
        (
            vec![Status::Pass, Status::Fail],
            false,
            Verdict::NonConformant,
        ),
        (vec![Status::Pass, Status::Warn], false, Verdict::Conformant),
        (
            vec![Status::Pass, Status::Warn],
            true,
            Verdict::NonConformant,
        ),
        (vec![], true, Verdict::Conformant),
    ];
    for (statuses, strict, want) in cases {
        let checks: Vec<_> = statuses.iter().map(|s| check("a.b", *s)).collect();
        let summary = Summary::from_checks(&checks, strict);
        assert_eq!(summary.verdict, want, "{statuses:?} strict={strict}");
        assert_eq!(summary.total, statuses.len());
    }
}

#[test]
fn summary_counts_each_status() {
    let checks: Vec<_> = [
        Status::Pass,
        Status::Pass,
        Status::Fail,
        Status::Warn,
        Status::Skip,
        Status::Skip,
        Status::Skip,
        Status::Info,
    ]
    .iter()
    .map(|s| check("a.b", *s))
    .collect();
    let s = Summary::from_checks(&checks, false);
    assert_eq!(
        (s.total, s.passed, s.failed, s.warned, s.skipped, s.info),
        (8, 2, 1, 1, 3, 1)
    );
}

#[test]
fn exit_code_follows_the_verdict() {
    let plugin = PluginInfo::default();
    let strict = RunOptions {
        strict: true,
        ..RunOptions::default()
    };
    let warned = vec![check("a.b", Status::Warn)];
    let lenient = Report::new(
        "nomad-1.10",
        plugin.clone(),
        RunOptions::default(),
        warned.clone(),
        vec![],
    );
    assert_eq!(lenient.exit_code(), 0);
    let strict = Report::new("nomad-1.10", plugin, strict, warned, vec![]);
    assert_eq!(strict.exit_code(), 1);
    assert_eq!(strict.schema, SCHEMA);
    assert_eq!(strict.tool.name, TOOL_NAME);
}

/// A check put in after the run replaces the one of its id (or joins the
/// others) and the summary follows it; a changed plugin file still makes the
/// verdict inconclusive.
#[test]
fn a_check_put_in_after_the_run_moves_the_summary() {
    let passed = vec![check("a.b", Status::Pass), check("c.d", Status::Pass)];
    let mut report = Report::new(
        "nomad-1.10",
        PluginInfo::default(),
        RunOptions::default(),
        passed,
        vec![],
    );
    report.put_check(check("a.b", Status::Fail));
    assert_eq!(report.checks.len(), 2);
    assert_eq!((report.summary.passed, report.summary.failed), (1, 1));
    assert_eq!(report.exit_code(), 1);
    report.put_check(check("e.f", Status::Fail));
    assert_eq!((report.summary.total, report.summary.failed), (3, 2));
    report.mark_plugin_changed(PluginChanged {
        calls_before: 1,
        sha256_before: None,
        sha256_after: None,
        detail: "size".into(),
    });
    report.put_check(check("c.d", Status::Fail));
    assert_eq!(report.summary.verdict, Verdict::Inconclusive);
    assert_eq!(report.summary.failed, 3);
}

#[test]
fn enums_serialise_as_documented() {
    let json =
        serde_json::to_string(&(Level::Should, Status::Warn, Verdict::NonConformant)).unwrap();
    assert_eq!(json, r#"["should","warn","non-conformant"]"#);
    let back: (Level, Status, Verdict) = serde_json::from_str(&json).unwrap();
    assert_eq!(back, (Level::Should, Status::Warn, Verdict::NonConformant));
}

#[test]
fn checks_by_id_sorts_without_touching_the_report() {
    let report = Report::new(
        "nomad-1.10",
        PluginInfo::default(),
        RunOptions::default(),
        vec![
            check("delete.removes", Status::Pass),
            check("create.succeeds", Status::Pass),
        ],
        vec![],
    );
    let ids: Vec<_> = report
        .checks_by_id()
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["create.succeeds", "delete.removes"]);
    assert_eq!(report.checks[0].id, "delete.removes");
}

#[test]
fn evidence_prefers_unclean_invocations() {
    let clean = Invocation {
        operation: "create".into(),
        exit_code: Some(0),
        ..Invocation::default()
    };
    let failed = Invocation {
        operation: "delete".into(),
        exit_code: Some(1),
        ..Invocation::default()
    };
    let mut c = check("delete.succeeds", Status::Fail);
    c.invocations = vec![clean.clone(), failed.clone()];
    assert_eq!(c.evidence(), vec![&failed]);
    c.invocations = vec![clean.clone()];
    assert_eq!(c.evidence(), vec![&clean]);
}

#[test]
fn outcome_describes_how_a_call_ended() {
    let cases = [
        (Some(0), None, false, false, 0, "exit 0"),
        (Some(2), None, false, true, 0, "exit 2, stdio leaked"),
        (None, Some(9), true, false, 0, "signal 9, timed out"),
        (Some(0), None, false, false, 2, "exit 0, 2 orphan(s)"),
        (None, None, false, false, 0, "did not start"),
    ];
    let killed = Invocation {
        signal: Some(9),
        killed_by_check_ms: Some(40),
        ..Invocation::default()
    };
    assert_eq!(killed.outcome(), "signal 9, killed by the check at 40 ms");
    let killed_at_a_step = Invocation {
        killed_at: Some("execve /sbin/mkfs.ext4".into()),
        ..killed.clone()
    };
    assert_eq!(
        killed_at_a_step.outcome(),
        "signal 9, killed by the check at 40 ms, before execve /sbin/mkfs.ext4"
    );
    let killed_by_time = Invocation {
        killed_at: Some("after 40 ms".into()),
        ..killed.clone()
    };
    assert_eq!(
        killed_by_time.outcome(),
        "signal 9, killed by the check at 40 ms"
    );
    let dumped = Invocation {
        signal: Some(11),
        core_dumped: true,
        ..Invocation::default()
    };
    assert_eq!(dumped.outcome(), "signal 11 (core dumped)");
    let real_time = Invocation {
        signal: Some(36),
        ..Invocation::default()
    };
    assert_eq!(real_time.outcome(), "signal 36");
    for (exit_code, signal, timed_out, leaked, leftovers, want) in cases {
        let inv = crate::sample::ended(exit_code, signal, timed_out, leaked, leftovers);
        assert_eq!(inv.outcome(), want);
    }
}

#[test]
fn excerpt_table() {
    let cases: &[(&[u8], usize, &str)] = &[
        (b"hello", 10, "hello"),
        (b"hello", 5, "hello"),
        (b"hello world", 5, "hello… [6 more bytes]"),
        (b"", 0, ""),
        (b"abc", 0, "… [3 more bytes]"),
        // "é" is two bytes: a cap inside it keeps the character out whole.
        ("aé".as_bytes(), 2, "a… [2 more bytes]"),
        ("aé".as_bytes(), 3, "aé"),
        // One invalid byte becomes one replacement character (3 bytes of text).
        (b"a\xffb", 10, "a\u{FFFD}b"),
        (b"a\xffb", 3, "a… [2 more bytes]"),
        (b"a\xffb", 4, "a\u{FFFD}… [1 more bytes]"),
        // A truncated multi-byte sequence at the very end.
        (b"ab\xe2\x82", 10, "ab\u{FFFD}"),
    ];
    for (input, cap, want) in cases {
        assert_eq!(excerpt(input, *cap), *want, "input {input:?} cap {cap}");
    }
}

#[test]
fn excerpt_text_never_exceeds_cap() {
    let noisy: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    for cap in [0, 1, 2, 3, 4, 5, 100, 4096] {
        let out = excerpt(&noisy, cap);
        let text = out.split("… [").next().unwrap();
        assert!(text.len() <= cap, "cap {cap}: {} bytes", text.len());
    }
}
