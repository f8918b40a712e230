//! The JUnit XML report (`--junit`), for CI systems that show test results natively.
//!
//! JUnit knows only pass, failure and skipped, so the mapping is a decision: a warning is
//! a failure only under `--strict` (when it fails the run) and otherwise a passing case
//! marked with a `status=warn` property and a `warning` property, its text in
//! `system-err` too (reporters that hide `system-out` still show it), so that CI
//! dashboards go red exactly when the exit code does. Skips are `<skipped message>`,
//! counted in the suite's `skipped` attribute: never silent. The shape is the one
//! Jenkins' and GitLab's JUnit schema describe (a test validates it).

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite, XmlString};

use super::model::{CheckResult, Report, Status};
use std::time::Duration;

/// The name of the `<testsuites>` root element.
const ROOT_NAME: &str = "dhv-conform";

/// Renders the report as JUnit XML: one testsuite named after the plugin path, one
/// testcase per check (name = id, classname = group), sorted by id.
pub fn to_junit(report: &Report) -> String {
    let mut suite = TestSuite::new(report.plugin.path.as_str());
    suite.add_properties(suite_properties(report));
    suite.add_test_cases(
        report
            .checks_by_id()
            .into_iter()
            .map(|check| test_case(check, report.options.strict)),
    );
    let time = run_time(report);
    suite.set_time(time);
    // quick-junit counts skips as `disabled`; JUnit readers want them as `skipped`,
    // and nothing here is disabled.
    let skipped = std::mem::take(&mut suite.disabled);
    suite.extra.insert(
        XmlString::new("skipped"),
        XmlString::new(skipped.to_string()),
    );
    if let Some(at) = &report.started_at {
        suite
            .extra
            .insert(XmlString::new("timestamp"), XmlString::new(at.as_str()));
    }

    let mut root = quick_junit::Report::new(ROOT_NAME);
    root.add_test_suite(suite);
    root.set_time(time);
    // Serialising into a String only fails on I/O errors, and a String has none.
    root.to_string().expect("JUnit XML serialises into memory")
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
    props
}

fn test_case(check: &CheckResult, strict: bool) -> TestCase {
    let fails_run = check.status == Status::Fail || (check.status == Status::Warn && strict);
    let status = if fails_run {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
        status
            .set_message(clean(first_line(&check.message)))
            .set_type(check.level.as_str())
            .set_description(clean(&check.message));
        status
    } else if check.status == Status::Skip {
        let mut status = TestCaseStatus::skipped();
        status.set_message(clean(&check.message));
        status
    } else {
        TestCaseStatus::success()
    };

    let mut case = TestCase::new(check.id.as_str(), status);
    case.set_classname(check.group.as_str())
        .set_time(Duration::from_millis(check.duration_ms))
        .add_property(Property::new("level", check.level.as_str()))
        .add_property(Property::new("status", check.status.as_str()));

    match check.status {
        Status::Fail | Status::Warn => {
            let (out, mut err) = evidence(check);
            if !fails_run {
                // A passing warning: the case looks green, so say it where every
                // reader looks (a property, and stderr, which fewer readers hide).
                case.add_property(Property::new("warning", clean(first_line(&check.message))));
                err.insert_str(0, &format!("warning: {}\n", clean(&check.message)));
            }
            set_if_any(&mut case, out, err);
        }
        Status::Info => set_if_any(
            &mut case,
            format!("{}\n", clean(&check.message)),
            String::new(),
        ),
        Status::Pass | Status::Skip => {}
    }
    case
}

/// The reproduce lines and stdout excerpts (for system-out) and the stderr excerpts (for
/// system-err) of the invocations behind a failure.
fn evidence(check: &CheckResult) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    for inv in check.evidence() {
        let head = format!("{} ({})", inv.operation, inv.outcome());
        out.push_str(&format!("{head}\nreproduce: {}\n", inv.reproduce));
        for orphan in &inv.orphans {
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

fn set_if_any(case: &mut TestCase, out: String, err: String) {
    if !out.is_empty() {
        case.set_system_out(out);
    }
    if !err.is_empty() {
        case.set_system_err(err);
    }
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or_default()
}

/// Plugin text with control characters escaped: XML 1.0 cannot carry most of them
/// at all (a NUL makes the file unreadable), and the rest would reach a terminal.
fn clean(text: &str) -> String {
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
            xml.contains(r#"<testcase name="create.succeeds" classname="create""#),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase ").count(), 6);
        assert!(xml.contains(r#"<testsuite name="/opt/nomad/plugins/example""#));
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
                    <testcase name="create.idempotent" classname="create" time="0.012">
                        <properties>
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
                    <testcase name="create.succeeds" classname="create" time="0.012">
                        <properties>
                            <property name="level" value="must"/>
                            <property name="status" value="pass"/>
                        </properties>
                    </testcase>
                    <testcase name="fingerprint.runs" classname="fingerprint" time="0.012">
                        <properties>
                            <property name="level" value="must"/>
                            <property name="status" value="pass"/>
                        </properties>
                    </testcase>
                    <testcase name="fingerprint.version-semver" classname="fingerprint" time="0.012">
                        <properties>
                            <property name="level" value="should"/>
                            <property name="status" value="warn"/>
                            <property name="warning" value="version &quot;1.2&quot; is accepted by go-version but is not SemVer 2.0 | use &quot;1.2.0&quot;"/>
                        </properties>
                        <system-err>warning: version &quot;1.2&quot; is accepted by go-version but is not SemVer 2.0 | use &quot;1.2.0&quot;
            </system-err>
                    </testcase>
                    <testcase name="process.no-orphans" classname="process" time="0.012">
                        <properties>
                            <property name="level" value="should"/>
                            <property name="status" value="skip"/>
                        </properties>
                        <skipped message="built-in plugin"/>
                    </testcase>
                    <testcase name="timing.profile" classname="timing" time="0.012">
                        <properties>
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
