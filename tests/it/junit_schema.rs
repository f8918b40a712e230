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

fn element(e: &BytesStart<'_>) -> Node {
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    let attrs = e
        .attributes()
        .map(|a| {
            let a = a.expect("well-formed attribute");
            (
                String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                String::from_utf8_lossy(&a.value).into_owned(),
            )
        })
        .collect();
    Node {
        name,
        attrs,
        ..Node::default()
    }
}

/// Parses a whole document; panics on anything that is not well-formed XML.
fn parse(xml: &str) -> Node {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Node::default()];
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => stack.push(element(&e)),
            Event::Empty(e) => stack.last_mut().unwrap().children.push(element(&e)),
            Event::End(_) => {
                let done = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(done);
            }
            Event::Text(t) => stack
                .last_mut()
                .unwrap()
                .text
                .push_str(&String::from_utf8_lossy(t.as_ref())),
            Event::CData(t) => stack
                .last_mut()
                .unwrap()
                .text
                .push_str(&String::from_utf8_lossy(t.as_ref())),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(stack.len(), 1, "unclosed elements");
    stack
        .pop()
        .unwrap()
        .children
        .into_iter()
        .next()
        .expect("a root element")
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

fn bound(node: &Node, key: &str) -> usize {
    match node.attr(key) {
        None => 1,
        Some("unbounded") => usize::MAX,
        Some(n) => n.parse().expect("occurrence bound"),
    }
}

fn particle(node: &Node) -> Particle {
    match node.name.as_str() {
        "xs:element" => Particle::Element {
            name: node.attr("ref").expect("element ref").to_owned(),
            min: bound(node, "minOccurs"),
            max: bound(node, "maxOccurs"),
        },
        "xs:sequence" => Particle::Sequence(node.children.iter().map(particle).collect()),
        "xs:choice" => Particle::Choice {
            of: node.children.iter().map(particle).collect(),
            min: bound(node, "minOccurs"),
            max: bound(node, "maxOccurs"),
        },
        other => panic!("schema uses {other}, which this test does not understand"),
    }
}

fn load_schema(path: &Path) -> HashMap<String, Decl> {
    let schema = parse(&std::fs::read_to_string(path).unwrap());
    assert_eq!(schema.name, "xs:schema");
    let mut decls = HashMap::new();
    for el in &schema.children {
        let name = el.attr("name").expect("top-level element name").to_owned();
        let ty = el
            .children
            .iter()
            .find(|c| c.name == "xs:complexType")
            .expect("complexType");
        let mut decl = Decl {
            attrs: Vec::new(),
            mixed: ty.attr("mixed") == Some("true"),
            content: None,
        };
        for c in &ty.children {
            match c.name.as_str() {
                "xs:attribute" => decl.attrs.push((
                    c.attr("name").unwrap().to_owned(),
                    c.attr("type").unwrap().to_owned(),
                    c.attr("use") == Some("required"),
                )),
                _ => decl.content = Some(particle(c)),
            }
        }
        decls.insert(name, decl);
    }
    decls
}

/// Matches `particle` against `names[at..]`, greedily; returns the new position.
fn consume(p: &Particle, names: &[&str], mut at: usize) -> Result<usize, String> {
    match p {
        Particle::Element { name, min, max } => {
            let mut n = 0;
            while n < *max && names.get(at) == Some(&name.as_str()) {
                at += 1;
                n += 1;
            }
            if n < *min {
                return Err(format!(
                    "expected <{name}> at child {at}, found {:?}",
                    names.get(at)
                ));
            }
            Ok(at)
        }
        Particle::Sequence(items) => items.iter().try_fold(at, |at, p| consume(p, names, at)),
        Particle::Choice { of, min, max } => {
            let mut n = 0;
            while n < *max {
                let Some(next) = of
                    .iter()
                    .find_map(|p| consume(p, names, at).ok().filter(|&e| e > at))
                else {
                    break;
                };
                at = next;
                n += 1;
            }
            if n < *min {
                return Err(format!("expected one of a choice at child {at}"));
            }
            Ok(at)
        }
    }
}

fn type_ok(ty: &str, value: &str) -> bool {
    match ty {
        "xs:string" => true,
        "xs:int" => value.parse::<i32>().is_ok(),
        "xs:decimal" => {
            !value.is_empty()
                && value.trim_start_matches('-').split('.').count() <= 2
                && value
                    .trim_start_matches('-')
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.')
        }
        "xs:dateTime" => regex_like_datetime(value),
        other => panic!("schema type {other} not understood"),
    }
}

/// `YYYY-MM-DDThh:mm:ss[.fff][Z|±hh:mm]`.
fn regex_like_datetime(v: &str) -> bool {
    let b = v.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    b.len() >= 19
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
}

fn validate(node: &Node, decls: &HashMap<String, Decl>, path: &str) -> Vec<String> {
    let here = format!("{path}/{}", node.name);
    let Some(decl) = decls.get(&node.name) else {
        return vec![format!("{here}: element not in the schema")];
    };
    let mut errors = Vec::new();
    for (name, value) in &node.attrs {
        match decl.attrs.iter().find(|(n, _, _)| n == name) {
            None => errors.push(format!("{here}: attribute {name} not in the schema")),
            Some((_, ty, _)) if !type_ok(ty, value) => {
                errors.push(format!("{here}: {name}={value:?} is not {ty}"))
            }
            Some(_) => {}
        }
    }
    for (name, _, required) in &decl.attrs {
        if *required && node.attr(name).is_none() {
            errors.push(format!("{here}: required attribute {name} missing"));
        }
    }
    if !decl.mixed && !node.text.trim().is_empty() {
        errors.push(format!("{here}: text where the schema allows none"));
    }
    let names: Vec<&str> = node.children.iter().map(|c| c.name.as_str()).collect();
    let end = match &decl.content {
        Some(p) => consume(p, &names, 0).unwrap_or_else(|e| {
            errors.push(format!("{here}: {e}"));
            names.len()
        }),
        None => 0,
    };
    if end < names.len() {
        errors.push(format!("{here}: unexpected <{}>", names[end]));
    }
    for child in &node.children {
        errors.extend(validate(child, decls, &here));
    }
    errors
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
