//! The unit tests of `junit.rs`, in a file of their own.

use super::*;
use crate::sample;

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
        xml.contains(r#"<failure message="the second create exited 1, expected 0" type="must">"#),
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
