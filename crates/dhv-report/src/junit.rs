//! The JUnit XML writer: the one behind `check --junit` ([`to_junit`]) and the
//! fleet's `report merge --junit` ([`crate::to_fleet_junit`]), for CI systems
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

use super::model::{CheckResult, Level, Report, Shown, Status};
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
        let [stdout, stderr] = inv.streams();
        let cut = |s: &Shown<'_>| if s.truncated { " (truncated)" } else { "" };
        if !stdout.text.is_empty() {
            out.push_str(&format!(
                "stdout{}:\n{}\n",
                cut(&stdout),
                stdout.text.trim_end()
            ));
        }
        if !stderr.text.is_empty() {
            err.push_str(&format!(
                "{head} stderr{}:\n{}\n",
                cut(&stderr),
                stderr.text.trim_end()
            ));
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
#[path = "junit_tests.rs"]
mod tests;
