//! The facts of Nomad's dynamic host volume plugin contract.
//!
//! The harness judges a plugin by what real Nomad would do with it, and the
//! manager must call plugins exactly as Nomad does; both read the contract
//! from here and nowhere else, so that a fact (a variable's position, a
//! timeout, an error's wording) has one definition. The facts come from
//! Nomad 2.0.5's client (`client/hostvolumemanager`, spec `nomad-1.10`), as
//! docs/nomad-fidelity.md lists them.
//! This crate only describes: it runs nothing and depends on no other crate of
//! the workspace. Its [`version`] module is go-version's reading of the
//! `version` a plugin fingerprints with.

mod decode_error;
mod env;
mod error_text;
mod exit;
mod go_printable;
mod json;
mod operation;
mod quote;
mod response;
mod scan;
mod stdout_hint;
pub mod var;
pub mod version;

pub use decode_error::DecodeError;
pub use env::{
    CreateRequest, DeleteRequest, Parameters, encode_parameters, fingerprint_env,
    is_valid_volume_id,
};
pub use error_text::{
    create_error_text, delete_error_text, fingerprint_decode_error_text, fingerprint_error_text,
};
pub use exit::ExitReason;
pub use json::unmarshal_string_map;
pub use operation::{
    CREATE_TIMEOUT, DELETE_TIMEOUT, FINGERPRINT_TIMEOUT, Operation, ParseOperationError,
    RESTORE_TIMEOUT,
};
pub use quote::{go_quote, go_quote_bytes, is_go_printable};
pub use response::{
    CreateResponse, FingerprintResponse, decode_create, decode_error, decode_failure_error,
    decode_fingerprint, decode_fingerprint_with,
};
pub use stdout_hint::stdout_hint;

/// The contract version this crate implements: stable since Nomad 1.10.0.
pub const SPEC_VERSION: &str = "nomad-1.10";
