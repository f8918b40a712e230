//! The fleet JUnit XML report (`report merge --junit`): one testsuite per node report,
//! one testcase per check it ran, written by the single report's writer (see
//! [`crate::to_junit`]): the same names, properties and mapping, a warning
//! failing only when that node ran `--strict`.

use quick_junit::Property;
use std::time::Duration;

use super::model::{FleetNode, FleetReport};
use crate::junit::{Case, Suite, render};

/// The name of the `<testsuites>` root element.
const ROOT_NAME: &str = "dhv-conform fleet";

/// Renders the fleet as JUnit XML: one `<testsuite>` per node report (named
/// `PLUGIN on NODE`), in the fleet's node order.
pub fn to_fleet_junit(fleet: &FleetReport) -> String {
    render(ROOT_NAME, fleet.nodes.len(), |i| {
        node_suite(fleet, &fleet.nodes[i])
    })
}

fn node_suite<'a>(fleet: &'a FleetReport, node: &'a FleetNode) -> Suite<'a> {
    // `get`: a fleet read back from a hand-edited file must not make rendering panic.
    let build = fleet.builds.get(node.build);
    let properties = vec![
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
    ];
    let mut problems = node.problems.iter().peekable();
    let mut cases = Vec::new();
    for (check, status) in fleet.checks.iter().zip(&node.statuses) {
        let Some(status) = *status else { continue };
        let problem = problems.next_if(|p| p.id == check.id);
        let out = problem
            .and_then(|p| p.reproduce.as_deref())
            .map(|r| crate::junit::clean(&format!("reproduce: {r}\n")))
            .unwrap_or_default();
        cases.push(Case {
            id: &check.id,
            group: check.id.split('.').next().unwrap_or_default(),
            level: check.level,
            status,
            message: problem.map_or("", |p| p.message.as_str()),
            time: Duration::ZERO,
            out,
            err: String::new(),
        });
    }
    Suite {
        name: format!("{} on {}", node.plugin, node.name),
        properties,
        time: Duration::from_millis(node.duration_ms.unwrap_or(0)),
        timestamp: node.started_at.as_deref(),
        strict: node.strict,
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::sample;

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
            xml.contains(r#"<failure message="create.succeeds fail | &lt;why&gt;" type="must">"#),
            "{xml}"
        );
        assert!(xml.contains("reproduce: env -i DHV_OPERATION=create /p/create.succeeds create"));
        assert!(xml.contains(r#"<skipped message="delete.succeeds skip | &lt;why&gt;"/>"#));
        // The single report's names and properties.
        assert!(xml.contains(r#"<testcase name="succeeds" classname="create" time="0.000">"#));
        assert!(xml.contains(r#"<property name="level" value="must"/>"#));
        assert!(xml.contains(r#"timestamp="2026-12-01T13:05:09Z""#));
        assert!(!xml.contains(r#"disabled="1""#));
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
