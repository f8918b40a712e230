//! Go's JSON scanner: is this byte string exactly one JSON value?
//!
//! Go's `json.Unmarshal` runs this check over the whole input before decoding
//! anything, and its syntax errors name the offending byte and what the
//! scanner was looking for. Reproducing the scanner state by state is the
//! simplest way to get the same verdict and the same words for every input,
//! including where the input simply stops. It works byte by byte with an
//! explicit stack, so depth costs memory (bounded by Go's own limit), not stack.

use super::decode_error::DecodeError;
use super::quote::escape_rune;

/// JSON's white space: exactly these four bytes, as in Go.
pub(super) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Go's nesting limit (`maxNestingDepth` in its scanner).
const MAX_DEPTH: usize = 10_000;

/// Where the scanner is inside a value, byte by byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits seen.
    InStringEscU(u8),
    Neg,
    Int,
    Zero,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
    /// Inside `true`, `false` or `null`, with this many bytes matched.
    Literal(&'static [u8], usize),
}

/// What an open container expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// Go's `checkValid`: the whole input must be one JSON value with only white
/// space around it; the first offending byte is reported as Go words it.
pub(super) fn check_valid(input: &[u8]) -> Result<(), DecodeError> {
    let mut scanner = Scanner {
        state: State::BeginValue,
        stack: Vec::new(),
    };
    for (i, &c) in input.iter().enumerate() {
        scanner.step(c).map_err(|context| DecodeError::Syntax {
            message: format!("invalid character {} {context}", quote_char(c)),
            offset: i + 1,
        })?;
    }
    // Go ends the input with a virtual space, which completes a pending number
    // but exposes a half-written literal (`tru` fails on the space).
    if scanner.state != State::EndTop {
        scanner.step(b' ').map_err(|context| DecodeError::Syntax {
            message: format!("invalid character ' ' {context}"),
            offset: input.len(),
        })?;
    }
    if scanner.state == State::EndTop {
        Ok(())
    } else {
        Err(DecodeError::Syntax {
            message: "unexpected end of JSON input".to_owned(),
            offset: input.len(),
        })
    }
}

struct Scanner {
    state: State,
    stack: Vec<Frame>,
}

impl Scanner {
    /// Consumes one byte; on error, returns Go's context for it (the text after the quoted byte).
    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.state {
            State::BeginValue => self.begin_value(c),
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b']' {
                    self.end_value(c)
                } else {
                    self.begin_value(c)
                }
            }
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b'}' {
                    self.pop();
                    Ok(())
                } else {
                    self.begin_string(c)
                }
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => self.end_top(c),
            State::InString => self.in_string(c),
            State::InStringEsc => self.in_string_escape(c),
            State::InStringEscU(seen) => self.in_unicode_escape(seen, c),
            State::Neg => self.after_minus(c),
            State::Int | State::Zero => self.in_integer(c),
            State::Dot => self.after_decimal_point(c),
            State::Frac => self.in_fraction(c),
            State::Exp | State::ExpSign => self.in_exponent_start(c),
            State::ExpDigits if c.is_ascii_digit() => Ok(()),
            State::ExpDigits => self.end_value(c),
            State::Literal(word, matched) => self.in_literal(word, matched, c),
        }
    }

    fn in_string(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'"' => self.state = State::EndValue,
            b'\\' => self.state = State::InStringEsc,
            0..0x20 => return Err("in string literal".to_owned()),
            _ => {}
        }
        Ok(())
    }

    fn in_string_escape(&mut self, c: u8) -> Result<(), String> {
        self.state = match c {
            b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => State::InString,
            b'u' => State::InStringEscU(0),
            _ => return Err("in string escape code".to_owned()),
        };
        Ok(())
    }

    /// After `\u` and `seen` hex digits.
    fn in_unicode_escape(&mut self, seen: u8, c: u8) -> Result<(), String> {
        if !c.is_ascii_hexdigit() {
            return Err("in \\u hexadecimal character escape".to_owned());
        }
        self.state = if seen == 3 {
            State::InString
        } else {
            State::InStringEscU(seen + 1)
        };
        Ok(())
    }

    fn after_minus(&mut self, c: u8) -> Result<(), String> {
        self.state = match c {
            b'0' => State::Zero,
            b'1'..=b'9' => State::Int,
            _ => return Err("in numeric literal".to_owned()),
        };
        Ok(())
    }

    /// In an integer part: `Int` takes more digits, `Zero` (a leading 0) does not.
    fn in_integer(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'0'..=b'9' if self.state == State::Int => Ok(()),
            b'.' => {
                self.state = State::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.state = State::Exp;
                Ok(())
            }
            _ => self.end_value(c),
        }
    }

    fn after_decimal_point(&mut self, c: u8) -> Result<(), String> {
        if !c.is_ascii_digit() {
            return Err("after decimal point in numeric literal".to_owned());
        }
        self.state = State::Frac;
        Ok(())
    }

    fn in_fraction(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'0'..=b'9' => Ok(()),
            b'e' | b'E' => {
                self.state = State::Exp;
                Ok(())
            }
            _ => self.end_value(c),
        }
    }

    /// Right after `e` (a sign may come) or after its sign (a digit must).
    fn in_exponent_start(&mut self, c: u8) -> Result<(), String> {
        if self.state == State::Exp && matches!(c, b'+' | b'-') {
            self.state = State::ExpSign;
            return Ok(());
        }
        if !c.is_ascii_digit() {
            return Err("in exponent of numeric literal".to_owned());
        }
        self.state = State::ExpDigits;
        Ok(())
    }

    /// In `true`, `false` or `null`, `matched` bytes in.
    fn in_literal(&mut self, word: &'static [u8], matched: usize, c: u8) -> Result<(), String> {
        let expected = word[matched];
        if c != expected {
            return Err(format!(
                "in literal {} (expecting {})",
                String::from_utf8_lossy(word),
                quote_char(expected)
            ));
        }
        self.state = if matched + 1 == word.len() {
            State::EndValue
        } else {
            State::Literal(word, matched + 1)
        };
        Ok(())
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        self.state = match c {
            c if is_space(c) => return Ok(()),
            b'{' => return self.push(Frame::ObjectKey, State::BeginStringOrEmpty),
            b'[' => return self.push(Frame::ArrayValue, State::BeginValueOrEmpty),
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b'1'..=b'9' => State::Int,
            b't' => State::Literal(b"true", 1),
            b'f' => State::Literal(b"false", 1),
            b'n' => State::Literal(b"null", 1),
            _ => return Err("looking for beginning of value".to_owned()),
        };
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        match c {
            c if is_space(c) => Ok(()),
            b'"' => {
                self.state = State::InString;
                Ok(())
            }
            _ => Err("looking for beginning of object key string".to_owned()),
        }
    }

    /// After a complete value: what may follow depends on the enclosing container.
    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(frame) = self.stack.last_mut() else {
            self.state = State::EndTop;
            return self.end_top(c);
        };
        self.state = State::EndValue;
        if is_space(c) {
            return Ok(());
        }
        match (*frame, c) {
            (Frame::ObjectKey, b':') => {
                *frame = Frame::ObjectValue;
                self.state = State::BeginValue;
            }
            (Frame::ObjectKey, _) => return Err("after object key".to_owned()),
            (Frame::ObjectValue, b',') => {
                *frame = Frame::ObjectKey;
                self.state = State::BeginString;
            }
            (Frame::ObjectValue, b'}') | (Frame::ArrayValue, b']') => self.pop(),
            (Frame::ObjectValue, _) => return Err("after object key:value pair".to_owned()),
            (Frame::ArrayValue, b',') => self.state = State::BeginValue,
            (Frame::ArrayValue, _) => return Err("after array element".to_owned()),
        }
        Ok(())
    }

    fn end_top(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            Ok(())
        } else {
            Err("after top-level value".to_owned())
        }
    }

    fn push(&mut self, frame: Frame, next: State) -> Result<(), String> {
        self.stack.push(frame);
        if self.stack.len() > MAX_DEPTH {
            return Err("exceeded max depth".to_owned());
        }
        self.state = next;
        Ok(())
    }

    fn pop(&mut self) {
        self.stack.pop();
        self.state = if self.stack.is_empty() {
            State::EndTop
        } else {
            State::EndValue
        };
    }
}

/// Go's `quoteChar`: how a syntax error shows the offending byte. Go treats the
/// byte as a Latin-1 rune and quotes it with `strconv.Quote` rules.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => format!("'{}'", escape_rune(char::from(c))),
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
