//! The unit tests of `json.rs`, in a file of their own.

use super::*;
use proptest::prelude::*;

#[test]
fn unquote_follows_go() {
    let cases: &[(&[u8], &str)] = &[
        (b"plain", "plain"),
        (br#"\"\\\/\b\f\n\r\t"#, "\"\\/\u{8}\u{c}\n\r\t"),
        (br"\u00e9\u0041", "éA"),
        (br"\uD83D\uDE00", "😀"),
        (br"\uD83Dx", "\u{FFFD}x"),
        (br"\uDE00\uD83D\uDE00", "\u{FFFD}😀"),
        (br"\uD83D\u0041", "\u{FFFD}A"),
        (b"a\xffb", "a\u{FFFD}b"),
        // A truncated sequence is one replacement per byte in Go.
        (b"\xe2\x82A", "\u{FFFD}\u{FFFD}A"),
        (b"\xed\xa0\x80", "\u{FFFD}\u{FFFD}\u{FFFD}"),
        ("é😀".as_bytes(), "é😀"),
    ];
    for (body, expected) in cases {
        assert_eq!(unquote(body), *expected, "{:?}", body.escape_ascii());
    }
}

#[test]
fn string_maps_decode_as_go_decodes_them() {
    let map = |s: &str| unmarshal_string_map(s.as_bytes());
    let got = map(r#"{"k":"\ud800x","a":"1","a":"2","n":null,"e":"\u00e9"}"#)
        .unwrap()
        .unwrap();
    assert_eq!(got["k"], "\u{fffd}x");
    assert_eq!(got["a"], "2");
    assert_eq!(got["n"], "");
    assert_eq!(got["e"], "é");
    assert_eq!(map(" null ").unwrap(), None);
    assert_eq!(
        unmarshal_string_map(b"{\"k\":\"a\xffb\"}")
            .unwrap()
            .unwrap()["k"],
        "a\u{fffd}b"
    );
    for (bad, want) in [
        (
            "[]",
            "json: cannot unmarshal array into Go value of type map[string]string",
        ),
        (
            r#""x""#,
            "json: cannot unmarshal string into Go value of type map[string]string",
        ),
        (
            r#"{"a":1}"#,
            "json: cannot unmarshal number into Go value of type string",
        ),
        ("{", "unexpected end of JSON input"),
    ] {
        assert_eq!(map(bad).unwrap_err().to_string(), want, "{bad}");
    }
}

#[test]
fn field_names_fold_like_go() {
    let fields = &[("bytes", FieldKind::Int64), ("path", FieldKind::String)];
    assert_eq!(find_field(fields, "bytes"), Some(0));
    assert_eq!(find_field(fields, "BYTES"), Some(0));
    assert_eq!(find_field(fields, "Path"), Some(1));
    assert_eq!(find_field(fields, "byte\u{17F}"), Some(0));
    assert_eq!(find_field(fields, "paths"), None);
    assert_eq!(find_field(fields, "páth"), None);
}

proptest! {
    #[test]
    fn marshalled_maps_parse_back(map in proptest::collection::btree_map(any::<String>(), any::<String>(), 0..6)) {
        let json = marshal_string_map(&map);
        prop_assert!(!json.chars().any(|c| c < ' '), "raw control character in {}", json);
        let back: BTreeMap<String, String> = serde_json::from_str(&json)
            .map_err(|e| TestCaseError::fail(format!("{json}: {e}")))?;
        prop_assert_eq!(back, map);
    }
}
