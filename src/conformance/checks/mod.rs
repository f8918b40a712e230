//! The checks, grouped as docs/checks.md groups them: a file per group (and a
//! file of its own for a check that would make its group's file too long,
//! which its group's file lists; what two files of a group share is in a
//! third, so that neither imports the other back).
//! Each check is defined once, next to its function: a [`CheckSpec`] constant
//! with its id, level, rule, the prose `explain` prints and the function that
//! runs it. The group's `CHECKS` lists them in catalogue order; the catalogue,
//! `explain`, `check --list` and docs/checks.md are built from those lists.
//! Each function reads like its rule: do the scenario through [`Ctx`], look at
//! what the plugin printed *and* at the disk, and return a [`Finding`].

/// A scenario check's `run`: its function, boxed to one signature, and named.
macro_rules! scenario {
    ($f:ident) => {
        $crate::conformance::checks::CheckFn::Scenario(|ctx| Box::pin($f(ctx)), stringify!($f))
    };
}

/// A run-wide check's `run`: its function, named.
macro_rules! run_wide {
    ($f:ident) => {
        $crate::conformance::checks::CheckFn::RunWide($f, stringify!($f))
    };
}

mod company;
pub(crate) mod concurrency;
mod concurrency_same_volume;
mod crash_plan;
pub(crate) mod create;
mod create_update;
mod deadline;
pub(crate) mod delete;
mod delete_auto;
mod delete_held;
mod delete_in_use;
pub(crate) mod failure;
pub(crate) mod fingerprint;
pub(crate) mod history;
mod history_link;
mod history_state;
mod in_the_way;
pub(crate) mod input;
mod input_space;
mod input_space_refused;
mod input_surroundings;
pub(crate) mod lifecycle;
mod lifecycle_reboot;
mod lifecycle_stale_loop;
mod node_residue;
pub(crate) mod process;
mod process_tries;
mod refused;
mod spec;
pub(crate) mod storage;
pub(crate) mod timing;
pub(crate) mod volume;
mod volume_measured;
mod volume_parameters;

pub(crate) use super::context::shown;
use super::context::{Ctx, Finding, ProbeOwners, RunLog};
use crate::plugin::BoxFuture;
pub(crate) use crate::report::{Level, Needs};
pub use spec::CheckSpec;

/// A check that runs its own scenario in its sandbox.
pub(crate) type ScenarioFn = for<'a> fn(&'a Ctx) -> BoxFuture<'a, FindingResult>;

/// A check judged over the run's call log, once every scenario has finished.
pub(crate) type RunWideFn = fn(&RunLog) -> FindingResult;

/// What a check runs, and the function's name (which a test holds to the id).
#[derive(Clone, Copy)]
pub(crate) enum CheckFn {
    /// Its own scenario, in parallel with the others.
    Scenario(ScenarioFn, &'static str),
    /// A judgement over every call of the run.
    RunWide(RunWideFn, &'static str),
}

impl CheckFn {
    /// The name of the function that implements the check.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn name(&self) -> &'static str {
        match self {
            CheckFn::Scenario(_, name) | CheckFn::RunWide(_, name) => name,
        }
    }
}

impl std::fmt::Debug for CheckFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckFn::Scenario(..) => "Scenario",
            CheckFn::RunWide(..) => "RunWide",
        })
    }
}

/// The checks whose rules the run's probes answer (see [`ProbeOwners`]).
pub(crate) const PROBE_OWNERS: ProbeOwners = ProbeOwners {
    fingerprint: fingerprint::RUNS.asker(),
    create: create::SUCCEEDS.asker(),
    delete: delete::SUCCEEDS.asker(),
    again: create::IDEMPOTENT.asker(),
    distinct: create::DISTINCT.asker(),
    timing: timing::MARGIN.asker(),
};

/// The owner of one cause met by every check that makes calls at once
/// (creates failing when two overlap): see [`company`]. Named here, where the
/// group's checks are gathered, so that `company` imports none of them.
pub(crate) const COMPANY_OWNER: &CheckSpec = &concurrency::CREATE;

/// The checks that others wait for (see [`company`], and the histories,
/// which cite `create.update`'s lost data): each runs first in its phase.
pub(crate) const AWAITED: &[CheckSpec] = &[*COMPANY_OWNER, create_update::UPDATE];

/// The skip of a check that builds on `check`, which did not pass.
pub(crate) fn needs(check: &CheckSpec) -> String {
    format!("needs {}", check.id)
}

/// The skip of a check whose test area (a dir of its sandbox) could not be made.
pub(crate) fn unprepared(e: std::io::Error) -> Finding {
    Finding::Skip(format!("cannot prepare the test area: {e}"))
}

/// A check's body returns its finding, or short-cuts with `?` on a finding
/// (a skip because a prerequisite failed, or the first failed step).
pub(crate) type FindingResult = Result<Finding, Finding>;

/// What the plugin printed, diagnosed ("text before the JSON on stdout — logs
/// belong on stderr (first line: …)"), ready to lead a message; empty when the
/// shape of the output is not the problem.
pub(crate) fn hint_prefix(stdout: &[u8]) -> String {
    crate::contract::stdout_hint(stdout)
        .map(|hint| format!("{hint}; "))
        .unwrap_or_default()
}

/// Awaits futures concurrently, keeping their order (no extra dependency for it).
pub(crate) async fn join_all<F: std::future::Future>(
    futs: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let futs: Vec<_> = futs.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    let mut pending: Vec<(usize, std::pin::Pin<Box<F>>)> = futs.into_iter().enumerate().collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|(i, f)| match f.as_mut().poll(cx) {
            std::task::Poll::Ready(out) => {
                outputs[*i] = Some(out);
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}

/// The timing profile of every operation over the run, for the report.
pub(crate) fn timing_profiles(
    shared: &super::context::Shared,
) -> Vec<crate::report::TimingProfile> {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let calls = shared.log.calls();
    timing::profiles(&calls)
        .into_iter()
        .map(|p| {
            let mut alone_ms: Vec<f64> = calls
                .iter()
                .filter(|c| c.op == p.op && c.phase.alone())
                .map(|c| ms(c.duration))
                .collect();
            alone_ms.sort_by(f64::total_cmp);
            crate::report::TimingProfile {
                operation: p.op.to_string(),
                count: p.count,
                p50_ms: ms(p.p50),
                p95_ms: ms(p.p95),
                max_ms: ms(p.max),
                limit_ms: ms(p.limit),
                alone_ms,
            }
        })
        .collect()
}
