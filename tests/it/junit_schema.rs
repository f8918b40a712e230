//! `--junit` output validated against the JUnit schema that Jenkins and GitLab read
//! (tests/fixtures/junit.xsd), through the binary, for a run with failures, warnings,
//! skips and measurements, lenient and strict.
//!
//! No network and no xmllint: the schema file is read with an XML parser and the part
//! of XSD it uses (elements, sequences, choices, occurrence bounds, required attributes
//! and their types) is applied here.

use crate::util;

use std::collections::HashMap;
use std::path::Path;

use assert_cmd::Command;
use quick_xml::events::{BytesStart, Event};

mod xsd;
use xsd::{load_schema, parse, validate};

/// A parsed XML element.
#[derive(Debug, Default)]
struct Node {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
    text: String,
}

impl Node {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A content particle of the schema.
#[derive(Debug)]
enum Particle {
    Element {
        name: String,
        min: usize,
        max: usize,
    },
    Sequence(Vec<Particle>),
    Choice {
        of: Vec<Particle>,
        min: usize,
        max: usize,
    },
}

#[derive(Debug)]
struct Decl {
    /// name, type, required
    attrs: Vec<(String, String, bool)>,
    mixed: bool,
    content: Option<Particle>,
}

fn junit_of(plugin: &str, extra: &[&str]) -> String {
    let out_dir = util::Scratch::new();
    let tmp = util::Scratch::new();
    let junit = out_dir.path().join("junit.xml");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(repo.join("sample-plugins").join(plugin))
        .arg("--junit")
        .arg(&junit)
        .args(extra)
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    std::fs::read_to_string(&junit).expect("the JUnit file was written")
}

#[test]
fn junit_matches_the_schema_ci_systems_read() {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit.xsd");
    let decls = load_schema(&schema);
    for (plugin, extra) in [
        ("fails-on-existing-dir", &[][..]),
        ("fails-on-existing-dir", &["--strict"][..]),
        ("reference", &[][..]),
    ] {
        let xml = junit_of(plugin, extra);
        let root = parse(&xml);
        let errors = validate(&root, &decls, "");
        assert!(
            errors.is_empty(),
            "{plugin} {extra:?}:\n{}\n{xml}",
            errors.join("\n")
        );
    }
}

/// `report merge --junit` (the fleet) is written by the same writer: it validates
/// too, and its cases are named as the single report's are.
#[test]
fn the_fleet_junit_matches_the_schema_too() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let decls = load_schema(&repo.join("tests/fixtures/junit.xsd"));
    let work = util::Scratch::new();
    let mut reports = Vec::new();
    for (plugin, node, extra) in [
        ("relative-path", "node-a", &[][..]),
        ("non-semver-version", "node-b", &["--strict"][..]),
    ] {
        let json = work.path().join(format!("{node}.json"));
        Command::cargo_bin("dhv-conform")
            .unwrap()
            .arg("check")
            .arg(repo.join("sample-plugins").join(plugin))
            .args(["--quiet", "--node-name", node, "--json"])
            .arg(&json)
            .args(extra)
            .env("TMPDIR", work.path())
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        reports.push(json);
    }
    let junit = work.path().join("fleet.xml");
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["report", "merge"])
        .args(&reports)
        .arg("--junit")
        .arg(&junit)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let root = parse(&xml);
    let errors = validate(&root, &decls, "");
    assert!(errors.is_empty(), "{}\n{xml}", errors.join("\n"));
    assert_eq!(root.children.len(), 2, "{xml}");
    for suite in &root.children {
        for case in suite.children.iter().filter(|c| c.name == "testcase") {
            let class = case.attr("classname").unwrap();
            let name = case.attr("name").unwrap();
            assert!(!name.starts_with(&format!("{class}.")), "{class} {name}");
            let props = &case
                .children
                .iter()
                .find(|k| k.name == "properties")
                .unwrap()
                .children;
            assert!(
                props.iter().any(|p| p.attr("name") == Some("level")),
                "{xml}"
            );
        }
    }
    // node-b ran --strict: its warning is a failure, under the check's one name.
    assert!(
        xml.contains(r#"<testcase name="version-semver" classname="fingerprint""#),
        "{xml}"
    );
    assert!(!xml.contains("[warning]"), "{xml}");
}

/// The counts on the testsuite agree with its testcases; skips are `<skipped message>`,
/// and a warning that does not fail the run keeps the check's name and is visible as
/// a property and first in its stdout.
#[test]
fn junit_counts_skips_and_warnings() {
    // A failure (create.path-exists), a warning (create.path-in-volumes-dir)
    // and skips (the checks that need an absolute path).
    let xml = junit_of("relative-path", &[]);
    let root = parse(&xml);
    let suite = &root.children[0];
    let cases: Vec<&Node> = suite
        .children
        .iter()
        .filter(|c| c.name == "testcase")
        .collect();
    let count = |name: &str| {
        cases
            .iter()
            .filter(|c| c.children.iter().any(|k| k.name == name))
            .count()
    };
    assert_eq!(suite.attr("tests"), Some(cases.len().to_string().as_str()));
    assert_eq!(
        suite.attr("failures"),
        Some(count("failure").to_string().as_str())
    );
    assert_eq!(
        suite.attr("skipped"),
        Some(count("skipped").to_string().as_str())
    );
    assert_ne!(suite.attr("failures"), Some("0"));
    for skip in cases
        .iter()
        .flat_map(|c| c.children.iter())
        .filter(|k| k.name == "skipped")
    {
        assert!(skip.attr("message").is_some_and(|m| !m.is_empty()), "{xml}");
    }
    let warned = cases
        .iter()
        .find(|c| c.attr("name") == Some("path-in-volumes-dir"))
        .expect("create.path-in-volumes-dir, under its one name");
    assert_eq!(warned.attr("classname"), Some("create"));
    assert!(
        !warned.children.iter().any(|k| k.name == "failure"),
        "a warning does not fail the suite: {xml}"
    );
    let props = &warned
        .children
        .iter()
        .find(|k| k.name == "properties")
        .unwrap()
        .children;
    assert!(
        props.iter().any(|p| p.attr("name") == Some("warning")),
        "{xml}"
    );
    assert!(
        props
            .iter()
            .any(|p| p.attr("name") == Some("status") && p.attr("value") == Some("warn")),
        "{xml}"
    );
    let out = warned
        .children
        .iter()
        .find(|k| k.name == "system-out")
        .expect("system-out");
    assert!(out.text.starts_with("warning: "), "{}", out.text);
}

/// The validator itself: documents that break the schema are caught.
#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit.xsd");
    let decls = load_schema(&schema);
    let suite = |attrs: &str, body: &str| {
        format!("<testsuites><testsuite name=\"p\" {attrs}>{body}</testsuite></testsuites>")
    };
    let full = "tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.1\" timestamp=\"2026-12-01T13:05:09Z\"";
    let case = "<testcase name=\"a\" classname=\"g\" time=\"0.001\"/>";
    assert!(validate(&parse(&suite(full, case)), &decls, "").is_empty());
    let cases = [
        (
            suite(&full.replace(" skipped=\"0\"", ""), case),
            "required attribute skipped",
        ),
        (
            suite(&full.replace("2026-12-01T13:05:09Z", "yesterday"), case),
            "is not xs:dateTime",
        ),
        (
            suite(full, "<testcase name=\"a\" classname=\"g\"/>"),
            "required attribute time",
        ),
        (
            suite(full, &case.replace("/>", " disabled=\"1\"/>")),
            "attribute disabled not in the schema",
        ),
        (
            suite(
                full,
                "<testcase name=\"a\" classname=\"g\" time=\"1\"><skipped/><failure/></testcase>",
            ),
            "unexpected <failure>",
        ),
        (suite(full, "<bogus/>"), "unexpected <bogus>"),
    ];
    for (doc, says) in cases {
        let errors = validate(&parse(&doc), &decls, "").join("\n");
        assert!(errors.contains(says), "{says}: {errors}\n{doc}");
    }
}
