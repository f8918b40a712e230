//! How a check's finding becomes its result: the level applied (a failed
//! should is a warning), the calls behind it attached as the report's
//! evidence, and the verdict libtest shows for it. Apart from the engine,
//! which only schedules the checks.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use libtest_mimic::{Completion, Failed};

use super::catalogue::CheckSpec;
use super::context::Finding;
use super::evidence;
use crate::plugin::{PluginRun, Timeouts};
use crate::report::{CheckResult, Level, Status};

/// Applies the level: a failed should is a warning; a must never warns (it
/// passes, fails or is skipped) and cannot be info.
pub(super) fn to_result(
    spec: &CheckSpec,
    finding: Finding,
    elapsed: Duration,
    runs: &[PluginRun],
    in_flight: &HashMap<Instant, usize>,
    limits: &Timeouts,
    run_start: Instant,
) -> CheckResult {
    let (status, message) = match finding {
        Finding::Pass(m) => (Status::Pass, m),
        Finding::Fail(m) if spec.level == Level::Should => (Status::Warn, m),
        Finding::Fail(m) => (Status::Fail, m),
        // A must ends pass, fail or skip: whatever its rule finds broken
        // breaks a must.
        Finding::Warn(m) if spec.level == Level::Must => (Status::Fail, m),
        Finding::Warn(m) => (Status::Warn, m),
        Finding::Skip(m) => (Status::Skip, m),
        Finding::Info(m) => (Status::Info, m),
    };
    CheckResult {
        id: spec.id.to_string(),
        group: spec.group().to_string(),
        level: spec.level,
        status,
        message,
        duration_ms: elapsed.as_millis() as u64,
        invocations: evidence::invocations(runs, status, in_flight, limits, run_start),
        unpinned: None,
        needs: Some(spec.needs),
        phase: Some(spec.phase()),
    }
}

/// How libtest shows a result: warnings pass unless `--strict`; skips are
/// "ignored" with their reason.
pub(super) fn libtest_verdict(result: &CheckResult, strict: bool) -> Result<Completion, Failed> {
    match result.status {
        Status::Pass | Status::Info => Ok(Completion::Completed),
        Status::Warn if !strict => Ok(Completion::Completed),
        Status::Skip => Ok(Completion::ignored_with(&result.message)),
        Status::Warn | Status::Fail => Err(Failed::from(result.message.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::checks::{create, delete};

    fn status_of(spec: &CheckSpec, finding: Finding) -> Status {
        let limits = Timeouts::default();
        let result = to_result(
            spec,
            finding,
            Duration::ZERO,
            &[],
            &HashMap::new(),
            &limits,
            Instant::now(),
        );
        result.status
    }

    #[test]
    fn a_must_never_warns_and_a_should_fails_as_a_warning() {
        let warn = || Finding::Warn("a finding".into());
        let fail = || Finding::Fail("a finding".into());
        assert_eq!(create::IDEMPOTENT.level, Level::Must);
        assert_eq!(status_of(&create::IDEMPOTENT, warn()), Status::Fail);
        assert_eq!(status_of(&create::IDEMPOTENT, fail()), Status::Fail);
        assert_eq!(delete::NO_RESIDUE.level, Level::Should);
        assert_eq!(status_of(&delete::NO_RESIDUE, warn()), Status::Warn);
        assert_eq!(status_of(&delete::NO_RESIDUE, fail()), Status::Warn);
    }
}
