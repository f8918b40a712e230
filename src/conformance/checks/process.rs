//! `process.*`: a plugin gets nothing from Nomad but the `DHV_*` variables and
//! runs from whatever directory the agent happens to be in (two scenarios); and,
//! judged over every call of the run, it leaves no process behind, holds no
//! pipe open, gives the same outcome when a call is made again alone, and
//! never touches the process that runs it.

use super::process_tries::{
    CwdFindings, EnvFindings, EnvNeed, cwd_problem, env_need, read_only_cwd, unrelated_cwd,
};
use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Fact, Finding, LoggedCall, RunLog, listing};
use crate::contract::Operation;

/// The `process.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    NO_STDIO_LEAK,
    NO_ORPHANS,
    ENV_SELF_CONTAINED,
    CWD_INDEPENDENT,
    REPEATABLE,
    AGENT_UNTOUCHED,
];

pub(crate) const AGENT_UNTOUCHED: CheckSpec = CheckSpec {
    id: "process.agent-untouched",
    level: Level::Must,
    rule: "a plugin never touches the process that runs it: its cgroup, its freezer, ptrace, its signals, its limits, its own dirs (no mount over them)",
    why: "The process that runs the plugin is the Nomad agent. A plugin that moves it into a cgroup of its own (which the plugin's cleanup then kills), freezes its cgroup, or leaves a tracer on it (`strace -f -p $PPID`) stops or kills the agent, and with it every allocation and volume of the node. A plugin that mounts something over the agent's own dirs (bind-mounts another dir over the dir that holds the volumes dir) turns every later write of the agent and of every later call into a write into that other dir. The harness undoes what was done (moves itself back, thaws, kills the tracer) and skips the checks that had not started: what they would see is no longer the plugin alone. A mount over its dirs it detaches at once, before any further call, and the run goes on: later calls find its dirs as they were.",
    fix: "Never write `$PPID` (or any pid but your own) into a `cgroup.procs`, never freeze a cgroup you did not make, and never trace, signal or limit your parent: put your own processes in a cgroup of their own (`echo $$ > .../cgroup.procs`), leave debugging tracers out of the shipped plugin, and mount only inside your volume's own dir (`$DHV_VOLUMES_DIR/<id>`), never on the volumes dir or a dir above it.",
    varies: None,
    samples: &["mounts-over-root"],
    needs: Needs::Any,
    subject: None,
    run: run_wide!(agent_untouched),
};

/// The skip reason of a check that had not started when the plugin was seen
/// touching the harness (see [`AGENT_UNTOUCHED`]).
pub(crate) const INTERFERED_SKIP: &str =
    "skipped: the plugin interfered with the harness (see process.agent-untouched)";

/// The process that runs the plugin was left alone. What the plugin did to
/// it the engine publishes when it first sees it (the supervisor's word);
/// the engine holds this check to it again at the run's end, so what was
/// done after this judged (during the run's clearing or teardown) fails it
/// too.
fn agent_untouched(log: &RunLog) -> FindingResult {
    log.require_process()?;
    if let Some(finding) = mounted_over(&log.facts) {
        return Err(finding);
    }
    match log.facts.iter().find(|f| matches!(f, Fact::Interfered { .. })) {
        Some(fact) => Err(interfered(fact, &log.calls)),
        None => Ok(Finding::Pass(
            "no call moved the process that runs it to another cgroup, froze its cgroup or traced it"
                .into(),
        )),
    }
}

/// `process.agent-untouched`'s failure for the mounts a plugin put over the
/// harness's own dirs ([`Fact::MountedOver`]), and for what else it did to
/// the harness ([`Fact::Interfered`]) when it did; `None` when it put none.
pub(crate) fn mounted_over(facts: &[Fact]) -> Option<Finding> {
    let mounts: Vec<String> = facts
        .iter()
        .filter(|f| matches!(f, Fact::MountedOver { .. }))
        .map(Fact::describe)
        .collect();
    if mounts.is_empty() {
        return None;
    }
    let also = match facts.iter().find(|f| matches!(f, Fact::Interfered { .. })) {
        Some(fact) => format!(
            "; and {} (the harness undid it; the checks not yet started were skipped)",
            fact.describe()
        ),
        None => String::new(),
    };
    Some(Finding::Fail(format!(
        "expected the plugin never to touch the process that runs it (its cgroup, its freezer, \
         ptrace, its signals, its limits, its own dirs: under Nomad that process is the agent, \
         and a mount over its dirs sends what it writes, and every later call's writes, into \
         the dir mounted there); {}{also}",
        mounts.join("; ")
    )))
}

/// `process.agent-untouched`'s failure for a [`Fact::Interfered`], naming
/// the call of `calls` that did it when its own sweep saw it (its cgroup
/// held the harness, or the tracer).
pub(crate) fn interfered(fact: &Fact, calls: &[LoggedCall]) -> Finding {
    let culprit = calls.iter().find_map(|c| {
        let outcome = c.run.as_ref()?.result.as_ref().ok()?;
        outcome.touched_harness.as_ref()?;
        Some(format!("a {} call of {}", c.op, c.check))
    });
    let fact = match (fact, culprit) {
        (Fact::Interfered { what, during, .. }, Some(by)) => Fact::Interfered {
            what: what.clone(),
            by: Some(by),
            during: during.clone(),
        },
        _ => fact.clone(),
    };
    Finding::Fail(format!(
        "expected the plugin never to touch the process that runs it (its cgroup, its freezer, \
         ptrace, its signals, its limits, its own dirs: under Nomad that process is the agent, and every \
         volume and job of the node goes with it); {}. The harness undid it; the checks not \
         yet started were skipped",
        fact.describe()
    ))
}

pub(crate) const ENV_SELF_CONTAINED: CheckSpec = CheckSpec {
    id: "process.env-self-contained",
    level: Level::Must,
    rule: "the plugin works with exactly Nomad's environment (no PATH, HOME, LANG)",
    why: "Nomad clears the environment: the plugin gets only the DHV_* variables, with no PATH, HOME or LANG. A plugin that works in a shell can fail under Nomad.",
    fix: "Set what you need inside the plugin (`PATH=/usr/sbin:/usr/bin:/sbin:/bin`, `HOME=/root`), or use absolute paths.",
    varies: None,
    samples: &["needs-home", "needs-path"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(env_self_contained),
};

/// Works with exactly Nomad's env; when it does not, name the variables it
/// silently depends on.
async fn env_self_contained(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    let nomads = ctx.variant(|_| {});
    let mut found = EnvFindings::default();
    for op in Operation::ALL {
        let op_name = op.as_str();
        match env_need(ctx, &nomads, op).await? {
            EnvNeed::Works => {}
            EnvNeed::Unmade => found.unmade.push(op_name),
            EnvNeed::Broken => found.broken.push(op_name),
            EnvNeed::Depends(names) => found.dependent.push(format!(
                "{op_name} fails under Nomad's environment but works with {names}"
            )),
        }
    }
    found.verdict()
}

pub(crate) const CWD_INDEPENDENT: CheckSpec = CheckSpec {
    id: "process.cwd-independent",
    level: Level::Should,
    rule: "the plugin works from an unrelated read-only working directory and writes nothing there",
    why: "The plugin inherits the Nomad agent's working directory, often `/`, which may be read-only; files written there land in the agent's directory.",
    fix: "Use absolute paths and never write into the working directory.",
    varies: None,
    samples: &["writes-cwd"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(cwd_independent),
};

/// Works from a read-only, unrelated directory and writes nothing there.
async fn cwd_independent(ctx: &Ctx) -> FindingResult {
    ctx.require_process()?;
    ctx.prereqs().require_create().await?;
    let cwd = read_only_cwd(ctx)?;
    let elsewhere = ctx.variant(|o| o.cwd = Some(cwd.clone()));
    let here = ctx.variant(|_| {});
    let mut found = CwdFindings::default();
    for op in Operation::ALL {
        if let Some(needs) = ctx.prereqs().failed_prerequisite(op).await {
            // Fails for a reason another check reports: no comparison to make.
            found.excused.push(format!("{op} ({needs})"));
            continue;
        }
        if let Some(problem) = cwd_problem(ctx, &elsewhere, &here, op).await? {
            found.problems.push(problem);
        }
    }
    let written = listing(ctx.host(), &cwd);
    if let Ok(held) = unrelated_cwd(ctx) {
        let _ = ctx.host().set_mode(&held, 0o755);
    }
    if !written.is_empty() {
        found.problems.push(format!(
            "it wrote into its working directory: {}",
            written.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    found.verdict()
}

pub(crate) const NO_STDIO_LEAK: CheckSpec = CheckSpec {
    id: "process.no-stdio-leak",
    level: Level::Must,
    rule: "no process started by the plugin keeps stdout or stderr open after the plugin exits",
    why: "Nomad reads the plugin's stdout and stderr until both close, with no wait delay: a background process that keeps them open blocks the Nomad client until that process exits.",
    fix: "Start background processes with their output redirected (`cmd >/dev/null 2>&1 &`), or do not start them.",
    varies: Some(
        "counts the calls that left stdout or stderr held open and names the first ones, in the order the checks finished",
    ),
    samples: &["leaked-child"],
    needs: Needs::Any,
    subject: None,
    run: run_wide!(no_stdio_leak),
};

fn no_stdio_leak(log: &RunLog) -> FindingResult {
    log.require_process()?;
    let log = &log.calls;
    let leaks: Vec<String> = log
        .iter()
        .filter_map(|c| {
            let o = c.run.as_ref()?.result.as_ref().ok()?;
            // A call killed for overrunning is the deadline checks' finding.
            (o.leaked && !o.timed_out).then(|| {
                let holders: Vec<&str> = o
                    .leftovers
                    .iter()
                    .filter(|l| l.held_stdio)
                    .map(|l| l.cmdline.as_str())
                    .collect();
                format!("{} ({}): held by [{}]", c.check, c.op, holders.join(", "))
            })
        })
        .collect();
    if leaks.is_empty() {
        Ok(Finding::Pass(
            "no call left stdout or stderr held open after it exited".into(),
        ))
    } else {
        Err(Finding::Fail(format!(
            "expected no process started by the plugin to keep stdout/stderr open after it exits (Nomad \
             waits for the pipes: the agent hangs); {} calls leaked: {}. Redirect background work: \
             `cmd >/dev/null 2>&1 &`, or better, don't leave it running",
            leaks.len(),
            leaks.into_iter().take(5).collect::<Vec<_>>().join("; ")
        )))
    }
}

pub(crate) const REPEATABLE: CheckSpec = CheckSpec {
    id: "process.repeatable",
    level: Level::Must,
    rule: "the same call made again alone gives the same outcome: a call that fails inside a check about another operation is made again alone, and one that then succeeds is a race in the plugin",
    why: "Nomad itself never retries a failed plugin call: it returns the error. A create that fails by chance fails the volume request (the user must send it again), and a delete that fails by chance keeps the volume until someone sends delete again (which delete.idempotent and lifecycle.crash-delete judge). A call that fails, then succeeds made again alone with the same request, is a race inside the plugin (a pipeline that breaks under `pipefail`, a check-then-act on a shared file, a `losetup -f` taken by a neighbour).",
    fix: "Find the race from the two outcomes and their stderr: make each step safe to run while other calls run (locks per volume, `mkdir -p`, no `cmd | grep -q` under `pipefail`), and check the state a step needs rather than assuming it.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: None,
    run: run_wide!(repeatable),
};

/// The same call made again alone gives the same outcome. A call that failed in
/// a check about something else was made again alone; one that then succeeded
/// is a race in the plugin, reported here once (Nomad itself never retries a
/// failed call: a delete that fails by chance keeps the volume until someone
/// sends it again), with the call, both outcomes and their stderr.
fn repeatable(log: &RunLog) -> FindingResult {
    if log.repeats.is_empty() {
        return Ok(Finding::Pass(
            "no call failed in one place and succeeded made again alone".into(),
        ));
    }
    // Creates that failed beside others as concurrency.create's creates at
    // once did: its finding (it ran before this one), cited, not repeated.
    let owned = super::company::owned_shapes(&log.facts);
    let (cited, own): (Vec<_>, Vec<_>) = log
        .repeats
        .iter()
        .partition(|r| r.op == Operation::Create && owned.contains(&r.shape));
    if own.is_empty() {
        let owner = super::COMPANY_OWNER.id;
        return Err(Finding::Skip(format!(
            "inconclusive: every call that failed, then succeeded made again alone, was a create \
             that failed as the creates at once of {owner} did (see {owner}): {}",
            cited
                .iter()
                .map(|r| &r.shape)
                .min()
                .expect("a call was made again")
        )));
    }
    for r in &own {
        for run in r.runs.iter().flatten() {
            log.cite_run(run);
        }
    }
    let mut lines: Vec<String> = own.iter().map(|r| r.describe()).collect();
    lines.sort();
    Err(Finding::Fail(format!(
        "expected the same call made again alone to give the same outcome (Nomad itself never \
         retries a failed call: a create or delete that fails by chance fails the user's request); \
         a call failed, then \
         succeeded made again alone, a race in the plugin: {}",
        lines.into_iter().take(3).collect::<Vec<_>>().join("; ")
    )))
}

pub(crate) const NO_ORPHANS: CheckSpec = CheckSpec {
    id: "process.no-orphans",
    level: Level::Should,
    rule: "no process started by the plugin is alive after the plugin exits (one that holds stdout or stderr is process.no-stdio-leak's finding)",
    why: "A process the plugin leaves running outlives the call and is managed by no one: it holds resources and may change the volume later.",
    fix: "Wait for every process you start before exiting; run daemons through the system's service manager, not from the plugin.",
    varies: Some(
        "counts the processes left running and names the first calls that left one, in the order the checks finished",
    ),
    samples: &["setsid-daemon"],
    needs: Needs::Any,
    subject: None,
    run: run_wide!(no_orphans),
};

/// Nothing the plugin started outlived it. A process that held a call's stdout
/// or stderr is `process.no-stdio-leak`'s finding (it is necessarily left
/// running too): counted and cited, not reported twice.
fn no_orphans(log: &RunLog) -> FindingResult {
    log.require_process()?;
    let log = &log.calls;
    let mut orphans = Vec::new();
    let mut held = 0;
    let runs = log
        .iter()
        .filter_map(|c| Some((c, c.run.as_ref()?)))
        .filter(|(_, r)| !r.timed_out());
    for (c, run) in runs {
        for l in run.leftovers() {
            if l.held_stdio {
                held += 1;
                continue;
            }
            let escaped = match l.escaped_group {
                true => " [left the process group]",
                false => "",
            };
            orphans.push(format!("{} ({}): {}{escaped}", c.check, c.op, l.cmdline));
        }
    }
    let cited = match held {
        0 => String::new(),
        n => {
            format!(
                " ({n} left running while holding stdout or stderr: see {})",
                NO_STDIO_LEAK.id
            )
        }
    };
    if orphans.is_empty() {
        let what = match held {
            0 => "nothing left running",
            _ => "nothing else left running",
        };
        Ok(Finding::Pass(format!("{what} after any call{cited}")))
    } else {
        Err(Finding::Fail(format!(
            "expected no process started by the plugin to be alive after it exits; found {} (all killed): {}{cited}",
            orphans.len(),
            orphans.into_iter().take(5).collect::<Vec<_>>().join("; ")
        )))
    }
}
