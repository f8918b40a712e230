//! One cause met by every check that makes calls at once: creates that fail
//! when two overlap (a lock that fails instead of waiting, a shared file
//! taken by a neighbour). It is reported once, by `concurrency.create`, and
//! every other check whose creates failed alike cites it.
//!
//! Why `concurrency.create` owns it: its question is exactly "creates at
//! once all succeed", and it meets the cause by design (its creates are held
//! at their first change of state and let go together), in every run, idle
//! or loaded. `process.repeatable` meets it only where a neighbour happened
//! to overlap a create, so a finding of its own would come and go with the
//! host's load; and it is judged after the run, so the checks that run
//! beside `concurrency.create` could not know its finding when they end.
//! `concurrency.create` runs first in its phase, and a check that cites it
//! waits for its end ([`Ctx::after`]) before it ends itself.

use std::collections::BTreeSet;

use super::COMPANY_OWNER;
use crate::conformance::context::{Ctx, Fact, Finding};
use crate::contract::Operation;

/// What the owner publishes when its creates at once failed: the shapes of
/// their errors (the fact it reads back is its own finding's).
pub(crate) fn publish(ctx: &Ctx, errors: &[String]) {
    let Some(example) = errors.first() else {
        return;
    };
    ctx.publish(Fact::FailedAtOnce {
        op: Operation::Create,
        shapes: errors.iter().map(|e| ctx.error_shape(e)).collect(),
        example: example.clone(),
    });
}

/// The shapes of the errors of creates made at once that the owner failed
/// on, from the run's facts; empty when it found none (or did not run).
pub(crate) fn owned_shapes(facts: &[Fact]) -> BTreeSet<String> {
    facts
        .iter()
        .filter_map(|f| match f {
            Fact::FailedAtOnce {
                op: Operation::Create,
                shapes,
                ..
            } => Some(shapes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The finding of a check whose only problems were creates that failed
/// (`errors`, Nomad's texts, none empty) when every one of them failed as
/// the owner's creates at once did: a skip, inconclusive, citing the owner
/// (a must never warns, and the cause is reported once). Waits for the
/// owner's end first. `None` when one failed otherwise: the check's own
/// finding stands.
pub(crate) async fn cited(ctx: &Ctx, what: &str, errors: &[String]) -> Option<Finding> {
    let first = errors.first()?;
    ctx.after(COMPANY_OWNER.id).await;
    let shapes: Vec<String> = errors.iter().map(|e| ctx.error_shape(e)).collect();
    if !all_owned(&owned_shapes(&ctx.facts()), &shapes) {
        return None;
    }
    Some(Finding::Skip(format!(
        "inconclusive: {what} failed as the creates at once of {owner} did (see {owner}): {}",
        ctx.error_shape(first),
        owner = COMPANY_OWNER.id
    )))
}

/// Whether every one of `shapes` (none empty) is one the owner failed on.
fn all_owned(owned: &BTreeSet<String>, shapes: &[String]) -> bool {
    !shapes.is_empty() && shapes.iter().all(|s| owned.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_s_shapes_are_cited_and_only_its_creates() {
        let lock = "error creating volume \"{id}\" with plugin \"p\": exit status {n}: locked";
        let facts = vec![
            Fact::FailedAtOnce {
                op: Operation::Create,
                shapes: [lock.to_owned()].into(),
                example: "…".into(),
            },
            // Deletes at once are not the owner's question.
            Fact::FailedAtOnce {
                op: Operation::Delete,
                shapes: ["busy".to_owned()].into(),
                example: "…".into(),
            },
        ];
        let owned = owned_shapes(&facts);
        assert!(all_owned(&owned, &[lock.into(), lock.into()]));
        // One failure of another shape: the check's own finding stands.
        assert!(!all_owned(&owned, &[lock.into(), "no space left".into()]));
        assert!(!all_owned(&owned, &["busy".into()]));
        assert!(!all_owned(&owned, &[]));
        // Nothing published (the owner passed, or is not in the run).
        assert!(!all_owned(&owned_shapes(&[]), &[lock.into()]));
    }
}
