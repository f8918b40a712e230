//! `failure.unknown-operation`: Nomad may add operations; a plugin must refuse
//! what it does not know, and change nothing.

use super::CheckResult;
use crate::conformance::context::{Ctx, Expect, Finding, listing};
use crate::contract::var;

/// The operation name sent; no Nomad version uses it.
const UNKNOWN_OP: &str = "dhv-conform-unknown-operation";

/// `failure.unknown-operation` (should): `PLUGIN <unknown op>` exits non-zero.
pub async fn unknown_operation(ctx: &Ctx) -> CheckResult {
    ctx.require_process()?;
    let before = listing(&ctx.sandbox.volumes);
    let mut env = ctx.request().env();
    if let Some(op) = env.iter_mut().find(|(k, _)| k == var::OPERATION) {
        op.1 = UNKNOWN_OP.to_string();
    }
    let Some(run) = ctx.run_unknown(UNKNOWN_OP, env).await else {
        return Err(Finding::Skip("built-in plugin".into()));
    };
    let error = (!run.succeeded()).then(|| run.exit_error());
    ctx.note("an unknown operation", UNKNOWN_OP, Expect::Failure, error);
    let after = listing(&ctx.sandbox.volumes);
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
