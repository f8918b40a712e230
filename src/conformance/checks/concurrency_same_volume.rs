//! The rounds of `concurrency.same-volume` (its own file, as the
//! `concurrency.*` file would be too long): identical creates of one volume
//! raced, on a fresh volume or on one that exists behind a node's mount
//! table, then judged and deleted.

use std::collections::BTreeSet;
use std::path::Path;

use super::join_all;
use crate::conformance::context::{Ctx, Expect, Race, Start};
use crate::conformance::host::{Host, MountFill};
use crate::contract::{CreateRequest, CreateResponse};
use crate::plugin::PluginCall;

/// Identical creates at once in a round of `concurrency.same-volume`.
pub(super) const SAME_VOLUME_BURST: usize = 6;

/// How many mounts a node has beyond a small run's: enough that the lines
/// after a volume's in `mount`'s output outgrow a pipe's buffer (64 KiB), so
/// that a reader that stops at the volume's line cuts the writer off.
pub(super) const FILLER_MOUNTS: usize = 1000;

/// What the rounds of `concurrency.same-volume` found so far.
#[derive(Default)]
pub(super) struct SameVolumeTally {
    pub(super) problems: Vec<String>,
    /// The errors of the creates that failed.
    pub(super) creates_failed: Vec<String>,
    /// Whether any of the identical creates failed.
    pub(super) failed: bool,
    /// Whether the identical creates of a round got different paths.
    pub(super) split: bool,
}

/// A node's mount table, where volumes are mounts and the run has a mount
/// namespace of its own, and how the verdict says which table it was.
pub(super) fn node_mount_table(ctx: &Ctx, mounts: bool) -> (Option<Box<dyn MountFill>>, String) {
    match mounts {
        false => (None, String::new()),
        true => match ctx
            .dirs()
            // Reached through the harness's descriptor: a mount a plugin put
            // over the check's dir meanwhile redirects none of the fillers.
            .make_dirs_through_fd(Path::new("mount-table"))
            .and_then(|d| ctx.host().fill_mount_table(&d, FILLER_MOUNTS))
        {
            Ok(f) => (
                Some(f),
                format!(
                    "; every other round on an existing volume, behind {FILLER_MOUNTS} other mounts"
                ),
            ),
            Err(e) => (
                None,
                format!("; the mount table was the run's own, not a node's ({e})"),
            ),
        },
    }
}

/// One round: [`SAME_VOLUME_BURST`] identical creates raced (on a volume
/// that exists, every other round where the mount table is a node's), judged
/// into `tally`, then their volume deleted. Whether every delete succeeded.
pub(super) async fn same_volume_round(
    ctx: &Ctx,
    round: usize,
    mounts: bool,
    filler: Option<&mut Box<dyn MountFill>>,
    tally: &mut SameVolumeTally,
) -> bool {
    let req = ctx.request();
    if let Some(filler) = filler.filter(|_| round % 2 == 1) {
        if !existing_volume(ctx, &req, filler.as_mut(), tally).await {
            return false;
        }
    }
    let race = Race::new(ctx.calls(), SAME_VOLUME_BURST, round);
    // Either: the rule judges each outcome below.
    let calls = join_all((0..SAME_VOLUME_BURST).map(|_| async {
        ctx.calls()
            .create_with(
                &req,
                Expect::Either,
                "one of the identical concurrent creates",
                Start::Raced(&race),
            )
            .await
            .into_call()
    }))
    .await;
    let paths = tally.judge_burst(ctx.host(), mounts, &calls);
    let mut cleaned = true;
    for path in &paths {
        cleaned &= ctx
            .calls()
            .delete(
                &req,
                path,
                Expect::Success,
                "delete after the identical creates",
            )
            .await
            .ok();
    }
    tally.failed |= calls.iter().any(|c| !c.ok());
    cleaned
}

/// Restore racing an update of a volume that exists: created first, then the
/// fillers made again after its mount, as a busy node's mounts follow a
/// volume's line. Whether the round goes on.
async fn existing_volume(
    ctx: &Ctx,
    req: &CreateRequest,
    filler: &mut dyn MountFill,
    tally: &mut SameVolumeTally,
) -> bool {
    // Either: its failure is judged below, as a problem of the round
    // (one the creates at once of concurrency.create may explain).
    let first = ctx
        .calls()
        .create(
            req,
            Expect::Either,
            "create of the volume the identical creates race on",
        )
        .await;
    if let Err(e) = &first.result {
        tally
            .problems
            .push(format!("the create before them failed: {e}"));
        tally.creates_failed.push(e.to_string());
        return false;
    }
    if let Err(e) = filler.renew() {
        tally.problems.push(format!(
            "(harness) the mount table could not be refilled: {e}"
        ));
        return false;
    }
    true
}

impl SameVolumeTally {
    /// Judges a burst of identical creates: each exits 0, all with one path,
    /// mounted once there where volumes are mounts. The paths they gave.
    fn judge_burst(
        &mut self,
        host: &dyn Host,
        mounts: bool,
        calls: &[PluginCall<CreateResponse>],
    ) -> BTreeSet<String> {
        let mut paths = BTreeSet::new();
        for (i, call) in calls.iter().enumerate() {
            match &call.result {
                Ok(resp) => {
                    paths.insert(resp.path.clone());
                }
                Err(e) => {
                    self.problems.push(format!("#{} failed: {e}", i + 1));
                    self.creates_failed.push(e.to_string());
                }
            }
        }
        if paths.len() > 1 {
            self.split = true;
            self.problems.push(format!("different paths: {paths:?}"));
        }
        if mounts {
            for path in &paths {
                let stacked = mounted_at(host, Path::new(path));
                if stacked > 1 {
                    self.problems.push(format!(
                        "{path:?} is mounted {stacked} times: a create that found the volume \
                         unmounted mounted it again over its own mount"
                    ));
                }
            }
        }
        paths
    }
}

/// How many mounts sit at `path` (stacked: 2 or more).
fn mounted_at(host: &dyn Host, path: &Path) -> usize {
    host.mounts()
        .map(|m| m.iter().filter(|m| m.mount_point == path).count())
        .unwrap_or(0)
}
