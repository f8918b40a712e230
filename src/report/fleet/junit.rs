//! The fleet JUnit XML report (`report merge --junit`): one testsuite per node report,
//! one testcase per check it ran.
//!
//! The mapping is the single report's (see [`crate::report::to_junit`]): a warning fails
//! only when that node ran `--strict`, skips carry their reason. quick-junit holds a
//! whole document in memory, and 10,000 nodes × 43 checks of it would dwarf the matrix,
//! so each node's suite is built and serialised alone and the documents are spliced
//! under one root; a test holds the result byte-equal to serialising it in one piece.

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use super::model::{FleetNode, FleetReport, Problem};
use crate::report::model::{Level, Status};

/// The name of the `<testsuites>` root element.
const ROOT_NAME: &str = "dhv-conform fleet";
/// quick-junit's closing root tag, on a line of its own.
const ROOT_END: &str = "</testsuites>";

/// Renders the fleet as JUnit XML: one `<testsuite>` per node report (named
/// `PLUGIN on NODE`), in the fleet's node order.
pub fn to_fleet_junit(fleet: &FleetReport) -> String {
    let mut root = quick_junit::Report::new(ROOT_NAME);
    for node in &fleet.nodes {
        let suite = node_suite(fleet, node);
        root.tests += suite.tests;
        root.failures += suite.failures;
        root.errors += suite.errors;
    }
    // The root alone, its counts already the totals: everything before its end tag.
    let mut xml = serialise(&root);
    xml.truncate(xml.rfind(ROOT_END).unwrap_or(xml.len()));
    for node in &fleet.nodes {
        let mut one = quick_junit::Report::new(ROOT_NAME);
        one.add_test_suite(node_suite(fleet, node));
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
    xml
}

fn serialise(report: &quick_junit::Report) -> String {
    // Serialising into a String only fails on I/O errors, and a String has none.
    report
        .to_string()
        .expect("JUnit XML serialises into memory")
}

fn node_suite(fleet: &FleetReport, node: &FleetNode) -> TestSuite {
    // `get`: a fleet read back from a hand-edited file must not make rendering panic.
    let build = fleet.builds.get(node.build);
    let mut suite = TestSuite::new(format!("{} on {}", node.plugin, node.name));
    suite.add_properties([
        Property::new("node", &node.name),
        Property::new("plugin", &node.plugin),
        Property::new(
            "plugin.sha256",
            build.and_then(|b| b.sha256.as_deref()).unwrap_or("none"),
        ),
        Property::new(
            "plugin.version",
            build.and_then(|b| b.version.as_deref()).unwrap_or("none"),
        ),
        Property::new("tool.version", &node.tool_version),
        Property::new("strict", node.strict.to_string()),
        Property::new("verdict", node.verdict.as_str()),
        Property::new("source", &node.source),
    ]);
    let mut problems = node.problems.iter().peekable();
    for (check, status) in fleet.checks.iter().zip(&node.statuses) {
        let Some(status) = *status else { continue };
        let problem = problems.next_if(|p| p.id == check.id);
        let mut case = TestCase::new(
            check.id.as_str(),
            case_status(status, check.level, node.strict, problem),
        );
        case.set_classname(check.id.split('.').next().unwrap_or_default());
        if status == Status::Warn {
            case.add_property(Property::new("status", "warn"));
        }
        if let Some(reproduce) = problem.and_then(|p| p.reproduce.as_deref()) {
            case.set_system_out(format!("reproduce: {reproduce}\n"));
        }
        suite.add_test_case(case);
    }
    suite
}

fn case_status(
    status: Status,
    level: Level,
    strict: bool,
    problem: Option<&Problem>,
) -> TestCaseStatus {
    let message = problem.map_or("", |p| p.message.as_str());
    match status {
        Status::Fail => failure(message, level),
        Status::Warn if strict => failure(message, level),
        Status::Skip => {
            let mut skipped = TestCaseStatus::skipped();
            skipped.set_message(message);
            skipped
        }
        Status::Pass | Status::Warn | Status::Info => TestCaseStatus::success(),
    }
}

fn failure(message: &str, level: Level) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
    status.set_message(message).set_type(level.as_str());
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fleet::sample;

    /// The same document built in one piece, as quick-junit would write it.
    fn whole(fleet: &FleetReport) -> String {
        let mut root = quick_junit::Report::new(ROOT_NAME);
        root.add_test_suites(fleet.nodes.iter().map(|n| node_suite(fleet, n)));
        serialise(&root)
    }

    #[test]
    fn spliced_suites_equal_the_whole_document() {
        let fleet = sample::fleet();
        assert_eq!(to_fleet_junit(&fleet), whole(&fleet));
        let empty = crate::report::fleet::Merger::new().finish();
        assert_eq!(to_fleet_junit(&empty), whole(&empty));
    }

    #[test]
    fn one_suite_per_node_with_its_cases() {
        let xml = to_fleet_junit(&sample::fleet());
        let parsed = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        let names: Vec<&str> = parsed.test_suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "lvm on node-c",
                "lvm on node-a",
                "zfs on node-a",
                "lvm on node-b"
            ]
        );
        let cases: Vec<usize> = parsed
            .test_suites
            .iter()
            .map(|s| s.test_cases.len())
            .collect();
        // An absent check has no case.
        assert_eq!(cases, [4, 4, 2, 4]);
        assert_eq!((parsed.tests, parsed.failures), (14, 1));
        assert!(
            xml.contains(r#"<failure message="create.succeeds fail | &lt;why&gt;" type="must"/>"#),
            "{xml}"
        );
        assert!(xml.contains("reproduce: env -i DHV_OPERATION=create /p/create.succeeds create"));
        assert!(xml.contains(r#"<skipped message="delete.succeeds skip | &lt;why&gt;"/>"#));
        assert!(xml.contains(r#"<property name="plugin.sha256" value="60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"/>"#));
    }

    #[test]
    fn a_warning_fails_only_on_a_strict_node() {
        let mut fleet = sample::fleet();
        let lenient = to_fleet_junit(&fleet);
        assert!(lenient.contains(r#"<property name="status" value="warn"/>"#));
        assert!(!lenient.contains(r#"type="should""#));
        fleet.nodes[2].strict = true;
        let strict = to_fleet_junit(&fleet);
        assert!(strict.contains(r#"type="should""#), "{strict}");
        assert_eq!(strict.matches("<failure").count(), 2);
    }
}
