//! Go's `strconv.ParseUint` and `strconv.Atoi`, as Nomad's built-in `mkdir`
//! plugin parses its `mode`, `uid` and `gid` parameters with them.
//!
//! The plugin has to accept exactly what Go accepts and fail in Go's words
//! (`strconv.ParseUint: parsing "999": invalid syntax`), so the rules are Go's,
//! not Rust's `from_str_radix`: digits are read left to right in one pass, so
//! whichever of a bad digit or an overflow comes first decides the error; an
//! explicit base means no `0o`/`0x` prefix and no `_` separators; `Atoi` takes a
//! leading `+` or `-`, and an `int` is 64 bits (Nomad's Linux builds).

use std::fmt;

use super::go_quote;

/// Why a number did not parse: Go's `*strconv.NumError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumError {
    /// The function that failed, as Go names it: `ParseUint`, `Atoi`.
    pub func: &'static str,
    /// The input, as given.
    pub num: String,
    /// What was wrong with it.
    pub kind: NumErrorKind,
}

/// The two ways a number can be wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumErrorKind {
    /// Go's `strconv.ErrSyntax`.
    Syntax,
    /// Go's `strconv.ErrRange`.
    Range,
}

impl fmt::Display for NumError {
    /// `strconv.<func>: parsing "<num>": invalid syntax` (or `value out of range`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.kind {
            NumErrorKind::Syntax => "invalid syntax",
            NumErrorKind::Range => "value out of range",
        };
        write!(
            f,
            "strconv.{}: parsing {}: {why}",
            self.func,
            go_quote(&self.num)
        )
    }
}

impl std::error::Error for NumError {}

fn error(func: &'static str, num: &str, kind: NumErrorKind) -> NumError {
    NumError {
        func,
        num: num.to_owned(),
        kind,
    }
}

/// `strconv.ParseUint(s, base, bit_size)` for an explicit `base` in 2..=36 and
/// `bit_size` in 1..=64 (the only calls made here).
pub fn parse_uint(s: &str, base: u32, bit_size: u32) -> Result<u64, NumError> {
    const FUNC: &str = "ParseUint";
    debug_assert!((2..=36).contains(&base) && (1..=64).contains(&bit_size));
    if s.is_empty() {
        return Err(error(FUNC, s, NumErrorKind::Syntax));
    }
    let max = if bit_size == 64 {
        u64::MAX
    } else {
        (1u64 << bit_size) - 1
    };
    let mut n: u64 = 0;
    for c in s.bytes() {
        let digit = match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            b'a'..=b'z' | b'A'..=b'Z' => u32::from(c.to_ascii_lowercase() - b'a') + 10,
            _ => return Err(error(FUNC, s, NumErrorKind::Syntax)),
        };
        if digit >= base {
            return Err(error(FUNC, s, NumErrorKind::Syntax));
        }
        n = n
            .checked_mul(u64::from(base))
            .and_then(|n| n.checked_add(u64::from(digit)))
            .filter(|&n| n <= max)
            .ok_or_else(|| error(FUNC, s, NumErrorKind::Range))?;
    }
    Ok(n)
}

/// `strconv.Atoi(s)` with Go's 64-bit `int`.
pub fn atoi(s: &str) -> Result<i64, NumError> {
    const FUNC: &str = "Atoi";
    // Go's fast path (fewer than 19 bytes) and its slow path (ParseInt) accept
    // and reject the same strings in base 10, with the same errors once the
    // slow path's are renamed to Atoi; one implementation serves both.
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = parse_uint(digits, 10, 64).map_err(|e| error(FUNC, s, e.kind))?;
    let limit = 1u64 << 63;
    match (negative, magnitude) {
        (false, m) if m < limit => Ok(m as i64),
        (true, m) if m <= limit => Ok((m as i64).wrapping_neg()),
        _ => Err(error(FUNC, s, NumErrorKind::Range)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `strconv.ParseUint(v, 8, 32)`, as Nomad parses `mode`: results and Go's words.
    #[test]
    fn parse_uint_base_8_bits_32_is_gos() {
        let ok: &[(&str, u64)] = &[
            ("0700", 0o700),
            ("700", 0o700),
            ("0", 0),
            ("0000000000000000000000000755", 0o755),
            ("7777", 0o7777),
            ("17777", 0o17777),
            ("37777777777", 0xffff_ffff),
            ("4755", 0o4755),
        ];
        for &(input, want) in ok {
            assert_eq!(parse_uint(input, 8, 32), Ok(want), "{input:?}");
        }
        let syntax = [
            "",
            "999",
            "0999",
            "8",
            "+755",
            "-1",
            "0o755",
            "0x1ff",
            "7_55",
            " 755",
            "755 ",
            "75a",
            "७५५",
        ];
        for input in syntax {
            assert_eq!(
                parse_uint(input, 8, 32).unwrap_err().to_string(),
                format!(
                    "strconv.ParseUint: parsing {}: invalid syntax",
                    go_quote(input)
                ),
                "{input:?}"
            );
        }
        // One pass, left to right: an overflow before a bad digit is a range error.
        for input in [
            "40000000000",
            "77777777777",
            "777777777779",
            "100000000000000000000000",
        ] {
            assert_eq!(
                parse_uint(input, 8, 32).unwrap_err().to_string(),
                format!("strconv.ParseUint: parsing \"{input}\": value out of range"),
            );
        }
        assert_eq!(
            parse_uint("7779x", 8, 32).unwrap_err().kind,
            NumErrorKind::Syntax
        );
        assert_eq!(
            parse_uint("\"", 8, 32).unwrap_err().to_string(),
            r#"strconv.ParseUint: parsing "\"": invalid syntax"#
        );
    }

    /// `strconv.Atoi(v)`, as Nomad parses `uid` and `gid`.
    #[test]
    fn atoi_is_gos() {
        let ok: &[(&str, i64)] = &[
            ("0", 0),
            ("1000", 1000),
            ("+1000", 1000),
            ("-1", -1),
            ("-0", 0),
            ("007", 7),
            ("4294967295", 4_294_967_295),
            ("4294967296", 4_294_967_296),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
            ("+0000000000000000000000001", 1),
        ];
        for &(input, want) in ok {
            assert_eq!(atoi(input), Ok(want), "{input:?}");
        }
        let syntax = [
            "",
            "abc",
            "+",
            "-",
            "+-1",
            "--1",
            "1.0",
            "1e3",
            "0x10",
            "1_000",
            " 1",
            "1 ",
            "١",
            "12345678901234567890x",
            "x99999999999999999999",
        ];
        // (`12345678901234567890` fits a uint64, so its bad byte is reached: syntax.)
        for input in syntax {
            let want = format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(input));
            assert_eq!(atoi(input).unwrap_err().to_string(), want, "{input:?}");
        }
        for input in [
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "+99999999999999999999",
            // The overflow comes before the bad byte.
            "99999999999999999999x",
        ] {
            assert_eq!(
                atoi(input).unwrap_err().to_string(),
                format!("strconv.Atoi: parsing \"{input}\": value out of range"),
            );
        }
        assert_eq!(
            atoi("abc").unwrap_err().to_string(),
            r#"strconv.Atoi: parsing "abc": invalid syntax"#
        );
    }
}
