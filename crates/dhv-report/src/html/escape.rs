//! Text from a report made safe, and visible, in an HTML page.
//!
//! A plugin's output is hostile input: it reaches the page through the JSON report's
//! excerpts (lossy UTF-8, so invalid bytes are already U+FFFD there) and may hold
//! markup (`</script>`, `<!--`), NUL, ESC, other control characters and bidi overrides
//! that would reorder what a reader sees. Every string of the report goes through
//! [`text`] (element content) or [`attr`] (attribute values): markup characters become
//! entities, and every invisible or reordering character is shown as what it is,
//! `␀`, `␛` or `⟨U+202E⟩`, so the page shows the bytes as text and nothing in them runs.
//! `://` is written `&#58;//`, so that no URL, even one a plugin printed, appears in
//! the page's source (the page makes no network reference at all).

use std::fmt::Write as _;

/// Where the escaped text goes: element content may carry marker spans, an attribute
/// only characters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Content,
    Attribute,
}

/// `s` escaped for element content, with invisible characters shown in marker spans.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    push(&mut out, s, Context::Content);
    out
}

/// `s` escaped for a double-quoted attribute value (a `title`, an `id`, ...).
pub fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    push(&mut out, s, Context::Attribute);
    out
}

/// Appends `s` escaped for element content to `out`.
pub fn push_text(out: &mut String, s: &str) {
    push(out, s, Context::Content);
}

fn push(out: &mut String, s: &str, ctx: Context) {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            ':' if s_starts(&mut chars.clone(), "//") => out.push_str("&#58;"),
            '\n' if ctx == Context::Content => out.push('\n'),
            '\t' if ctx == Context::Content => out.push('\t'),
            '\u{FFFD}' => marker(out, ctx, "\u{FFFD}", "invalid UTF-8 in the output"),
            c => match visible(c) {
                Some(shown) => marker(out, ctx, &shown, &format!("U+{:04X}", c as u32)),
                None => out.push(c),
            },
        }
    }
}

fn s_starts(chars: &mut impl Iterator<Item = char>, prefix: &str) -> bool {
    prefix.chars().all(|p| chars.next() == Some(p))
}

/// What an invisible, control or reordering character is shown as; `None` for a
/// character shown as itself.
fn visible(c: char) -> Option<String> {
    let n = c as u32;
    match n {
        // C0 controls have their own pictures: ␀ for NUL, ␛ for ESC, ␍ for CR, ...
        0x00..=0x1F => char::from_u32(0x2400 + n).map(String::from),
        0x7F => Some("\u{2421}".to_owned()),
        // C1 controls, bidi marks, embeddings, overrides and isolates, zero-width
        // characters, line and paragraph separators, the BOM.
        0x80..=0x9F | 0x061C | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x2069 | 0xFEFF => {
            Some(format!("\u{27E8}U+{n:04X}\u{27E9}"))
        }
        // Noncharacters (U+FFFE, U+FFFF, ...): an HTML parser reports them as errors.
        _ if crate::escape::noncharacter(c) => Some(format!("\u{27E8}U+{n:04X}\u{27E9}")),
        _ => None,
    }
}

fn marker(out: &mut String, ctx: Context, shown: &str, what: &str) {
    match ctx {
        Context::Content => {
            let _ = write!(out, "<span class=\"ctl\" title=\"{what}\">{shown}</span>");
        }
        Context::Attribute => out.push_str(shown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_entities() {
        let cases = [
            (
                "</script><script>x()</script>",
                "&lt;/script&gt;&lt;script&gt;x()&lt;/script&gt;",
            ),
            ("<!-- a -->", "&lt;!-- a --&gt;"),
            ("a & \"b\" 'c'", "a &amp; &quot;b&quot; &#39;c&#39;"),
            (
                "see https://example.test/x",
                "see https&#58;//example.test/x",
            ),
            ("a: b", "a: b"),
            ("line\n\tnext", "line\n\tnext"),
        ];
        for (input, want) in cases {
            assert_eq!(text(input), want, "{input:?}");
        }
    }

    #[test]
    fn invisible_characters_are_shown() {
        let cases = [
            (
                "a\0b",
                "a<span class=\"ctl\" title=\"U+0000\">\u{2400}</span>b",
            ),
            (
                "\x1b[31m",
                "<span class=\"ctl\" title=\"U+001B\">\u{241B}</span>[31m",
            ),
            ("\r", "<span class=\"ctl\" title=\"U+000D\">\u{240D}</span>"),
            (
                "\u{7f}",
                "<span class=\"ctl\" title=\"U+007F\">\u{2421}</span>",
            ),
            (
                "x\u{202E}y",
                "x<span class=\"ctl\" title=\"U+202E\">\u{27E8}U+202E\u{27E9}</span>y",
            ),
            (
                "\u{2066}",
                "<span class=\"ctl\" title=\"U+2066\">\u{27E8}U+2066\u{27E9}</span>",
            ),
            (
                "\u{FFFD}",
                "<span class=\"ctl\" title=\"invalid UTF-8 in the output\">\u{FFFD}</span>",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(text(input), want, "{input:?}");
        }
    }

    #[test]
    fn attributes_get_no_markup() {
        assert_eq!(
            attr("a\"\n\0<\u{202E}"),
            "a&quot;\u{240A}\u{2400}&lt;\u{27E8}U+202E\u{27E9}"
        );
    }

    #[test]
    fn escaped_text_holds_no_markup_character() {
        // Whatever the input, the output has no raw `<`, `>` or quote but those of the
        // marker spans the escaper writes itself.
        let nasty: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let out = attr(&nasty);
        assert!(!out.contains(['<', '>', '"', '\'']), "{out}");
        let stripped = text(&nasty)
            .replace("<span class=\"ctl\" title=\"", "")
            .replace("\">", "")
            .replace("</span>", "");
        assert!(!stripped.contains(['<', '>', '"', '\'']));
    }
}
