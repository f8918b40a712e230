//! How `process.env-self-contained` and `process.cwd-independent` try an
//! operation: made with one environment or from one directory, then another
//! when it fails, and what the tries of every operation come to.

use std::path::PathBuf;

use super::{FindingResult, fingerprint, needs};
use crate::conformance::context::{Ctx, Expect, Finding, Variant};
use crate::contract::{DeleteRequest, Operation};

/// The variables a shell session has and Nomad does not give: ours, or sane
/// defaults when we run without them ourselves.
pub(super) fn harness_env() -> Vec<(String, String)> {
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
pub(super) enum Tried {
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
pub(super) async fn try_settled(
    ctx: &Ctx,
    plugin: &Variant<'_>,
    op: Operation,
    how: &str,
) -> Result<Tried, Finding> {
    match try_op(ctx, plugin, op, Expect::Either, how).await {
        // It overruns alone anyway: the deadline check reports that.
        Tried::Hangs if ctx.prereqs().failed_prerequisite(op).await.is_some() => Ok(Tried::Hangs),
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

/// What one operation showed of the environment it needs.
pub(super) enum EnvNeed {
    /// It works with Nomad's environment.
    Works,
    /// Not made: the create before it failed.
    Unmade,
    /// It fails or hangs with or without PATH, HOME and LANG (or its
    /// prerequisite's check reports why).
    Broken,
    /// It fails with Nomad's environment and works with these variables.
    Depends(String),
}

/// Tries `op` with Nomad's environment; when it fails, with PATH, HOME and
/// LANG, then with each alone, to name what it depends on.
pub(super) async fn env_need(
    ctx: &Ctx,
    nomads: &Variant<'_>,
    op: Operation,
) -> Result<EnvNeed, Finding> {
    // A failure here is diagnosed below, not taken as such; a timeout is
    // re-run alone first (inconclusive when it times out alone too).
    match try_settled(ctx, nomads, op, "with Nomad's environment").await? {
        Tried::Works => return Ok(EnvNeed::Works),
        Tried::Unmade => return Ok(EnvNeed::Unmade),
        Tried::Hangs => return Ok(EnvNeed::Broken), // its prerequisite's check reports it
        Tried::Fails => {}
    }
    let full = harness_env();
    let with_all = ctx.variant(|o| o.extra_env = full.clone());
    let tried = try_settled(ctx, &with_all, op, "with PATH, HOME and LANG").await?;
    if tried == Tried::Unmade {
        return Ok(EnvNeed::Unmade);
    }
    if tried != Tried::Works {
        return Ok(EnvNeed::Broken); // fails either way: not an environment problem
    }
    let mut needed = Vec::new();
    for var in &full {
        let with_one = ctx.variant(|o| o.extra_env = vec![var.clone()]);
        let how = format!("with {}", var.0);
        if try_settled(ctx, &with_one, op, &how).await? == Tried::Works {
            needed.push(var.0.clone());
        }
    }
    Ok(EnvNeed::Depends(if needed.is_empty() {
        "PATH, HOME and LANG together".to_string()
    } else {
        needed.join(" or ")
    }))
}

/// What the operations showed of the environment, in their order.
#[derive(Default)]
pub(super) struct EnvFindings {
    /// One line per operation that depends on a variable.
    pub dependent: Vec<String>,
    /// The operations that fail or hang either way.
    pub broken: Vec<&'static str>,
    /// The operations not made.
    pub unmade: Vec<&'static str>,
}

impl EnvFindings {
    /// `process.env-self-contained`'s verdict.
    pub fn verdict(&self) -> FindingResult {
        let (dependent, broken, unmade) = (&self.dependent, &self.broken, &self.unmade);
        let not_compared = match unmade.is_empty() {
            true => String::new(),
            false => format!(
                "; not compared: {} (the create it needs failed)",
                unmade.join(", ")
            ),
        };
        if dependent.is_empty() && broken.len() + unmade.len() == 3 && !broken.is_empty() {
            Err(Finding::Skip(format!(
                "{} (nothing works, with or without PATH, HOME and LANG)",
                needs(&fingerprint::RUNS)
            )))
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
}

/// Makes the unrelated working dir, read-only to a plugin that runs as
/// anyone but root.
pub(super) fn read_only_cwd(ctx: &Ctx) -> Result<PathBuf, Finding> {
    let cwd = ctx
        .dirs()
        .make_dirs(std::path::Path::new("unrelated-cwd"))
        .map_err(|e| Finding::Skip(format!("cannot make a working dir: {e}")))?;
    // Root writes through the mode bits, so a harness that is not root
    // leaves the dir writable: then a plugin that writes there and ignores a
    // failure leaves the same file, and is judged the same, as under a root
    // harness.
    let mode = match ctx.host().privileged() {
        true => 0o555,
        false => 0o755,
    };
    let _ = ctx.host().set_mode(&unrelated_cwd(ctx)?, mode);
    Ok(cwd)
}

/// The unrelated working dir through the harness's descriptor (see
/// [`Dirs::make_dirs_through_fd`](crate::conformance::context::Dirs::make_dirs_through_fd)):
/// where its mode is set, whatever a plugin mounted over its path.
pub(super) fn unrelated_cwd(ctx: &Ctx) -> Result<PathBuf, Finding> {
    ctx.dirs()
        .make_dirs_through_fd(std::path::Path::new("unrelated-cwd"))
        .map_err(|e| Finding::Skip(format!("cannot make a working dir: {e}")))
}

/// Tries `op` from the unrelated dir (`elsewhere`) and, when it fails
/// there, from the harness's own (`here`): the problem, when only the
/// unrelated dir makes it fail.
pub(super) async fn cwd_problem(
    ctx: &Ctx,
    elsewhere: &Variant<'_>,
    here: &Variant<'_>,
    op: Operation,
) -> Result<Option<String>, Finding> {
    // Either, then judged here: only a failure that the working directory
    // causes is this check's diagnosis, and a timeout proves nothing until
    // a re-run alone repeats it.
    let there = try_settled(ctx, elsewhere, op, "from an unrelated read-only dir").await?;
    if there == Tried::Works {
        return Ok(None);
    }
    if there == Tried::Unmade {
        // The create before the delete failed there: create's comparison.
        return Ok(None);
    }
    let home = try_settled(ctx, here, op, "from the harness's own dir").await?;
    if home == Tried::Works {
        return Ok(Some(format!(
            "{op} failed there (it works from the harness's own directory)"
        )));
    }
    // Fails from both dirs: not the working dir's doing, but still a
    // call that did not do what was expected.
    ctx.calls().note(
        &format!("{op} from an unrelated read-only dir"),
        op.as_str(),
        Expect::Success,
        Some("it fails from the harness's own directory too".into()),
    );
    Ok(None)
}

/// What the operations showed of the working directory.
#[derive(Default)]
pub(super) struct CwdFindings {
    /// What the unrelated dir made go wrong.
    pub problems: Vec<String>,
    /// The operations not compared, and the prerequisite each needs.
    pub excused: Vec<String>,
}

impl CwdFindings {
    /// `process.cwd-independent`'s verdict.
    pub fn verdict(&self) -> FindingResult {
        let (problems, excused) = (&self.problems, &self.excused);
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
}
