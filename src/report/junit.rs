//! The JUnit XML writer: the one behind `check --junit` ([`to_junit`]) and the
//! fleet's `report merge --junit` ([`crate::report::to_fleet_junit`]), for CI systems
//! that show test results natively.
//!
//! JUnit knows only pass, failure and skipped, so the mapping is a decision:
//! - one `<testcase>` per check: `classname` its group, `name` the rest of its id
//!   (`concurrency` / `create`), so a reporter that joins them shows the id once; the
//!   whole id, the level and the status are properties;
//! - a failure is `<failure type="must|should">`, its first line the message;
//! - a skip is `<skipped message>`, counted in the suite's `skipped`: never silent;
//! - a case's name is the same whatever its status, so a CI system's history of a
//!   check (GitLab's, Jenkins') follows it from pass to warning and back;
//! - a warning fails only under `--strict` (when it fails the run). Otherwise the case
//!   passes, so dashboards go red exactly when the exit code does, with the warning in
//!   a `warning` property and first in `system-out` (as nextest reports a flaky test
//!   that passed), and `status` `warn`. Under `--strict` it is a
//!   `<failure type="should">`.
//!
//! The shape is the one Jenkins' and GitLab's JUnit schema describe (a test validates
//! both documents against it). quick-junit holds a whole document in memory, and a
//! fleet of 10,000 nodes × every check of it would dwarf the matrix, so each suite is
//! built and serialised alone and spliced under one root; a test holds the result
//! byte-equal to serialising it in one piece.

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite, XmlString};

use super::model::{CheckResult, Level, Report, Status};
use std::time::Duration;

/// The name of the single report's `<testsuites>` root element.
const ROOT_NAME: &str = "dhv-conform";
/// quick-junit's closing root tag, on a line of its own.
const ROOT_END: &str = "</testsuites>";
/// The timestamp of a suite whose report has none (the schema requires one).
const UNKNOWN_TIME: &str = "1970-01-01T00:00:00Z";

/// One check as the writer takes it.
pub(crate) struct Case<'a> {
    /// The check id (`group.rest`).
    pub id: &'a str,
    /// The check's group, the id's prefix.
    pub group: &'a str,
    /// The check's level.
    pub level: Level,
    /// Its status.
    pub status: Status,
    /// Its message (the first line is a failure's `message`).
    pub message: &'a str,
    /// How long it took.
    pub time: Duration,
    /// The calls behind it (reproduce lines, stdout excerpts): `system-out`.
    pub out: String,
    /// Their stderr excerpts: `system-err`.
    pub err: String,
}

/// One report's suite as the writer takes it.
pub(crate) struct Suite<'a> {
    /// The suite's name.
    pub name: String,
    /// The suite's properties.
    pub properties: Vec<Property>,
    /// The run's wall time.
    pub time: Duration,
    /// When the run started (RFC 3339), if known.
    pub timestamp: Option<&'a str>,
    /// Whether the run was `--strict`: a warning then fails.
    pub strict: bool,
    /// Its checks, in order.
    pub cases: Vec<Case<'a>>,
}

/// Renders the report as JUnit XML: one testsuite named after the plugin path, one
/// testcase per check, sorted by id.
pub fn to_junit(report: &Report) -> String {
    render(ROOT_NAME, 1, |_| report_suite(report))
}

/// The document of `count` suites, `suite(i)` building the i-th (twice: once for the
/// root's totals, once to write it, so that only one is in memory at a time).
pub(crate) fn render<'a>(
    root_name: &str,
    count: usize,
    suite: impl Fn(usize) -> Suite<'a>,
) -> String {
    let mut root = quick_junit::Report::new(root_name);
    let mut time = Duration::ZERO;
    for i in 0..count {
        let one = test_suite(suite(i));
        root.tests += one.tests;
        root.failures += one.failures;
        root.errors += one.errors;
        time += one.time.unwrap_or_default();
    }
    root.set_time(time);
    // The root alone, its counts already the totals: everything before its end tag.
    let mut xml = serialise(&root);
    xml.truncate(xml.rfind(ROOT_END).unwrap_or(xml.len()));
    for i in 0..count {
        let mut one = quick_junit::Report::new(root_name);
        one.add_test_suite(test_suite(suite(i)));
        let text = serialise(&one);
        // The suite's lines sit between the root's start tag line and its end tag.
        let start = text
            .find("<testsuites")
            .and_then(|i| text[i..].find('\n').map(|j| i + j + 1));
        let end = text.rfind(ROOT_END);
        if let (Some(start), Some(end)) = (start, end) {
            xml.push_str(&text[start..end]);
        }
    }
    xml.push_str(ROOT_END);
    xml.push('\n');
    xml_chars(xml)
}

/// The document with every character XML 1.0 cannot carry (C0 controls but
/// tab, newline and carriage return; U+FFFE; U+FFFF) written as its escape
/// text (`\u{fffe}`): whichever field it came in (a message, a plugin path, a
/// version, a node name), the file stays well-formed, and the reader sees
/// what was there. No markup holds such a character, so only text changes.
fn xml_chars(xml: String) -> String {
    let invalid = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    if !xml.contains(invalid) {
        return xml;
    }
    let mut out = String::with_capacity(xml.len() + 16);
    for c in xml.chars() {
        if invalid(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn serialise(report: &quick_junit::Report) -> String {
    // Serialising into a String only fails on I/O errors, and a String has none.
    report
        .to_string()
        .expect("JUnit XML serialises into memory")
}

/// The suite in quick-junit's terms, with `skipped` and `timestamp` as JUnit readers
/// want them.
fn test_suite(suite: Suite<'_>) -> TestSuite {
    let mut out = TestSuite::new(suite.name.as_str());
    out.add_properties(suite.properties);
    let strict = suite.strict;
    out.add_test_cases(suite.cases.into_iter().map(|c| test_case(c, strict)));
    out.set_time(suite.time);
    // quick-junit counts skips as `disabled`; JUnit readers want them as `skipped`,
    // and nothing here is disabled.
    let skipped = std::mem::take(&mut out.disabled);
    out.extra.insert(
        XmlString::new("skipped"),
        XmlString::new(skipped.to_string()),
    );
    out.extra.insert(
        XmlString::new("timestamp"),
        XmlString::new(suite.timestamp.unwrap_or(UNKNOWN_TIME)),
    );
    out
}

fn report_suite(report: &Report) -> Suite<'_> {
    Suite {
        name: report.plugin.path.clone(),
        properties: suite_properties(report),
        time: run_time(report),
        timestamp: report.started_at.as_deref(),
        strict: report.options.strict,
        cases: report.checks_by_id().into_iter().map(report_case).collect(),
    }
}

fn report_case(check: &CheckResult) -> Case<'_> {
    let (out, err) = match check.status {
        Status::Fail | Status::Warn => evidence(check),
        Status::Info => (format!("{}\n", clean(&check.message)), String::new()),
        Status::Pass | Status::Skip => (String::new(), String::new()),
    };
    Case {
        id: &check.id,
        group: &check.group,
        level: check.level,
        status: check.status,
        message: &check.message,
        time: Duration::from_millis(check.duration_ms),
        out,
        err,
    }
}

/// The run's wall time, or the checks' summed time for a report without one.
fn run_time(report: &Report) -> Duration {
    let ms = report
        .duration_ms
        .unwrap_or_else(|| report.checks.iter().map(|c| c.duration_ms).sum());
    Duration::from_millis(ms)
}

fn suite_properties(report: &Report) -> Vec<Property> {
    let version = report.plugin.version.as_ref();
    let mut props = vec![
        Property::new("schema", &report.schema),
        Property::new("tool.version", &report.tool.version),
        Property::new("spec", &report.spec),
        Property::new("plugin.builtin", report.plugin.builtin.to_string()),
        Property::new(
            "plugin.sha256",
            report.plugin.sha256.as_deref().unwrap_or("none"),
        ),
        Property::new("plugin.version", version.map_or("none", |v| v.raw.as_str())),
        Property::new(
            "plugin.version.canonical",
            version
                .and_then(|v| v.canonical.as_deref())
                .unwrap_or("none"),
        ),
        Property::new("strict", report.options.strict.to_string()),
        Property::new("timeout_scale", report.options.timeout_scale.to_string()),
        Property::new("filtered", report.options.filtered.to_string()),
        Property::new("verdict", report.summary.verdict.as_str()),
    ];
    if let Some(node) = &report.node {
        props.push(Property::new("node.name", &node.name));
    }
    if let Some(signal) = &report.interrupted {
        props.push(Property::new("interrupted", signal));
    }
    if let Some(change) = &report.plugin_changed {
        props.push(Property::new("plugin_changed", change.describe()));
    }
    props
}

/// The testcase's name: the id without its group (the classname), whatever the
/// status.
fn case_name<'a>(case: &Case<'a>) -> &'a str {
    case.id
        .strip_prefix(case.group)
        .and_then(|r| r.strip_prefix('.'))
        .filter(|r| !r.is_empty())
        .unwrap_or(case.id)
}

fn test_case(case: Case<'_>, strict: bool) -> TestCase {
    let fails_run = case.status == Status::Fail || (case.status == Status::Warn && strict);
    let status = if fails_run {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
        status
            .set_message(clean(first_line(case.message)))
            .set_type(case.level.as_str())
            .set_description(clean(case.message));
        status
    } else if case.status == Status::Skip {
        let mut status = TestCaseStatus::skipped();
        status.set_message(clean(case.message));
        status
    } else {
        TestCaseStatus::success()
    };

    let mut out = TestCase::new(case_name(&case), status);
    out.set_classname(case.group)
        .set_time(case.time)
        .add_property(Property::new("id", case.id))
        .add_property(Property::new("level", case.level.as_str()))
        .add_property(Property::new("status", case.status.as_str()));
    let mut system_out = case.out;
    if case.status == Status::Warn && !fails_run {
        // A passing warning keeps its name (a renamed case starts a new history);
        // its text goes where readers look for a passing case's news.
        out.add_property(Property::new("warning", clean(first_line(case.message))));
        system_out.insert_str(0, &format!("warning: {}\n", clean(case.message)));
    }
    if !system_out.is_empty() {
        out.set_system_out(system_out);
    }
    if !case.err.is_empty() {
        out.set_system_err(case.err);
    }
    out
}

/// The reproduce lines and stdout excerpts (for system-out) and the stderr excerpts (for
/// system-err) of the invocations behind a failure.
fn evidence(check: &CheckResult) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    for inv in check.evidence() {
        let head = format!("{} ({})", inv.operation, inv.outcome());
        out.push_str(&format!("{head}\nreproduce: {}\n", inv.reproduce));
        for orphan in &inv.leftovers {
            out.push_str(&format!("orphan: {orphan}\n"));
        }
        if !inv.stdout.is_empty() {
            let cut = if inv.stdout_truncated {
                " (truncated)"
            } else {
                ""
            };
            out.push_str(&format!("stdout{cut}:\n{}\n", inv.stdout.trim_end()));
        }
        if !inv.stderr.is_empty() {
            let cut = if inv.stderr_truncated {
                " (truncated)"
            } else {
                ""
            };
            err.push_str(&format!("{head} stderr{cut}:\n{}\n", inv.stderr.trim_end()));
        }
    }
    (clean(&out), clean(&err))
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or_default()
}

/// Plugin text with control characters escaped: XML 1.0 cannot carry most of them
/// at all (a NUL makes the file unreadable), and the rest would reach a terminal.
pub(crate) fn clean(text: &str) -> String {
    super::printable(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn one_case_per_check_named_by_id() {
        let xml = to_junit(&sample::report(false));
        assert!(
            xml.contains(r#"<testcase name="succeeds" classname="create""#),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase ").count(), 6);
        assert!(xml.contains(r#"<testsuite name="/opt/nomad/plugins/example""#));
    }

    /// The document built in one piece, as quick-junit would write it.
    fn whole(suites: Vec<Suite<'_>>) -> String {
        let mut root = quick_junit::Report::new("r");
        let suites: Vec<TestSuite> = suites.into_iter().map(test_suite).collect();
        let time = suites.iter().map(|s| s.time.unwrap_or_default()).sum();
        root.add_test_suites(suites);
        root.set_time(time);
        serialise(&root)
    }

    #[test]
    fn spliced_suites_equal_the_whole_document() {
        let (a, b) = (sample::report(false), sample::report(true));
        let reports = [&a, &b];
        let spliced = render("r", 2, |i| report_suite(reports[i]));
        assert_eq!(spliced, whole(vec![report_suite(&a), report_suite(&b)]));
        assert_eq!(render("r", 0, |i| report_suite(reports[i])), whole(vec![]));
    }

    #[test]
    fn classname_is_the_group_and_name_the_rest_of_the_id() {
        let xml = to_junit(&sample::report(false));
        assert!(!xml.contains(r#"name="create.idempotent""#), "{xml}");
        assert!(
            xml.contains(r#"<testcase name="idempotent" classname="create""#),
            "{xml}"
        );
        assert!(xml.contains(r#"<property name="id" value="create.idempotent"/>"#));
    }

    /// A warning keeps the check's one name (a CI's history of the case goes on),
    /// says so in a property and first in its stdout, and fails only under strict.
    #[test]
    fn a_warning_keeps_its_name_and_says_so_in_a_property_and_stdout() {
        for strict in [false, true] {
            let xml = to_junit(&sample::report(strict));
            assert!(!xml.contains("[warning]"), "{xml}");
            let parsed = quick_junit::Report::deserialize_from_str(&xml).unwrap();
            let case = parsed.test_suites[0]
                .test_cases
                .iter()
                .find(|c| c.name.as_str() == "version-semver")
                .unwrap_or_else(|| panic!("{xml}"));
            assert_eq!(
                matches!(case.status, quick_junit::TestCaseStatus::Success { .. }),
                !strict,
                "{xml}"
            );
            let warning = case
                .properties
                .iter()
                .find(|p| p.name.as_str() == "warning");
            let stdout = case.system_out.as_ref().map(|o| o.as_str());
            if strict {
                assert!(warning.is_none(), "{xml}");
            } else {
                assert!(warning.is_some(), "{xml}");
                assert!(
                    stdout.is_some_and(|o| o.starts_with("warning: version \"1.2\"")),
                    "{xml}"
                );
            }
        }
    }

    #[test]
    fn failure_carries_level_message_and_reproduce_line() {
        let xml = to_junit(&sample::report(false));
        assert!(
            xml.contains(
                r#"<failure message="the second create exited 1, expected 0" type="must">"#
            ),
            "{xml}"
        );
        assert!(xml.contains("reproduce: env -i DHV_OPERATION=create"));
        assert!(xml.contains("mkdir: cannot create directory: File exists"));
        assert_eq!(xml.matches("<failure").count(), 1);
    }

    #[test]
    fn skip_carries_its_reason() {
        let xml = to_junit(&sample::report(false));
        assert!(
            xml.contains(r#"<skipped message="built-in plugin"/>"#),
            "{xml}"
        );
    }

    #[test]
    fn warning_fails_only_under_strict() {
        let lenient = to_junit(&sample::report(false));
        assert!(lenient.contains(r#"<property name="status" value="warn"/>"#));
        assert!(!lenient.contains(r#"type="should""#));
        let strict = to_junit(&sample::report(true));
        assert!(strict.contains(r#"type="should""#), "{strict}");
        assert_eq!(strict.matches("<failure").count(), 2);
    }

    #[test]
    fn parses_back() {
        let xml = to_junit(&sample::report(true));
        let parsed = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(parsed.test_suites.len(), 1);
        assert_eq!(parsed.test_suites[0].test_cases.len(), 6);
        assert_eq!(parsed.test_suites[0].failures, 2);
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_junit(&sample::report(false)), @r#"
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="dhv-conform" tests="6" failures="1" errors="0" time="2.345">
                <testsuite name="/opt/nomad/plugins/example" tests="6" disabled="0" errors="0" failures="1" time="2.345" skipped="1" timestamp="2026-12-01T13:05:09Z">
                    <properties>
                        <property name="schema" value="dhv-conform/report/v1"/>
                        <property name="tool.version" value="0.1.0"/>
                        <property name="spec" value="nomad-1.10"/>
                        <property name="plugin.builtin" value="false"/>
                        <property name="plugin.sha256" value="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"/>
                        <property name="plugin.version" value="1.2"/>
                        <property name="plugin.version.canonical" value="1.2.0"/>
                        <property name="strict" value="false"/>
                        <property name="timeout_scale" value="1"/>
                        <property name="filtered" value="false"/>
                        <property name="verdict" value="non-conformant"/>
                        <property name="node.name" value="client-1"/>
                    </properties>
                    <testcase name="idempotent" classname="create" time="0.012">
                        <properties>
                            <property name="id" value="create.idempotent"/>
                            <property name="level" value="must"/>
                            <property name="status" value="fail"/>
                        </properties>
                        <failure message="the second create exited 1, expected 0" type="must">the second create exited 1, expected 0
            the volume at /tmp/.tmpAbC123/volumes/x was left in place</failure>
                        <system-out>create (exit 1)
            reproduce: env -i DHV_OPERATION=create DHV_VOLUMES_DIR=/tmp/.tmpAbC123/volumes DHV_VOLUME_ID=0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 DHV_VOLUME_NAME=conformance-0b9c8f6e /opt/nomad/plugins/example create
            </system-out>
                        <system-err>create (exit 1) stderr:
            mkdir: cannot create directory: File exists
            </system-err>
                    </testcase>
                    <testcase name="succeeds" classname="create" time="0.012">
                        <properties>
                            <property name="id" value="create.succeeds"/>
                            <property name="level" value="must"/>
                            <property name="status" value="pass"/>
                        </properties>
                    </testcase>
                    <testcase name="runs" classname="fingerprint" time="0.012">
                        <properties>
                            <property name="id" value="fingerprint.runs"/>
                            <property name="level" value="must"/>
                            <property name="status" value="pass"/>
                        </properties>
                    </testcase>
                    <testcase name="version-semver" classname="fingerprint" time="0.012">
                        <properties>
                            <property name="id" value="fingerprint.version-semver"/>
                            <property name="level" value="should"/>
                            <property name="status" value="warn"/>
                            <property name="warning" value="version &quot;1.2&quot; is accepted by go-version but is not SemVer 2.0 | use &quot;1.2.0&quot;"/>
                        </properties>
                        <system-out>warning: version &quot;1.2&quot; is accepted by go-version but is not SemVer 2.0 | use &quot;1.2.0&quot;
            </system-out>
                    </testcase>
                    <testcase name="no-orphans" classname="process" time="0.012">
                        <properties>
                            <property name="id" value="process.no-orphans"/>
                            <property name="level" value="should"/>
                            <property name="status" value="skip"/>
                        </properties>
                        <skipped message="built-in plugin"/>
                    </testcase>
                    <testcase name="profile" classname="timing" time="0.012">
                        <properties>
                            <property name="id" value="timing.profile"/>
                            <property name="level" value="info"/>
                            <property name="status" value="info"/>
                        </properties>
                        <system-out>create: 4 calls, p50 7ms, p95 9ms, max 9ms
            </system-out>
                    </testcase>
                </testsuite>
            </testsuites>
        "#);
    }
}
