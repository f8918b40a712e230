//! `failure.*`: how a plugin fails. `failure.unknown-operation` (Nomad may
//! add operations; a plugin must refuse what it does not know, and change
//! nothing) is a scenario; `failure.clean` and `failure.error-json` judge
//! every failed call of the run, including a failure the suite provokes on
//! purpose, so every plugin's failure path is judged. The checks that make
//! a step fail on purpose by refusing it (`failure.*-refused`) are in
//! `refused`.

use super::{CheckSpec, FindingResult, Level, Needs, shown};
use crate::conformance::context::{
    Ctx, Expect, Fact, Finding, LoggedCall, RunLog, is_provoked, listing,
};

/// What the failure provoked on purpose is (made in the timing phase, when
/// create works and does not hang), in the words of the messages.
const PROVOKED: &str = "its volumes dir lies under a regular file";
use crate::contract::{self, Operation, var};

/// The operation name sent; no Nomad version uses it.
const UNKNOWN_OP: &str = "dhv-conform-unknown-operation";

/// The `failure.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    CLEAN,
    ERROR_JSON,
    UNKNOWN_OPERATION,
    super::refused::MOUNT_REFUSED,
    super::refused::CHMOD_REFUSED,
    super::refused::REMOVE_REFUSED,
];

pub(crate) const UNKNOWN_OPERATION: CheckSpec = CheckSpec {
    id: "failure.unknown-operation",
    level: Level::Should,
    rule: "`PLUGIN <unknown op>` exits non-zero and changes nothing",
    why: "A future Nomad may send operations this plugin does not know; answering them with success, or acting on them, would mislead it.",
    fix: "Exit non-zero for any operation other than fingerprint, create and delete, and change nothing.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(unknown_operation),
};

async fn unknown_operation(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    let before = listing(ctx.host(), ctx.dirs().volumes());
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
    let after = listing(ctx.host(), ctx.dirs().volumes());
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
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: run_wide!(clean),
};

/// Every failed create of the run (the plugin's own failures, and the one
/// provoked on purpose) left nothing new in the volumes dir and no process
/// behind.
fn clean(log: &RunLog) -> FindingResult {
    // Nomad rejecting the output of a create that exited 0 is create.response's
    // finding (the plugin did make the volume): only the plugin's own failures count.
    let failed: Vec<&LoggedCall> = log
        .of(Operation::Create)
        .into_iter()
        .filter(|c| c.plugin_failed)
        .collect();
    let false_success = log
        .facts
        .iter()
        .find(|f| matches!(f, Fact::FalseSuccess { .. }));
    // Failed creates whose leftovers another check saw (in its own volumes
    // dir, with nothing else of it running): this check owns that finding.
    let seen_elsewhere: Vec<String> = log
        .facts
        .iter()
        .filter(|f| matches!(f, Fact::FailedCreateLeft { .. }))
        .map(Fact::describe)
        .collect();
    if let Some(what) = false_success.map(Fact::describe) {
        if let Some(c) = provoked(log) {
            log.cite(c);
        }
        return Err(Finding::Fail(format!(
            "expected a create that cannot work to fail; {what}"
        )));
    }
    if failed.is_empty() && seen_elsewhere.is_empty() {
        return Err(Finding::Skip(cannot_fail(log)));
    }
    let mut dirty = Vec::new();
    for c in &failed {
        if let Some(left) = left_behind(c) {
            log.cite(c);
            dirty.push(format!("{}: left {left}", who(c)));
        }
    }
    dirty.extend(seen_elsewhere);
    let dirty = in_stable_order(dirty);
    if !dirty.is_empty() {
        return Err(Finding::Fail(format!(
            "expected a failed create to leave nothing new in the volumes dir and no process; {}",
            dirty.join("; ")
        )));
    }
    // A create made beside others of its check (a burst) shares its volumes
    // dir with them: what it left cannot be told from theirs, so only its
    // processes are judged. The message says so rather than call it clean.
    Ok(Finding::Pass(format!(
        "no failed create left a process, and none made alone left files in its volumes dir; {}",
        provoked_failure(log)
    )))
}

/// What the failed create `c` left: "files [...] and processes [...]", or
/// `None` when nothing.
fn left_behind(c: &LoggedCall) -> Option<String> {
    let files = c.residue.clone().unwrap_or_default();
    let procs: Vec<String> = c
        .run
        .iter()
        .flat_map(|r| r.leftovers().iter().map(|l| l.cmdline.clone()))
        .collect();
    if files.is_empty() && procs.is_empty() {
        return None;
    }
    let mut left = Vec::new();
    if !files.is_empty() {
        left.push(format!("files [{}]", files.join(", ")));
    }
    if !procs.is_empty() {
        left.push(format!("processes [{}]", procs.join(", ")));
    }
    Some(left.join(" and "))
}

/// How the create provoked to fail went, for `failure.clean`'s pass.
fn provoked_failure(log: &RunLog) -> String {
    match provoked(log) {
        Some(c) if c.plugin_failed => {
            format!("the create provoked on purpose ({PROVOKED}) failed cleanly")
        }
        Some(_) => format!(
            "a create provoked to fail ({PROVOKED}) succeeded; the failures judged are the plugin's own"
        ),
        None => "no failure could be provoked (create hangs, or did not run)".into(),
    }
}

pub(crate) const ERROR_JSON: CheckSpec = CheckSpec {
    id: "failure.error-json",
    level: Level::Should,
    rule: "every failing create or delete of the run (the provoked one, and those made with a step refused, included) that exits prints `{\"error\": \"<why>\"}` on stdout, with a reason",
    why: "When a call fails Nomad decodes `{\"error\": \"...\"}` from stdout and shows that text to the user; plain text is dropped, and the user sees only `exit status 1`.",
    fix: "On failure, print `{\"error\": \"what went wrong\"}` on stdout and the details on stderr; a failure that prints nothing (or an empty reason) leaves the user with only `exit status 1`.",
    varies: None,
    samples: &["text-error"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: run_wide!(error_json),
};

/// Every failing create and delete of the run prints `{"error": "..."}` on
/// stdout, with a reason; the message quotes what Nomad shows the user.
fn error_json(log: &RunLog) -> FindingResult {
    log.require_process()?;
    let failed = answered_failures(log);
    if failed.is_empty() {
        return Err(Finding::Skip(cannot_fail(log)));
    }
    let bad: Vec<String> = failed
        .iter()
        .filter_map(|c| {
            let what = no_reason(c)?;
            log.cite(c);
            Some(format!(
                "{}: {what}, so Nomad shows only: {}",
                who(c),
                nomad_shows(c)
            ))
        })
        .collect();
    let bad = in_stable_order(bad);
    if !bad.is_empty() {
        return Err(Finding::Fail(format!(
            "expected a failing create or delete to print {{\"error\": \"<why>\"}} on stdout, with a \
             reason, so Nomad can tell the user why; {}",
            bad.join("; ")
        )));
    }
    Ok(explained(log, &failed))
}

/// The run's failing creates and deletes that ended with an answer to judge.
fn answered_failures(log: &RunLog) -> Vec<&LoggedCall> {
    // A call that hung is the deadline checks' finding, one that could not
    // start fingerprint.runs's: neither printed an answer to judge.
    // The calls made on a host that refused a step are answered as any.
    log.calls
        .iter()
        .chain(&log.refused)
        .filter(|c| c.op != Operation::Fingerprint && c.plugin_failed)
        .filter(|c| {
            c.run
                .as_ref()
                .is_some_and(|r| r.result.is_ok() && !r.timed_out())
        })
        .collect()
}

/// What the failure `c` printed instead of a reason ("nothing on stdout",
/// ...), or `None` when it gave one (or could not: cut, or killed).
fn no_reason(c: &LoggedCall) -> Option<String> {
    let run = c.run.as_ref()?;
    // An excerpt of a longer answer cannot be judged by its cut.
    if !run.stdout_complete() {
        return None;
    }
    let out = run.stdout();
    let said = contract::decode_failure_error(c.op, out);
    let blank = String::from_utf8_lossy(out).trim().is_empty();
    // A process killed by a signal had no chance to say why.
    let killed = run.exit().and_then(|e| e.signal()).is_some();
    match said {
        Some(text) if !text.trim().is_empty() => None,
        Some(_) => Some("an empty reason".to_string()),
        None if blank && killed => None,
        None if blank => Some("nothing on stdout".to_string()),
        None => Some(format!("stdout {}", shown(out))),
    }
}

/// `failure.error-json`'s pass, every one of the (not empty) `failed`
/// having said why, with an example of what Nomad shows.
fn explained(log: &RunLog, failed: &[&LoggedCall]) -> Finding {
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
    Finding::Pass(format!(
        "every failing create and delete that exited said why in {{\"error\": ...}}; {} {}: {}",
        who(example),
        if said {
            "explained itself, and Nomad shows"
        } else {
            "was killed by a signal before it could say why, so Nomad shows only"
        },
        nomad_shows(example)
    ))
}

/// `items` sorted and without repeats, ordered by what stays the same from
/// run to run (volume ids, names and temp dirs masked as a snapshot masks
/// them), so that two findings of one check keep their order in a snapshot.
fn in_stable_order(mut items: Vec<String>) -> Vec<String> {
    let masks = crate::report::Redactions::new();
    items.sort_by_cached_key(|s| (masks.apply(s), s.clone()));
    items.dedup();
    items
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

#[cfg(test)]
mod tests {
    use super::in_stable_order;

    #[test]
    fn findings_are_ordered_by_what_a_snapshot_keeps() {
        // The volume ids sort one way, the texts the other: the texts decide.
        let b = "x (delete): stdout \"b\", volume \"00000000-0000-4000-8000-000000000000\"";
        let a = "x (delete): stdout \"a\", volume \"ffffffff-0000-4000-8000-000000000000\"";
        let sorted = in_stable_order(vec![b.into(), a.into(), a.into()]);
        assert_eq!(sorted, vec![a.to_string(), b.to_string()]);
    }
}
