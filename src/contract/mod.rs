//! The facts of Nomad's dynamic host volume plugin contract.
//!
//! The harness judges a plugin by what real Nomad would do with it, and the
//! manager must call plugins exactly as Nomad does; both read the contract
//! from here and nowhere else, so that a fact (a variable's position, a
//! timeout, an error's wording) has one definition. The facts come from
//! NOMAD-CONTRACT.md (Nomad's `client/hostvolumemanager`, spec `nomad-1.10`).
//! This module only describes; it runs nothing and depends on no other module.

mod json;
mod quote;
mod scan;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use json::DecodeError;
use json::{FieldKind, FieldValue, GoStruct};
pub use quote::go_quote;

/// The contract version this crate implements: stable since Nomad 1.10.0.
pub const SPEC_VERSION: &str = "nomad-1.10";

/// Names of the `DHV_*` environment variables, the only ones a plugin gets.
pub mod var {
    /// The operation: `fingerprint`, `create` or `delete`.
    pub const OPERATION: &str = "DHV_OPERATION";
    /// The agent's directory for volumes (`client.host_volumes_dir`).
    pub const VOLUMES_DIR: &str = "DHV_VOLUMES_DIR";
    /// The agent's plugin directory (`client.host_volume_plugin_dir`).
    pub const PLUGIN_DIR: &str = "DHV_PLUGIN_DIR";
    /// The node's node pool.
    pub const NODE_POOL: &str = "DHV_NODE_POOL";
    /// The volume's namespace.
    pub const NAMESPACE: &str = "DHV_NAMESPACE";
    /// The volume's name, from the user: untrusted.
    pub const VOLUME_NAME: &str = "DHV_VOLUME_NAME";
    /// The volume's ID, a lower-case UUID.
    pub const VOLUME_ID: &str = "DHV_VOLUME_ID";
    /// `capacity_min` in bytes, `0` when unset.
    pub const CAPACITY_MIN_BYTES: &str = "DHV_CAPACITY_MIN_BYTES";
    /// `capacity_max` in bytes, `0` when unset.
    pub const CAPACITY_MAX_BYTES: &str = "DHV_CAPACITY_MAX_BYTES";
    /// The node's ID.
    pub const NODE_ID: &str = "DHV_NODE_ID";
    /// The volume's `parameters` as JSON, from the user: untrusted.
    pub const PARAMETERS: &str = "DHV_PARAMETERS";
    /// Delete only: the `path` that create returned.
    pub const CREATED_PATH: &str = "DHV_CREATED_PATH";
}

/// What Nomad asks a plugin to do; also the plugin's single argument.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// Report the plugin's version; run at agent start and on SIGHUP.
    Fingerprint,
    /// Create (or re-create, on restore) a volume; must be idempotent.
    Create,
    /// Delete a volume.
    Delete,
}

impl Operation {
    /// Every operation, in the order a volume meets them.
    pub const ALL: [Operation; 3] = [Operation::Fingerprint, Operation::Create, Operation::Delete];

    /// The word Nomad passes as argv\[1\] and `DHV_OPERATION`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Fingerprint => "fingerprint",
            Operation::Create => "create",
            Operation::Delete => "delete",
        }
    }

    /// How long Nomad lets the operation run (see [`FINGERPRINT_TIMEOUT`]).
    pub fn timeout(self) -> Duration {
        match self {
            Operation::Fingerprint => FINGERPRINT_TIMEOUT,
            Operation::Create => CREATE_TIMEOUT,
            Operation::Delete => DELETE_TIMEOUT,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not one of the three operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation {input:?}: expected fingerprint, create or delete")]
pub struct ParseOperationError {
    /// The rejected word.
    pub input: String,
}

impl FromStr for Operation {
    type Err = ParseOperationError;

    /// Exact, lower-case match only, as a plugin's `case "$1"` would see it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| ParseOperationError {
                input: s.to_owned(),
            })
    }
}

/// A volume's `parameters` block: Go's `map[string]string`, kept in Go's marshalling order.
pub type Parameters = BTreeMap<String, String>;

/// Fingerprint's effective limit. Nomad sets 5 s on the plugin call, but node
/// fingerprinting wraps it in a 1 s context, and the shorter one wins.
pub const FINGERPRINT_TIMEOUT: Duration = Duration::from_secs(1);
/// Create's limit: the whole client RPC has 60 s.
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Delete's limit: the whole client RPC has 60 s.
pub const DELETE_TIMEOUT: Duration = Duration::from_secs(60);
/// The limit on re-running create for every volume when the agent restarts.
pub const RESTORE_TIMEOUT: Duration = Duration::from_secs(50);

/// Everything Nomad tells a plugin when it creates (or restores) a volume.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreateRequest {
    /// `DHV_VOLUMES_DIR`.
    pub volumes_dir: String,
    /// `DHV_PLUGIN_DIR`.
    pub plugin_dir: String,
    /// `DHV_NODE_POOL`.
    pub node_pool: String,
    /// `DHV_NAMESPACE`.
    pub namespace: String,
    /// `DHV_VOLUME_NAME`.
    pub volume_name: String,
    /// `DHV_VOLUME_ID`.
    pub volume_id: String,
    /// `DHV_CAPACITY_MIN_BYTES`; `0` when the spec has none.
    pub capacity_min_bytes: i64,
    /// `DHV_CAPACITY_MAX_BYTES`; `0` when the spec has none.
    pub capacity_max_bytes: i64,
    /// `DHV_NODE_ID`.
    pub node_id: String,
    /// `DHV_PARAMETERS`; `None` (no block) is sent as `null`, unlike an empty block (`{}`).
    pub parameters: Option<Parameters>,
}

impl CreateRequest {
    /// The plugin's whole environment for create, in Nomad's order; every
    /// variable is present even when empty.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            (var::OPERATION, Operation::Create.as_str().to_owned()),
            (var::VOLUMES_DIR, self.volumes_dir.clone()),
            (var::PLUGIN_DIR, self.plugin_dir.clone()),
            (var::NODE_POOL, self.node_pool.clone()),
            (var::NAMESPACE, self.namespace.clone()),
            (var::VOLUME_NAME, self.volume_name.clone()),
            (var::VOLUME_ID, self.volume_id.clone()),
            (var::CAPACITY_MIN_BYTES, self.capacity_min_bytes.to_string()),
            (var::CAPACITY_MAX_BYTES, self.capacity_max_bytes.to_string()),
            (var::NODE_ID, self.node_id.clone()),
            (var::PARAMETERS, encode_parameters(self.parameters.as_ref())),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }
}

/// Everything Nomad tells a plugin when it deletes a volume.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteRequest {
    /// `DHV_VOLUMES_DIR`.
    pub volumes_dir: String,
    /// `DHV_PLUGIN_DIR`.
    pub plugin_dir: String,
    /// `DHV_NODE_POOL`.
    pub node_pool: String,
    /// `DHV_CREATED_PATH`: the `path` create returned.
    pub created_path: String,
    /// `DHV_NAMESPACE`.
    pub namespace: String,
    /// `DHV_VOLUME_NAME`.
    pub volume_name: String,
    /// `DHV_VOLUME_ID`.
    pub volume_id: String,
    /// `DHV_NODE_ID`.
    pub node_id: String,
    /// `DHV_PARAMETERS`; `None` is sent as `null`.
    pub parameters: Option<Parameters>,
}

impl DeleteRequest {
    /// The plugin's whole environment for delete, in Nomad's order; every
    /// variable is present even when empty.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            (var::OPERATION, Operation::Delete.as_str().to_owned()),
            (var::VOLUMES_DIR, self.volumes_dir.clone()),
            (var::PLUGIN_DIR, self.plugin_dir.clone()),
            (var::NODE_POOL, self.node_pool.clone()),
            (var::CREATED_PATH, self.created_path.clone()),
            (var::NAMESPACE, self.namespace.clone()),
            (var::VOLUME_NAME, self.volume_name.clone()),
            (var::VOLUME_ID, self.volume_id.clone()),
            (var::NODE_ID, self.node_id.clone()),
            (var::PARAMETERS, encode_parameters(self.parameters.as_ref())),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    /// The delete Nomad sends for a volume that `req` created at `created_path`.
    pub fn for_created(req: &CreateRequest, created_path: &str) -> DeleteRequest {
        DeleteRequest {
            volumes_dir: req.volumes_dir.clone(),
            plugin_dir: req.plugin_dir.clone(),
            node_pool: req.node_pool.clone(),
            created_path: created_path.to_owned(),
            namespace: req.namespace.clone(),
            volume_name: req.volume_name.clone(),
            volume_id: req.volume_id.clone(),
            node_id: req.node_id.clone(),
            parameters: req.parameters.clone(),
        }
    }
}

/// The plugin's whole environment for fingerprint: only the operation.
pub fn fingerprint_env() -> Vec<(String, String)> {
    vec![(
        var::OPERATION.to_owned(),
        Operation::Fingerprint.as_str().to_owned(),
    )]
}

/// `DHV_PARAMETERS` as Go's `json.Marshal` writes a `map[string]string`:
/// compact, keys sorted by bytes, `<`, `>`, `&`, U+2028 and U+2029 escaped;
/// a nil map (`None`) is `null`.
pub fn encode_parameters(p: Option<&Parameters>) -> String {
    p.map_or_else(|| "null".to_owned(), json::marshal_string_map)
}

/// Whether `s` has the shape of a Nomad volume ID: a lower-case 8-4-4-4-12 hex UUID.
///
/// Only the shape: Nomad's IDs are random bytes, without RFC 4122 version bits.
pub fn is_valid_volume_id(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => matches!(b, b'0'..=b'9' | b'a'..=b'f'),
        })
}

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
    let mut fields = json::unmarshal(stdout, &PLUGIN_FINGERPRINT)?.into_iter();
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

/// How a process ended, rendered as Go's os.ProcessState.String(): "exit status 1", "signal: killed".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ExitReason {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal (Linux numbering).
    Signal(i32),
}

impl ExitReason {
    /// Whether Nomad counts this as success: exit status 0 and nothing else.
    pub fn success(&self) -> bool {
        matches!(self, ExitReason::Code(0))
    }

    /// Go's `os.ProcessState.String()`, which Nomad's error messages embed.
    /// (Go would add ` (core dumped)` after a core dump; that is not tracked here.)
    pub fn go_string(&self) -> String {
        match *self {
            ExitReason::Code(code) => format!("exit status {code}"),
            ExitReason::Signal(sig) => match go_signal_name(sig) {
                Some(name) => format!("signal: {name}"),
                None => format!("signal: signal {sig}"),
            },
        }
    }
}

impl fmt::Display for ExitReason {
    /// Same text as [`ExitReason::go_string`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.go_string())
    }
}

/// Go's `syscall.Signal.String()` on Linux, which has a name for 1 to 31.
fn go_signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        16 => "stack fault",
        17 => "child exited",
        18 => "continued",
        19 => "stopped (signal)",
        20 => "stopped",
        21 => "stopped (tty input)",
        22 => "stopped (tty output)",
        23 => "urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "file size limit exceeded",
        26 => "virtual timer expired",
        27 => "profiling timer expired",
        28 => "window changed",
        29 => "I/O possible",
        30 => "power failure",
        31 => "bad system call",
        _ => return None,
    })
}

/// Nomad's error after a failed create. `exit` is the [`ExitReason::go_string`];
/// `error_text` is what [`decode_failure_error`] found (`None`: stdout did not decode).
pub fn create_error_text(
    volume_id: &str,
    plugin: &str,
    exit: &str,
    error_text: Option<&str>,
) -> String {
    let head = format!(
        "error creating volume {} with plugin {}: {exit}",
        go_quote(volume_id),
        go_quote(plugin)
    );
    match error_text {
        Some(text) => format!("{head}: {text}"),
        None => head,
    }
}

/// Nomad's error after a failed delete. `exit` is the [`ExitReason::go_string`];
/// `error_text` is what [`decode_failure_error`] found (`None`: stdout did not decode).
pub fn delete_error_text(
    volume_id: &str,
    plugin: &str,
    exit: &str,
    error_text: Option<&str>,
) -> String {
    let (id, plugin) = (go_quote(volume_id), go_quote(plugin));
    match error_text {
        Some(text) => format!("error deleting volume {id} with plugin {plugin}: {exit}: {text}"),
        None => format!(
            "error reading plugin response when deleting volume {id} with plugin {plugin}: original error: {exit}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9d27";

    fn create_request() -> CreateRequest {
        CreateRequest {
            volumes_dir: "/opt/nomad/volumes".into(),
            plugin_dir: "/opt/nomad/plugins".into(),
            node_pool: "default".into(),
            namespace: "prod".into(),
            volume_name: "db".into(),
            volume_id: ID.into(),
            capacity_min_bytes: 1_000_000,
            capacity_max_bytes: 2_000_000,
            node_id: "f1f0b1bd-8f5c-4a3a-9b0e-39c7a4d5e6f7".into(),
            parameters: Some(Parameters::from([
                ("mode".to_owned(), "0755".to_owned()),
                ("a&b".to_owned(), "<x>".to_owned()),
            ])),
        }
    }

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(name, _)| name.as_str()).collect()
    }

    #[test]
    fn create_env_is_every_create_variable_in_nomads_order() {
        let env = create_request().env();
        assert_eq!(
            env,
            [
                ("DHV_OPERATION", "create"),
                ("DHV_VOLUMES_DIR", "/opt/nomad/volumes"),
                ("DHV_PLUGIN_DIR", "/opt/nomad/plugins"),
                ("DHV_NODE_POOL", "default"),
                ("DHV_NAMESPACE", "prod"),
                ("DHV_VOLUME_NAME", "db"),
                ("DHV_VOLUME_ID", ID),
                ("DHV_CAPACITY_MIN_BYTES", "1000000"),
                ("DHV_CAPACITY_MAX_BYTES", "2000000"),
                ("DHV_NODE_ID", "f1f0b1bd-8f5c-4a3a-9b0e-39c7a4d5e6f7"),
                (
                    "DHV_PARAMETERS",
                    r#"{"a\u0026b":"\u003cx\u003e","mode":"0755"}"#
                ),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn delete_env_is_every_delete_variable_in_nomads_order() {
        let req = DeleteRequest::for_created(&create_request(), "/opt/nomad/volumes/x");
        assert_eq!(
            names(&req.env()),
            [
                var::OPERATION,
                var::VOLUMES_DIR,
                var::PLUGIN_DIR,
                var::NODE_POOL,
                var::CREATED_PATH,
                var::NAMESPACE,
                var::VOLUME_NAME,
                var::VOLUME_ID,
                var::NODE_ID,
                var::PARAMETERS,
            ]
        );
        let env = req.env();
        assert_eq!(env[0].1, "delete");
        assert_eq!(env[4].1, "/opt/nomad/volumes/x");
        assert_eq!(env[7].1, ID);
        assert_eq!(env[9].1, r#"{"a\u0026b":"\u003cx\u003e","mode":"0755"}"#);
    }

    #[test]
    fn unset_values_are_still_sent() {
        let empty = CreateRequest {
            volumes_dir: String::new(),
            plugin_dir: String::new(),
            node_pool: String::new(),
            namespace: String::new(),
            volume_name: String::new(),
            volume_id: String::new(),
            capacity_min_bytes: 0,
            capacity_max_bytes: 0,
            node_id: String::new(),
            parameters: None,
        };
        let values: Vec<_> = empty.env().into_iter().map(|(_, v)| v).collect();
        assert_eq!(
            values,
            ["create", "", "", "", "", "", "", "0", "0", "", "null"]
        );
        let values: Vec<_> = DeleteRequest::for_created(&empty, "")
            .env()
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(values, ["delete", "", "", "", "", "", "", "", "", "null"]);
        assert_eq!(
            fingerprint_env(),
            [("DHV_OPERATION".to_owned(), "fingerprint".to_owned())]
        );
    }

    #[test]
    fn capacities_are_plain_decimal() {
        let mut req = create_request();
        req.capacity_min_bytes = -1;
        req.capacity_max_bytes = i64::MAX;
        let env = req.env();
        assert_eq!(env[7].1, "-1");
        assert_eq!(env[8].1, "9223372036854775807");
    }

    #[test]
    fn parameters_are_encoded_like_go_json_marshal() {
        let map = |pairs: &[(&str, &str)]| -> Parameters {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases: &[(Option<Parameters>, &str)] = &[
            (None, "null"),
            (Some(map(&[])), "{}"),
            (
                Some(map(&[("b", "2"), ("a", "1"), ("B", "3")])),
                r#"{"B":"3","a":"1","b":"2"}"#,
            ),
            (
                Some(map(&[("html", "<a href='x'>&</a>")])),
                r#"{"html":"\u003ca href='x'\u003e\u0026\u003c/a\u003e"}"#,
            ),
            (Some(map(&[("q", "\"\\/")])), r#"{"q":"\"\\/"}"#),
            (
                Some(map(&[("c", "\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}")])),
                "{\"c\":\"\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}\"}",
            ),
            (
                Some(map(&[("u", "é😀\u{2028}\u{2029}")])),
                r#"{"u":"é😀\u2028\u2029"}"#,
            ),
            // Byte order, not code point order within the BMP and beyond.
            (
                Some(map(&[("\u{ff}", "1"), ("\u{1F600}", "2"), ("z", "3")])),
                "{\"z\":\"3\",\"\u{ff}\":\"1\",\"\u{1F600}\":\"2\"}",
            ),
        ];
        for (params, expected) in cases {
            assert_eq!(encode_parameters(params.as_ref()), *expected, "{params:?}");
        }
    }

    #[test]
    fn volume_ids_are_lower_case_uuids() {
        for (id, ok) in [
            (ID, true),
            ("00000000-0000-0000-0000-000000000000", true),
            ("0B6DFB33-3C4F-4FB8-9C2B-5E0D8A3B9D27", false),
            ("0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9d2", false),
            ("0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9d277", false),
            ("0b6dfb333c4f-4fb8-9c2b-5e0d8a3b9d27-", false),
            ("0b6dfb33_3c4f_4fb8_9c2b_5e0d8a3b9d27", false),
            ("0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9d2g", false),
            ("../../../../../../../../../etc/passw", false),
            ("", false),
            ("0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9dé", false),
        ] {
            assert_eq!(is_valid_volume_id(id), ok, "{id:?}");
        }
    }

    #[test]
    fn operations_have_nomads_words_and_limits() {
        for (op, word, limit) in [
            (Operation::Fingerprint, "fingerprint", 1),
            (Operation::Create, "create", 60),
            (Operation::Delete, "delete", 60),
        ] {
            assert_eq!(op.as_str(), word);
            assert_eq!(op.to_string(), word);
            assert_eq!(word.parse::<Operation>(), Ok(op));
            assert_eq!(op.timeout(), Duration::from_secs(limit));
            assert_eq!(serde_json::to_string(&op).unwrap(), format!("\"{word}\""));
        }
        for bad in ["Create", "version", "", " create"] {
            assert_eq!(
                bad.parse::<Operation>(),
                Err(ParseOperationError { input: bad.into() })
            );
        }
        assert_eq!(RESTORE_TIMEOUT, Duration::from_secs(50));
        assert_eq!(SPEC_VERSION, "nomad-1.10");
    }

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

    #[test]
    fn create_decode_errors_read_like_go() {
        const BYTES: &str =
            "into Go struct field HostVolumePluginCreateResponse.bytes of type int64";
        const PATH: &str =
            "into Go struct field HostVolumePluginCreateResponse.path of type string";
        const VALUE: &str =
            "into Go value of type hostvolumemanager.HostVolumePluginCreateResponse";
        let cases: &[(&[u8], String)] = &[
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
            // Syntax is checked over the whole input first: a syntax error wins.
            (
                b"{\"bytes\":\"5\"} x",
                "invalid character 'x' after top-level value".into(),
            ),
            (b"[1,2", "unexpected end of JSON input".into()),
        ];
        for (stdout, message) in cases {
            let err = decode_create(stdout).expect_err(&String::from_utf8_lossy(stdout));
            assert_eq!(err.to_string(), *message, "{:?}", stdout.escape_ascii());
        }
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

    #[test]
    fn error_texts_are_nomads() {
        let exit = ExitReason::Code(1).go_string();
        assert_eq!(
            create_error_text(ID, "lvm", &exit, Some("disk full")),
            format!(r#"error creating volume "{ID}" with plugin "lvm": exit status 1: disk full"#)
        );
        assert_eq!(
            create_error_text(ID, "lvm", "signal: killed", None),
            format!(r#"error creating volume "{ID}" with plugin "lvm": signal: killed"#)
        );
        assert_eq!(
            create_error_text(ID, "lvm", &exit, Some("")),
            format!(r#"error creating volume "{ID}" with plugin "lvm": exit status 1: "#)
        );
        assert_eq!(
            delete_error_text(ID, "lvm", &exit, Some("busy")),
            format!(r#"error deleting volume "{ID}" with plugin "lvm": exit status 1: busy"#)
        );
        assert_eq!(
            delete_error_text(ID, "lvm", "exit status 2", None),
            format!(
                r#"error reading plugin response when deleting volume "{ID}" with plugin "lvm": original error: exit status 2"#
            )
        );
        // IDs are %q-quoted, as Go does.
        assert_eq!(
            create_error_text("a\"b", "p\\q\n", "exit status 1", None),
            r#"error creating volume "a\"b" with plugin "p\\q\n": exit status 1"#
        );
    }

    #[test]
    fn exit_reasons_read_like_go() {
        let cases = [
            (ExitReason::Code(0), "exit status 0", true),
            (ExitReason::Code(1), "exit status 1", false),
            (ExitReason::Code(255), "exit status 255", false),
            (ExitReason::Signal(1), "signal: hangup", false),
            (ExitReason::Signal(2), "signal: interrupt", false),
            (ExitReason::Signal(3), "signal: quit", false),
            (ExitReason::Signal(4), "signal: illegal instruction", false),
            (
                ExitReason::Signal(5),
                "signal: trace/breakpoint trap",
                false,
            ),
            (ExitReason::Signal(6), "signal: aborted", false),
            (ExitReason::Signal(7), "signal: bus error", false),
            (
                ExitReason::Signal(8),
                "signal: floating point exception",
                false,
            ),
            (ExitReason::Signal(9), "signal: killed", false),
            (
                ExitReason::Signal(10),
                "signal: user defined signal 1",
                false,
            ),
            (ExitReason::Signal(11), "signal: segmentation fault", false),
            (
                ExitReason::Signal(12),
                "signal: user defined signal 2",
                false,
            ),
            (ExitReason::Signal(13), "signal: broken pipe", false),
            (ExitReason::Signal(14), "signal: alarm clock", false),
            (ExitReason::Signal(15), "signal: terminated", false),
            (ExitReason::Signal(17), "signal: child exited", false),
            (ExitReason::Signal(31), "signal: bad system call", false),
            (ExitReason::Signal(34), "signal: signal 34", false),
            (ExitReason::Signal(0), "signal: signal 0", false),
        ];
        for (reason, text, success) in cases {
            assert_eq!(reason.go_string(), text);
            assert_eq!(reason.to_string(), text);
            assert_eq!(reason.success(), success, "{reason:?}");
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

        #[test]
        fn encoded_parameters_parse_back_to_the_same_map(
            params in proptest::option::of(proptest::collection::btree_map(any::<String>(), any::<String>(), 0..8))
        ) {
            let encoded = encode_parameters(params.as_ref());
            let back: Option<Parameters> = serde_json::from_str(&encoded)
                .map_err(|e| TestCaseError::fail(format!("{encoded}: {e}")))?;
            prop_assert_eq!(back, params);
        }
    }
}
