//! `fingerprint.*`: the plugin starts, answers with one JSON object, and names a
//! version Nomad can parse, every time.

use super::{CheckResult, hint_prefix, join_all, shown};
use crate::conformance::context::{Ctx, Expect, Finding};
use crate::contract::DecodeError;
use crate::plugin::{ExternalPlugin, PluginError, PluginSource, decode_fingerprint};

/// `fingerprint.runs` (must): `PLUGIN fingerprint` starts and exits 0.
pub async fn runs(ctx: &Ctx) -> CheckResult {
    let call = ctx.fingerprint_probe().await;
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
    let call = ctx.fingerprint_probe().await;
    ctx.cite(call.run.as_ref());
    match &call.run {
        None => Ok(None),
        Some(run) if run.succeeded() => Ok(Some(run.stdout().to_vec())),
        Some(_) => Err(Finding::Skip("needs fingerprint.runs".into())),
    }
}

/// `fingerprint.json` (must): stdout decodes as Nomad decodes it.
pub async fn json(ctx: &Ctx) -> CheckResult {
    let Some(stdout) = stdout_of_good_run(ctx).await? else {
        return Ok(Finding::Pass("built-in plugin".into()));
    };
    let call = ctx.fingerprint_probe().await;
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

/// `fingerprint.version` (must): `version` is a string go-version accepts.
pub async fn version(ctx: &Ctx) -> CheckResult {
    let call = ctx.fingerprint_probe().await;
    if let Some(stdout) = stdout_of_good_run(ctx).await? {
        let complete = call.run.as_ref().is_none_or(|r| r.stdout_complete());
        let too_large = matches!(call.result, Err(PluginError::OutputTooLarge { .. }));
        let bad_json = complete
            && matches!(decode_fingerprint(&stdout), Err(e) if !matches!(e, DecodeError::Text { .. }));
        if too_large || bad_json {
            return Err(Finding::Skip("needs fingerprint.json".into()));
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

/// `fingerprint.version-semver` (should): the version is strict SemVer 2.0.
pub async fn version_semver(ctx: &Ctx) -> CheckResult {
    let call = ctx.fingerprint_probe().await;
    ctx.cite(call.run.as_ref());
    let Ok(fp) = &call.result else {
        return Err(Finding::Skip("needs fingerprint.version".into()));
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

/// `fingerprint.stable` (should): repeated and concurrent fingerprints agree.
pub async fn stable(ctx: &Ctx) -> CheckResult {
    let first = ctx.fingerprint_probe().await;
    let Ok(fp) = &first.result else {
        return Err(Finding::Skip("needs fingerprint.version".into()));
    };
    let want = fp.version.raw.clone();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            ctx.fingerprint_unloaded(Expect::Success, "repeated fingerprint")
                .await,
        );
    }
    let burst = join_all(
        (0..8).map(|_| ctx.fingerprint_unloaded(Expect::Success, "concurrent fingerprint")),
    )
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

/// `fingerprint.lookup` (should): a plugin given by path is one that Nomad's
/// lookup of its file name in its own dir finds. Judged on the file, with no
/// call: how the plugin is installed, not what it does.
pub async fn lookup(ctx: &Ctx) -> CheckResult {
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
    match ExternalPlugin::lookup(dir, &id) {
        Ok(_) => Ok(Finding::Pass(format!(
            "Nomad's lookup of {id:?} in its own dir finds it"
        ))),
        // The file cannot start either: fingerprint.runs says so, once.
        Err(PluginError::NotExecutable { .. }) => Err(Finding::Skip(
            "needs fingerprint.runs (the file is not executable)".into(),
        )),
        Err(e) => {
            let leads_to = std::fs::canonicalize(&path)
                .map(|p| format!(": it leads to {}, outside the dir", p.display()))
                .unwrap_or_default();
            Err(Finding::Fail(format!(
                "expected Nomad's lookup of {id:?} in its plugin dir {} to find it, as a Nomad client \
                 looks plugins up; Nomad 2.0.5 says: {e}{leads_to} (plugins are confined to their dir)",
                dir.display()
            )))
        }
    }
}
