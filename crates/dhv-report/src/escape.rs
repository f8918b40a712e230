//! The one escaping of text that reaches a terminal.
//!
//! Mount points, mount sources, file names, plugin file names and ids, and
//! plugin output all come from a plugin or the disk. Written raw, they could
//! move the cursor or rewrite the screen (ESC and OSC sequences, C0 and C1
//! controls), forge a line of their own (a newline where one line is
//! expected), or show text in another order than it is (U+202E and the other
//! bidirectional overrides and isolates). Every renderer that writes such a
//! string to a terminal passes it through [`printable`] (text that may span
//! lines) or [`printable_line`] (one line): each such character is written as
//! a Rust-style escape (`\u{1b}`, `\u{202e}`, `\n`). Invalid UTF-8 has already
//! become U+FFFD where bytes turned into text; [`printable_bytes`] writes each
//! invalid byte as `\xNN` instead, so two names that differ stay different.

use std::borrow::Cow;

/// Whether `c` is shown escaped: every control character (C0, DEL, C1), the
/// characters that change the direction or order of the text shown, and the
/// noncharacters (U+FDD0..U+FDEF, U+FFFE, U+FFFF and their like in every
/// plane), which XML 1.0 cannot carry (U+FFFE, U+FFFF) and nothing should show.
pub(crate) fn hidden(c: char) -> bool {
    c.is_control()
        || noncharacter(c)
        || matches!(c,
            '\u{061c}'            // ARABIC LETTER MARK
            | '\u{200b}'..='\u{200f}' // zero widths, LRM, RLM
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{202a}'..='\u{202e}' // embeddings and overrides
            | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
            | '\u{2066}'..='\u{2069}' // isolates
            | '\u{feff}'              // byte order mark
        )
}

/// A Unicode noncharacter: U+FDD0..U+FDEF, and the last two code points of
/// every plane.
pub(crate) fn noncharacter(c: char) -> bool {
    let n = c as u32;
    (0xfdd0..=0xfdef).contains(&n) || n & 0xfffe == 0xfffe
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| hidden(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) && !keep(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` for a terminal, newlines and tabs kept (multi-line output such as a
/// plugin's stderr); every other control or bidi character escaped.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// `text` for one line of a terminal: as [`printable`], and a newline (or
/// carriage return) is escaped too, so that no string makes a line of its own.
pub fn printable_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\t')
}

/// Bytes from the disk (a file name, a mount point) for one line of a
/// terminal: valid UTF-8 as [`printable_line`], each invalid byte as `\xNN`.
pub fn printable_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&printable_line(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_newlines_are_escaped() {
        assert_eq!(printable("ok\x1b[2Jgone\r\n"), "ok\\u{1b}[2Jgone\\r\n");
        assert_eq!(printable("tab\tand\nnewline"), "tab\tand\nnewline");
        assert_eq!(printable_line("a\nb"), "a\\nb");
        assert_eq!(
            printable_line("\x1b]0;title\x07x"),
            "\\u{1b}]0;title\\u{7}x"
        );
        assert_eq!(printable_line("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(printable_line("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(printable_line("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(printable_line("plain /mnt/é"), "plain /mnt/é");
        assert!(matches!(printable_line("plain"), Cow::Borrowed(_)));
        assert_eq!(
            printable_line("a\u{fffe}b\u{ffff}\u{fdd0}\u{10ffff}"),
            "a\\u{fffe}b\\u{ffff}\\u{fdd0}\\u{10ffff}"
        );
        assert_eq!(printable_line("\u{fffd}\u{fdf0}"), "\u{fffd}\u{fdf0}");
    }

    #[test]
    fn invalid_utf8_bytes_are_shown_as_hex() {
        assert_eq!(printable_bytes(b"a\xffb\n\x1b"), "a\\xffb\\n\\u{1b}");
        assert_eq!(printable_bytes("é".as_bytes()), "é");
    }
}
