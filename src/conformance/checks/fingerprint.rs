//! `fingerprint.*`: the plugin starts, answers with one JSON object, and names a
//! version Nomad can parse, every time.

use super::{CheckSpec, FindingResult, Level, Needs, hint_prefix, join_all, needs, shown};
use crate::conformance::context::{Ctx, Expect, Finding, RunLog};
use crate::contract::{DecodeError, Operation};
use crate::plugin::{ExternalPlugin, PluginError, PluginSource, decode_fingerprint};

/// The `fingerprint.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    RUNS,
    JSON,
    VERSION,
    VERSION_SEMVER,
    DEADLINE,
    STABLE,
    LOOKUP,
];

pub(crate) const RUNS: CheckSpec = CheckSpec {
    id: "fingerprint.runs",
    level: Level::Must,
    rule: "`PLUGIN fingerprint` starts and exits 0",
    why: "A Nomad client fingerprints every plugin in its plugin dir when it starts and on SIGHUP. A plugin that cannot start or exits non-zero is left out of the node's attributes, so no volume can be created with it on that node.",
    fix: "Make the file executable (`chmod +x`), start it with a valid shebang (`#!/bin/sh`, LF line endings, an interpreter that exists), and exit 0 for `fingerprint` without relying on PATH, HOME or any other variable Nomad does not pass.",
    varies: None,
    samples: &[
        "crlf-shebang",
        "missing-shebang",
        "not-executable",
        "needs-path",
    ],
    needs: Needs::Any,
    subject: Some(Operation::Fingerprint),
    run: scenario!(runs),
};

async fn runs(ctx: &Ctx) -> FindingResult {
    let call = ctx.prereqs().fingerprint_probe().await;
    ctx.cite(call.run.as_ref());
    let Some(run) = &call.run else {
        return Ok(Finding::Pass("built-in plugin answers in-process".into()));
    };
    match &run.result {
        Err(start) => Err(Finding::Fail(format!(
            "expected `PLUGIN fingerprint` to start; got: {} — {}",
            start.go_error, start.explanation
        ))),
        Ok(o) if o.timed_out => Err(Finding::Fail(format!(
            "expected fingerprint to exit 0 within {:?}; it was still running and was killed",
            run.timeout
        ))),
        Ok(o) if !o.exit.success() => Err(Finding::Fail(format!(
            "expected exit 0; got {} (stderr: {}, stdout: {})",
            o.exit.go_string(),
            shown(&o.stderr),
            shown(&o.stdout)
        ))),
        Ok(o) => Ok(Finding::Pass(format!(
            "exit 0 in {:.1} ms",
            o.duration.as_secs_f64() * 1e3
        ))),
    }
}

/// The probe's stdout when fingerprint ran and exited 0; else skip.
async fn stdout_of_good_run(ctx: &Ctx) -> Result<Option<Vec<u8>>, Finding> {
    let call = ctx.prereqs().fingerprint_probe().await;
    ctx.cite(call.run.as_ref());
    match &call.run {
        None => Ok(None),
        Some(run) if run.succeeded() => Ok(Some(run.stdout().to_vec())),
        Some(_) => Err(Finding::Skip(needs(&RUNS))),
    }
}

pub(crate) const JSON: CheckSpec = CheckSpec {
    id: "fingerprint.json",
    level: Level::Must,
    rule: "fingerprint stdout decodes as Nomad decodes it: one JSON object, white space around it only",
    why: "Nomad decodes fingerprint stdout with Go's encoding/json: anything but one JSON object with white space around it is a decoding error and the plugin is left out.",
    fix: "Print exactly `{\"version\": \"1.0.0\"}` on stdout and send every log line to stderr (`echo ... >&2`).",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Fingerprint),
    run: scenario!(json),
};

async fn json(ctx: &Ctx) -> FindingResult {
    let Some(stdout) = stdout_of_good_run(ctx).await? else {
        return Ok(Finding::Pass("built-in plugin".into()));
    };
    let call = ctx.prereqs().fingerprint_probe().await;
    if let Err(PluginError::OutputTooLarge { message, .. }) = &call.result {
        return Err(Finding::Fail(format!(
            "expected one JSON object on stdout; {message}"
        )));
    }
    // Past the kept excerpt, the decoded verdict is the one to go by. A
    // version go-version refuses fails Nomad's decode too, but that is
    // `fingerprint.version`'s finding: the JSON itself is fine.
    let complete = call.run.as_ref().is_none_or(|r| r.stdout_complete());
    let decoded = match (&call.result, complete) {
        (Ok(_), false) => Ok(()),
        _ => match decode_fingerprint(&stdout) {
            Ok(_) | Err(DecodeError::Text { .. }) => Ok(()),
            Err(e) => Err(e),
        },
    };
    match decoded {
        Ok(()) => Ok(Finding::Pass("one JSON object on stdout".into())),
        Err(e) => Err(Finding::Fail(format!(
            "{}expected stdout to be one JSON object with only white space around it (no log lines); \
             Nomad's decoder says: {e}; stdout: {}",
            hint_prefix(&stdout),
            shown(&stdout)
        ))),
    }
}

pub(crate) const VERSION: CheckSpec = CheckSpec {
    id: "fingerprint.version",
    level: Level::Must,
    rule: "`version` is a JSON string that go-version accepts",
    why: "The version is parsed with hashicorp/go-version. A rejected string leaves the plugin out; `{}`, `null` or `{\"version\": null}` leave the version unset, which crashes the Nomad agent with a nil dereference.",
    fix: "Print the version as a JSON string that go-version accepts, such as `\"1.2.3\"` or `\"1.2.3-rc.1\"`.",
    varies: None,
    samples: &["bad-version", "missing-version", "null-version"],
    needs: Needs::Any,
    subject: Some(Operation::Fingerprint),
    run: scenario!(version),
};

async fn version(ctx: &Ctx) -> FindingResult {
    let call = ctx.prereqs().fingerprint_probe().await;
    if let Some(stdout) = stdout_of_good_run(ctx).await? {
        let complete = call.run.as_ref().is_none_or(|r| r.stdout_complete());
        let too_large = matches!(call.result, Err(PluginError::OutputTooLarge { .. }));
        let bad_json = complete
            && matches!(decode_fingerprint(&stdout), Err(e) if !matches!(e, DecodeError::Text { .. }));
        if too_large || bad_json {
            return Err(Finding::Skip(needs(&JSON)));
        }
    }
    match &call.result {
        Ok(fp) => Ok(Finding::Pass(format!(
            "version {:?} → {}",
            fp.version.raw,
            fp.version.canonical.as_deref().unwrap_or("?")
        ))),
        Err(PluginError::Response { message }) => Err(Finding::Fail(format!(
            "expected `version` to be a JSON string that go-version accepts (e.g. \"1.0.0\"); got: {message}; \
             stdout: {}",
            call.run
                .as_ref()
                .map(|r| shown(r.stdout()))
                .unwrap_or_default()
        ))),
        Err(e) => Err(Finding::Fail(format!("expected a version; got: {e}"))),
    }
}

pub(crate) const VERSION_SEMVER: CheckSpec = CheckSpec {
    id: "fingerprint.version-semver",
    level: Level::Should,
    rule: "`version` is strict SemVer 2.0",
    why: "Nomad accepts versions such as `1.2` or `1.2.3beta`, but constraints and tools that compare versions as SemVer read them differently or reject them.",
    fix: "Use a strict SemVer 2.0 version: three numeric parts without leading zeros, then an optional `-pre.release` and `+build`.",
    varies: None,
    samples: &["non-semver-version"],
    needs: Needs::Any,
    subject: Some(Operation::Fingerprint),
    run: scenario!(version_semver),
};

async fn version_semver(ctx: &Ctx) -> FindingResult {
    let call = ctx.prereqs().fingerprint_probe().await;
    ctx.cite(call.run.as_ref());
    let Ok(fp) = &call.result else {
        return Err(Finding::Skip(needs(&VERSION)));
    };
    if fp.version.semver {
        Ok(Finding::Pass(format!("{:?} is SemVer", fp.version.raw)))
    } else {
        Err(Finding::Fail(format!(
            "expected strict SemVer 2.0 (MAJOR.MINOR.PATCH, e.g. \"1.2.0\"); got {:?} \
             (Nomad accepts it as {}, but tools that compare versions may not)",
            fp.version.raw,
            fp.version.canonical.as_deref().unwrap_or("?")
        )))
    }
}

pub(crate) const STABLE: CheckSpec = CheckSpec {
    id: "fingerprint.stable",
    level: Level::Should,
    rule: "repeated and concurrent (8 at once) fingerprints return the same version",
    why: "Nomad fingerprints again on SIGHUP and publishes whatever version comes back; a version that changes between calls makes job constraints on it flap.",
    fix: "Return the same version on every call, from a constant in the plugin.",
    varies: None,
    samples: &[],
    needs: Needs::Concurrent,
    subject: Some(Operation::Fingerprint),
    run: scenario!(stable),
};

async fn stable(ctx: &Ctx) -> FindingResult {
    let first = ctx.prereqs().fingerprint_probe().await;
    let Ok(fp) = &first.result else {
        return Err(Finding::Skip(needs(&VERSION)));
    };
    let want = fp.version.raw.clone();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            ctx.steps()
                .fingerprint_unloaded(Expect::Success, "repeated fingerprint")
                .await,
        );
    }
    let burst = join_all((0..8).map(|_| {
        ctx.steps()
            .fingerprint_unloaded(Expect::Success, "concurrent fingerprint")
    }))
    .await;
    seen.extend(burst);
    let mut problems = Vec::new();
    for (i, call) in seen.iter().enumerate() {
        let label = if i < 3 {
            format!("repeat {}", i + 1)
        } else {
            format!("concurrent {}", i - 2)
        };
        match &call.result {
            Ok(got) if got.version.raw == want => {}
            Ok(got) => problems.push(format!("{label}: version {:?}", got.version.raw)),
            Err(e) => problems.push(format!("{label}: {e}")),
        }
    }
    if problems.is_empty() {
        Ok(Finding::Pass(format!(
            "11 more fingerprints (3 in a row, 8 at once) all said {want:?}"
        )))
    } else {
        Err(Finding::Fail(format!(
            "expected every fingerprint to say {want:?}; got: {}",
            problems.join("; ")
        )))
    }
}

pub(crate) const LOOKUP: CheckSpec = CheckSpec {
    id: "fingerprint.lookup",
    level: Level::Should,
    rule: "a plugin given by path is one Nomad's lookup finds by its file name in its own dir (confined to the dir: no symlink leading outside)",
    why: "Nomad 2.0.5 looks a plugin up by its id in `client.host_volume_plugin_dir`, confined to that dir (Go's os.Root, CVE-2026-7474): a symlink that leads outside the dir, or whose target is an absolute path, is `no such plugin: \"ID\"`, so the plugin is never fingerprinted and no volume can be created with it, although running the file by path works.",
    fix: "Install the executable itself in the plugin dir (copy it, or link to a file inside the dir with a relative target), not a symlink to a file elsewhere.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Fingerprint),
    run: scenario!(lookup),
};

/// A plugin given by path is one that Nomad's lookup of its file name in its
/// own dir finds. Judged on the file, with no call: how the plugin is
/// installed, not what it does.
async fn lookup(ctx: &Ctx) -> FindingResult {
    let path = match ctx.target() {
        PluginSource::Builtin => return Ok(Finding::Pass("built-in plugin: no lookup".into())),
        PluginSource::Found { .. } => {
            return Ok(Finding::Pass(
                "found by Nomad's lookup in its plugin dir".into(),
            ));
        }
        PluginSource::Executable(path) => std::path::absolute(path).unwrap_or(path.clone()),
    };
    let (Some(dir), Some(id)) = (path.parent(), path.file_name()) else {
        return Err(Finding::Skip("the path has no file name".into()));
    };
    let id = id.to_string_lossy();
    match ExternalPlugin::lookup(dir, &*id) {
        Ok(_) => Ok(Finding::Pass(format!(
            "Nomad's lookup of {id:?} in its own dir finds it"
        ))),
        // The file cannot start either: fingerprint.runs says so, once.
        Err(PluginError::NotExecutable { .. }) => Err(Finding::Skip(format!(
            "{} (the file is not executable)",
            needs(&RUNS)
        ))),
        Err(e) => {
            let inside = |p: &std::path::Path| {
                ctx.host()
                    .canonical(dir)
                    .is_ok_and(|d| p.parent().is_some_and(|parent| parent.starts_with(&d)))
            };
            let absolute_link = ctx.host().link_target(&path).is_ok_and(|t| t.is_absolute());
            let leads_to = match ctx.host().canonical(&path) {
                Ok(p) if !inside(&p) => format!(": it leads to {}, outside the dir", p.display()),
                Ok(p) if absolute_link => format!(
                    ": it leads to {} by an absolute symlink, which Go's os.Root refuses even inside the dir",
                    p.display()
                ),
                _ => String::new(),
            };
            Err(Finding::Fail(format!(
                "expected Nomad's lookup of {id:?} in its plugin dir {} to find it, as a Nomad client \
                 looks plugins up; Nomad 2.0.5 says: {e}{leads_to} (plugins are confined to their dir)",
                dir.display()
            )))
        }
    }
}

pub(crate) const DEADLINE: CheckSpec = CheckSpec {
    id: "fingerprint.deadline",
    level: Level::Must,
    rule: "every fingerprint call made alone finishes within 1 s (Nomad's effective limit); overruns seen only under the run's own load are evidence, not failures, and one made alone that the host's CPU wait explains counts only when it repeats alone",
    why: "Nomad wraps node fingerprinting in a 1 s context, so a fingerprint slower than 1 s is killed and the plugin is left out of the node (although the call's own limit reads 5 s).",
    fix: "Answer `fingerprint` at once with a constant version; do no I/O, probing or network calls there.",
    varies: None,
    samples: &["slow-fingerprint"],
    needs: Needs::Any,
    subject: Some(Operation::Fingerprint),
    run: run_wide!(deadline),
};

fn deadline(log: &RunLog) -> FindingResult {
    super::deadline::judge(log, Operation::Fingerprint)
}
