//! The checks of a config's sections, each after parsing: what toml's types
//! cannot say (a scale's range, a request's unique name, a skip's known id
//! and reason, a parameter's values), each error naming the key's line.

use std::collections::BTreeMap;
use std::path::Path;

use super::{ConfiguredRequest, RawParameter, RawRequest};
use crate::conformance::{ParameterClaim, fixture};

/// `timeout_scale`: more than 0, at most 100.
pub(super) fn timeout_scale(scale: Option<f64>, at: &dyn Fn(&str) -> String) -> Result<(), String> {
    if let Some(scale) = scale
        && !(scale.is_finite() && scale > 0.0 && scale <= 100.0)
    {
        return Err(format!(
            "{}: timeout_scale must be more than 0 and at most 100, not {scale}",
            at("timeout_scale")
        ));
    }
    Ok(())
}

/// The `[[request]]`s, in the file's order: each named, no name twice, each
/// fixture (relative to `base`) read.
pub(super) fn requests(
    raw: Vec<RawRequest>,
    base: &Path,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<ConfiguredRequest>, String> {
    let mut requests = Vec::new();
    for r in raw {
        if r.name.trim().is_empty() {
            return Err(format!("{}: a [[request]] needs a name", at("name")));
        }
        if requests
            .iter()
            .any(|q: &ConfiguredRequest| q.name == r.name)
        {
            return Err(format!("{}: two requests named {:?}", at(&r.name), r.name));
        }
        let file = base.join(&r.fixture);
        let template = fixture::load(&file)
            .map_err(|e| format!("{}: request {:?}: {e}", at("fixture"), r.name))?
            .template;
        requests.push(ConfiguredRequest {
            name: r.name,
            fixture: file,
            template,
        });
    }
    Ok(requests)
}

/// `[skip]`: each id a check's (with the close ones when it is not), each
/// with the reason every report shows.
pub(super) fn skips(
    raw: BTreeMap<String, String>,
    at: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, String>, String> {
    let mut skips = BTreeMap::new();
    for (id, reason) in raw {
        if crate::conformance::catalogue::find(&id).is_none() {
            let close = super::super::explain::close_ids(&id);
            let hint = if close.is_empty() {
                "; `dhv-conform check --list` lists the ids".to_owned()
            } else {
                format!("; did you mean {}?", close.join(", "))
            };
            return Err(format!("{}: [skip] names no check {id:?}{hint}", at(&id)));
        }
        if reason.trim().is_empty() {
            return Err(format!(
                "{}: [skip] {id:?} needs a reason: a skipped check is shown in every report with it",
                at(&id)
            ));
        }
        skips.insert(id, reason);
    }
    Ok(skips)
}

/// `[claims.parameters.*]`: each with at least one value to try.
pub(super) fn parameters(
    raw: BTreeMap<String, RawParameter>,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<ParameterClaim>, String> {
    let mut parameters = Vec::new();
    for (key, p) in raw {
        if p.values.is_empty() {
            return Err(format!(
                "{}: [claims.parameters.{key}] needs at least one value to try",
                at(&key)
            ));
        }
        parameters.push(ParameterClaim {
            key,
            effect: p.effect.into(),
            values: p.values,
        });
    }
    Ok(parameters)
}
