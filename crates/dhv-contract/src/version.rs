//! Version strings as hashicorp/go-version reads them.
//!
//! A plugin's fingerprint reports a `version`, and Nomad only accepts it if
//! `version.NewVersion` does; the canonical form it then publishes as the node
//! attribute `plugins.host_volume.<id>.version` is go-version's `String()`.
//! go-version is far more lenient than SemVer (`1`, `v1.2`, `1.2.3beta`, four
//! segments) yet stricter in odd places (`V1.2.3`, trailing white space), so the
//! harness needs its exact rules rather than the `semver` crate's. SemVer
//! strictness is still reported, as advice to plugin authors.
//!
//! The rules and texts are go-version 1.9's, the release Nomad 2.0.5 builds
//! with: its errors are lower case (`malformed version: V1.2.3`), where 1.7,
//! which Nomad 1.10 builds with, wrote `Malformed version: ...`.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// A fingerprinted plugin version as reports record it: the one type for it,
/// in a report and in a fingerprint (the plugin layer describes a raw string
/// with `VersionInfo::from_raw`, by this module's rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The `version` string exactly as the plugin printed it.
    pub raw: String,
    /// The go-version canonical form; `None` when go-version rejects the string.
    pub canonical: Option<String>,
    /// Whether `raw` is strict SemVer 2.0.
    pub semver: bool,
}

impl VersionInfo {
    /// Describes a version string reported by a plugin: its go-version
    /// canonical form, and whether it is strict SemVer.
    pub fn from_raw(raw: &str) -> VersionInfo {
        VersionInfo {
            raw: raw.to_owned(),
            canonical: parse(raw).ok().map(|v| v.canonical()),
            semver: is_strict_semver(raw),
        }
    }
}

/// go-version's `VersionRegexpRaw`, anchored the way `NewVersion` anchors it.
///
/// The capture groups are numbered as in Go, because go-version picks the
/// prerelease and metadata out of them by number (7, falling back to 4; 10).
const VERSION_PATTERN: &str = concat!(
    r"^v?([0-9]+(\.[0-9]+)*?)",
    r"(-([0-9]+[0-9A-Za-z\-~]*(\.[0-9A-Za-z\-~]+)*)|(-?([A-Za-z\-~]+[0-9A-Za-z\-~]*(\.[0-9A-Za-z\-~]+)*)))?",
    // go-version 1.9 ends its pattern with a stray `?`, which makes the
    // metadata group lazy; anchored at both ends, that changes no match.
    r"(\+([0-9A-Za-z\-~]+(\.[0-9A-Za-z\-~]+)*))??$",
);

static VERSION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(VERSION_PATTERN).expect("the go-version pattern compiles"));

/// A version accepted by go-version's `NewVersion`.
///
/// Equality is structural (it includes the original text), not go-version's
/// `Equal`: `1` and `1.0.0` are different values with the same canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoVersion {
    segments: Vec<i64>,
    pre: String,
    metadata: String,
    original: String,
}

/// Why go-version rejects a version string; `Display` reads like go-version's errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// The text does not match go-version's pattern.
    #[error("malformed version: {input}")]
    Malformed {
        /// The rejected text, as given.
        input: String,
    },
    /// A numeric segment does not fit in an `int64`.
    #[error("error parsing version: strconv.ParseInt: parsing \"{segment}\": value out of range")]
    OutOfRange {
        /// The rejected text, as given.
        input: String,
        /// The segment that overflowed, as written (leading zeros included).
        segment: String,
    },
}

/// Parses `raw` exactly as go-version's `NewVersion` does: no trimming, no case folding.
pub fn parse(raw: &str) -> Result<GoVersion, VersionError> {
    let caps = VERSION_RE
        .captures(raw)
        .ok_or_else(|| VersionError::Malformed {
            input: raw.to_owned(),
        })?;
    let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());

    let mut segments = group(1)
        .split('.')
        .map(|seg| {
            // The pattern only lets ASCII digits through, so overflow is the one way this fails.
            seg.parse::<i64>().map_err(|_| VersionError::OutOfRange {
                input: raw.to_owned(),
                segment: seg.to_owned(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // go-version pads to MAJOR.MINOR.PATCH so that `1` compares and prints like `1.0.0`.
    if segments.len() < 3 {
        segments.resize(3, 0);
    }

    let pre = match group(7) {
        "" => group(4),
        named => named,
    };
    Ok(GoVersion {
        segments,
        pre: pre.to_owned(),
        metadata: group(10).to_owned(),
        original: raw.to_owned(),
    })
}

impl GoVersion {
    /// go-version's `String()`: what Nomad publishes as the plugin's version attribute.
    pub fn canonical(&self) -> String {
        self.to_string()
    }

    /// The numeric segments, padded with zeros to at least three.
    pub fn segments(&self) -> &[i64] {
        &self.segments
    }

    /// The prerelease, without its leading `-`; empty when there is none.
    pub fn prerelease(&self) -> &str {
        &self.pre
    }

    /// The build metadata, without its leading `+`; empty when there is none.
    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// The text that was parsed.
    pub fn original(&self) -> &str {
        &self.original
    }
}

impl fmt::Display for GoVersion {
    /// Same text as [`GoVersion::canonical`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{seg}")?;
        }
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

/// Whether `raw` is a SemVer 2.0.0 version, exactly as written (no `v`, three segments).
///
/// Nomad does not require this; the harness reports it because tools around
/// Nomad often do.
pub fn is_strict_semver(raw: &str) -> bool {
    semver::Version::parse(raw).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Versions go-version 1.9 accepts (its canonical form, as Nomad 2.0.5 uses it;
    /// docs/nomad-fidelity.md), plus neighbours.
    #[test]
    fn accepted_versions_have_go_versions_canonical_form() {
        let cases = [
            // (input, canonical, strict semver)
            ("1", "1.0.0", false),
            ("1.2", "1.2.0", false),
            ("1.2.3", "1.2.3", true),
            ("1.2.3.4", "1.2.3.4", false),
            ("1.2.3.4.5.6", "1.2.3.4.5.6", false),
            ("v1.2.3", "1.2.3", false),
            ("01.002.03", "1.2.3", false),
            ("1.2.3beta", "1.2.3-beta", false),
            ("1.2.3~rc1", "1.2.3-~rc1", false),
            ("1.2.3-beta.01", "1.2.3-beta.01", false),
            ("1.2.3-beta.1", "1.2.3-beta.1", true),
            ("1.2.3-1", "1.2.3-1", true),
            ("1.2.3--x", "1.2.3--x", true),
            ("1.0.0-rc.1+build.5", "1.0.0-rc.1+build.5", true),
            ("1.2+meta", "1.2.0+meta", false),
            // A lone `-` is itself a valid named prerelease (group 7 may start with `-`).
            ("1.2.3-", "1.2.3--", false),
            ("0.0.1", "0.0.1", true),
            // Prerelease and metadata edge cases, as go-version 1.9's groups take them.
            ("1.2.3-~", "1.2.3-~", false),
            ("1.2.3--", "1.2.3--", true),
            // A numeric prerelease needs a digit first; `-` then starts a named one.
            ("1.2.3-.rc", "1.2.3--.rc", false),
            ("1.0.0-0.3.7", "1.0.0-0.3.7", true),
            ("1.2.3-1a", "1.2.3-1a", true),
            ("1.2.3-a.b-c", "1.2.3-a.b-c", true),
            ("1.2.3+001", "1.2.3+001", true),
            ("1.2.3+meta-1.x", "1.2.3+meta-1.x", true),
            ("1.2.3.4beta", "1.2.3.4-beta", false),
            ("1.2beta.1+x", "1.2.0-beta.1+x", false),
            ("v1", "1.0.0", false),
            ("v1.2.3v", "1.2.3-v", false),
            ("9223372036854775807", "9223372036854775807.0.0", false),
        ];
        for (input, canonical, semver) in cases {
            let v = parse(input).unwrap_or_else(|e| panic!("{input:?} rejected: {e}"));
            assert_eq!(v.canonical(), canonical, "canonical of {input:?}");
            assert_eq!(v.to_string(), canonical, "Display of {input:?}");
            assert_eq!(v.original(), input);
            assert_eq!(is_strict_semver(input), semver, "semver of {input:?}");
        }
    }

    #[test]
    fn parts_come_from_go_versions_capture_groups() {
        let v = parse("v1.2.3.4-rc.1+linux.amd64").unwrap();
        assert_eq!(v.segments(), &[1, 2, 3, 4]);
        assert_eq!(v.prerelease(), "rc.1");
        assert_eq!(v.metadata(), "linux.amd64");

        // Group 7 (a named prerelease) wins, and its optional `-` is not part of it.
        let v = parse("1.2.3-beta").unwrap();
        assert_eq!((v.segments(), v.prerelease()), (&[1, 2, 3][..], "beta"));
        let v = parse("1.2.3~rc1").unwrap();
        assert_eq!(v.prerelease(), "~rc1");
        // Group 4 (a numeric prerelease) is the fallback.
        assert_eq!(parse("1.2.3-01a").unwrap().prerelease(), "01a");
        assert_eq!(parse("1").unwrap().segments(), &[1, 0, 0]);
        assert_eq!(parse("1.2").unwrap().metadata(), "");
    }

    #[test]
    fn rejected_versions_read_like_go_version_errors() {
        let malformed = [
            "V1.2.3",
            "1.2.3.beta",
            "1.2.3+",
            "1.2.3+a+b",
            "1.2.3_4",
            "",
            "1.2.3 ",
            " 1.2.3",
            "1.2.3\n",
            "1.2.3\r\n",
            "1.2.3-é",
            "١.٢.٣",
            "v",
            "1.",
            ".1",
            "1..2",
            "-1.2.3",
            "1.2.3-a..b",
            "vv1.2.3",
            "1.2.3-+",
            "1.2.3+meta.",
            "1.2.3-rc.",
            "1.2.3+a_b",
            "1.2.3-rc+",
        ];
        for input in malformed {
            let err = parse(input).expect_err(input);
            assert_eq!(
                err,
                VersionError::Malformed {
                    input: input.to_owned()
                }
            );
            assert_eq!(err.to_string(), format!("malformed version: {input}"));
        }
    }

    #[test]
    fn segments_beyond_int64_are_out_of_range() {
        for (input, segment) in [
            ("99999999999999999999", "99999999999999999999"),
            ("1.9223372036854775808", "9223372036854775808"),
            (
                "1.2.3.00000000000000000000099999999999999999999",
                "00000000000000000000099999999999999999999",
            ),
        ] {
            let err = parse(input).expect_err(input);
            assert_eq!(
                err,
                VersionError::OutOfRange {
                    input: input.to_owned(),
                    segment: segment.to_owned()
                }
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "error parsing version: strconv.ParseInt: parsing \"{segment}\": value out of range"
                )
            );
        }
        // Leading zeros do not count towards the range.
        assert_eq!(
            parse("0009223372036854775807").unwrap().segments()[0],
            i64::MAX
        );
    }

    #[test]
    fn strict_semver_is_the_semver_crates_verdict() {
        for (input, expected) in [
            ("1.2.3", true),
            ("1.0.0-rc.1+build.5", true),
            ("1.2", false),
            ("v1.2.3", false),
            ("1.2.3.4", false),
            ("01.2.3", false),
            ("", false),
        ] {
            assert_eq!(is_strict_semver(input), expected, "{input:?}");
        }
    }

    /// Strings shaped like versions, so that most of them are accepted.
    fn version_like() -> impl Strategy<Value = String> {
        r"[vV]?[0-9]{1,20}(\.[0-9]{1,20}){0,4}(-?[0-9A-Za-z~._+-]{1,8})?(\+[0-9A-Za-z~._+-]{1,8})?"
    }

    proptest! {
        #[test]
        fn parse_never_panics(raw in any::<String>()) {
            let _ = parse(&raw);
            let _ = is_strict_semver(&raw);
        }

        #[test]
        fn canonical_form_is_a_fixed_point(raw in version_like()) {
            if let Ok(v) = parse(&raw) {
                let canonical = v.canonical();
                let again = parse(&canonical).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(again.canonical(), canonical);
                prop_assert_eq!(again.segments(), v.segments());
                prop_assert_eq!(again.prerelease(), v.prerelease());
                prop_assert_eq!(again.metadata(), v.metadata());
            }
        }

        #[test]
        fn canonical_form_is_a_fixed_point_for_any_input(raw in any::<String>()) {
            if let Ok(v) = parse(&raw) {
                prop_assert_eq!(parse(&v.canonical()).map(|v| v.canonical()), Ok(v.canonical()));
            }
        }
    }
}
