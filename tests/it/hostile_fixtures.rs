//! Any fixture gives a run or exit 2 with one line, never a crash: the
//! corpus of hostile HCL in `fixtures/bad/hostile/` (each once crashed the
//! harness with a stack overflow), the same constructs at the size limit,
//! and generated nestings of every kind through the fixture reader.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dhv_conform::conformance::fixture;
use proptest::prelude::*;

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad/hostile");
    let mut all: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    all.sort();
    all
}

/// `check --list --fixture FILE` through the binary (a stack overflow would
/// abort it): exit 2 and one line on stderr naming the file.
fn assert_input_error(file: &Path) {
    let out = assert_cmd::Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["check", "--list", "--fixture"])
        .arg(file)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: {stderr}", file.display());
    assert_eq!(stderr.lines().count(), 1, "{}: {stderr}", file.display());
    assert!(stderr.contains(&*file.to_string_lossy()), "{stderr}");
}

#[test]
fn every_hostile_fixture_in_the_corpus_is_an_input_error() {
    let files = corpus();
    assert!(files.len() >= 7, "{files:?}");
    for file in files {
        assert_input_error(&file);
    }
}

/// The deepest each construct gets in 32 KiB (the size limit): the parser's
/// thread has stack enough for all of them.
#[test]
fn hostile_hcl_at_the_size_limit_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let n = 32 * 1024 - 40;
    let cases = [
        ("not", format!("name = {}true\n", "!".repeat(n))),
        ("neg", format!("name = {}1\n", "-".repeat(n))),
        (
            "template",
            format!(
                "name = \"${{{}{}}}\"\n",
                "[".repeat(n / 2),
                "]".repeat(n / 2)
            ),
        ),
        (
            "parens",
            format!(
                "name = \"${{{}1{}}}\"\n",
                "(".repeat(n / 2),
                ")".repeat(n / 2)
            ),
        ),
        ("plus", format!("name = 1{}\n", " + 1".repeat(n / 4))),
        (
            "cond",
            format!("name = {}0\n", "true ? 1 : ".repeat(n / 11)),
        ),
        (
            "trick",
            format!(
                "/* \" */ name = {}{}\n",
                "[".repeat(n / 2),
                "]".repeat(n / 2)
            ),
        ),
        (
            "object",
            format!(
                "/* \" */ name = {}1{}\n",
                "{a = ".repeat(n / 6),
                "}".repeat(n / 6)
            ),
        ),
        ("too-big", format!("name = \"{}\"\n", "x".repeat(n + 100))),
    ];
    for (name, text) in cases {
        let file = dir.path().join(format!("{name}.hcl"));
        fs::write(&file, text).unwrap();
        assert_input_error(&file);
    }
}

/// Openers that nest, each with its closer ("" where none is needed).
const NESTERS: &[(&str, &str)] = &[
    ("[", "]"),
    ("(", ")"),
    ("{a = ", "}"),
    ("!", ""),
    ("-", ""),
    ("f(", ")"),
    ("\"${", "}\""),
    ("true ? 1 : ", ""),
    ("1 + ", ""),
    ("a[", "]"),
    ("[for x in ", " : x]"),
];

fn nested() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(0..NESTERS.len(), 0..2500),
        any::<bool>(),
        prop::sample::select(vec!["1", "true", "\"x\"", "a", "null"]),
    )
        .prop_map(|(chain, close, leaf)| {
            let mut text = String::from("name = ");
            for &i in &chain {
                text.push_str(NESTERS[i].0);
            }
            text.push_str(leaf);
            if close {
                for &i in chain.iter().rev() {
                    text.push_str(NESTERS[i].1);
                }
            }
            text.push('\n');
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// In this process: a crash here aborts the whole test binary, which
    /// fails; an answer either way passes.
    #[test]
    fn nested_hcl_of_any_kind_gives_an_answer(text in nested()) {
        let _ = fixture::parse_hcl(Path::new("fuzz.hcl"), &text);
    }
}
