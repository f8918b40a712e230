//! Why a plugin's stdout does not decode, worded as Go's `encoding/json` words it.
//!
//! Its own file so that the scanner (syntax) and the decoder (types) both
//! depend on it without depending on each other's module in a cycle.

/// Why a plugin's stdout does not decode; `Display` reads like Go's `encoding/json` errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input is not exactly one JSON value (Go's `*json.SyntaxError`).
    #[error("{message}")]
    Syntax {
        /// Go's text, e.g. `invalid character 'x' looking for beginning of value`.
        message: String,
        /// Go's `Offset`: bytes read when the error was found.
        offset: usize,
    },
    /// A member's value has the wrong JSON type for its Go field (Go's `*json.UnmarshalTypeError`).
    #[error(
        "json: cannot unmarshal {value} into Go struct field {go_struct}.{field} of type {go_type}"
    )]
    FieldType {
        /// What was found: `string`, `number`, `number 1.5`, `bool`, `object` or `array`.
        value: String,
        /// The Go struct's name, e.g. `HostVolumePluginCreateResponse`.
        go_struct: &'static str,
        /// The field's JSON name, e.g. `bytes`.
        field: &'static str,
        /// The field's Go type, e.g. `int64`.
        go_type: &'static str,
    },
    /// A string the field's own `UnmarshalText` refused, in that type's words
    /// (go-version's for a fingerprint's `version`: `malformed version: V1`).
    #[error("{message}")]
    Text {
        /// The type's error text.
        message: String,
    },
    /// The top-level value is neither an object nor `null` (Go's `*json.UnmarshalTypeError`).
    #[error("json: cannot unmarshal {value} into Go value of type {go_type}")]
    ValueType {
        /// What was found: `string`, `number`, `bool` or `array`.
        value: &'static str,
        /// The Go type decoded into, e.g. `hostvolumemanager.PluginFingerprint`.
        go_type: &'static str,
    },
}
