//! `failure.*`: how a plugin fails. `failure.unknown-operation` (Nomad may
//! add operations; a plugin must refuse what it does not know, and change
//! nothing) is a scenario; `failure.clean` and `failure.error-json` judge
//! every failed call of the run, including a failure the suite provokes on
//! purpose, so every plugin's failure path is judged.

use std::collections::BTreeSet;
use std::path::Path;

use super::{CheckResult, CheckSpec, Level, shown};
use crate::conformance::context::{
    Ctx, Expect, Finding, LoggedCall, RunLog, is_mount_point, is_provoked, listing,
};

/// What the failure provoked on purpose is (made in the timing phase, when
/// create works and does not hang), in the words of the messages.
const PROVOKED: &str = "its volumes dir lies under a regular file";
use crate::contract::{self, Operation, var};

/// The operation name sent; no Nomad version uses it.
const UNKNOWN_OP: &str = "dhv-conform-unknown-operation";

/// The `failure.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[CLEAN, ERROR_JSON, UNKNOWN_OPERATION, MOUNT_REFUSED];

pub(crate) const UNKNOWN_OPERATION: CheckSpec = CheckSpec {
    id: "failure.unknown-operation",
    level: Level::Should,
    rule: "`PLUGIN <unknown op>` exits non-zero and changes nothing",
    why: "A future Nomad may send operations this plugin does not know; answering them with success, or acting on them, would mislead it.",
    fix: "Exit non-zero for any operation other than fingerprint, create and delete, and change nothing.",
    samples: &[],
    run: scenario!(unknown_operation),
};

async fn unknown_operation(ctx: &Ctx) -> CheckResult {
    ctx.require_process()?;
    let before = listing(ctx.dirs().volumes());
    let mut env = ctx.request().env();
    if let Some(op) = env.iter_mut().find(|(k, _)| k == var::OPERATION) {
        op.1 = UNKNOWN_OP.to_string();
    }
    let Some(run) = ctx.calls().run_unknown(UNKNOWN_OP, env).await else {
        return Err(Finding::Skip("built-in plugin".into()));
    };
    let error = (!run.succeeded()).then(|| run.exit_error());
    ctx.calls()
        .note("an unknown operation", UNKNOWN_OP, Expect::Failure, error);
    let after = listing(ctx.dirs().volumes());
    let added: Vec<_> = after.difference(&before).cloned().collect();
    if run.succeeded() {
        return Err(Finding::Fail(format!(
            "expected `PLUGIN {UNKNOWN_OP}` to exit non-zero; it exited 0 (a future Nomad operation \
             would be taken as done)"
        )));
    }
    if !added.is_empty() {
        return Err(Finding::Fail(format!(
            "expected an unknown operation to change nothing; it created {}",
            added.join(", ")
        )));
    }
    Ok(Finding::Pass(format!("refused with {}", run.exit_error())))
}

pub(crate) const CLEAN: CheckSpec = CheckSpec {
    id: "failure.clean",
    level: Level::Must,
    rule: "every failed create of the run, and one the suite provokes on purpose, leaves nothing new in the volumes dir and no process behind; the provoked one does not report success with a path that cannot exist",
    why: "A failed create is not recorded by Nomad, so nothing will ever delete what it left behind: half-made directories and processes stay on the node.",
    fix: "On any error, undo what the create did before exiting non-zero (a `trap` in sh), and leave no process running.",
    samples: &[],
    run: run_wide!(clean),
};

/// Every failed create of the run (the plugin's own failures, and the one
/// provoked on purpose) left nothing new in the volumes dir and no process
/// behind.
fn clean(log: &RunLog) -> CheckResult {
    // Nomad rejecting the output of a create that exited 0 is create.response's
    // finding (the plugin did make the volume): only the plugin's own failures count.
    let failed: Vec<&LoggedCall> = log
        .of(Operation::Create)
        .into_iter()
        .filter(|c| c.plugin_failed)
        .collect();
    if let Some(what) = &log.false_success {
        if let Some(c) = provoked(log) {
            log.cite(c);
        }
        return Err(Finding::Fail(format!(
            "expected a create that cannot work to fail; {what}"
        )));
    }
    if failed.is_empty() && log.failed_leftovers.is_empty() {
        return Err(Finding::Skip(cannot_fail(log)));
    }
    let mut dirty = BTreeSet::new();
    for c in &failed {
        let files = c.residue.clone().unwrap_or_default();
        let procs: Vec<String> = c
            .run
            .iter()
            .flat_map(|r| r.leftovers().iter().map(|l| l.cmdline.clone()))
            .collect();
        if files.is_empty() && procs.is_empty() {
            continue;
        }
        let mut left = Vec::new();
        if !files.is_empty() {
            left.push(format!("files [{}]", files.join(", ")));
        }
        if !procs.is_empty() {
            left.push(format!("processes [{}]", procs.join(", ")));
        }
        log.cite(c);
        dirty.insert(format!("{}: left {}", who(c), left.join(" and ")));
    }
    // Failed creates whose leftovers another check saw (in its own volumes
    // dir, with nothing else of it running): this check owns that finding.
    dirty.extend(log.failed_leftovers.iter().cloned());
    if !dirty.is_empty() {
        return Err(Finding::Fail(format!(
            "expected a failed create to leave nothing new in the volumes dir and no process; {}",
            dirty.into_iter().collect::<Vec<_>>().join("; ")
        )));
    }
    // A create made beside others of its check (a burst) shares its volumes
    // dir with them: what it left cannot be told from theirs, so only its
    // processes are judged. The message says so rather than call it clean.
    let provoked = match provoked(log) {
        Some(c) if c.plugin_failed => {
            format!("the create provoked on purpose ({PROVOKED}) failed cleanly")
        }
        Some(_) => format!(
            "a create provoked to fail ({PROVOKED}) succeeded; the failures judged are the plugin's own"
        ),
        None => "no failure could be provoked (create hangs, or did not run)".into(),
    };
    Ok(Finding::Pass(format!(
        "no failed create left a process, and none made alone left files in its volumes dir; {provoked}"
    )))
}

pub(crate) const ERROR_JSON: CheckSpec = CheckSpec {
    id: "failure.error-json",
    level: Level::Should,
    rule: "every failing create or delete of the run (and the provoked one) that exits prints `{\"error\": \"<why>\"}` on stdout, with a reason",
    why: "When a call fails Nomad decodes `{\"error\": \"...\"}` from stdout and shows that text to the user; plain text is dropped, and the user sees only `exit status 1`.",
    fix: "On failure, print `{\"error\": \"what went wrong\"}` on stdout and the details on stderr; a failure that prints nothing (or an empty reason) leaves the user with only `exit status 1`.",
    samples: &["text-error"],
    run: run_wide!(error_json),
};

/// Every failing create and delete of the run prints `{"error": "..."}` on
/// stdout, with a reason; the message quotes what Nomad shows the user.
fn error_json(log: &RunLog) -> CheckResult {
    log.require_process()?;
    // A call that hung is the deadline checks' finding, one that could not
    // start fingerprint.runs's: neither printed an answer to judge.
    let failed: Vec<&LoggedCall> = log
        .calls
        .iter()
        .filter(|c| c.op != Operation::Fingerprint && c.plugin_failed)
        .filter(|c| {
            c.run
                .as_ref()
                .is_some_and(|r| r.result.is_ok() && !r.timed_out())
        })
        .collect();
    if failed.is_empty() {
        return Err(Finding::Skip(cannot_fail(log)));
    }
    let bad: BTreeSet<String> = failed
        .iter()
        .filter_map(|c| {
            let run = c.run.as_ref()?;
            // An excerpt of a longer answer cannot be judged by its cut.
            if !run.stdout_complete() {
                return None;
            }
            let out = run.stdout();
            let said = contract::decode_failure_error(c.op, out);
            let blank = String::from_utf8_lossy(out).trim().is_empty();
            // A process killed by a signal had no chance to say why.
            let killed = run.ended().signal.is_some();
            let what = match said {
                Some(text) if !text.trim().is_empty() => return None,
                Some(_) => "an empty reason".to_string(),
                None if blank && killed => return None,
                None if blank => "nothing on stdout".to_string(),
                None => format!("stdout {}", shown(out)),
            };
            log.cite(c);
            Some(format!(
                "{}: {what}, so Nomad shows only: {}",
                who(c),
                nomad_shows(c)
            ))
        })
        .collect();
    if !bad.is_empty() {
        return Err(Finding::Fail(format!(
            "expected a failing create or delete to print {{\"error\": \"<why>\"}} on stdout, with a \
             reason, so Nomad can tell the user why; {}",
            bad.into_iter().collect::<Vec<_>>().join("; ")
        )));
    }
    // The example shown: the provoked failure when it failed (every plugin
    // has it), else the first failure by check and operation, for a stable
    // report.
    let example = failed
        .iter()
        .find(|c| is_provoked(c))
        .or_else(|| failed.iter().min_by_key(|c| (c.check, c.op.as_str())))
        .expect("failed is not empty");
    log.cite(example);
    let said = example
        .run
        .as_ref()
        .and_then(|r| contract::decode_failure_error(example.op, r.stdout()))
        .is_some_and(|text| !text.is_empty());
    Ok(Finding::Pass(format!(
        "every failing create and delete that exited said why in {{\"error\": ...}}; {} {}: {}",
        who(example),
        if said {
            "explained itself, and Nomad shows"
        } else {
            "was killed by a signal before it could say why, so Nomad shows only"
        },
        nomad_shows(example)
    )))
}

/// The skip of a failure check that found no failure to judge.
fn cannot_fail(log: &RunLog) -> String {
    match provoked(log) {
        Some(c) if c.plugin_failed => {
            // It failed, but not in a way this check judges (it hung, or
            // could not start): the checks for those report it.
            format!(
                "no failure to judge: a create provoked to fail ({PROVOKED}) ended without an answer (it hung or could not start)"
            )
        }
        Some(_) => format!(
            "the plugin could not be made to fail: a create provoked to fail ({PROVOKED}) succeeded, and no create or delete failed in this run"
        ),
        None => {
            "no create or delete failed in this run, and none could be provoked (create hangs, \
             or did not run)"
                .into()
        }
    }
}

/// The provoked create, if the run made it.
fn provoked(log: &RunLog) -> Option<&LoggedCall> {
    log.calls.iter().find(|c| is_provoked(c))
}

/// The call's check and operation, or what it was when it was the provoked call.
fn who(c: &LoggedCall) -> String {
    if is_provoked(c) {
        format!("the create provoked on purpose ({PROVOKED})")
    } else {
        format!("{} ({})", c.check, c.op)
    }
}

/// Nomad's error text for a failed call, as its user sees it.
fn nomad_shows(c: &LoggedCall) -> String {
    match &c.error {
        Some(text) => format!("`{text}`"),
        None => format!(
            "`{}` (after the plugin's own words, if any)",
            c.run.as_ref().map(|r| r.exit_error()).unwrap_or_default()
        ),
    }
}

pub(crate) const MOUNT_REFUSED: CheckSpec = CheckSpec {
    id: "failure.mount-refused",
    level: Level::Should,
    rule: "for a plugin whose volumes are mounts: when the host refuses every mount (`mount(2)` fails with EPERM), create fails, leaves nothing new in the volumes dir and no loop device attached, and a create after that makes the volume, mounted",
    why: "A mount fails on real hosts: an agent in a container without CAP_SYS_ADMIN, a security module, no free loop device. Every step the create made before it (an image, a mount point, a lock file, a loop device) is then the plugin's to undo, since Nomad records no volume it could delete later; a create that reports success anyway hands Nomad a plain directory in the volumes dir's filesystem as the volume, without its size limit, and the data written there is not in the volume.",
    fix: "Check `mount`'s status and take the failure path (`{\"error\": \"...\"}`, exit 1) after undoing what this call made: remove the image and the mount point it created, detach its loop device.",
    samples: &[],
    run: scenario!(mount_refused),
};

/// A create made with every mount refused (a seccomp filter on the plugin's
/// processes), judged against the run's first create, which mounted its
/// volume; then a create with mounts allowed, which must work.
async fn mount_refused(ctx: &Ctx) -> CheckResult {
    ctx.probes().require_create().await?;
    if !ctx.probes().create_probe().await.mounted {
        return Err(Finding::Skip(
            "not applicable: the plugin's volumes are not mounts (the default create mounted nothing at its path)"
                .into(),
        ));
    }
    if !crate::exec::can_refuse_mounts() {
        return Err(Finding::Skip(
            "mounts cannot be refused to a plugin here (its calls need a cgroup of their own, on x86-64)"
                .into(),
        ));
    }
    let volumes = ctx.dirs().volumes().to_path_buf();
    let before = listing(&volumes);
    let loops_before = crate::safe_fs::loops_backed_under(ctx.dirs().dir());
    let req = ctx.request();
    let refused = ctx.variant(|o| o.refuse_mounts = true);
    let step = "create with every mount refused";
    let call = refused.create_unloaded(&req, Expect::Either, step).await;
    if call.timed_out() {
        return Err(Finding::Warn(format!(
            "{step}: expected it to fail within its limit; it overran it, and again alone (a \
             create that retries a mount that cannot work)"
        )));
    }
    match &call.result {
        Ok(resp) => {
            let mounted = is_mount_point(Path::new(&resp.path));
            // Whatever it made is removed as Nomad would: by a delete.
            let delete = contract::DeleteRequest::for_created(&req, &resp.path);
            ctx.steps()
                .delete_unloaded(&delete, Expect::Either, "delete of what it made")
                .await?;
            if !mounted {
                return Err(Finding::Warn(format!(
                    "{step}: expected it to fail, as its mount cannot be made; it reported success \
                     with path {:?}, which is not a mount point (the default create's is): Nomad \
                     would hand out a plain directory as the volume",
                    resp.path
                )));
            }
        }
        Err(e) => {
            let left = ctx.probes().left_since(&volumes, &before).await;
            let loops: Vec<String> = crate::safe_fs::loops_backed_under(ctx.dirs().dir())
                .into_iter()
                .filter(|l| !loops_before.contains(l))
                .map(|l| format!("{} ({})", l.device.display(), l.backing_file.display()))
                .collect();
            if !left.own.is_empty() || !loops.is_empty() {
                return Err(Finding::Warn(format!(
                    "{step}: it failed ({e}), and left{}{}{}",
                    match left.own.is_empty() {
                        true => String::new(),
                        false => format!(" in the volumes dir: {}", left.own.join(", ")),
                    },
                    match (left.own.is_empty(), loops.is_empty()) {
                        (false, false) => ";",
                        _ => "",
                    },
                    match loops.is_empty() {
                        true => String::new(),
                        false => format!(" loop devices attached: {}", loops.join(", ")),
                    },
                )));
            }
        }
    }
    let failed = call.result.as_ref().err().map(ToString::to_string);
    let step = "create after the refused one, mounts allowed";
    let resp = ctx.steps().create_ok(&req, step).await?;
    let mounted = is_mount_point(Path::new(&resp.path));
    ctx.steps().delete_ok(&req, &resp.path, "delete").await?;
    if !mounted {
        return Err(Finding::Warn(format!(
            "{step}: expected the volume mounted at {:?}, as the default create mounts it; nothing \
             is mounted there (the refused create left something a new create trusts)",
            resp.path
        )));
    }
    Ok(Finding::Pass(match failed {
        Some(e) => format!(
            "with mounts refused, create failed ({e}) and left nothing; then create made the volume, mounted"
        ),
        None => "with mounts refused, create made the volume mounted all the same".into(),
    }))
}
