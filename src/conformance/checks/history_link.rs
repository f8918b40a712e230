//! `history.through-link`: a volumes dir reached through a symbolic link, as
//! on real nodes where the host volumes dir is a link to a larger disk. A
//! volume made, written into by a task, updated with another name and
//! deleted there is gone afterwards, whatever name it came to have, and its
//! neighbour keeps everything.

use std::path::{Path, PathBuf};

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Expect, Finding, Start, VolumeAt, canary_intact};
use crate::contract::{CreateRequest, DeleteRequest};

pub(crate) const THROUGH_LINK: CheckSpec = CheckSpec {
    id: "history.through-link",
    level: Level::Must,
    rule: "with the volumes dir reached through a symbolic link: a volume created, written into, updated with another name and deleted under that name is gone, and a neighbour keeps its path and files",
    why: "On real nodes the host volumes dir is often a link to a larger disk. A delete that resolves the volume's path and then compares it with the volumes dir as given (or the other way round) finds it outside and removes nothing: every volume deleted stays on the disk, and its data with it.",
    fix: "Compare paths in one form: resolve both the volumes dir and the volume's path (or neither), and remove the path computed from the volume id.",
    varies: None,
    samples: &["realpath-delete"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(through_link),
};

async fn through_link(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    ctx.prereqs().require_delete().await?;
    if let Some(needs) = ctx.prereqs().paths_not_distinct().await {
        // Volumes that share a path lose each other's files: create.distinct's finding.
        return Err(Finding::Skip(needs));
    }
    let inconclusive =
        |e: std::io::Error| Finding::Skip(format!("inconclusive: cannot set the node up: {e}"));
    let real = ctx
        .dirs()
        .make_dirs(Path::new("linked-disk/volumes"))
        .map_err(inconclusive)?;
    let link = ctx
        .dirs()
        .plant_link(ctx.dirs().dir(), "volumes-link", &real)
        .map_err(inconclusive)?;
    let mut live: Vec<(CreateRequest, String)> = Vec::new();
    let result = history(ctx, &link, &mut live).await;
    for (req, path) in live.into_iter().rev() {
        ctx.calls()
            .delete(&req, &path, Expect::Either, "delete at the end")
            .await;
    }
    result
}

/// B, then A, each with a task's file; A updated with another name, then
/// deleted under it.
async fn history(
    ctx: &Ctx,
    volumes: &Path,
    live: &mut Vec<(CreateRequest, String)>,
) -> FindingResult {
    let mut b = ctx.request_in(volumes);
    b.volume_name = "link-b".into();
    let path_b = ctx.steps().create_ok(&b, "create B").await?.path;
    live.push((b, path_b.clone()));
    let file_b = task_file(ctx, &path_b, "B")?;
    let mut a = ctx.request_in(volumes);
    a.volume_name = "link-a".into();
    let path_a = ctx.steps().create_ok(&a, "create A").await?.path;
    live.push((a.clone(), path_a.clone()));
    task_file(ctx, &path_a, "A")?;
    let mut renamed = a;
    renamed.volume_name = "link-a-renamed".into();
    let update = "update A with another name";
    let call = ctx.calls().create(&renamed, Expect::Either, update).await;
    let mut words = vec![
        format!("the volumes dir {} is a link", volumes.display()),
        "create B \"link-b\", a task writes into it".to_owned(),
        "create A \"link-a\", a task writes into it".to_owned(),
    ];
    match &call.result {
        Ok(r) if r.path != path_a => {
            return Err(super::history_state::moved_by_update(
                update, &r.path, &path_a,
            ));
        }
        Ok(_) => words.push(update.to_owned()),
        Err(_) => words.push(format!("{update} (refused)")),
    }
    let step = "delete A \"link-a-renamed\"";
    words.push(step.to_owned());
    let at = VolumeAt::before_delete(ctx, &path_a);
    let req = DeleteRequest::for_created(&renamed, &path_a);
    let call = ctx
        .calls()
        .delete_with(&req, Expect::Success, step, Start::Now)
        .await;
    ctx.steps().need(call, step).await?;
    live.retain(|(r, _)| r.volume_id != renamed.volume_id);
    let history = words
        .iter()
        .enumerate()
        .map(|(n, s)| format!("{}. {s}", n + 1))
        .collect::<Vec<_>>()
        .join("; ");
    if !at.gone().await {
        return Err(Finding::Fail(format!(
            "expected delete to remove the volume whatever way the volumes dir is reached; \
             after it, {} (history: {history})",
            at.still_there()
        )));
    }
    if ctx.host().entry(Path::new(&path_b)).is_err() || !canary_intact(ctx.host(), &file_b) {
        return Err(Finding::Fail(format!(
            "after {step}, volume B \"link-b\" lost its path {path_b:?} or the file a task \
             wrote into it (history: {history})"
        )));
    }
    Ok(Finding::Pass(format!(
        "the volume was gone after its delete, its neighbour untouched: {history}"
    )))
}

/// A task's file in the volume at `path`; a volume that is no writable dir
/// is a skip (other checks judge it).
fn task_file(ctx: &Ctx, path: &str, letter: &str) -> Result<PathBuf, Finding> {
    ctx.dirs().plant(Path::new(path), ".hist-data").map_err(|e| {
        Finding::Skip(format!(
            "inconclusive: a task's file could not be written into volume {letter} at {path:?}: {e}"
        ))
    })
}
