//! The JSON lines of `check --format json` (progress) and `check --list --format json`.
//!
//! They follow libtest's JSON events (`"type"`, `"event"`, `"name"`), so tools that
//! read `cargo test -- --format json` read them too, and add what libtest has no word
//! for: the check's level and status (`warn`, `info`), and `slow` events.

use serde::{Deserialize, Serialize};

use super::model::{Level, Status};

/// One line of progress output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Event {
    /// The suite as a whole.
    Suite(SuiteEvent),
    /// One check.
    Test(TestEvent),
}

/// The suite started or ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteEvent {
    /// `started`, then `ok` or `failed`.
    pub event: String,
    /// How many checks run (on `started`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_count: Option<usize>,
    /// The counts (on the end event), named as in the summary table.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counts: Option<SuiteCounts>,
}

/// The end-of-suite counts: the same numbers as the summary table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteCounts {
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks that warned.
    pub warned: usize,
    /// Checks that were skipped (libtest's `ignored`).
    pub ignored: usize,
    /// Measurements.
    pub info: usize,
    /// Always 0 (libtest's field).
    pub measured: usize,
    /// Catalogue checks the filter left out.
    pub filtered_out: usize,
    /// Wall time in seconds.
    pub exec_time: f64,
}

/// One check started, ended, or is slow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestEvent {
    /// `started`; `ok`, `failed` or `ignored` (libtest's words: a warning is `ok`
    /// unless `--strict`); or `slow`.
    pub event: String,
    /// The check id.
    pub name: String,
    /// The check's level (on the end event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// The exact status (on the end event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// The check's message (on the end event), or the operation in flight (`slow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Seconds since the check started (end and `slow` events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_time: Option<f64>,
}

/// One line of `check --list --format json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogueEntry {
    /// The stable check id.
    pub id: String,
    /// The group: the part of the id before the dot.
    pub group: String,
    /// must / should / info.
    pub level: Level,
    /// The rule, in one sentence.
    pub rule: String,
    /// What its question needs of the host (the run's plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<super::Needs>,
    /// When in a run it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<super::Phase>,
}
