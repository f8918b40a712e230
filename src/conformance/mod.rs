//! The conformance engine: the catalogue of checks (docs/checks.md), the
//! sandboxes they run in, the checks themselves, and the engine that runs them
//! as libtest-mimic trials and builds the report.
//!
//! A check never spawns a process itself: it drives the plugin through the
//! plugin layer, and judges by what is on disk and in the process table as
//! well as by what the plugin prints. Both go through the run's one
//! [`host::Host`]: the plugin layer's calls run through the host's
//! transport, and a check looks at disks, mounts and loop devices through
//! `ctx.host()` (see [`host`] for where the line to `safe_fs`'s own-file
//! handling and the teardown is).

pub mod catalogue;
mod checks;
pub mod claims;
mod context;
mod engine;
mod engine_trial;
mod evidence;
pub mod explore;
pub mod fixture;
pub mod host;
mod interrupt;
mod leftovers;
mod live;
mod node_model;
mod progress;
mod space;
mod teardown;
mod verdict;
pub(crate) mod volume_facts;

pub use crate::plugin::PluginSource as Target;
pub use catalogue::{CATALOGUE, CheckSpec};
#[cfg(test)]
pub(crate) use checks::process::INTERFERED_SKIP;
pub use claims::{Attachment, Claims, Effect, ParameterClaim};
pub use context::{RequestTemplate, Settings};
pub use engine::{EngineError, SuiteOptions, SuiteOutcome, run_suite, selected};
pub(crate) use engine::{plugin_changed, run_suite_with};
pub(crate) use evidence::call_report;
pub(crate) use interrupt::{Signals, Trigger};
pub use leftovers::{Cleaned, Found, Left, OWNER_FILE, clean_leftovers, clean_leftovers_in};
pub use progress::{InFlight, Progress, ProgressEvent};
pub(crate) use teardown::remove_unheld;
pub use teardown::{TEARDOWN_DEADLINE, Teardown};
