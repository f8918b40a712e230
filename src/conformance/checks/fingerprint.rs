//! `fingerprint.*`: the plugin starts, answers with one JSON object, and names a
//! version Nomad can parse, every time.

use super::{CheckResult, hint_prefix, join_all, shown};
use crate::conformance::context::{Ctx, Expect, Finding};
use crate::contract;
use crate::plugin::PluginError;

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
    match contract::decode_fingerprint(&stdout) {
        Ok(_) => Ok(Finding::Pass("one JSON object on stdout".into())),
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
        if contract::decode_fingerprint(&stdout).is_err() {
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
