//! Go's `encoding/json`, reduced to what Nomad does with plugin I/O.
//!
//! Nomad decodes a plugin's stdout with `json.Unmarshal` into small flat
//! structs and encodes `DHV_PARAMETERS` with `json.Marshal`. A conformance
//! check must accept and reject exactly what Go does, and say so in Go's
//! words; serde_json differs in both (it rejects invalid UTF-8, stops at 128
//! levels, matches keys case-sensitively and words its errors its own way).
//! Decoding takes two passes, as in Go: [`check_valid`] vets the whole input
//! first, so a syntax error anywhere wins over a type error, and only then does
//! [`unmarshal`] walk the top-level object. Nothing here recurses, so hostile
//! nesting cannot overflow the stack.

use std::collections::BTreeMap;

use super::decode_error::DecodeError;
use super::scan::{check_valid, is_space};

/// The Go type of a struct field, which decides what JSON it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldKind {
    /// `string`: takes a JSON string; `null` leaves it unchanged.
    String,
    /// `int64`: takes an integer literal that fits; `null` leaves it unchanged.
    Int64,
    /// `*version.Version` (a `TextUnmarshaler` behind a pointer): takes a
    /// string; `null` resets it to nil.
    VersionPtr,
}

impl FieldKind {
    fn go_type(self) -> &'static str {
        match self {
            FieldKind::String => "string",
            FieldKind::Int64 => "int64",
            FieldKind::VersionPtr => "*version.Version",
        }
    }
}

/// A Go struct that Nomad unmarshals plugin output into.
#[derive(Debug)]
pub(super) struct GoStruct {
    /// The package-qualified type, as `reflect.Type.String()` prints it.
    pub(super) go_type: &'static str,
    /// The bare type name, as field errors print it.
    pub(super) name: &'static str,
    /// Each field's JSON name (from its tag) and Go type.
    pub(super) fields: &'static [(&'static str, FieldKind)],
}

/// A decoded field value; `None` in [`unmarshal`]'s result means the Go zero value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FieldValue {
    /// A string field's value.
    Str(String),
    /// An `int64` field's value.
    Int(i64),
}

/// `json.Unmarshal(input, &target)`: the value of each of `target.fields`, in order.
pub(super) fn unmarshal(
    input: &[u8],
    target: &GoStruct,
) -> Result<Vec<Option<FieldValue>>, DecodeError> {
    unmarshal_with(input, target, &mut |_| Ok(()))
}

/// [`unmarshal`], with `text` standing for the `UnmarshalText` of the
/// [`FieldKind::VersionPtr`] fields: it judges each such string as it is met.
///
/// Go's order of errors: a type error is saved and decoding goes on (the first
/// one saved is returned at the end), but an `UnmarshalText` error ends the
/// decode at once, so it wins over a type error met before it. Each value of a
/// key given twice is decoded in turn, and the last one stays.
pub(super) fn unmarshal_with(
    input: &[u8],
    target: &GoStruct,
    text: &mut dyn FnMut(&str) -> Result<(), String>,
) -> Result<Vec<Option<FieldValue>>, DecodeError> {
    check_valid(input)?;
    let mut values = vec![None; target.fields.len()];
    let mut saved: Option<DecodeError> = None;
    let mut r = Reader { input, pos: 0 };
    r.skip_space();
    match r.peek() {
        b'{' => {}
        b'n' => return Ok(values),
        other => {
            return Err(DecodeError::ValueType {
                value: json_kind(other),
                go_type: target.go_type,
            });
        }
    }
    r.pos += 1;
    loop {
        r.skip_space();
        if r.peek() == b'}' {
            return match saved {
                Some(e) => Err(e),
                None => Ok(values),
            };
        }
        let key = r.string();
        r.skip_space();
        r.pos += 1; // the ':' the scanner vouched for
        r.skip_space();
        match find_field(target.fields, &key) {
            Some(i) => field_value(&mut r, target, i, text, &mut values[i], &mut saved)?,
            None => r.skip_value(),
        }
        r.skip_space();
        if r.peek() == b',' {
            r.pos += 1;
        }
    }
}

/// Decodes the value at `r` into `value`, the `i`th field of `target`: a type error is
/// saved in `saved` (when none is yet) and decoding goes on; an `UnmarshalText` error
/// from `text` is returned, to end the decode.
fn field_value(
    r: &mut Reader<'_>,
    target: &GoStruct,
    i: usize,
    text: &mut dyn FnMut(&str) -> Result<(), String>,
    value: &mut Option<FieldValue>,
    saved: &mut Option<DecodeError>,
) -> Result<(), DecodeError> {
    let (field, kind) = target.fields[i];
    let type_error = |value: String| DecodeError::FieldType {
        value,
        go_struct: target.name,
        field,
        go_type: kind.go_type(),
    };
    match (r.peek(), kind) {
        (b'n', FieldKind::VersionPtr) => {
            r.skip_value();
            *value = None;
        }
        (b'n', _) => r.skip_value(),
        (b'"', FieldKind::VersionPtr) => {
            let string = r.string();
            text(&string).map_err(|message| DecodeError::Text { message })?;
            *value = Some(FieldValue::Str(string));
        }
        (b'"', FieldKind::String) => {
            *value = Some(FieldValue::Str(r.string()));
        }
        (b'-' | b'0'..=b'9', FieldKind::Int64) => {
            let literal = r.number();
            // Go's strconv.ParseInt: no fraction, no exponent, no overflow.
            match literal.parse::<i64>() {
                Ok(n) => *value = Some(FieldValue::Int(n)),
                Err(_) => {
                    saved.get_or_insert(type_error(format!("number {literal}")));
                }
            }
        }
        (c, _) => {
            saved.get_or_insert(type_error(json_kind(c).to_owned()));
            r.skip_value();
        }
    }
    Ok(())
}

/// `json.Unmarshal(input, &m)` into a Go `map[string]string` (a volume's
/// parameters): `null` is a nil map (`None`); a key given twice keeps its
/// last value; a `null` value is the empty string (Go decodes it into the
/// element's zero value); strings decode as Go's do (a lone surrogate or a
/// byte that is not UTF-8 becomes U+FFFD). Any other value is Go's type error.
pub fn unmarshal_string_map(input: &[u8]) -> Result<Option<BTreeMap<String, String>>, DecodeError> {
    check_valid(input)?;
    let mut r = Reader { input, pos: 0 };
    r.skip_space();
    match r.peek() {
        b'{' => {}
        b'n' => return Ok(None),
        other => {
            return Err(DecodeError::ValueType {
                value: json_kind(other),
                go_type: "map[string]string",
            });
        }
    }
    r.pos += 1;
    let mut map = BTreeMap::new();
    let mut saved: Option<DecodeError> = None;
    loop {
        r.skip_space();
        if r.peek() == b'}' {
            return match saved {
                Some(e) => Err(e),
                None => Ok(Some(map)),
            };
        }
        let key = r.string();
        r.skip_space();
        r.pos += 1; // the ':' the scanner vouched for
        r.skip_space();
        match r.peek() {
            b'"' => {
                map.insert(key, r.string());
            }
            b'n' => {
                r.skip_value();
                map.insert(key, String::new());
            }
            c => {
                saved.get_or_insert(DecodeError::ValueType {
                    value: json_kind(c),
                    go_type: "string",
                });
                r.skip_value();
            }
        }
        r.skip_space();
        if r.peek() == b',' {
            r.pos += 1;
        }
    }
}

/// Go's name for the kind of JSON value starting with `c`, as type errors print it.
fn json_kind(c: u8) -> &'static str {
    match c {
        b'{' => "object",
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        b'n' => "null",
        _ => "number",
    }
}

/// Go's field lookup: an exact match first, else a case-insensitive one.
fn find_field(fields: &[(&'static str, FieldKind)], key: &str) -> Option<usize> {
    fields
        .iter()
        .position(|(name, _)| *name == key)
        .or_else(|| {
            let folded = fold_name(key);
            fields
                .iter()
                .position(|(name, _)| fold_name(name) == folded)
        })
}

/// Go's `foldName`: ASCII upper-cased, other runes mapped through
/// `unicode.ToUpper(unicode.SimpleFold(r))`. Only the two non-ASCII runes that
/// fold to ASCII letters matter here, since every field name is ASCII.
fn fold_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '\u{17F}' => 'S',  // LATIN SMALL LETTER LONG S
            '\u{212A}' => 'K', // KELVIN SIGN
            c => c.to_ascii_uppercase(),
        })
        .collect()
}

/// A cursor over input that [`check_valid`] accepted, so it never meets bad syntax.
struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> u8 {
        self.input.get(self.pos).copied().unwrap_or(b' ')
    }

    fn skip_space(&mut self) {
        while self.pos < self.input.len() && is_space(self.input[self.pos]) {
            self.pos += 1;
        }
    }

    /// Reads a string literal the way Go's `unquote` does.
    fn string(&mut self) -> String {
        let start = self.pos + 1;
        let mut end = start;
        while end < self.input.len() && self.input[end] != b'"' {
            end += if self.input[end] == b'\\' { 2 } else { 1 };
        }
        self.pos = end + 1;
        unquote(self.input.get(start..end).unwrap_or_default())
    }

    /// Reads a number literal, verbatim.
    fn number(&mut self) -> &'a str {
        let start = self.pos;
        while self.pos < self.input.len()
            && matches!(
                self.input[self.pos],
                b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
            )
        {
            self.pos += 1;
        }
        // Only ASCII bytes were taken, so this cannot fail.
        std::str::from_utf8(&self.input[start..self.pos]).unwrap_or_default()
    }

    /// Steps over one value of any kind, however deeply nested, without recursion.
    fn skip_value(&mut self) {
        let mut depth = 0usize;
        loop {
            match self.peek() {
                b'"' => {
                    self.string();
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    self.pos += 1;
                }
                b',' | b':' => self.pos += 1,
                c if is_space(c) && self.pos < self.input.len() => self.pos += 1,
                b'-' | b'0'..=b'9' => {
                    self.number();
                }
                b't' | b'n' => self.pos += 4,
                b'f' => self.pos += 5,
                _ => return,
            }
            if depth == 0 || self.pos >= self.input.len() {
                return;
            }
        }
    }
}

/// Go's `unquote` of a string literal's body: escapes resolved, and every byte
/// that does not start a valid UTF-8 sequence replaced by U+FFFD (one per byte,
/// as `utf8.DecodeRune` goes, which is not what `String::from_utf8_lossy` does).
fn unquote(body: &[u8]) -> String {
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'\\' {
            i = unescape(body, i, &mut out);
            continue;
        }
        let run_end = body[i..]
            .iter()
            .position(|&b| b == b'\\')
            .map_or(body.len(), |n| i + n);
        push_lossy(&body[i..run_end], &mut out);
        i = run_end;
    }
    out
}

fn push_lossy(mut bytes: &[u8], out: &mut String) {
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => return out.push_str(s),
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push(char::REPLACEMENT_CHARACTER);
                bytes = &rest[1..];
            }
        }
    }
}

/// Resolves the escape at `body[i]`, returning the index after it.
fn unescape(body: &[u8], i: usize, out: &mut String) -> usize {
    let simple = match body.get(i + 1) {
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        _ => {
            let Some(unit) = hex4(body, i) else {
                return i + 2; // unreachable for validated input
            };
            if !(0xD800..0xE000).contains(&unit) {
                out.push(char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER));
                return i + 6;
            }
            // A surrogate: only a high one directly followed by an escaped low
            // one makes a character, and only then is the second escape consumed.
            if let Some(low) = hex4(body, i + 6) {
                if (0xD800..0xDC00).contains(&unit) && (0xDC00..0xE000).contains(&low) {
                    let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                    return i + 12;
                }
            }
            out.push(char::REPLACEMENT_CHARACTER);
            return i + 6;
        }
    };
    out.push(simple);
    i + 2
}

/// The code unit of a `\uXXXX` escape at `body[i]`, if there is one.
fn hex4(body: &[u8], i: usize) -> Option<u32> {
    if body.get(i..i + 2)? != b"\\u" {
        return None;
    }
    let digits = std::str::from_utf8(body.get(i + 2..i + 6)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// `json.Marshal` of a Go `map[string]string`: keys in byte order (which is
/// `BTreeMap`'s order), compact, HTML-safe escaping.
pub(super) fn marshal_string_map(map: &BTreeMap<String, String>) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_go_string(key, &mut out);
        out.push(':');
        push_go_string(value, &mut out);
    }
    out.push('}');
    out
}

/// A JSON string as Go's encoder writes it with `escapeHTML` on (the default
/// for `json.Marshal`), as of Go 1.22: `\b` and `\f` get their short escapes.
fn push_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str(r"\\"),
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            '\u{8}' => out.push_str(r"\b"),
            '\u{c}' => out.push_str(r"\f"),
            // `<`, `>` and `&` are escaped so the JSON is safe inside HTML;
            // U+2028/U+2029 so it is safe inside JavaScript.
            '\0'..'\u{20}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!(r"\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
