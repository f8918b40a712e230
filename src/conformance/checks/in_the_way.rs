//! `create.file-in-the-way`: a create that finds a regular file where its
//! volume goes. Its own file: it is the one check that puts something at a
//! volume's own path, and what the plugin may do there needs explaining.

use crate::contract::{CreateRequest, CreateResponse, Operation};
use std::path::{Path, PathBuf};

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Expect, Finding, canary_intact};

pub(crate) const FILE_IN_THE_WAY: CheckSpec = CheckSpec {
    id: "create.file-in-the-way",
    level: Level::Should,
    rule: "with a regular file where a volume's path is (after the volume was deleted), create of that volume fails or makes the volume at another path, and leaves the file as it was",
    why: "Nomad hands whatever path create answers to the task as the volume: a plugin that takes a file at its volume's path for a volume it made before (`[ -e ]`, `mkdir` whose \"exists\" error is ignored) gives the task a file, not a directory, and one that clears the file away to make its directory destroys data it did not make. Nomad's mkdir plugin fails there (`not a directory`).",
    fix: "Test for a directory, not for a name (`[ -d \"$path\" ]`, `os.path.isdir`), and fail with `{\"error\": \"...\"}` when something else is there; never remove what the volume's own create did not make.",
    varies: None,
    samples: &[],
    needs: Needs::Any,
    subject: Some(Operation::Create),
    run: scenario!(file_in_the_way),
};

/// Creates and deletes a volume, puts a file of the harness's where its
/// path was, creates the same volume again, and judges what became of the
/// file and of the answer.
async fn file_in_the_way(ctx: &Ctx) -> FindingResult {
    let way = file_where_volume_was(ctx).await?;
    let path = &way.path;
    let step = "create with a file where the volume was";
    let call = ctx
        .steps()
        .create_unloaded(&way.req, Expect::Either, step)
        .await?;
    let kept = canary_intact(ctx.host(), &way.file);
    let answer = match &call.result {
        Ok(resp) => resp.clone(),
        Err(e) => {
            if !kept {
                return Err(Finding::Warn(format!(
                    "{step}: it failed ({e}), but the file at {path:?} is gone or changed: a \
                     failed create must leave what it did not make"
                )));
            }
            // Anything else it left is failure.clean's finding: that check
            // judges every failed create made alone, this one among them.
            return Ok(Finding::Pass(
                "with a file at the volume's path, create failed and kept it".into(),
            ));
        }
    };
    if answer.path == *path && kept {
        return handed_the_file(ctx, &way, step).await;
    }
    created_elsewhere(ctx, &way, &answer, kept, step).await
}

/// A volume's request and path, and the harness's file now at that path.
struct InTheWay {
    req: CreateRequest,
    path: String,
    file: PathBuf,
}

/// Creates and deletes a volume, then puts a file where it was; the check
/// does not apply when that place has no parent dir, is still taken, or
/// lies outside the run's temp dir.
async fn file_where_volume_was(ctx: &Ctx) -> Result<InTheWay, Finding> {
    // Asks create's prerequisites first (needs create.succeeds, ...).
    ctx.prereqs().require_delete().await?;
    let (req, path) = ctx.steps().one_volume("first create").await?;
    ctx.steps().delete_ok(&req, &path, "delete").await?;
    let at = Path::new(&path);
    let (Some(dir), Some(name)) = (at.parent(), at.file_name().and_then(|n| n.to_str())) else {
        return Err(Finding::Skip(format!(
            "not applicable: the volume's path {path:?} has no parent dir"
        )));
    };
    if ctx.host().entry(at).is_ok() {
        // Its name is not in the message: a device's changes between runs.
        return Err(Finding::Skip(
            "not applicable: the volume's path is still there after delete (a device, or a path \
             the plugin keeps)"
                .into(),
        ));
    }
    // Only inside the run's temp dir: a path outside is create.path-in-volumes-dir's.
    match ctx.dirs().plant(dir, name) {
        Ok(file) => Ok(InTheWay { req, path, file }),
        Err(e) => Err(Finding::Skip(format!(
            "not applicable: cannot put a file at {path:?}: {e}"
        ))),
    }
}

/// Create answered with the harness's own file as the volume: the file is
/// removed, the volume deleted, and that is the finding.
async fn handed_the_file(ctx: &Ctx, way: &InTheWay, step: &str) -> FindingResult {
    let path = &way.path;
    // Its "volume" is the harness's file, which goes first: a delete
    // that fails on a file where it expects a directory is no finding
    // of this check, and one whose volume is gone must exit 0 anyway.
    let _ = ctx.dirs().remove_file(&way.file);
    let cleanup = "delete afterwards, the file removed";
    ctx.calls()
        .delete(&way.req, path, Expect::Either, cleanup)
        .await;
    Err(Finding::Warn(format!(
        "{step}: expected create to fail or make the volume elsewhere; it exited 0 with the \
         path {path:?}, which is the harness's regular file: Nomad would hand a file to the \
         task as the volume"
    )))
}

/// Create answered with a volume (elsewhere, or over the file it did not
/// keep): deleted, then judged on the file and on how it differs from the
/// default volume.
async fn created_elsewhere(
    ctx: &Ctx,
    way: &InTheWay,
    answer: &CreateResponse,
    kept: bool,
    step: &str,
) -> FindingResult {
    let path = &way.path;
    let same = answer.path == *path;
    let differs = ctx.prereqs().unlike_default(answer).await;
    ctx.steps()
        .delete_ok(&way.req, &answer.path, "delete afterwards")
        .await?;
    let made = differs.map(|how| format!(", and made a volume that {how}"));
    if !kept {
        return Err(Finding::Warn(format!(
            "{step}: expected the file at {path:?} to be left as it was; create {} it{}",
            match same {
                true => "exited 0 after removing or changing",
                false => "removed or changed",
            },
            made.unwrap_or_default()
        )));
    }
    match made {
        Some(made) => Err(Finding::Warn(format!(
            "{step}: create kept the file, put the volume at {:?}{made}",
            answer.path
        ))),
        None => Ok(Finding::Pass(format!(
            "with a file at the volume's path, create made the volume at {:?} and kept the file",
            answer.path
        ))),
    }
}
