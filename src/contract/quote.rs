//! Go's `strconv.Quote`, the `%q` in Nomad's messages.
//!
//! Nomad quotes volume and plugin IDs with `%q`, and Go's JSON scanner quotes
//! the byte it chokes on the same way; matching Go's messages means matching
//! its escapes.

/// Go's `%q` of a string (`strconv.Quote`), which Nomad uses for IDs in its messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' {
            out.push_str("\\\"");
        } else {
            out.push_str(&escape_rune(c));
        }
    }
    out.push('"');
    out
}

/// One rune as `strconv.Quote` writes it between its quotes (minus `"`, which
/// callers handle). Non-printable means: C0/C1 controls, DEL, Unicode
/// separators other than the space, and the common format and private-use
/// characters. Unassigned code points, which Go also escapes, are written as
/// is: telling them apart would need Unicode tables this crate does not carry.
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

fn is_go_printable(c: char) -> bool {
    !matches!(c,
        '\0'..'\u{20}'
        | '\u{7f}'..='\u{a0}'
        | '\u{ad}'
        | '\u{600}'..='\u{605}'
        | '\u{61c}'
        | '\u{6dd}'
        | '\u{70f}'
        | '\u{1680}'
        | '\u{180e}'
        | '\u{2000}'..='\u{200f}'
        | '\u{2028}'..='\u{202f}'
        | '\u{205f}'..='\u{206f}'
        | '\u{3000}'
        | '\u{e000}'..='\u{f8ff}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{e0001}'
        | '\u{e0020}'..='\u{e007f}'
        | '\u{f0000}'..
    )
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
}
