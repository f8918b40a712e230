//! `process.env-self-contained` and `process.cwd-independent`: a plugin gets
//! nothing from Nomad but the `DHV_*` variables, and runs from whatever directory
//! the agent happens to be in.

use std::os::unix::fs::PermissionsExt;

use super::CheckResult;
use crate::conformance::context::{Ctx, Finding, listing};
use crate::contract::DeleteRequest;
use crate::plugin::{ExternalPlugin, PluginRun};

/// The variables a shell session has and Nomad does not give: ours, or sane
/// defaults when we run without them ourselves.
fn harness_env() -> Vec<(String, String)> {
    let get = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.to_string());
    vec![
        (
            "PATH".into(),
            get(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            ),
        ),
        ("HOME".into(), get("HOME", "/root")),
        ("LANG".into(), get("LANG", "C.UTF-8")),
    ]
}

/// How one try of an operation went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tried {
    Works,
    Fails,
    /// Killed at its time limit: no environment variable explains that, and
    /// trying again would only wait as long once more.
    Hangs,
}

/// Tries `op` with `plugin` (one fresh volume for create and delete).
async fn try_op(ctx: &Ctx, plugin: &ExternalPlugin, op: &str) -> Tried {
    let judge = |run: &PluginRun, ok: bool| match (ok, run.timed_out()) {
        (true, _) => Tried::Works,
        (false, true) => Tried::Hangs,
        (false, false) => Tried::Fails,
    };
    if op == "fingerprint" {
        let (run, result) = plugin.fingerprint_run().await;
        return judge(&run, result.is_ok());
    }
    let req = ctx.request();
    let (run, result) = plugin.create_run(&req).await;
    let Ok(resp) = result else {
        return judge(&run, false);
    };
    let (del_run, deleted) = plugin
        .delete_run(&DeleteRequest::for_created(&req, &resp.path))
        .await;
    match op {
        "create" => Tried::Works,
        _ => judge(&del_run, deleted.is_ok()),
    }
}

/// Whether `op` succeeds for `plugin`.
async fn op_works(ctx: &Ctx, plugin: &ExternalPlugin, op: &str) -> bool {
    try_op(ctx, plugin, op).await == Tried::Works
}

/// `process.env-self-contained` (must): works with exactly Nomad's env; when it
/// does not, name the variables it silently depends on.
pub async fn env_self_contained(ctx: &Ctx) -> CheckResult {
    ctx.require_process()?;
    let Some(ext) = ctx.plugin.external() else {
        return Err(Finding::Skip("built-in plugin".into()));
    };
    let mut dependent = Vec::new();
    let mut broken: Vec<&str> = Vec::new();
    for op in ["fingerprint", "create", "delete"] {
        match try_op(ctx, ext, op).await {
            Tried::Works => continue,
            Tried::Hangs => {
                broken.push(op);
                continue;
            }
            Tried::Fails => {}
        }
        let full = harness_env();
        if !op_works(ctx, &ext.clone().with_extra_env(full.clone()), op).await {
            broken.push(op); // fails either way: not an environment problem
            continue;
        }
        let mut needed = Vec::new();
        for var in &full {
            if op_works(ctx, &ext.clone().with_extra_env(vec![var.clone()]), op).await {
                needed.push(var.0.clone());
            }
        }
        let names = if needed.is_empty() {
            "PATH, HOME and LANG together".to_string()
        } else {
            needed.join(" or ")
        };
        dependent.push(format!(
            "{op} fails under Nomad's environment but works with {names}"
        ));
    }
    if dependent.is_empty() && broken.len() == 3 {
        Err(Finding::Skip(
            "needs fingerprint.runs (nothing works, with or without PATH, HOME and LANG)".into(),
        ))
    } else if dependent.is_empty() && !broken.is_empty() {
        Ok(Finding::Pass(format!(
            "no operation depends on PATH, HOME or LANG ({} {} either way, for other reasons)",
            broken.join(" and "),
            if broken.len() == 1 {
                "fails or hangs"
            } else {
                "fail or hang"
            }
        )))
    } else if dependent.is_empty() {
        Ok(Finding::Pass("works with only the DHV_* variables".into()))
    } else {
        Err(Finding::Fail(format!(
            "expected the plugin to work with exactly Nomad's environment (only DHV_* variables: no PATH, \
             HOME or LANG); {}. Set what you need inside the plugin (e.g. PATH=/usr/sbin:/usr/bin:/sbin:/bin) \
             and use absolute interpreter paths in the #! line",
            dependent.join("; ")
        )))
    }
}

/// `process.cwd-independent` (should): works from a read-only, unrelated
/// directory and writes nothing there.
pub async fn cwd_independent(ctx: &Ctx) -> CheckResult {
    ctx.require_process()?;
    ctx.require_create().await?;
    let Some(ext) = ctx.plugin.external() else {
        return Err(Finding::Skip("built-in plugin".into()));
    };
    let cwd = ctx.dir.join("unrelated-cwd");
    std::fs::create_dir_all(&cwd)
        .map_err(|e| Finding::Skip(format!("cannot make a working dir: {e}")))?;
    let _ = std::fs::set_permissions(&cwd, std::fs::Permissions::from_mode(0o555));
    let elsewhere = ext.clone().with_cwd(&cwd);
    let mut problems = Vec::new();
    for op in ["fingerprint", "create", "delete"] {
        // Only a failure that the working directory causes counts here.
        if !op_works(ctx, &elsewhere, op).await && op_works(ctx, ext, op).await {
            problems.push(format!(
                "{op} failed there (it works from the harness's own directory)"
            ));
        }
    }
    let written = listing(&cwd);
    let _ = std::fs::set_permissions(&cwd, std::fs::Permissions::from_mode(0o755));
    if !written.is_empty() {
        problems.push(format!(
            "it wrote into its working directory: {}",
            written.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(Finding::Pass(
            "works from a read-only unrelated directory, writes nothing there".into(),
        ))
    } else {
        Err(Finding::Fail(format!(
            "expected the plugin to work from an unrelated read-only working directory (Nomad's agent \
             often runs in /) and write nothing there; {}",
            problems.join("; ")
        )))
    }
}
