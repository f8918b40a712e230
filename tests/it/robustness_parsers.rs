//! The harness's parsers, whatever they are fed: any input gives a value or an
//! error, never a panic or a crash of the binary.

use crate::util;

use std::fs;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::conformance::fixture;
use dhv_conform::{contract, version};
use proptest::prelude::*;

use crate::util::bin;

/// How long any one run of the binary may take before the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// Parsers: any input gives a value or an error, never a panic.
// (version::parse and the contract decoders have their own short-input
// proptests next to them; these add fixtures, sizes, long and deep input.)
// ---------------------------------------------------------------------------

/// JSON values a few levels deep, with the keys a fixture knows among others.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        prop::sample::select(vec![
            "10GiB",
            "1.5GB",
            "0",
            "-1",
            "99999999999PiB",
            "1e3",
            "host",
            ""
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(fixture_key(), inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn fixture_key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "name",
            "namespace",
            "node_pool",
            "plugin_id",
            "type",
            "capacity_min",
            "capacity_max",
            "capacity",
            "parameters",
            "capability",
            "constraint",
            "id",
            "node_id",
        ])
        .prop_map(str::to_string),
        any::<String>(),
    ]
}

/// Pieces of HCL, put together in any order: mostly malformed, sometimes a spec.
fn hcl_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "name",
            "namespace",
            "type",
            "plugin_id",
            "capacity_min",
            "capacity_max",
            "parameters",
            "capability",
            "constraint",
            " = ",
            "=",
            "\"x\"",
            "\"host\"",
            "\"10GiB\"",
            "\"1.5 GB\"",
            "\"-1\"",
            "1",
            "-1",
            "1.5",
            "1e999",
            "18446744073709551616",
            "true",
            "null",
            "{",
            "}",
            "[",
            "]",
            "(",
            ")",
            ",",
            ".",
            "*",
            "!",
            "?",
            ":",
            "\n",
            " ",
            "#",
            "//",
            "/*",
            "*/",
            "${",
            "%{",
            "$${",
            "<<EOF\n",
            "<<-EOF\n",
            "EOF\n",
            "for",
            "in",
            "if",
            "\"\\u00e9\"",
            "\"\\",
            "\u{ff}",
            "é",
            "\0",
        ]),
        0..48,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn json_fixtures_never_panic(text in any::<String>()) {
        let _ = fixture::parse_json(Path::new("f.json"), &text);
    }

    #[test]
    fn structured_json_fixtures_never_panic(value in json_value()) {
        let _ = fixture::parse_json(Path::new("f.json"), &value.to_string());
    }

    #[test]
    fn hcl_fixtures_never_panic(text in any::<String>()) {
        let _ = fixture::parse_hcl(Path::new("f.hcl"), &text);
    }

    #[test]
    fn hcl_like_fixtures_never_panic(text in hcl_like()) {
        let _ = fixture::parse_hcl(Path::new("f.hcl"), &text);
    }

    #[test]
    fn sizes_never_panic(text in any::<String>(), sizeish in r"[0-9. ]{0,40}[kKmMgGtTpPiIbB ]{0,4}") {
        let _ = fixture::parse_size(&text);
        let _ = fixture::parse_size(&sizeish);
    }

    #[test]
    fn long_versions_never_panic(
        raw in r"[vV]?([0-9]{1,60}\.){0,300}[0-9]{0,60}(-[0-9A-Za-z.+~-]{0,200})?(\+[0-9A-Za-z.-]{0,200})?"
    ) {
        let _ = version::parse(&raw);
        let _ = dhv_conform::report::VersionInfo::from_raw(&raw);
    }

    #[test]
    fn decoders_never_panic_on_large_documents(
        value in json_value(),
        key in prop::sample::select(vec!["path", "bytes", "version", "error"]),
    ) {
        let mut top = serde_json::Map::new();
        top.insert(key.to_string(), value.clone());
        let doc = serde_json::Value::Object(top).to_string();
        let _ = contract::decode_create(doc.as_bytes());
        let _ = contract::decode_fingerprint(doc.as_bytes());
        let _ = contract::decode_create(value.to_string().as_bytes());
        let _ = contract::decode_fingerprint(value.to_string().as_bytes());
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash_in_json() {
    let deep = format!("{{\"name\": {}", "[".repeat(200_000));
    assert!(fixture::parse_json(Path::new("deep.json"), &deep).is_err());
    for doc in [
        format!("{{\"path\": {}", "[".repeat(200_000)),
        format!("{{\"version\": {}", "{\"a\":".repeat(100_000)),
        "[".repeat(200_000),
    ] {
        assert!(contract::decode_create(doc.as_bytes()).is_err());
        assert!(contract::decode_fingerprint(doc.as_bytes()).is_err());
    }
}

/// Through the binary, so that a stack overflow fails this test alone.
#[test]
fn deep_nesting_is_an_input_error_not_a_crash_in_hcl() {
    let area = util::Scratch::new();
    for (name, text) in [
        ("arrays.hcl", format!("name = {}", "[".repeat(50_000))),
        ("objects.hcl", format!("name = {}", "{a = ".repeat(50_000))),
        ("parens.hcl", format!("name = {}", "(".repeat(50_000))),
    ] {
        let path = area.path().join(name);
        fs::write(&path, text).unwrap();
        let out = Command::new(bin())
            .args(["check", "--list", "--fixture"])
            .arg(&path)
            .timeout(RUN_LIMIT)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
