//! Unit tests of Go's JSON scanner: its verdicts and its words, input by
//! input (kept beside it so scan.rs stays the scanner alone).

use super::*;
use proptest::prelude::*;

fn syntax_message(input: &[u8]) -> String {
    match check_valid(input) {
        Err(DecodeError::Syntax { message, .. }) => message,
        other => panic!(
            "{:?}: expected a syntax error, got {other:?}",
            input.escape_ascii()
        ),
    }
}

#[test]
fn well_formed_inputs_pass_the_scanner() {
    for input in [
        "null",
        " {} ",
        "\t\r\n[]\n",
        r#"{"a":[1,-0,0.5,1e3,1E+3,-1.5e-7,true,false,null,"x",{"b":{}}]}"#,
        r#""\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00""#,
        "0",
        "-0",
        "[ ]",
        "{ }",
        "{\"a\" : 1 , \"b\" : [ 1 , 2 ] }",
    ] {
        assert_eq!(check_valid(input.as_bytes()), Ok(()), "{input:?}");
    }
    // Go does not validate UTF-8 inside strings.
    assert_eq!(check_valid(b"\"\xff\xfe\""), Ok(()));
}

/// Each input's syntax error, in Go's words.
fn assert_syntax_messages(cases: &[(&[u8], &str)]) {
    for (input, message) in cases {
        assert_eq!(
            syntax_message(input),
            *message,
            "{:?}",
            input.escape_ascii()
        );
    }
}

#[test]
fn syntax_errors_in_structure_use_gos_words() {
    assert_syntax_messages(&[
        (b"", "unexpected end of JSON input"),
        (b" \n\t", "unexpected end of JSON input"),
        (b"{", "unexpected end of JSON input"),
        (b"{\"a\"", "unexpected end of JSON input"),
        (b"\"abc", "unexpected end of JSON input"),
        (b"[1,", "unexpected end of JSON input"),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (
            b"creating...\n{}",
            "invalid character 'c' looking for beginning of value",
        ),
        (b"{}x", "invalid character 'x' after top-level value"),
        (b"{} {}", "invalid character '{' after top-level value"),
        (b"1 2", "invalid character '2' after top-level value"),
        (b"{\"a\" 1}", "invalid character '1' after object key"),
        (
            b"{\"a\":1 \"b\"}",
            "invalid character '\"' after object key:value pair",
        ),
        (
            b"{\"a\":1,}",
            "invalid character '}' looking for beginning of object key string",
        ),
        (
            b"{'a':1}",
            r"invalid character '\'' looking for beginning of object key string",
        ),
        (b"[1 2]", "invalid character '2' after array element"),
        (
            b"[1,]",
            "invalid character ']' looking for beginning of value",
        ),
    ]);
}

#[test]
fn syntax_errors_in_strings_numbers_and_literals_use_gos_words() {
    assert_syntax_messages(&[
        (b"\"a\nb\"", r"invalid character '\n' in string literal"),
        (b"\"\\x\"", "invalid character 'x' in string escape code"),
        (
            b"\"\\u12g4\"",
            r"invalid character 'g' in \u hexadecimal character escape",
        ),
        (b"-", "invalid character ' ' in numeric literal"),
        (b"-a", "invalid character 'a' in numeric literal"),
        (b"01", "invalid character '1' after top-level value"),
        (
            b"1.",
            "invalid character ' ' after decimal point in numeric literal",
        ),
        (
            b"1.e3",
            "invalid character 'e' after decimal point in numeric literal",
        ),
        (
            b"1e",
            "invalid character ' ' in exponent of numeric literal",
        ),
        (
            b"1e+",
            "invalid character ' ' in exponent of numeric literal",
        ),
        (
            b"tru",
            "invalid character ' ' in literal true (expecting 'e')",
        ),
        (
            b"trUe",
            "invalid character 'U' in literal true (expecting 'u')",
        ),
        (
            b"fals",
            "invalid character ' ' in literal false (expecting 'e')",
        ),
        (
            b"nul",
            "invalid character ' ' in literal null (expecting 'l')",
        ),
        (
            b"NaN",
            "invalid character 'N' looking for beginning of value",
        ),
        (
            b"\xef\xbb\xbf{}",
            "invalid character '\u{ef}' looking for beginning of value",
        ),
        (
            b"\x00",
            r"invalid character '\x00' looking for beginning of value",
        ),
        (
            b"\x7f",
            r"invalid character '\x7f' looking for beginning of value",
        ),
        (
            b"\x85",
            r"invalid character '\u0085' looking for beginning of value",
        ),
        (
            b"\\",
            r"invalid character '\\' looking for beginning of value",
        ),
    ]);
}

#[test]
fn syntax_error_offsets_count_bytes_read() {
    assert_eq!(
        check_valid(b"{}x"),
        Err(DecodeError::Syntax {
            message: "invalid character 'x' after top-level value".into(),
            offset: 3
        })
    );
    assert_eq!(
        check_valid(b"[1"),
        Err(DecodeError::Syntax {
            message: "unexpected end of JSON input".into(),
            offset: 2
        })
    );
}

#[test]
fn nesting_is_limited_like_go_without_recursing() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(check_valid(nested(MAX_DEPTH).as_bytes()), Ok(()));
    assert_eq!(
        syntax_message(nested(MAX_DEPTH + 1).as_bytes()),
        "invalid character '[' exceeded max depth"
    );
    let bomb = "[".repeat(1_000_000);
    assert_eq!(
        syntax_message(bomb.as_bytes()),
        "invalid character '[' exceeded max depth"
    );
    let objects = "{\"a\":".repeat(MAX_DEPTH + 1);
    assert_eq!(
        syntax_message(objects.as_bytes()),
        "invalid character '{' exceeded max depth"
    );
}

#[test]
fn quote_char_follows_strconv_quote() {
    for (c, expected) in [
        (b'x', "'x'"),
        (b'\'', r"'\''"),
        (b'"', "'\"'"),
        (b'\\', r"'\\'"),
        (b'\n', r"'\n'"),
        (b'\x0b', r"'\v'"),
        (b'\x01', r"'\x01'"),
        (0xa0, r"'\u00a0'"),
        (0xad, r"'\u00ad'"),
        (0xff, "'ÿ'"),
    ] {
        assert_eq!(quote_char(c), expected);
    }
}

/// JSON-looking noise, to reach deeper scanner states than random bytes do.
/// No `d`/`D`, so no surrogate escapes, which serde_json rejects and Go does not.
fn jsonish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop::sample::select(
            "{}[]\",:0123456789.eE+-truefalsn \\/bu\n\tx"
                .chars()
                .collect::<Vec<_>>(),
        ),
        0..48,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    /// On ASCII input without surrogates or deep nesting, Go and serde_json agree
    /// on what JSON is, which makes serde_json a fair oracle for the scanner.
    #[test]
    fn scanner_agrees_with_serde_json(input in jsonish()) {
        let ours = check_valid(input.as_bytes()).is_ok();
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&input).is_ok();
        prop_assert_eq!(ours, theirs, "{:?}", input);
    }
}
