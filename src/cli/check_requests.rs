//! The requests a `check` runs with (a fixture's, a config's
//! `[[request]]`s, or the default), the files they read, and one outcome
//! from the runs of several. The library's suite shares them.

use std::path::Path;

use super::CliError;
use super::check_args::CheckArgs;
use super::config::Config;
use super::print_stderr;
use crate::conformance::{self, Claims, RequestTemplate, fixture};
use crate::report;

/// The requests to run with: `--fixture`'s (a flag wins), else the config's,
/// else the default request.
pub(super) fn requests(
    args: &CheckArgs,
    config: Option<&Config>,
) -> Result<Vec<Request>, CliError> {
    if let Some(path) = &args.fixture {
        return Ok(vec![Request {
            name: "fixture".into(),
            fixture: Some(path.display().to_string()),
            template: template(Some(path))?,
        }]);
    }
    match config {
        Some(c) if !c.requests.is_empty() => c
            .requests
            .iter()
            .map(|r| {
                fits_the_kernel(&r.fixture, &r.template)?;
                Ok(Request {
                    name: r.name.clone(),
                    fixture: Some(r.fixture.display().to_string()),
                    template: r.template.clone(),
                })
            })
            .collect(),
        _ => Ok(vec![Request {
            name: "default".into(),
            fixture: None,
            template: RequestTemplate::default(),
        }]),
    }
}

/// The files the run reads, which no output may write over: the plugin, its
/// config, the fixtures, and the snapshot being compared.
pub(super) fn inputs(
    args: &CheckArgs,
    target: &conformance::Target,
    config: Option<&Config>,
    requests: &[Request],
) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut inputs = Vec::new();
    if let Some(plugin) = target.path() {
        inputs.push(("the plugin", plugin.to_path_buf()));
    }
    if let Some(c) = config {
        inputs.push(("its config", c.path.clone()));
    }
    for r in requests {
        if let Some(f) = &r.fixture {
            inputs.push(("the fixture", f.into()));
        }
    }
    if let Some(s) = args.snapshot.as_ref().filter(|_| !args.bless) {
        inputs.push(("the snapshot being compared", s.clone()));
    }
    inputs
}

/// One request the suite runs with.
pub(super) struct Request {
    pub(super) name: String,
    pub(super) fixture: Option<String>,
    pub(super) template: RequestTemplate,
}

/// One outcome of the runs of several requests: the last run's, with the
/// reports merged (each check's worst status, its request named) and any
/// run's harness failure. An earlier run's teardown that left something is
/// said now (the last one's is said by [`finish`]).
pub(super) fn merged(
    outcomes: Vec<(String, Option<String>, conformance::SuiteOutcome)>,
) -> conformance::SuiteOutcome {
    merge_outcomes(outcomes, |name, teardown| {
        print_stderr(&format!(
            "dhv-conform: request {name}: {}\n",
            teardown.summary()
        ));
    })
}

/// [`merged`] without its words: `left(name, teardown)` is told of each earlier
/// run whose teardown left something (the library and `check` share this).
pub(crate) fn merge_outcomes(
    mut outcomes: Vec<(String, Option<String>, conformance::SuiteOutcome)>,
    mut left: impl FnMut(&str, &conformance::Teardown),
) -> conformance::SuiteOutcome {
    let (name, fixture, mut last) = outcomes.pop().expect("at least one request");
    if outcomes.is_empty() {
        return last;
    }
    let mut runs = Vec::new();
    for (name, fixture, o) in outcomes {
        if !o.teardown.removed && !o.teardown.kept_on_request {
            left(&name, &o.teardown);
        }
        last.harness_failed |= o.harness_failed;
        runs.push((name, fixture, o.report));
    }
    let report = last.report.clone();
    runs.push((name, fixture, report));
    if let Some(report) = report::merge_requests(runs) {
        last.report = report;
    }
    last
}

/// The config and claims, for the report.
pub(crate) fn config_info(config: Option<&Path>, claims: &Claims) -> Option<report::ConfigInfo> {
    if config.is_none() && !claims.any() {
        return None;
    }
    Some(report::ConfigInfo {
        path: config.map(|path| path.display().to_string()),
        claims: serde_json::to_value(claims).unwrap_or_default(),
    })
}

/// The request template: the fixture's, or the default one.
pub(crate) fn template(fixture: Option<&Path>) -> Result<RequestTemplate, CliError> {
    let Some(path) = fixture else {
        return Ok(RequestTemplate::default());
    };
    let template = fixture::load(path)
        .map_err(|e| CliError::usage(e.to_string()))?
        .template;
    fits_the_kernel(path, &template)?;
    Ok(template)
}

/// A fixture whose request the kernel cannot hand to a plugin (`E2BIG`) is
/// bad input: exit 2 naming the fixture, rather than every create failing to
/// start. The paths and ids of the run are not known yet: generous stand-ins.
pub(crate) fn fits_the_kernel(path: &Path, template: &RequestTemplate) -> Result<(), CliError> {
    let stand_in = "x".repeat(200);
    let request = stand_in_request(template, &stand_in);
    match crate::exec::env_too_large(&request.env()) {
        Some(why) => Err(CliError::usage(format!(
            "fixture {}: the request is too large to pass to a plugin: {why}",
            path.display()
        ))),
        None => Ok(()),
    }
}

fn stand_in_request(t: &RequestTemplate, stand_in: &str) -> crate::contract::CreateRequest {
    let nil = uuid::Uuid::nil().to_string();
    let name = t.name.clone().unwrap_or_else(|| stand_in.to_owned());
    t.request(stand_in, stand_in, name, nil.clone(), &nil)
}
