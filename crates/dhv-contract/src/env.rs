//! What Nomad tells a plugin: the requests, and the environment each becomes.

use std::collections::BTreeMap;

use super::json;
use super::operation::Operation;
use super::var;

/// A volume's `parameters` block: Go's `map[string]string`, kept in Go's marshalling order.
pub type Parameters = BTreeMap<String, String>;

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
    /// Whether `bytes`, as a create answered it, lies in the capacity range
    /// asked for: min <= bytes, and bytes <= max when max > 0. A plugin that
    /// does not know its volume's size answers 0, which is always admitted.
    pub fn admits_bytes(&self, bytes: i64) -> bool {
        bytes <= 0
            || (bytes >= self.capacity_min_bytes
                && (self.capacity_max_bytes <= 0 || bytes <= self.capacity_max_bytes))
    }

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

    proptest! {
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
