//! The conformance engine: the catalogue of checks (docs/checks.md), the
//! sandboxes they run in, the checks themselves, and the engine that runs them
//! as libtest-mimic trials and builds the report.
//!
//! A check never spawns a process itself: it drives the plugin through the
//! plugin layer (and so the runner), and judges by what is on disk and in the
//! process table as well as by what the plugin prints.

pub mod catalogue;
mod checks;
pub mod claims;
mod context;
mod engine;
mod engine_trial;
mod evidence;
pub mod fixture;
mod interrupt;
mod leftovers;
mod live;
mod progress;
mod teardown;
mod verdict;
pub(crate) mod volume_facts;

pub use crate::plugin::PluginSource as Target;
pub use catalogue::{CATALOGUE, CheckSpec};
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
