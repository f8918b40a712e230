//! Scenario steps several checks share: plant a canary in a volume, create a
//! volume that must then be deleted cleanly, create a volume to delete.

use std::path::{Path, PathBuf};

use std::collections::BTreeSet;

use super::{Ctx, Expect, Finding, Leftovers, listing};
use crate::contract::{CreateRequest, DeleteRequest};

/// Writes a canary into a volume, or fails the check saying the path is
/// unusable. A path that resolves outside the run's sandbox gets nothing
/// written: the check is skipped, saying so.
pub(crate) fn plant_in_volume(ctx: &Ctx, path: &str, step: &str) -> Result<PathBuf, Finding> {
    ctx.plant(Path::new(path), ".dhv-conform-canary").map_err(|e| {
        let outside = e
            .get_ref()
            .is_some_and(|inner| inner.is::<super::sandbox::OutsideSandbox>());
        if outside {
            Finding::Skip(format!("{step}: the volume's `path` {path:?}: {e}"))
        } else {
            Finding::Fail(format!(
                "{step}: expected a writable directory at `path` {path:?}; writing a file there failed: {e}"
            ))
        }
    })
}

impl Ctx {
    /// Creates one volume for a check that deletes it: its request and path.
    pub async fn one_volume(&self, step: &str) -> Result<(CreateRequest, String), Finding> {
        self.require_create().await?;
        let req = self.request();
        let resp = self.create_ok(&req, step).await?;
        Ok((req, resp.path))
    }

    /// Creates `req`, which may succeed or fail (the rule of the checks that
    /// use it); a success must then be deleted (and with `no_residue`, leave
    /// nothing); a failure must be clean (nothing new in the volumes dir, no
    /// process left). A call that timed out is judged by its re-run alone
    /// (inconclusive when that times out too). Returns a note on what happened.
    pub async fn create_cleanly(
        &self,
        req: &CreateRequest,
        label: &str,
        no_residue: bool,
    ) -> Result<String, Finding> {
        let dir = Path::new(&req.volumes_dir);
        let before = listing(dir);
        // Either: these requests may be refused; how is judged below. A
        // create that timed out is judged by its re-run alone.
        let step = format!("create with {label}");
        let call = self.create_unloaded(req, Expect::Either, &step).await?;
        match &call.result {
            Ok(resp) => {
                let step = format!("{label}: delete after a successful create");
                let delete = DeleteRequest::for_created(req, &resp.path);
                let deleted = self
                    .delete_unloaded(&delete, Expect::Success, &step)
                    .await?;
                self.need(deleted, &step).await?;
                let left = self.left_since(dir, &before).await;
                if no_residue && !left.own.is_empty() {
                    return Err(Finding::Fail(format!(
                        "{label}: create succeeded, but after delete the volumes dir still holds {}{}",
                        left.own.join(", "),
                        left.citation()
                    )));
                }
                Ok(format!("{label}: created and deleted{}", left.citation()))
            }
            Err(e) => {
                let left = self.left_since(dir, &before).await;
                let procs: Vec<String> = call
                    .run
                    .iter()
                    .flat_map(|r| r.leftovers().iter().map(|l| l.cmdline.clone()))
                    .collect();
                if left.own.is_empty() && procs.is_empty() {
                    return Ok(format!("{label}: refused cleanly{}", left.citation()));
                }
                let files = if left.own.is_empty() {
                    String::new()
                } else {
                    format!(" files: {}", left.own.join(", "))
                };
                let procs = if procs.is_empty() {
                    String::new()
                } else {
                    format!(" processes: {}", procs.join(", "))
                };
                // What a failed create left is failure.clean's finding, not
                // this check's (its input caused no command, no escape): it
                // is handed over, and this check names the owner.
                self.shared.hand_to_failure_clean(format!(
                    "{} ({label}): failed ({e}) and left{files}{procs}",
                    self.check
                ));
                Ok(format!(
                    "{label}: refused (what the failed create left is failure.clean's finding){}",
                    left.citation()
                ))
            }
        }
    }

    /// What is in `dir` now and was not in `before`, split by cause (see
    /// [`leftovers`](Self::leftovers)).
    pub async fn left_since(&self, dir: &Path, before: &BTreeSet<String>) -> Leftovers {
        let new = listing(dir).difference(before).cloned().collect::<Vec<_>>();
        self.leftovers(new).await
    }
}
