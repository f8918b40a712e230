//! The checks, one small function per catalogue row, grouped as CONFORMANCE.md
//! groups them. Each reads like its rule: do the scenario through [`Ctx`], look
//! at what the plugin printed *and* at the disk, and return a [`Finding`].

mod concurrency;
mod create;
mod delete;
mod failure;
mod fingerprint;
mod input;
mod lifecycle;
mod process;
mod run_wide;

use super::context::{Ctx, Finding};

/// Runs the check `ctx.spec.id`. Aggregate checks get the whole run's calls.
pub(crate) async fn run(ctx: &Ctx) -> Finding {
    let result = match ctx.spec.id {
        "fingerprint.runs" => fingerprint::runs(ctx).await,
        "fingerprint.json" => fingerprint::json(ctx).await,
        "fingerprint.version" => fingerprint::version(ctx).await,
        "fingerprint.version-semver" => fingerprint::version_semver(ctx).await,
        "fingerprint.stable" => fingerprint::stable(ctx).await,
        "create.succeeds" => create::succeeds(ctx).await,
        "create.response" => create::response(ctx).await,
        "create.path-exists" => create::path_exists(ctx).await,
        "create.path-in-volumes-dir" => create::path_in_volumes_dir(ctx).await,
        "create.bytes-in-range" => create::bytes_in_range(ctx).await,
        "create.idempotent" => create::idempotent(ctx).await,
        "create.distinct" => create::distinct(ctx).await,
        "create.update" => create::update(ctx).await,
        "create.parameters" => create::parameters(ctx).await,
        "delete.succeeds" => delete::succeeds(ctx).await,
        "delete.removes" => delete::removes(ctx).await,
        "delete.idempotent" => delete::idempotent(ctx).await,
        "delete.never-created" => delete::never_created(ctx).await,
        "delete.isolated" => delete::isolated(ctx).await,
        "delete.no-residue" => delete::no_residue(ctx).await,
        "delete.auto-delete-safe" => delete::auto_delete_safe(ctx).await,
        "lifecycle.restore" => lifecycle::restore(ctx).await,
        "lifecycle.recreate" => lifecycle::recreate(ctx).await,
        "lifecycle.crash-create" => lifecycle::crash_create(ctx).await,
        "lifecycle.crash-delete" => lifecycle::crash_delete(ctx).await,
        "concurrency.create" => concurrency::create(ctx).await,
        "concurrency.delete" => concurrency::delete(ctx).await,
        "concurrency.same-volume" => concurrency::same_volume(ctx).await,
        "failure.unknown-operation" => failure::unknown_operation(ctx).await,
        "process.env-self-contained" => process::env_self_contained(ctx).await,
        "process.cwd-independent" => process::cwd_independent(ctx).await,
        "input.name-traversal" => input::name_traversal(ctx).await,
        "input.name-injection" => input::name_injection(ctx).await,
        "input.capacity-edge" => input::capacity_edge(ctx).await,
        "fingerprint.deadline" => run_wide::deadline(ctx, "fingerprint"),
        "create.deadline" => run_wide::deadline(ctx, "create"),
        "delete.deadline" => run_wide::deadline(ctx, "delete"),
        "failure.clean" => run_wide::failure_clean(ctx),
        "failure.error-json" => run_wide::error_json(ctx),
        "process.no-stdio-leak" => run_wide::no_stdio_leak(ctx),
        "process.no-orphans" => run_wide::no_orphans(ctx),
        "timing.margin" => run_wide::timing_margin(ctx),
        "timing.profile" => run_wide::timing_profile(ctx),
        _ => Err(Finding::Skip("not implemented".into())),
    };
    result.unwrap_or_else(|finding| finding)
}

/// A check's body returns its finding, or short-cuts with `?` on a finding
/// (a skip because a prerequisite failed, or the first failed step).
pub(crate) type CheckResult = Result<Finding, Finding>;

/// Text of a plugin's output for a message: trimmed, capped, control characters
/// escaped, `(empty)` when there is none.
pub(crate) fn shown(bytes: &[u8]) -> String {
    const CAP: usize = 300;
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return "(empty)".into();
    }
    let mut out: String = text
        .chars()
        .take(CAP)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if text.chars().count() > CAP {
        out.push('…');
    }
    format!("\"{out}\"")
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
    run_wide::profiles(&shared.log())
        .into_iter()
        .map(|p| crate::report::TimingProfile {
            operation: p.op.to_string(),
            count: p.count,
            p50_ms: ms(p.p50),
            p95_ms: ms(p.p95),
            max_ms: ms(p.max),
            limit_ms: ms(p.limit),
        })
        .collect()
}
