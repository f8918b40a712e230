//! Go's `strconv.Quote`, the `%q` in Nomad's messages.
//!
//! Nomad quotes volume and plugin IDs with `%q`, and Go's JSON scanner quotes
//! the byte it chokes on the same way; matching Go's messages means matching
//! its escapes, which follow Go 1.26's `strconv.IsPrint` (Nomad 2.0.5 is built
//! with Go 1.26, whose tables are Unicode 15.0.0's: [`go_printable`](super::go_printable)).

use super::go_printable::PRINTABLE;

/// Go's `%q` of a string (`strconv.Quote`), which Nomad uses for IDs in its messages.
pub fn go_quote(s: &str) -> String {
    go_quote_bytes(s.as_bytes())
}

/// Go's `%q` of bytes that need not be UTF-8, as Go quotes a `string` holding
/// them: each byte that does not start a valid UTF-8 sequence is `\xNN`
/// (Go decodes it as one `RuneError` of width 1 and moves on by one byte).
pub fn go_quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '"' {
                out.push_str("\\\"");
            } else {
                out.push_str(&escape_rune(c));
            }
        }
        // Rust groups a truncated sequence into one invalid chunk; none of
        // its bytes after the first can start a sequence, so Go, which steps
        // one byte at a time, escapes each of them alike.
        for b in chunk.invalid() {
            out.push_str(&format!(r"\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

/// One rune as `strconv.Quote` writes it between its quotes (minus `"`, which
/// callers handle).
pub(super) fn escape_rune(c: char) -> String {
    match c {
        '\\' => r"\\".to_owned(),
        '\u{7}' => r"\a".to_owned(),
        '\u{8}' => r"\b".to_owned(),
        '\u{c}' => r"\f".to_owned(),
        '\n' => r"\n".to_owned(),
        '\r' => r"\r".to_owned(),
        '\t' => r"\t".to_owned(),
        '\u{b}' => r"\v".to_owned(),
        '\0'..'\u{20}' | '\u{7f}' => format!(r"\x{:02x}", u32::from(c)),
        c if is_go_printable(c) => c.to_string(),
        c if u32::from(c) < 0x10000 => format!(r"\u{:04x}", u32::from(c)),
        c => format!(r"\U{:08x}", u32::from(c)),
    }
}

/// Go 1.26's `strconv.IsPrint`: letters, marks, numbers, punctuation,
/// symbols and the ASCII space.
pub fn is_go_printable(c: char) -> bool {
    let c = u32::from(c);
    PRINTABLE
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_follows_strconv_quote() {
        for (s, quoted) in [
            ("", r#""""#),
            ("plain id", r#""plain id""#),
            ("é😀", r#""é😀""#),
            ("\u{0}\u{7}\u{1b}\u{7f}", r#""\x00\a\x1b\x7f""#),
            (
                "\u{85}\u{a0}\u{ad}\u{200b}\u{2028}\u{feff}",
                r#""\u0085\u00a0\u00ad\u200b\u2028\ufeff""#,
            ),
            ("\u{f0000}", r#""\U000f0000""#),
            ("'", r#""'""#),
        ] {
            assert_eq!(go_quote(s), quoted, "{s:?}");
        }
    }

    /// Format characters (Cf), unassigned code points, noncharacters and
    /// private use, which Go 1.26's tables (Unicode 15.0.0) do not print, and
    /// printable runes of several scripts and ages, which stay raw.
    #[test]
    fn go_quote_escapes_what_go_1_26_does_not_print() {
        for (s, quoted) in [
            ("fmt\u{8e2}char", r#""fmt\u08e2char""#),
            ("\u{110bd}", r#""\U000110bd""#),
            ("\u{1d173}", r#""\U0001d173""#),
            ("\u{378}", r#""\u0378""#),
            ("\u{fffe}", r#""\ufffe""#),
            ("\u{ffff}", r#""\uffff""#),
            ("\u{e0001}", r#""\U000e0001""#),
            ("\u{13439}", r#""\U00013439""#),
            ("\u{2fffe}", r#""\U0002fffe""#),
            ("\u{10ffff}", r#""\U0010ffff""#),
            ("\u{e000}", r#""\ue000""#),
            // printable, raw: Latin-1, Greek, CJK, an emoji, a combining mark,
            // Unicode 15.0 additions (Kawi U+11F00, CJK extension H U+31350),
            // the replacement character
            (
                "ñΩ中😀a\u{301}\u{11f00}\u{31350}\u{fffd}",
                "\"ñΩ中😀a\u{301}\u{11f00}\u{31350}\u{fffd}\"",
            ),
        ] {
            assert_eq!(go_quote(s), quoted, "{s:?}");
        }
        // Unicode 16.0 and 17.0 code points are unassigned for Go 1.26.
        assert_eq!(go_quote("\u{1e5d0}"), r#""\U0001e5d0""#);
    }

    #[test]
    fn invalid_utf8_bytes_are_escaped_one_by_one() {
        assert_eq!(go_quote_bytes(b"a\xffb"), r#""a\xffb""#);
        assert_eq!(go_quote_bytes(b"\xe0\xa0A"), r#""\xe0\xa0A""#);
        assert_eq!(go_quote_bytes(b"\xf0\x9f\x98"), r#""\xf0\x9f\x98""#);
        assert_eq!(go_quote_bytes(b"\xc3\xa9\x80"), r#""é\x80""#);
        // A surrogate's encoding, an overlong one, one past U+10FFFF: invalid
        // to Go's decoder too, byte by byte.
        assert_eq!(go_quote_bytes(b"\xed\xa0\x80"), r#""\xed\xa0\x80""#);
        assert_eq!(go_quote_bytes(b"\xc0\x80"), r#""\xc0\x80""#);
        assert_eq!(go_quote_bytes(b"\xf4\x90\x80\x80"), r#""\xf4\x90\x80\x80""#);
        assert_eq!(go_quote_bytes("ok".as_bytes()), go_quote("ok"));
    }

    #[test]
    fn the_table_is_sorted_and_disjoint() {
        assert!(PRINTABLE.windows(2).all(|w| w[0].1 + 1 < w[1].0));
        assert!(PRINTABLE.iter().all(|&(lo, hi)| lo <= hi));
    }
}
