//! `create.*`: create succeeds, answers as Nomad decodes it, makes a real path
//! inside the volumes dir, and is idempotent, distinct per volume and safe with
//! any parameters.

use std::path::Path;

use super::{CheckSpec, FindingResult, Level, Needs, fingerprint, hint_prefix, needs, shown};
use crate::conformance::context::{Ctx, Expect, Finding, Holds, RunLog, canary_intact};
use crate::contract::{self, CreateRequest, CreateResponse, Operation, Parameters};
use crate::plugin::PluginCall;

/// The `create.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    SUCCEEDS,
    RESPONSE,
    PATH_EXISTS,
    PATH_IN_VOLUMES_DIR,
    BYTES_IN_RANGE,
    IDEMPOTENT,
    DISTINCT,
    super::create_update::UPDATE,
    PARAMETERS,
    VOLUMES_DIR_MISSING,
    super::in_the_way::FILE_IN_THE_WAY,
    DEADLINE,
];

pub(crate) const SUCCEEDS: CheckSpec = CheckSpec {
    id: "create.succeeds",
    level: Level::Must,
    rule: "create with the default request exits 0 within 60 s",
    why: "Without a successful create no volume can exist: `nomad volume create` fails with the plugin's exit error. Most other checks need it and are skipped when it fails.",
    fix: "Exit 0 within 60 s after creating the volume, using only the DHV_* variables Nomad passes; run the reproduce line to see the failure by hand.",
    varies: None,
    samples: &[
        "hanging-create",
        "ignores-sigterm",
        "needs-home",
        "realtime-signal",
    ],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(succeeds),
};

async fn succeeds(ctx: &Ctx) -> FindingResult {
    let probe = ctx.prereqs().create_probe().await;
    ctx.cite(probe.call.run.as_ref());
    let call = &probe.call;
    if call.exited_zero() {
        return Ok(Finding::Pass(format!(
            "exit 0 in {:.1} ms",
            call.duration.as_secs_f64() * 1e3
        )));
    }
    let fingerprint = ctx.prereqs().fingerprint_probe().await;
    let cannot_start =
        |run: &Option<crate::plugin::PluginRun>| run.as_ref().is_some_and(|r| r.result.is_err());
    if cannot_start(&call.run) && cannot_start(&fingerprint.run) {
        return Err(Finding::Skip(format!(
            "{} (the plugin cannot start)",
            needs(&fingerprint::RUNS)
        )));
    }
    let detail = match &call.run {
        Some(run) => match &run.result {
            Err(start) => format!(
                "it could not start: {} — {}",
                start.go_error, start.explanation
            ),
            Ok(o) if o.timed_out => format!(
                "it was still running after {:?} and was killed",
                run.timeout
            ),
            Ok(o) => format!(
                "{}; Nomad says: {}; stderr: {}",
                o.exit.go_string(),
                call.error_text(),
                shown(&o.stderr)
            ),
        },
        None => call.error_text(),
    };
    Err(Finding::Fail(format!(
        "expected create with the default request to exit 0; got: {detail}"
    )))
}

pub(crate) const RESPONSE: CheckSpec = CheckSpec {
    id: "create.response",
    level: Level::Must,
    rule: "create stdout decodes as Nomad decodes it: `path` a string, `bytes` an int64 if present",
    why: "Nomad decodes create stdout with Go's encoding/json into `{path, bytes}`: a log line before the JSON, a second object after it, or `bytes` as a string or a float make the create fail although the volume was made.",
    fix: "Print one JSON object, e.g. `{\"path\": \"/abs/path\", \"bytes\": 0}`, with `bytes` an integer; send every log line to stderr.",
    varies: None,
    samples: &["logs-on-stdout", "string-bytes"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(response),
};

async fn response(ctx: &Ctx) -> FindingResult {
    let probe = ctx.prereqs().create_probe().await;
    ctx.cite(probe.call.run.as_ref());
    if !probe.call.exited_zero() {
        return Err(Finding::Skip(needs(&SUCCEEDS)));
    }
    let Some(run) = &probe.call.run else {
        return Ok(Finding::Pass("built-in plugin".into()));
    };
    // Judged whole (up to the decode limit) when the call ran; the run
    // keeps only an excerpt.
    let decoded = match &probe.call.result {
        Ok(resp) => Ok(resp.clone()),
        Err(crate::plugin::PluginError::OutputTooLarge { message, .. }) => {
            return Err(Finding::Fail(format!(
                "expected one JSON object on stdout; {message}"
            )));
        }
        Err(e) if !run.stdout_complete() => Err(e.to_string()),
        Err(_) => contract::decode_create(run.stdout()).map_err(|e| e.to_string()),
    };
    match decoded {
        Ok(resp) => Ok(Finding::Pass(format!(
            "path {:?}, bytes {}",
            resp.path, resp.bytes
        ))),
        Err(e) => Err(Finding::Fail(format!(
            "{}expected stdout to be one JSON object with a string `path` and an integer `bytes`, \
             nothing else; Nomad's decoder says: {e}; stdout: {}",
            hint_prefix(run.stdout()),
            shown(run.stdout())
        ))),
    }
}

/// The probe's decoded response, or the skip that says why there is none.
async fn probe_response(
    ctx: &Ctx,
) -> Result<(CreateRequest, contract::CreateResponse, bool), Finding> {
    let probe = ctx.prereqs().create_probe().await;
    ctx.cite(probe.call.run.as_ref());
    if !probe.call.exited_zero() {
        return Err(Finding::Skip(needs(&SUCCEEDS)));
    }
    match &probe.call.result {
        Ok(resp) => Ok((probe.request.clone(), resp.clone(), probe.path_existed)),
        Err(_) => Err(Finding::Skip(needs(&RESPONSE))),
    }
}

pub(crate) const PATH_EXISTS: CheckSpec = CheckSpec {
    id: "create.path-exists",
    level: Level::Must,
    rule: "`path` is non-empty, absolute, and exists on disk after create",
    why: "Nomad publishes `path` as the volume's host path and bind-mounts it into tasks: an empty, relative or missing path makes every allocation using the volume fail to start.",
    fix: "Return the absolute path of the directory (or mount point) you created, after it exists.",
    varies: None,
    samples: &["nonexistent-path", "relative-path"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(path_exists),
};

async fn path_exists(ctx: &Ctx) -> FindingResult {
    let (_, resp, existed) = probe_response(ctx).await?;
    if resp.path.is_empty() {
        return Err(Finding::Fail(
            "expected a non-empty `path`; got \"\"".into(),
        ));
    }
    if !Path::new(&resp.path).is_absolute() {
        return Err(Finding::Fail(format!(
            "expected an absolute `path`; got {:?} (relative to what? Nomad mounts it as is)",
            resp.path
        )));
    }
    if !existed {
        return Err(Finding::Fail(format!(
            "expected `path` {:?} to exist after create; it does not",
            resp.path
        )));
    }
    Ok(Finding::Pass("absolute and present on disk".into()))
}

pub(crate) const PATH_IN_VOLUMES_DIR: CheckSpec = CheckSpec {
    id: "create.path-in-volumes-dir",
    level: Level::Should,
    rule: "`path` lies inside DHV_VOLUMES_DIR",
    why: "Operators size, back up and clean DHV_VOLUMES_DIR; a volume placed elsewhere escapes all of that, and the harness cannot check it for residue.",
    fix: "Create volumes under `$DHV_VOLUMES_DIR`, e.g. `$DHV_VOLUMES_DIR/$DHV_VOLUME_ID`.",
    varies: None,
    samples: &["relative-path"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(path_in_volumes_dir),
};

async fn path_in_volumes_dir(ctx: &Ctx) -> FindingResult {
    let (req, resp, _) = probe_response(ctx).await?;
    let inside = |p: &Path| {
        let dir = Path::new(&req.volumes_dir);
        p.starts_with(dir) && p != dir
    };
    let path = Path::new(&resp.path);
    let resolved = ctx.host().canonical(path).ok();
    let dir_resolved = ctx.host().canonical(Path::new(&req.volumes_dir)).ok();
    let resolved_inside = match (&resolved, &dir_resolved) {
        (Some(p), Some(d)) => p.starts_with(d) && p != d,
        _ => true,
    };
    if path.is_absolute() && inside(path) && resolved_inside && !resp.path.contains("/../") {
        Ok(Finding::Pass("inside DHV_VOLUMES_DIR".into()))
    } else if ctx.host().is_block_device(path) {
        // A block-device volume is a device node, wherever the system keeps
        // it; Nomad saves the path as it is.
        Ok(Finding::Pass(
            "a block device (a block-device volume)".into(),
        ))
    } else {
        Err(Finding::Fail(format!(
            "expected `path` inside DHV_VOLUMES_DIR {:?}; got {:?}",
            req.volumes_dir, resp.path
        )))
    }
}

pub(crate) const BYTES_IN_RANGE: CheckSpec = CheckSpec {
    id: "create.bytes-in-range",
    level: Level::Should,
    rule: "when bytes > 0: capacity min <= bytes <= capacity max (when max > 0)",
    why: "Nomad shows `bytes` as the volume's capacity; a figure outside the capacity the user asked for misleads scheduling decisions and users.",
    fix: "Report the capacity you provisioned, between `DHV_CAPACITY_MIN_BYTES` and `DHV_CAPACITY_MAX_BYTES` (when max > 0), or 0 when you do not know it.",
    varies: None,
    samples: &["bytes-out-of-range"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(bytes_in_range),
};

async fn bytes_in_range(ctx: &Ctx) -> FindingResult {
    let (req, resp, _) = probe_response(ctx).await?;
    if resp.bytes <= 0 {
        return Ok(Finding::Pass("bytes not reported (0)".into()));
    }
    let (min, max) = (req.capacity_min_bytes, req.capacity_max_bytes);
    if !req.admits_bytes(resp.bytes) {
        return Err(Finding::Fail(format!(
            "expected capacity min {min} <= bytes{}; got bytes {}",
            if max > 0 {
                format!(" <= capacity max {max}")
            } else {
                String::new()
            },
            resp.bytes
        )));
    }
    Ok(Finding::Pass(format!(
        "{} bytes within [{min}, {max}]",
        resp.bytes
    )))
}

/// The response of a shared probe's create, cited as this check's evidence:
/// the probe's failure is this check's.
fn probe_created<'a>(
    ctx: &Ctx,
    call: &'a PluginCall<CreateResponse>,
    step: &str,
) -> Result<&'a CreateResponse, Finding> {
    ctx.cite(call.run.as_ref());
    call.result
        .as_ref()
        .map_err(|e| Finding::Fail(format!("{step}: expected create to succeed; got: {e}")))
}

pub(crate) const IDEMPOTENT: CheckSpec = CheckSpec {
    id: "create.idempotent",
    level: Level::Must,
    rule: "the same create again exits 0 with the same path, and the volume's files survive (a changed `bytes` is said in the message, not judged: Nomad's server records the last one reported)",
    why: "Nomad calls create again with the same request when the agent restarts (restore) and when a volume is updated. A create that fails or moves the volume on the second call loses the volume or its data.",
    fix: "When the volume already exists, return its path unchanged and exit 0: `mkdir -p`, and check each step before doing it again.",
    varies: None,
    samples: &["fails-on-existing-dir"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(idempotent),
};

async fn idempotent(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    // Judged on the shared create-again probe: the checks that skip "needs
    // create.idempotent" rest on it.
    let probe = ctx.prereqs().again_probe().await;
    let first = probe_created(ctx, &probe.first, "first create")?;
    let canary = probe.canary.clone()?;
    let again = probe
        .again
        .as_ref()
        .expect("made whenever the first create succeeded");
    let again = probe_created(ctx, again, "second create of the same volume")?;
    let req = &probe.request;
    if again.path != first.path {
        return Err(Finding::Fail(format!(
            "expected the same path again ({:?}); got {:?}: Nomad's restore would mount another directory",
            first.path, again.path
        )));
    }
    if !canary_intact(ctx.host(), &canary) {
        return Err(Finding::Fail(format!(
            "expected a file written into the volume to survive a second create; {} is gone or changed: \
             create wiped the volume (data loss on every agent restart)",
            canary.display()
        )));
    }
    ctx.steps()
        .delete_ok(req, &first.path, "delete after the second create")
        .await?;
    if again.bytes != first.bytes {
        // Not this rule's: Nomad's restore uses only the path, and the
        // server records whatever the last create reported. Said, not judged.
        return Ok(Finding::Pass(format!(
            "same path, data kept; bytes changed from {} to {} on the same request (Nomad's \
             server records whatever the last create reported)",
            first.bytes, again.bytes
        )));
    }
    Ok(Finding::Pass("same path and bytes; data kept".into()))
}

pub(crate) const DISTINCT: CheckSpec = CheckSpec {
    id: "create.distinct",
    level: Level::Must,
    rule: "two volumes get different paths; creating the second leaves the first intact",
    why: "Each volume id is a separate volume: two volumes sharing a path see each other's files, and deleting one deletes the other.",
    fix: "Derive the path from `DHV_VOLUME_ID` (unique, a UUID), never from a constant or a counter.",
    varies: None,
    samples: &["shared-path"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(distinct),
};

/// Two volumes, two paths; the second leaves the first alone. Judged on the
/// shared two-volume probe, on which the checks whose volumes collide rest
/// their "needs create.distinct".
async fn distinct(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let probe = ctx.prereqs().distinct_probe().await;
    let [a_req, b_req] = &probe.requests;
    let a = probe_created(ctx, &probe.a, "create of volume A")?;
    let canary = probe.canary.clone()?;
    let b = probe
        .b
        .as_ref()
        .expect("made whenever A's create succeeded");
    let b = probe_created(ctx, b, "create of volume B")?;
    let result = if a.path == b.path {
        Err(Finding::Fail(format!(
            "expected different paths for two volumes; both got {:?}",
            a.path
        )))
    } else if !canary_intact(ctx.host(), &canary) {
        Err(Finding::Fail(format!(
            "expected volume A's files to survive the creation of volume B; {} is gone or changed",
            canary.display()
        )))
    } else {
        Ok(Finding::Pass("two volumes, two paths, A intact".into()))
    };
    ctx.calls()
        .delete(b_req, &b.path, Expect::Success, "delete of volume B")
        .await;
    ctx.calls()
        .delete(a_req, &a.path, Expect::Success, "delete of volume A")
        .await;
    result
}

pub(crate) const PARAMETERS: CheckSpec = CheckSpec {
    id: "create.parameters",
    level: Level::Should,
    rule: "create with parameters `{}` and with hostile parameter values succeeds or fails cleanly; nothing runs from them",
    why: "Parameters come from the user's volume spec and are untrusted: characters such as `<>&\"'$` must not run anything or break the plugin's parsing.",
    fix: "Parse `DHV_PARAMETERS` as JSON (e.g. with jq), never with eval; refuse unknown keys with `{\"error\": \"...\"}` and a non-zero exit.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(parameters),
};

/// `{}` and hostile parameter values are handled safely: success, or a clean
/// failure; nothing runs from them.
async fn parameters(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let marker = ctx.dirs().dir().join("parameter-marker");
    let m = marker.display();
    let hostile: Parameters = [
        ("dhv_conform_probe", format!("<>&\"'$(touch {m})")),
        ("dhv-conform-probe-2", format!("`touch {m}`; touch {m}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut notes = Vec::new();
    for (label, params) in [
        ("parameters {}", Parameters::new()),
        ("hostile parameters", hostile),
    ] {
        let mut req = ctx.request();
        req.parameters = Some(params);
        let outcome = ctx
            .steps()
            .create_cleanly(&req, label, Holds::DELETES)
            .await?;
        notes.push(outcome);
    }
    if ctx.host().exists(&marker) {
        return Err(Finding::Fail(format!(
            "expected nothing to be executed from parameter values; the marker {} appeared: \
             the plugin runs user input as shell code",
            marker.display()
        )));
    }
    Ok(Finding::Pass(notes.join("; ")))
}

pub(crate) const VOLUMES_DIR_MISSING: CheckSpec = CheckSpec {
    id: "create.volumes-dir-missing",
    level: Level::Should,
    rule: "create in a volumes dir that does not exist yet (a new node's: Nomad does not make it) succeeds and makes the volume as the default create makes it; delete then removes it",
    why: "Nomad passes its `host_volumes_dir` (by default `<data_dir>/host_volumes`) without making it, so on a new node the first create of an external plugin finds no volumes dir. A plugin that counts on it fails every first create there.",
    fix: "Make the volumes dir as part of create, before the volume (`mkdir -p -- \"$DHV_VOLUMES_DIR\"`, `os.makedirs(volumes_dir, exist_ok=True)`).",
    varies: None,
    samples: &["check-then-mkdir", "fails-on-existing-dir"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(volumes_dir_missing),
};

/// Creates in `fresh/host_volumes`, of which only `fresh` exists (a data
/// dir), then deletes.
async fn volumes_dir_missing(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let data = ctx
        .dirs()
        .make_dirs(Path::new("fresh"))
        .map_err(super::unprepared)?;
    let volumes = data.join("host_volumes");
    let req = ctx.request_in(&volumes);
    let step = "create with no volumes dir yet";
    let call = ctx
        .steps()
        .create_unloaded(&req, Expect::Either, step)
        .await?
        .into_call();
    let resp = match call.result {
        Ok(resp) => resp,
        Err(e) => {
            return Err(Finding::Warn(format!(
                "{step}: expected it to make the volumes dir {volumes:?} and the volume, as on a \
                 new node; it failed: {e}"
            )));
        }
    };
    let differs = ctx.prereqs().unlike_default(&resp).await;
    ctx.steps().delete_ok(&req, &resp.path, "delete").await?;
    if let Some(how) = differs {
        return Err(Finding::Warn(format!(
            "{step}: expected the volume as the default create makes it; it made one that {how}"
        )));
    }
    Ok(Finding::Pass(
        "with no volumes dir yet, create made it and the volume; delete removed the volume".into(),
    ))
}

pub(crate) const DEADLINE: CheckSpec = CheckSpec {
    id: "create.deadline",
    level: Level::Must,
    rule: "every create call made alone finishes within 60 s",
    why: "Nomad allows 60 s for the whole create RPC and then kills the plugin (SIGKILL to the process only): the volume may be half made and the user sees a timeout.",
    fix: "Finish within 60 s; move slow provisioning out of the call, or make it resumable so the next create finishes it.",
    varies: None,
    samples: &["hanging-create", "ignores-sigterm"],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: run_wide!(deadline),
};

fn deadline(log: &RunLog) -> FindingResult {
    super::deadline::judge(log, Operation::Create)
}
