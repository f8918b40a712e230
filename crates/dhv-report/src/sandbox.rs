//! What the end of a run did with its temp dir, as the report tells it: a
//! run that could not remove its temp dir (a mount a plugin left, that could
//! not be unmounted) says so, and names what a plugin's deletes left mounted.

use serde::{Deserialize, Serialize};

/// The run's temp dir after the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxOutcome {
    /// The temp dir and everything in it is gone.
    pub removed: bool,
    /// Mounts found below the temp dir after the plugin's deletes had run:
    /// each one a delete left behind. The harness unmounted them (or, when it
    /// could not, they are in `kept`).
    pub mounts_left: Vec<String>,
    /// Loop devices found attached to files below the temp dir after the
    /// plugin's deletes had run, each `device (backing file path)`: a delete
    /// left each one behind. The harness detached them (or, when it could
    /// not, they are in `kept`). Absent in reports written before the field
    /// existed.
    #[serde(default)]
    pub loops_left: Vec<String>,
    /// What is still there and why: mounts that could not be unmounted,
    /// mount points the removal did not cross, entries it could not remove.
    pub kept: Vec<String>,
}
