//! The fleet report: many nodes' conformance reports merged into one matrix.
//!
//! A plugin can conform on one node and not on another (a missing `mkfs.ext4`, another
//! kernel, a full disk, another build of the plugin), so a fleet gate runs the suite on
//! every node and reads the results side by side: checks × nodes, the nodes grouped by
//! plugin build, the non-conformant ones first with what failed and how to repeat it.
//!
//! Reports are read one at a time (`read_report`, on a few threads in
//! `merge_files`, both of the `files` feature; [`parse_report`] from bytes)
//! and folded into a [`Merger`], which keeps one status per check and
//! node and the text of the checks that did not pass, never a whole report: memory
//! follows the size of the matrix, not of the reports.
//! [`to_fleet_json`], [`to_fleet_markdown`] and [`to_fleet_junit`] render the result.

mod json;
mod junit;
#[cfg(feature = "files")]
mod load;
mod markdown;
mod merge;
mod model;
mod read;
#[cfg(test)]
mod sample;

use std::path::PathBuf;

pub use json::{from_fleet_json, to_fleet_json};
pub use junit::to_fleet_junit;
#[cfg(feature = "files")]
pub use load::merge_files;
pub use markdown::to_fleet_markdown;
pub use merge::Merger;
pub use model::{
    Build, FLEET_SCHEMA, FleetCheck, FleetNode, FleetReport, FleetSummary, Problem, StatusCounts,
};
#[cfg(feature = "files")]
pub use read::read_report;
pub use read::{CheckCell, NodeReport, expand_inputs, parse_report};

/// Why a set of node reports cannot be merged; each names the file (or node) at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// A file or directory could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON, or not shaped like a `dhv-conform/report/v1` report.
    #[error("{}: not a dhv-conform report", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and why parsing stopped.
        #[source]
        source: serde_json::Error,
    },
    /// The file is a JSON document of another schema (or another version of this one).
    #[error(
        "{}: schema {found:?} is not {}",
        path.display(),
        crate::SCHEMA
    )]
    Schema {
        /// The file.
        path: PathBuf,
        /// The schema it names.
        found: String,
    },
    /// A directory given as input holds no `*.json` file: a collection step went wrong,
    /// and a gate must not pass on zero nodes.
    #[error("{}: no *.json report in this directory", dir.display())]
    EmptyDir {
        /// The directory.
        dir: PathBuf,
    },
    /// Two reports claim the same node and plugin, so one of them would hide the other.
    #[error(
        "node {node:?} has two reports for plugin {plugin:?}: {} and {} (give each node its own --node-name, or merge one report per node)",
        first.display(),
        second.display()
    )]
    Duplicate {
        /// The node name both reports give.
        node: String,
        /// The plugin both reports are for.
        plugin: String,
        /// The file read first.
        first: PathBuf,
        /// The file read second.
        second: PathBuf,
    },
}
