//! `history.*`: what a sequence of operations on one node does to its
//! volumes, where a single call looks right. Each check plays a fixed
//! history (the same in every run, so a snapshot pins its verdict) against
//! a model of the node ([`Node`]): for every live volume, what Nomad knows
//! (its request and path) and what a task left in it (files with their
//! content and mode, the volume's own mode, links into its neighbours and
//! out of the volumes dir). After every operation the oracle ([`Node::damage`])
//! compares every volume with the model: the operated one as the contract
//! says, every other one untouched.
//!
//! The names are drawn to collide (a prefix of another, another case,
//! punctuation that sanitises alike), and a name is given again to a new
//! volume after its first one was deleted: a plugin that maps two names to
//! one directory, cleans up by a pattern that matches a neighbour, follows
//! a link a task left, or hands out a slot still in use, meets its bug here.

use super::{CheckSpec, FindingResult, Level, Needs, create_update::UPDATE};
use crate::conformance::context::{Ctx, Expect, Fact, Finding};
use crate::conformance::node_model::Node;
use crate::contract::CreateRequest;

pub(crate) const NEIGHBOURS: CheckSpec = CheckSpec {
    id: "history.neighbours",
    level: Level::Must,
    rule: "volumes named to collide (hist, hist-1, Hist, hist_1), each holding files, a mode and links a task left (into a neighbour, out of the volumes dir): creating, deleting and creating again under a freed name changes nothing of any other volume, and every volume gets a path of its own",
    why: "A node holds many volumes for many jobs. A delete whose clean-up matches a neighbour's name, two names mapped to one directory, a slot handed out again while in use, or a delete that follows a link a task left, loses another job's data; no single call shows it.",
    fix: "Derive every path from the volume id alone (never the name), remove exactly the volume's own path (no globs, no `find -L`, never through a link), and never hand out a path or slot until its volume is deleted.",
    varies: None,
    samples: &["glob-delete"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(neighbours),
};

pub(crate) const UPDATE_KEEPS: CheckSpec = CheckSpec {
    id: "history.update-keeps",
    level: Level::Must,
    rule: "an existing volume holding files updated by create again with another name, then a smaller capacity, then the first request again: each answer is the same path with every file, mode and the volume's own mode as they were, or a refusal that leaves the volume so; the last (the request it was made with) succeeds",
    why: "Nomad calls create again for an existing id on every update and every agent restore, and an update may rename the volume or shrink it. An answer that renames, re-modes, prunes or moves the volume, or one that leaves it refusing the next create, loses a job's data or wedges the volume.",
    fix: "Treat create of an existing volume (by id) as an update of that very volume: keep its path, files and modes; refuse what you cannot apply without changing anything.",
    varies: None,
    samples: &["name-as-path"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(update_keeps),
};

/// The group, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[
    NEIGHBOURS,
    UPDATE_KEEPS,
    super::history_state::STATE_NOT_PATH,
    super::history_link::THROUGH_LINK,
];

/// The names of `history.neighbours`, drawn to collide with the first: a
/// prefix of the next, another case, punctuation that sanitises alike.
const NAMES: [&str; 4] = ["hist", "hist-1", "Hist", "hist_1"];

/// Creates colliding names, lets tasks write, deletes one, gives its name
/// to a new volume, deletes another: every other volume untouched throughout.
async fn neighbours(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    ctx.prereqs().require_delete().await?;
    if let Some(needs) = ctx.prereqs().paths_not_distinct().await {
        return Err(Finding::Skip(needs));
    }
    let mut node = Node::new(ctx);
    let result = neighbours_history(&mut node).await;
    node.clear().await;
    result?;
    Ok(Finding::Pass(format!(
        "every volume untouched by the others' operations, each at a path of its own: {}",
        node.history()
    )))
}

async fn neighbours_history(node: &mut Node<'_>) -> Result<(), Finding> {
    for name in NAMES {
        node.create(name).await?;
    }
    // The first name's volume goes, and the name is given again: a pattern
    // that matches its neighbours, or a slot handed out again, shows here.
    if !node.live.is_empty() {
        let first = node.live[0].req.volume_name.clone();
        node.delete(0).await?;
        node.create(&first).await?;
    }
    if !node.live.is_empty() {
        node.delete(0).await?;
    }
    Ok(())
}

/// Updates one volume that holds files: another name, a smaller capacity,
/// then the request it was made with.
async fn update_keeps(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    if let Some(needs) = ctx.prereqs().create_again_fails().await {
        return Err(Finding::Skip(needs));
    }
    let mut node = Node::new(ctx);
    let result = updates(&mut node).await;
    node.clear().await;
    result
}

async fn updates(node: &mut Node<'_>) -> FindingResult {
    let Some(index) = node.create("upd").await? else {
        return Err(Finding::Skip(
            "inconclusive: the plugin refused the volume name \"upd\"".into(),
        ));
    };
    let first = node.live[index].req.clone();
    let mut renamed = first.clone();
    renamed.volume_name = "upd-renamed".into();
    let mut smaller = first.clone();
    smaller.capacity_min_bytes = first.capacity_min_bytes / 2;
    if smaller.capacity_max_bytes > 0 {
        smaller.capacity_max_bytes = (first.capacity_max_bytes / 2).max(smaller.capacity_min_bytes);
    }
    let updates = [
        (
            "create again with another name (\"upd-renamed\")",
            renamed,
            false,
        ),
        ("create again with capacity min halved", smaller, false),
        (
            "create again with the request it was made with",
            first,
            true,
        ),
    ];
    for (what, req, must_succeed) in updates {
        update_once(node, index, what, &req, must_succeed).await?;
    }
    Ok(Finding::Pass(format!(
        "every update kept the volume's path, files and modes: {}",
        node.history()
    )))
}

/// One update of the live volume `index`: the same path with everything as
/// it was, or a refusal that left it so (never for `must_succeed`).
async fn update_once(
    node: &mut Node<'_>,
    index: usize,
    what: &str,
    req: &CreateRequest,
    must_succeed: bool,
) -> Result<(), Finding> {
    let ctx = node.ctx;
    let letter = node.live[index].letter;
    let call = ctx
        .calls()
        .create(req, Expect::Either, what)
        .await
        .into_call();
    node.steps.push(format!(
        "{what} of {letter}{}",
        if call.result.is_err() {
            " (refused)"
        } else {
            ""
        }
    ));
    let v = &node.live[index];
    if let Some(damage) = node.damage(v) {
        let lost = damage.starts_with("lost");
        if lost && what.contains("capacity") {
            // An update that re-makes the volume on a new capacity is
            // create.update's finding: once, there.
            ctx.after(UPDATE.id).await;
            if ctx
                .facts()
                .iter()
                .any(|f| matches!(f, Fact::UpdateLostData { .. }))
            {
                return Err(Finding::Skip(format!(
                    "inconclusive: {what} lost the volume's data, as an update of its capacity \
                     does (see {})",
                    UPDATE.id
                )));
            }
        }
        return Err(node.fail(format!("after {what}, volume {} {damage}", v.named())));
    }
    match call.result {
        Ok(resp) if resp.path != v.path => Err(node.fail(format!(
            "expected {what} to answer the volume's path {:?}; got {:?}",
            v.path, resp.path
        ))),
        Err(e) if must_succeed => Err(node.fail(format!(
            "expected {what} to succeed; got: {e}: the updates before it left the volume \
             refusing the request it was made with"
        ))),
        _ => node.oracle(Some(index)),
    }
}
