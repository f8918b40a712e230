//! A fingerprint's stdout decoded as Nomad decodes it: Go's `encoding/json`
//! into a struct whose `version` is a `*version.Version`, so go-version judges
//! each `version` string during the decode, in Go's order of errors.

use crate::contract::{self, DecodeError, FingerprintResponse};

/// `json.Unmarshal(stdout, &PluginFingerprint{})` in Nomad 2.0.5: a version
/// go-version rejects is a [`DecodeError::Text`] with go-version's words, even
/// when a later `version` key would be fine (the first bad one ends the decode).
pub fn decode_fingerprint(stdout: &[u8]) -> Result<FingerprintResponse, DecodeError> {
    contract::decode_fingerprint_with(stdout, |raw| {
        crate::version::parse(raw)
            .map(drop)
            .map_err(|e| e.to_string())
    })
}

/// The version string to show for a fingerprint's stdout, whether or not
/// Nomad accepts it: the one Nomad's decode stopped at, else the one it kept
/// (the last); `None` when there is none or the JSON does not decode.
pub fn shown_version(stdout: &[u8]) -> Option<String> {
    let mut rejected = None;
    let decoded = contract::decode_fingerprint_with(stdout, |raw| {
        crate::version::parse(raw).map(drop).map_err(|e| {
            rejected = Some(raw.to_owned());
            e.to_string()
        })
    });
    match decoded {
        Ok(fp) => fp.version,
        Err(DecodeError::Text { .. }) => rejected,
        Err(_) => contract::decode_fingerprint(stdout).ok()?.version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::VersionInfo;

    /// A version is described by go-version's canonical form and SemVer's
    /// strictness; one go-version rejects keeps only its raw text.
    #[test]
    fn a_version_is_described_by_go_version_and_semver() {
        for (raw, canonical, semver) in [
            ("1.2.3", Some("1.2.3"), true),
            ("v1.2", Some("1.2.0"), false),
            ("1.2.3beta", Some("1.2.3-beta"), false),
            ("V1.2.3", None, false),
            ("", None, false),
        ] {
            let expected = VersionInfo {
                raw: raw.to_owned(),
                canonical: canonical.map(str::to_owned),
                semver,
            };
            assert_eq!(VersionInfo::from_raw(raw), expected, "{raw:?}");
        }
    }

    #[test]
    fn version_info_round_trips_through_json() {
        let info = VersionInfo::from_raw("1.2");
        let json = serde_json::to_string(&info).unwrap();
        assert_eq!(json, r#"{"raw":"1.2","canonical":"1.2.0","semver":false}"#);
        assert_eq!(serde_json::from_str::<VersionInfo>(&json).unwrap(), info);
    }

    #[test]
    fn version_errors_come_in_gos_order() {
        let cases = [
            (r#"{"version": "1.0.0"}"#, Ok(Some("1.0.0"))),
            (r#"{"version": "V1.2.3"}"#, Err("malformed version: V1.2.3")),
            // The first bad version ends the decode, whatever follows.
            (
                r#"{"version": "V1", "version": "1.0.0"}"#,
                Err("malformed version: V1"),
            ),
            (
                r#"{"version": "1.0.0", "Version": "99999999999999999999"}"#,
                Err(
                    "error parsing version: strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
                ),
            ),
            // A bad version wins over a type error met before it ...
            (
                r#"{"version": 5, "version": "1.2.3.beta"}"#,
                Err("malformed version: 1.2.3.beta"),
            ),
            // ... but a type error stands when every version string is good.
            (
                r#"{"version": 5, "version": "1.0.0"}"#,
                Err(
                    "json: cannot unmarshal number into Go struct field PluginFingerprint.version of type *version.Version",
                ),
            ),
            (r#"{"version": "1.0.0", "version": null}"#, Ok(None)),
            (
                r#"{"version": null, "version": "2.0.0"}"#,
                Ok(Some("2.0.0")),
            ),
            // A syntax error anywhere comes first.
            (
                r#"{"version": "V1"} x"#,
                Err("invalid character 'x' after top-level value"),
            ),
        ];
        for (stdout, want) in cases {
            let got = decode_fingerprint(stdout.as_bytes());
            let got = got
                .as_ref()
                .map(|r| r.version.as_deref())
                .map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_owned), "{stdout}");
        }
    }

    #[test]
    fn the_version_shown_is_the_one_nomad_stopped_at() {
        for (stdout, want) in [
            (r#"{"version": "1.0.0"}"#, Some("1.0.0")),
            (r#"{"version": "V1", "version": "1.0.0"}"#, Some("V1")),
            (r#"{"version": "1.0.0", "version": "V2"}"#, Some("V2")),
            // A type error: the JSON does not decode, so nothing to show.
            (r#"{"version": 5, "version": "1.0.0"}"#, None),
            (r#"{"version": null}"#, None),
            ("not json", None),
        ] {
            assert_eq!(
                shown_version(stdout.as_bytes()).as_deref(),
                want,
                "{stdout}"
            );
        }
    }
}
