//! `volume.parameters`, in its own file (the other `volume.*` checks fill
//! volume.rs): each parameter a plugin accepts has the effect it claims on the
//! volume made with it.

use std::collections::BTreeMap;
use std::path::Path;

use super::volume_measured::measured_probe;
use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::claims::{Effect, ParameterClaim};
use crate::conformance::context::{Ctx, Finding};
use crate::conformance::volume_facts::{Kind, VolumeFacts};

pub(crate) const PARAMETERS: CheckSpec = CheckSpec {
    id: "volume.parameters",
    level: Level::Should,
    rule: "claimed by `[claims.parameters]` and `filesystem` (the built-in mkdir claims Nomad's `mode`, `uid`, `gid`): each parameter's effect holds on the volume made with it",
    why: "Jobs ask for a volume's mode, owner or filesystem through its `parameters` block; a plugin that accepts a parameter and ignores it hands the task a volume it cannot use (permission denied) or one that is not what the operator chose.",
    fix: "Apply every parameter you accept (chmod, chown after creating the root; mkfs with the type asked for) and refuse the ones you do not support with an {\"error\": ...}; list what each parameter sets under [claims.parameters] in dhv-conform.toml.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: None,
    run: scenario!(parameters),
};

/// Each declared effect holds on the volume created with it. Without a claim, a
/// request whose parameters use Nomad's own names (`mode`, `uid`, `gid`, as the
/// built-in `mkdir` reads them) is held to them on the default volume.
async fn parameters(ctx: &Ctx) -> FindingResult {
    let claims = ctx.claims().clone();
    let requested = requested(ctx.template().parameters.as_ref());
    if claims.parameters.is_empty() && claims.filesystem.is_none() && requested.is_empty() {
        return Err(Finding::Skip(
            "not claimed (no [claims.parameters] or filesystem in dhv-conform.toml)".into(),
        ));
    }
    let mut held = Vec::new();
    if let Some(fs) = &claims.filesystem {
        let (_, _, facts) = measured_probe(ctx).await?;
        check_fs(&facts, fs, "the default volume").map_err(Finding::Fail)?;
        held.push(format!("filesystem {fs}"));
    }
    let asks_mode = requested.iter().any(|(_, e, _)| *e == Effect::Mode);
    if claims.implicit && !asks_mode {
        // Nomad's mkdir: 0700 when no mode is asked for.
        let (_, _, facts) = measured_probe(ctx).await?;
        if facts.mode != 0o700 {
            return Err(Finding::Fail(format!(
                "expected the default volume's mode to be 0700 (Nomad's default); it is {:04o}",
                facts.mode
            )));
        }
        held.push("default mode 0700".into());
    }
    if claims.parameters.is_empty() && !requested.is_empty() {
        let (_, _, facts) = measured_probe(ctx).await?;
        for (key, effect, value) in &requested {
            effect_holds(&facts, *effect, value).map_err(|got| {
                Finding::Fail(format!(
                    "expected the request's {key} = {value:?} (Nomad's name for it) to set the volume's {}; \
                     the default volume is {}: {got}",
                    effect.as_str(),
                    facts.describe()
                ))
            })?;
            held.push(format!("the request's {key} = {value:?} holds"));
        }
    }
    for claim in &claims.parameters {
        for value in &claim.values {
            held.push(one_parameter(ctx, claim, value).await?);
        }
    }
    Ok(Finding::Pass(held.join("; ")))
}

/// The request's parameters that carry Nomad's own names and a value of the
/// form Nomad's `mkdir` reads (an octal mode, a decimal id other than -1).
fn requested(params: Option<&crate::contract::Parameters>) -> Vec<(String, Effect, String)> {
    let Some(params) = params else {
        return Vec::new();
    };
    [
        ("mode", Effect::Mode),
        ("uid", Effect::Uid),
        ("gid", Effect::Gid),
    ]
    .into_iter()
    .filter_map(|(key, effect)| {
        let value = params.get(key)?;
        let fits = match effect {
            Effect::Mode => u32::from_str_radix(value, 8).is_ok(),
            _ => value.parse::<u32>().is_ok(),
        };
        fits.then(|| (key.to_owned(), effect, value.clone()))
    })
    .collect()
}

/// Whether `effect` with `value` holds on the measured volume; what it is instead.
fn effect_holds(facts: &VolumeFacts, effect: Effect, value: &str) -> Result<(), String> {
    match effect {
        Effect::Mode => match u32::from_str_radix(value.trim_start_matches("0o"), 8) {
            Ok(want) if facts.mode == want & 0o7777 => Ok(()),
            Ok(want) => Err(format!(
                "mode {:04o}, not {:04o}",
                facts.mode,
                want & 0o7777
            )),
            Err(_) => Err(format!("the claimed value {value:?} is not an octal mode")),
        },
        Effect::Uid => id_holds(facts.uid, value, "owner"),
        Effect::Gid => id_holds(facts.gid, value, "group"),
        Effect::FsType => check_fs(facts, value, "the volume"),
    }
}

/// Creates a volume with `claim.key = value`, measures it, deletes it.
async fn one_parameter(ctx: &Ctx, claim: &ParameterClaim, value: &str) -> Result<String, Finding> {
    ctx.prereqs().require_create().await?;
    let mut req = ctx.request();
    let mut params: BTreeMap<String, String> = req
        .parameters
        .clone()
        .map(|p| p.into_iter().collect())
        .unwrap_or_default();
    params.insert(claim.key.clone(), value.to_owned());
    req.parameters = Some(params.into_iter().collect());
    let step = format!("create with {} = {value:?}", claim.key);
    let resp = ctx.steps().create_ok(&req, &step).await?;
    let facts = VolumeFacts::measure(ctx.host(), Path::new(&resp.path))
        .map_err(|e| Finding::Fail(format!("{step}: cannot measure {:?}: {e}", resp.path)))?;
    let holds = effect_holds(&facts, claim.effect, value);
    ctx.steps()
        .delete_ok(&req, &resp.path, &format!("delete after {step}"))
        .await?;
    holds
        .map(|()| {
            format!(
                "{} = {value:?} sets the {}",
                claim.key,
                claim.effect.as_str()
            )
        })
        .map_err(|got| {
            Finding::Fail(format!(
                "expected {} = {value:?} to set the volume's {}; {step} made {}: {got}",
                claim.key,
                claim.effect.as_str(),
                facts.describe()
            ))
        })
}

fn id_holds(have: u32, value: &str, what: &str) -> Result<(), String> {
    match value.parse::<u32>() {
        Ok(want) if want == have => Ok(()),
        Ok(want) => Err(format!("{what} {have}, not {want}")),
        Err(_) => Err(format!("the claimed value {value:?} is not a number")),
    }
}

fn check_fs(facts: &VolumeFacts, want: &str, which: &str) -> Result<(), String> {
    match &facts.kind {
        Kind::Mount { fs_type, .. } if fs_type == want => Ok(()),
        Kind::Mount { fs_type, .. } => Err(format!(
            "expected {which} to be a {want} filesystem; it is {fs_type}"
        )),
        _ => Err(format!(
            "expected {which} to be a {want} filesystem mounted at its path; it is {}",
            facts.describe()
        )),
    }
}
