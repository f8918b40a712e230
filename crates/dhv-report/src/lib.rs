//! Reports of `dhv-conform`: the result model, its schema and every form it is
//! rendered in. What a program that reads or writes reports depends on; with
//! default features off (no `files`), it needs neither tokio nor nix.
//!
//! One run, many readers: a person at a terminal, a CI gate reading JUnit, a PR comment
//! in Markdown, a script reading JSON, and a stored snapshot that turns any change of
//! behaviour into a diff. They all render the same [`Report`], which is why this module
//! owns the serde schema types and depends on no other crate of the workspace but
//! `dhv-contract` (and, for files, `dhv-host`): the engine fills
//! the model, and the renderers cannot disagree about what happened.
//!
//! Redaction of machine-specific text (paths, ids, durations, pids) is declared once, in
//! [`Redactions`], and used by the snapshot, by `--snapshot` and by insta tests alike.

mod commands;
mod escape;
mod events;
pub mod fleet;
mod formats;
mod html;
mod human;
mod invocation;
mod json;
mod judgement;
mod junit;
mod markdown;
mod model;
mod redact;
mod requests;
#[cfg(test)]
mod sample;
mod sandbox;
mod snapshot;

pub use commands::{
    CreateOutput, PluginsOutput, RestoreListOutput, RestoreOutput, RunOutput, VolumeDeleteOutput,
    VolumeListOutput, VolumeOutput,
};
pub use escape::{printable, printable_bytes, printable_line};
pub use events::{CatalogueEntry, Event, SuiteCounts, SuiteEvent, TestEvent};
pub use formats::{FORMATS, Format};
pub use html::{to_fleet_html, to_html};
pub use human::{summary_table, summary_table_noted};
pub use json::{from_json, to_json};
pub use junit::to_junit;
pub use markdown::to_markdown;
pub use model::{
    CheckResult, ConfigInfo, DEFAULT_EXCERPT_CAP, Invocation, Level, Needs, NodeInfo, Phase,
    PluginChanged, PluginInfo, Report, RequestOutcome, RunConditions, RunOptions, SCHEMA, Shown,
    SpaceLimited, Status, Summary, TOOL_NAME, TimingProfile, ToolInfo, Verdict, VersionInfo,
    excerpt,
};
pub use redact::Redactions;
pub use requests::merge_requests;
pub use sandbox::SandboxOutcome;
pub use snapshot::{
    MAX_SNAPSHOT_BYTES, Normalised, Pending, SnapshotError, SnapshotOutcome, changes,
    compare_stored, diff, harness_of, normalise, normalise_older, pending_path, pin_as_stored,
    same_results,
};
#[cfg(feature = "files")]
pub use snapshot::{accept, bless, compare, find_pending, reject, write_pending};
