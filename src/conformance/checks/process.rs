//! `process.env-self-contained` and `process.cwd-independent`: a plugin gets
//! nothing from Nomad but the `DHV_*` variables, and runs from whatever directory
//! the agent happens to be in.

use std::os::unix::fs::PermissionsExt;

use super::CheckResult;
use crate::conformance::context::{Ctx, Expect, Finding, Variant, listing};
use crate::contract::{DeleteRequest, Operation};

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
    /// Not made: the create a delete needs failed first (nothing is said of
    /// a delete that was never sent).
    Unmade,
}

/// Tries `op` with `plugin` (one fresh volume for create and delete). The
/// call of `op` itself is made with `expect`; the create before a delete and
/// the delete after a create are steps that must succeed.
async fn try_op(
    ctx: &Ctx,
    plugin: &Variant<'_>,
    op: Operation,
    expect: Expect,
    how: &str,
) -> Tried {
    let judge = |call_ok: bool, timed_out: bool| match (call_ok, timed_out) {
        (true, _) => Tried::Works,
        (false, true) => Tried::Hangs,
        (false, false) => Tried::Fails,
    };
    if op == Operation::Fingerprint {
        let call = plugin
            .fingerprint(expect, &format!("fingerprint {how}"))
            .await;
        return judge(call.ok(), call.timed_out());
    }
    let req = ctx.request();
    let create_expect = if op == Operation::Create {
        expect
    } else {
        Expect::Success
    };
    let call = plugin
        .create(&req, create_expect, &format!("create {how}"))
        .await;
    let Ok(resp) = &call.result else {
        return match op {
            Operation::Delete => Tried::Unmade,
            _ => judge(false, call.timed_out()),
        };
    };
    let delete_expect = if op == Operation::Delete {
        expect
    } else {
        Expect::Success
    };
    let deleted = plugin
        .delete(
            &DeleteRequest::for_created(&req, &resp.path),
            delete_expect,
            &format!("delete {how}"),
        )
        .await;
    match op {
        Operation::Delete => judge(deleted.ok(), deleted.timed_out()),
        _ => Tried::Works,
    }
}

/// Tries `op` (either outcome expected); a try that timed out is re-run
/// alone, and one that times out alone too makes the comparison
/// inconclusive (a skip that says so, not a diagnosis).
async fn try_settled(
    ctx: &Ctx,
    plugin: &Variant<'_>,
    op: Operation,
    how: &str,
) -> Result<Tried, Finding> {
    match try_op(ctx, plugin, op, Expect::Either, how).await {
        // It overruns alone anyway: the deadline check reports that.
        Tried::Hangs if ctx.failed_prerequisite(op).await.is_some() => Ok(Tried::Hangs),
        Tried::Hangs => {
            let again = &format!("{how}, re-run alone after a timeout");
            match try_op(ctx, &plugin.alone(), op, Expect::Either, again).await {
                Tried::Hangs => Err(Finding::Skip(format!(
                    "inconclusive: {op} {how} timed out alone too"
                ))),
                tried => Ok(tried),
            }
        }
        tried => Ok(tried),
    }
}

/// `process.env-self-contained` (must): works with exactly Nomad's env; when it
/// does not, name the variables it silently depends on.
pub async fn env_self_contained(ctx: &Ctx) -> CheckResult {
    ctx.require_process()?;
    let nomads = ctx.variant(|_| {});
    let mut dependent = Vec::new();
    let mut broken: Vec<&str> = Vec::new();
    let mut unmade: Vec<&str> = Vec::new();
    for op in Operation::ALL {
        let op_name = op.as_str();
        // A failure here is diagnosed below, not taken as such; a timeout is
        // re-run alone first (inconclusive when it times out alone too).
        match try_settled(ctx, &nomads, op, "with Nomad's environment").await? {
            Tried::Works => continue,
            Tried::Unmade => {
                unmade.push(op_name);
                continue;
            }
            Tried::Hangs => {
                broken.push(op_name); // its prerequisite's check reports it
                continue;
            }
            Tried::Fails => {}
        }
        let full = harness_env();
        let with_all = ctx.variant(|o| o.extra_env = full.clone());
        let tried = try_settled(ctx, &with_all, op, "with PATH, HOME and LANG").await?;
        if tried == Tried::Unmade {
            unmade.push(op_name);
            continue;
        }
        if tried != Tried::Works {
            broken.push(op_name); // fails either way: not an environment problem
            continue;
        }
        let mut needed = Vec::new();
        for var in &full {
            let with_one = ctx.variant(|o| o.extra_env = vec![var.clone()]);
            let how = format!("with {}", var.0);
            if try_settled(ctx, &with_one, op, &how).await? == Tried::Works {
                needed.push(var.0.clone());
            }
        }
        let names = if needed.is_empty() {
            "PATH, HOME and LANG together".to_string()
        } else {
            needed.join(" or ")
        };
        dependent.push(format!(
            "{op_name} fails under Nomad's environment but works with {names}"
        ));
    }
    let not_compared = match unmade.is_empty() {
        true => String::new(),
        false => format!(
            "; not compared: {} (the create it needs failed)",
            unmade.join(", ")
        ),
    };
    if dependent.is_empty() && broken.len() + unmade.len() == 3 && !broken.is_empty() {
        Err(Finding::Skip(
            "needs fingerprint.runs (nothing works, with or without PATH, HOME and LANG)".into(),
        ))
    } else if dependent.is_empty() && !broken.is_empty() {
        Ok(Finding::Pass(format!(
            "no operation depends on PATH, HOME or LANG ({} {} either way, for other reasons){not_compared}",
            broken.join(" and "),
            if broken.len() == 1 {
                "fails or hangs"
            } else {
                "fail or hang"
            }
        )))
    } else if dependent.is_empty() {
        Ok(Finding::Pass(format!(
            "works with only the DHV_* variables{not_compared}"
        )))
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
    let cwd = ctx
        .sandbox
        .make_dirs(std::path::Path::new("unrelated-cwd"))
        .map_err(|e| Finding::Skip(format!("cannot make a working dir: {e}")))?;
    let _ = std::fs::set_permissions(&cwd, std::fs::Permissions::from_mode(0o555));
    let elsewhere = ctx.variant(|o| o.cwd = Some(cwd.clone()));
    let here = ctx.variant(|_| {});
    let mut problems = Vec::new();
    let mut excused = Vec::new();
    for op in Operation::ALL {
        if let Some(needs) = ctx.failed_prerequisite(op).await {
            // Fails for a reason another check reports: no comparison to make.
            excused.push(format!("{op} ({needs})"));
            continue;
        }
        // Either, then judged here: only a failure that the working directory
        // causes is this check's diagnosis, and a timeout proves nothing until
        // a re-run alone repeats it.
        let there = try_settled(ctx, &elsewhere, op, "from an unrelated read-only dir").await?;
        if there == Tried::Works {
            continue;
        }
        if there == Tried::Unmade {
            // The create before the delete failed there: create's comparison.
            continue;
        }
        let home = try_settled(ctx, &here, op, "from the harness's own dir").await?;
        if home == Tried::Works {
            problems.push(format!(
                "{op} failed there (it works from the harness's own directory)"
            ));
        } else {
            // Fails from both dirs: not the working dir's doing, but still a
            // call that did not do what was expected.
            ctx.note(
                &format!("{op} from an unrelated read-only dir"),
                op.as_str(),
                Expect::Success,
                Some("it fails from the harness's own directory too".into()),
            );
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
    if problems.is_empty() && excused.is_empty() {
        Ok(Finding::Pass(
            "works from a read-only unrelated directory, writes nothing there".into(),
        ))
    } else if problems.is_empty() {
        Ok(Finding::Pass(format!(
            "works from a read-only unrelated directory, writes nothing there; not compared: {}",
            excused.join(", ")
        )))
    } else {
        Err(Finding::Fail(format!(
            "expected the plugin to work from an unrelated read-only working directory (Nomad's agent \
             often runs in /) and write nothing there; {}",
            problems.join("; ")
        )))
    }
}
