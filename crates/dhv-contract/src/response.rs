//! What a plugin answers: its stdout decoded exactly as Nomad's `json.Unmarshal` does.

use super::decode_error::DecodeError;
use super::json::{self, FieldKind, FieldValue, GoStruct};
use super::operation::Operation;

/// What a successful fingerprint decodes to (Nomad's `PluginFingerprint`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct FingerprintResponse {
    /// The reported version, not yet checked against go-version (see
    /// [`crate::version::parse`]). `None` when absent or `null`: a Nomad agent
    /// dereferences it regardless and crashes, so treat it as a hard failure.
    pub version: Option<String>,
}

/// What a create decodes to (Nomad's `HostVolumePluginCreateResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct CreateResponse {
    /// Where the volume is; Nomad mounts it and later passes it back as `DHV_CREATED_PATH`.
    pub path: String,
    /// The volume's size; `0` when absent.
    pub bytes: i64,
    /// The plugin's error text; Nomad only shows it when the plugin fails.
    pub error: String,
}

static PLUGIN_FINGERPRINT: GoStruct = GoStruct {
    go_type: "hostvolumemanager.PluginFingerprint",
    name: "PluginFingerprint",
    fields: &[("version", FieldKind::VersionPtr)],
};

static CREATE_RESPONSE: GoStruct = GoStruct {
    go_type: "hostvolumemanager.HostVolumePluginCreateResponse",
    name: "HostVolumePluginCreateResponse",
    fields: &[
        ("path", FieldKind::String),
        ("bytes", FieldKind::Int64),
        ("error", FieldKind::String),
    ],
};

static DELETE_RESPONSE: GoStruct = GoStruct {
    go_type: "hostvolumemanager.HostVolumePluginDeleteResponse",
    name: "HostVolumePluginDeleteResponse",
    fields: &[("error", FieldKind::String)],
};

fn string_field(value: Option<FieldValue>) -> Option<String> {
    match value {
        Some(FieldValue::Str(s)) => Some(s),
        _ => None,
    }
}

fn int_field(value: Option<FieldValue>) -> i64 {
    match value {
        Some(FieldValue::Int(n)) => n,
        _ => 0,
    }
}

/// Decodes a successful fingerprint's stdout as Nomad's `json.Unmarshal` does.
///
/// Nomad's field is a `*version.Version`, so real Nomad also fails this decode
/// (with go-version's error) when the string is not a valid go-version. Here
/// the string is returned as it is, for [`crate::version::parse`] to judge, so
/// that a report can show both what was sent and why it is wrong.
pub fn decode_fingerprint(stdout: &[u8]) -> Result<FingerprintResponse, DecodeError> {
    decode_fingerprint_with(stdout, |_| Ok(()))
}

/// [`decode_fingerprint`] as Nomad really decodes it: `version` judges every
/// `version` string as it is met (go-version's `UnmarshalText`), so that a bad
/// one fails the decode, with its error ([`DecodeError::Text`]), in the order
/// Go's decoder finds errors (see `json::unmarshal_with`).
pub fn decode_fingerprint_with(
    stdout: &[u8],
    mut version: impl FnMut(&str) -> Result<(), String>,
) -> Result<FingerprintResponse, DecodeError> {
    let mut fields = json::unmarshal_with(stdout, &PLUGIN_FINGERPRINT, &mut version)?.into_iter();
    Ok(FingerprintResponse {
        version: fields.next().and_then(string_field),
    })
}

/// Decodes a successful create's stdout as Nomad's `json.Unmarshal` does.
pub fn decode_create(stdout: &[u8]) -> Result<CreateResponse, DecodeError> {
    let mut fields = json::unmarshal(stdout, &CREATE_RESPONSE)?.into_iter();
    Ok(CreateResponse {
        path: fields.next().and_then(string_field).unwrap_or_default(),
        bytes: fields.next().map_or(0, int_field),
        error: fields.next().and_then(string_field).unwrap_or_default(),
    })
}

/// The error text a failed plugin explained itself with: `Some` only when
/// stdout decodes as `{"error": "..."}` by Go's rules and the text is not empty.
///
/// This answers "did the plugin say why?". To render the message a user of
/// real Nomad would see, use [`decode_failure_error`], which keeps Nomad's
/// quirks (an empty text still counts, and create decodes the whole create
/// response).
pub fn decode_error(stdout: &[u8]) -> Option<String> {
    let mut fields = json::unmarshal(stdout, &DELETE_RESPONSE).ok()?.into_iter();
    fields
        .next()
        .and_then(string_field)
        .filter(|text| !text.is_empty())
}

/// The error text Nomad puts in its message after `op` failed, exactly as
/// Nomad gets it: `Some` whenever stdout decodes, even to an empty text.
///
/// Create decodes stdout into the whole create response, so a bad `bytes` or
/// `path` loses the error text; delete decodes only `error`. Nomad never reads
/// a failed fingerprint's stdout, so that is always `None`.
pub fn decode_failure_error(op: Operation, stdout: &[u8]) -> Option<String> {
    match op {
        Operation::Fingerprint => None,
        Operation::Create => decode_create(stdout).ok().map(|resp| resp.error),
        Operation::Delete => {
            let mut fields = json::unmarshal(stdout, &DELETE_RESPONSE).ok()?.into_iter();
            Some(fields.next().and_then(string_field).unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fingerprint(version: Option<&str>) -> FingerprintResponse {
        FingerprintResponse {
            version: version.map(str::to_owned),
        }
    }

    fn create(path: &str, bytes: i64, error: &str) -> CreateResponse {
        CreateResponse {
            path: path.into(),
            bytes,
            error: error.into(),
        }
    }

    #[test]
    fn fingerprint_decodes_like_go() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"version":"1.2.3"}"#, Some("1.2.3")),
            ("\n\t {\"version\": \"0.0.1\"} \r\n", Some("0.0.1")),
            (r#"{"VERSION":"1"}"#, Some("1")),
            (r#"{"Version":"1","extra":[1,{"a":null}]}"#, Some("1")),
            (r#"{"version":"1","version":"2"}"#, Some("2")),
            (r#"{"version":"1","version":null}"#, None), // null resets Go's pointer
            (r#"{"version":"\u0031.0"}"#, Some("1.0")),
            ("{}", None),
            ("null", None),
            (" null\n", None),
            (r#"{"version":null}"#, None),
        ];
        for (stdout, version) in cases {
            assert_eq!(
                decode_fingerprint(stdout.as_bytes()),
                Ok(fingerprint(*version)),
                "{stdout:?}"
            );
        }
    }

    #[test]
    fn create_decodes_like_go() {
        let cases: &[(&str, CreateResponse)] = &[
            (r#"{"path":"/v/x","bytes":5}"#, create("/v/x", 5, "")),
            (
                " \n{\"path\": \"/v/x\", \"bytes\": 50000000}\n\n",
                create("/v/x", 50_000_000, ""),
            ),
            (r#"{"PATH": "/x", "Bytes": 5}"#, create("/x", 5, "")),
            (r#"{"pAtH":"/x","BYTEſ":7}"#, create("/x", 7, "")),
            (
                r#"{"path":"/x","unknown":{"bytes":"nope"},"more":[1.5]}"#,
                create("/x", 0, ""),
            ),
            (
                r#"{"path":"/a","path":"/b","PATH":"/c"}"#,
                create("/c", 0, ""),
            ),
            (
                r#"{"path":"/a","path":null,"bytes":null}"#,
                create("/a", 0, ""),
            ),
            (r#"{"bytes":-0}"#, create("", 0, "")),
            (
                r#"{"bytes":-9223372036854775808}"#,
                create("", i64::MIN, ""),
            ),
            (r#"{"bytes":9223372036854775807}"#, create("", i64::MAX, "")),
            (
                r#"{"path":"/x","error":"ignored on success"}"#,
                create("/x", 0, "ignored on success"),
            ),
            (
                "{\"path\":\"/v/\u{e9}\\u00e9\\n\"}",
                create("/v/éé\n", 0, ""),
            ),
            ("{}", create("", 0, "")),
            ("null", create("", 0, "")),
        ];
        for (stdout, expected) in cases {
            assert_eq!(
                decode_create(stdout.as_bytes()).as_ref(),
                Ok(expected),
                "{stdout:?}"
            );
        }
        // Invalid UTF-8 is not an error: each bad byte becomes U+FFFD.
        assert_eq!(
            decode_create(b"{\"path\":\"/v/\xff\xfe\"}"),
            Ok(create("/v/\u{FFFD}\u{FFFD}", 0, ""))
        );
    }

    /// Each stdout's decode error, as Go's decoder words it.
    fn assert_create_errors(cases: &[(&[u8], String)]) {
        for (stdout, message) in cases {
            let err = decode_create(stdout).expect_err(&String::from_utf8_lossy(stdout));
            assert_eq!(err.to_string(), *message, "{:?}", stdout.escape_ascii());
        }
    }

    #[test]
    fn create_syntax_errors_read_like_go() {
        assert_create_errors(&[
            (b"", "unexpected end of JSON input".into()),
            (b"  \n", "unexpected end of JSON input".into()),
            (b"{\"path\":\"/x\"", "unexpected end of JSON input".into()),
            (
                b"{\"path\":\"/x\"}\nok",
                "invalid character 'o' after top-level value".into(),
            ),
            (
                b"{\"path\":\"/x\"}{\"path\":\"/y\"}",
                "invalid character '{' after top-level value".into(),
            ),
            (
                b"creating volume\n{\"path\":\"/x\"}",
                "invalid character 'c' looking for beginning of value".into(),
            ),
            (
                b"{\"path\":'/x'}",
                r"invalid character '\'' looking for beginning of value".into(),
            ),
            // Syntax is checked over the whole input first: a syntax error wins.
            (
                b"{\"bytes\":\"5\"} x",
                "invalid character 'x' after top-level value".into(),
            ),
            (b"[1,2", "unexpected end of JSON input".into()),
        ]);
    }

    #[test]
    fn create_type_errors_read_like_go() {
        const BYTES: &str =
            "into Go struct field HostVolumePluginCreateResponse.bytes of type int64";
        const PATH: &str =
            "into Go struct field HostVolumePluginCreateResponse.path of type string";
        const VALUE: &str =
            "into Go value of type hostvolumemanager.HostVolumePluginCreateResponse";
        assert_create_errors(&[
            (
                b"{\"bytes\":1.5}",
                format!("json: cannot unmarshal number 1.5 {BYTES}"),
            ),
            (
                b"{\"bytes\":1.0}",
                format!("json: cannot unmarshal number 1.0 {BYTES}"),
            ),
            (
                b"{\"bytes\":1e3}",
                format!("json: cannot unmarshal number 1e3 {BYTES}"),
            ),
            (
                b"{\"bytes\":99999999999999999999}",
                format!("json: cannot unmarshal number 99999999999999999999 {BYTES}"),
            ),
            (
                b"{\"bytes\":\"5\"}",
                format!("json: cannot unmarshal string {BYTES}"),
            ),
            (
                b"{\"bytes\":true}",
                format!("json: cannot unmarshal bool {BYTES}"),
            ),
            (
                b"{\"bytes\":{}}",
                format!("json: cannot unmarshal object {BYTES}"),
            ),
            (
                b"{\"bytes\":[5]}",
                format!("json: cannot unmarshal array {BYTES}"),
            ),
            (
                b"{\"path\":5}",
                format!("json: cannot unmarshal number {PATH}"),
            ),
            (
                b"{\"path\":false}",
                format!("json: cannot unmarshal bool {PATH}"),
            ),
            (
                b"{\"path\":[\"/x\"]}",
                format!("json: cannot unmarshal array {PATH}"),
            ),
            (
                b"{\"path\":{\"p\":1}}",
                format!("json: cannot unmarshal object {PATH}"),
            ),
            (b"[]", format!("json: cannot unmarshal array {VALUE}")),
            (b"\"/x\"", format!("json: cannot unmarshal string {VALUE}")),
            (b"5", format!("json: cannot unmarshal number {VALUE}")),
            (b"true", format!("json: cannot unmarshal bool {VALUE}")),
            // The first type error is reported.
            (
                b"{\"path\":1,\"bytes\":\"2\"}",
                format!("json: cannot unmarshal number {PATH}"),
            ),
        ]);
        assert_eq!(
            decode_create(b"{\"bytes\":1.5}"),
            Err(DecodeError::FieldType {
                value: "number 1.5".into(),
                go_struct: "HostVolumePluginCreateResponse",
                field: "bytes",
                go_type: "int64",
            })
        );
    }

    #[test]
    fn fingerprint_decode_errors_read_like_go() {
        let cases: &[(&str, &str)] = &[
            ("", "unexpected end of JSON input"),
            ("0.0.1", "invalid character '.' after top-level value"),
            (
                "v1.0.0",
                "invalid character 'v' looking for beginning of value",
            ),
            (
                "{\"version\":1}",
                "json: cannot unmarshal number into Go struct field PluginFingerprint.version of type *version.Version",
            ),
            (
                "{\"version\":true}",
                "json: cannot unmarshal bool into Go struct field PluginFingerprint.version of type *version.Version",
            ),
            (
                "{\"version\":[\"1\"]}",
                "json: cannot unmarshal array into Go struct field PluginFingerprint.version of type *version.Version",
            ),
            (
                "[{\"version\":\"1\"}]",
                "json: cannot unmarshal array into Go value of type hostvolumemanager.PluginFingerprint",
            ),
            (
                "\"1.0.0\"",
                "json: cannot unmarshal string into Go value of type hostvolumemanager.PluginFingerprint",
            ),
        ];
        for (stdout, message) in cases {
            let err = decode_fingerprint(stdout.as_bytes()).expect_err(stdout);
            assert_eq!(err.to_string(), *message, "{stdout:?}");
        }
    }

    #[test]
    fn hostile_input_is_an_error_not_a_crash() {
        let deep = "[".repeat(1_000_000);
        assert_eq!(
            decode_create(deep.as_bytes()).unwrap_err().to_string(),
            "invalid character '[' exceeded max depth"
        );
        // Nesting Go accepts is skipped without recursion.
        let n = 10_000 - 1;
        let nested = format!(r#"{{"x":{}{},"path":"/p"}}"#, "[".repeat(n), "]".repeat(n));
        assert_eq!(decode_create(nested.as_bytes()), Ok(create("/p", 0, "")));
    }

    #[test]
    fn decode_error_needs_go_decodable_json_with_a_text() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (br#"{"error":"disk full"}"#, Some("disk full")),
            (b"\n{\"Error\": \"disk full\"}\n", Some("disk full")),
            (br#"{"error":"a","error":"b"}"#, Some("b")),
            (br#"{"error":"x","bytes":1.5}"#, Some("x")),
            (br#"{"error":""}"#, None),
            (b"{}", None),
            (b"null", None),
            (br#"{"error":null}"#, None),
            (b"", None),
            (b"disk full", None),
            (br#"{"error":"disk full"} trailing"#, None),
            (br#"{"error":5}"#, None),
            (br#"["disk full"]"#, None),
        ];
        for (stdout, expected) in cases {
            assert_eq!(
                decode_error(stdout).as_deref(),
                *expected,
                "{:?}",
                stdout.escape_ascii()
            );
        }
    }

    #[test]
    fn failure_error_is_what_nomad_gets() {
        use Operation::*;
        let cases: &[(Operation, &[u8], Option<&str>)] = &[
            (Create, br#"{"error":"disk full"}"#, Some("disk full")),
            (Create, b"{}", Some("")),
            (Create, br#"{"error":""}"#, Some("")),
            (Create, b"null", Some("")),
            (Create, b"", None),
            (Create, b"oops", None),
            // Create decodes the whole create response: a bad `bytes` loses the text.
            (Create, br#"{"error":"x","bytes":1.5}"#, None),
            (Delete, br#"{"error":"x","bytes":1.5}"#, Some("x")),
            (Delete, b"{}", Some("")),
            (Delete, b"", None),
            (Fingerprint, br#"{"error":"x"}"#, None),
        ];
        for (op, stdout, expected) in cases {
            assert_eq!(
                decode_failure_error(*op, stdout).as_deref(),
                *expected,
                "{op} {:?}",
                stdout.escape_ascii()
            );
        }
    }

    proptest! {
        #[test]
        fn decoders_never_panic(stdout in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_fingerprint(&stdout);
            let _ = decode_create(&stdout);
            let _ = decode_error(&stdout);
            for op in Operation::ALL {
                let _ = decode_failure_error(op, &stdout);
            }
        }

        #[test]
        fn decoders_never_panic_on_json_like_input(
            parts in proptest::collection::vec(
                prop::sample::select(vec![
                    "{", "}", "[", "]", ",", ":", " ", "\"path\"", "\"bytes\"", "\"error\"",
                    "\"version\"", "\"x\"", "\"\\u", "d83d", "\\", "1", "-0", "1.5", "1e3",
                    "99999999999999999999", "true", "null", "\"\u{e9}\"", "\u{ff}",
                ]),
                0..40,
            )
        ) {
            let stdout = parts.concat();
            let _ = decode_fingerprint(stdout.as_bytes());
            let _ = decode_create(stdout.as_bytes());
            let _ = decode_error(stdout.as_bytes());
        }

        #[test]
        fn decoded_responses_agree_with_serde_on_plain_objects(
            path in any::<String>(),
            bytes in any::<i64>(),
            error in any::<String>(),
        ) {
            let stdout = serde_json::json!({"path": path, "bytes": bytes, "error": error}).to_string();
            prop_assert_eq!(decode_create(stdout.as_bytes()), Ok(CreateResponse { path, bytes, error }));
        }
    }
}
