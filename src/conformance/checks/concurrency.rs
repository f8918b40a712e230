//! `concurrency.*`: Nomad runs creates and deletes of different volumes at the
//! same time, and restore can race an update of the same volume.
//!
//! Races are met by design, not by chance: each burst's calls start aligned
//! (every one waits at a barrier until all are ready, then all are spawned
//! at once) and are held at their first change of state (a name made or
//! removed in the check's dirs, a file created, a mount, a loop device) until
//! every call of the burst has reached its own, then let go together, the
//! first one varied by round ([`Race`]): a check-then-act window of
//! microseconds after an interpreter's start-up is met in every round, not
//! by luck. Bursts are repeated for a fixed number of rounds, each on fresh
//! volumes, and deletes race creates. A round that finds a fault ends the
//! check; the messages name no round, so the report does not depend on which
//! one found it. Where calls cannot be held (the kernel has no seccomp user
//! notification), the message says so and the starts are only aligned.

use crate::contract::Operation;
use std::collections::BTreeSet;
use std::path::Path;

use super::concurrency_same_volume::{
    SAME_VOLUME_BURST, SameVolumeTally, node_mount_table, same_volume_round,
};
use super::{CheckSpec, FindingResult, Level, Needs, join_all};
use crate::conformance::context::{Ctx, Expect, Finding, Race, Start, VolumeAt};
use crate::conformance::host::Host;
use crate::contract::{CreateResponse, DeleteRequest};
use crate::plugin::PluginCall;

/// Rounds of distinct creates (`concurrency.create`) and of deletes racing
/// creates (`concurrency.delete`).
const ROUNDS: usize = 3;

/// Rounds of identical creates (`concurrency.same-volume`): a check-then-act
/// race is met in the first (its calls are held at the act); the others let
/// a different call go first, for a race that only one order shows.
const SAME_VOLUME_ROUNDS: usize = 8;

/// The `concurrency.*` checks, in catalogue order.
pub(crate) const CHECKS: &[CheckSpec] = &[CREATE, DELETE, SAME_VOLUME];

pub(crate) const CREATE: CheckSpec = CheckSpec {
    id: "concurrency.create",
    level: Level::Must,
    rule: "8 creates of distinct volumes at once (started aligned, held at their first change of state and let go together; 3 rounds, fresh volumes each) all succeed with distinct, existing paths",
    why: "Nomad creates volumes concurrently (several jobs at once, restore at agent start); plugins that share a counter or file without a lock hand two volumes one path.",
    fix: "Use a per-volume path from `DHV_VOLUME_ID`, and lock (e.g. `flock`) any shared file.",
    varies: Some("names which of the concurrent creates lost the race"),
    samples: &["busy-pool", "racy-concurrency"],
    needs: Needs::Concurrent,
    subject: Some(Operation::Create),
    run: scenario!(create),
};

/// 8 distinct creates at once, aligned, for [`ROUNDS`] rounds.
async fn create(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let mut problems = Vec::new();
    let mut collisions_only = true;
    let mut failed = Vec::new();
    for round in 0..ROUNDS {
        let cleaned =
            create_round(ctx, round, &mut problems, &mut failed, &mut collisions_only).await;
        // A round whose deletes failed (or hung) ends the rounds: the next
        // would only wait as long again.
        if !problems.is_empty() || !cleaned {
            break;
        }
    }
    if problems.is_empty() {
        Ok(Finding::Pass(format!(
            "8 at once, {ROUNDS} rounds: distinct, existing paths{}",
            unheld(ctx)
        )))
    } else if let Some(needs) = match collisions_only {
        // Two volumes get one path even one after the other: not a race.
        true => ctx.prereqs().paths_not_distinct().await,
        false => None,
    } {
        Err(Finding::Skip(needs))
    } else {
        // Its creates at once failed: a cause the other checks that make
        // creates at once meet too, and cite (see `company`).
        super::company::publish(ctx, &failed);
        Err(Finding::Fail(format!(
            "expected 8 concurrent creates of distinct volumes to succeed with distinct, existing paths; {}",
            problems.join("; ")
        )))
    }
}

/// How a pass message ends where the calls could not be held at their
/// changes (the host's doing, not the plugin's: the verdict is then not
/// pinned in a snapshot).
fn unheld(ctx: &Ctx) -> &'static str {
    if ctx.target().is_builtin() || Race::holds(ctx.calls()) {
        return "";
    }
    ctx.unpin(UNHELD);
    "; the calls could not be held at their changes here (no seccomp user notification): started aligned only"
}

/// Why a concurrency verdict is not pinned where calls cannot be held.
const UNHELD: &str = "calls cannot be held at their changes on this host";

/// One round of `concurrency.create`: 8 creates raced, then their deletes;
/// whether every delete succeeded. The errors of the creates that failed
/// go into `failed`.
async fn create_round(
    ctx: &Ctx,
    round: usize,
    problems: &mut Vec<String>,
    failed: &mut Vec<String>,
    collisions_only: &mut bool,
) -> bool {
    let reqs: Vec<_> = (0..8).map(|_| ctx.request()).collect();
    let race = Race::new(ctx.calls(), reqs.len(), round);
    let calls = join_all(reqs.iter().map(|r| {
        ctx.calls().create_with(
            r,
            Expect::Success,
            "one of 8 concurrent creates",
            Start::Raced(&race),
        )
    }))
    .await;
    let mut paths = BTreeSet::new();
    for (i, call) in calls.iter().enumerate() {
        match &call.result {
            Ok(resp) => {
                if !paths.insert(resp.path.clone()) {
                    problems.push(format!(
                        "#{} got the same path as another: {:?}",
                        i + 1,
                        resp.path
                    ));
                } else if !ctx.host().exists(Path::new(&resp.path)) {
                    *collisions_only = false;
                    problems.push(format!("#{}'s path {:?} does not exist", i + 1, resp.path));
                }
            }
            Err(e) => {
                *collisions_only = false;
                problems.push(format!("#{} failed: {e}", i + 1));
                failed.push(e.to_string());
            }
        }
    }
    // At once too: a plugin whose deletes hang costs one delete limit here.
    join_all(reqs.iter().zip(&calls).filter_map(|(req, call)| {
        let resp = call.result.as_ref().ok()?;
        Some(ctx.calls().delete(
            req,
            &resp.path,
            Expect::Success,
            "delete after the concurrent creates",
        ))
    }))
    .await
    .iter()
    .all(|d| d.ok())
}

pub(crate) const DELETE: CheckSpec = CheckSpec {
    id: "concurrency.delete",
    level: Level::Must,
    rule: "8 deletes of distinct volumes at once, racing 4 creates of new volumes (started aligned, held at their first change of state and let go together; 3 rounds), all succeed: the deleted paths are gone, the created ones exist",
    why: "Several volumes are deleted at once (jobs stopping together); a race between deletes leaves volumes behind or fails them.",
    fix: "Keep deletes independent of each other; lock any shared file.",
    varies: None,
    samples: &["busy-pool"],
    needs: Needs::Concurrent,
    subject: Some(Operation::Delete),
    run: scenario!(delete),
};

/// 8 deletes at once, racing 4 creates of new volumes, all aligned, for
/// [`ROUNDS`] rounds.
async fn delete(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    // Volumes that share one path delete each other whatever the timing:
    // one root cause, create.distinct's.
    if let Some(needs) = ctx.prereqs().paths_not_distinct().await {
        return Err(Finding::Skip(needs));
    }
    let mut tally = DeleteTally::default();
    for round in 0..ROUNDS {
        let cleaned = delete_round(ctx, round, &mut tally).await?;
        if !tally.problems.is_empty() || !cleaned {
            break;
        }
    }
    let DeleteTally {
        problems,
        creates_failed,
        remade,
    } = tally;
    if problems.is_empty() {
        let remade = match remade.len() {
            0 => String::new(),
            n => format!(
                " ({n} deleted path(s) made again by a racing create of another volume that was \
                 given the same path, {}: two volumes at one path is the creates' finding, see \
                 concurrency.create)",
                remade.join(", ")
            ),
        };
        Ok(Finding::Pass(format!(
            "8 at once, racing 4 creates, {ROUNDS} rounds: all gone, the new ones made{remade}{}",
            unheld(ctx)
        )))
    } else if let Some(cited) = match problems.len() == creates_failed.len() {
        // Only its racing creates failed, as concurrency.create's did: one
        // cause, reported there; its deletes are then not judged.
        true => super::company::cited(ctx, "the creates racing its deletes", &creates_failed).await,
        false => None,
    } {
        Err(cited)
    } else {
        Err(Finding::Fail(format!(
            "expected 8 concurrent deletes, racing 4 creates of other volumes, to succeed and \
             remove every path (and the creates to make theirs); {}",
            problems.join("; ")
        )))
    }
}

/// What the rounds of `concurrency.delete` found so far.
#[derive(Default)]
struct DeleteTally {
    problems: Vec<String>,
    /// The errors of its racing creates that failed.
    creates_failed: Vec<String>,
    /// The deleted paths a racing create of another volume was given.
    remade: Vec<String>,
}

/// One round of `concurrency.delete`: 8 volumes made, then deleted at once,
/// racing 4 creates of new volumes; judged into `tally`. Whether its
/// clean-up deletes succeeded.
async fn delete_round(ctx: &Ctx, round: usize, tally: &mut DeleteTally) -> Result<bool, Finding> {
    let reqs: Vec<_> = (0..8).map(|_| ctx.request()).collect();
    let mut made = Vec::new();
    for req in &reqs {
        made.push(
            ctx.steps()
                .create_ok(req, "create before the concurrent deletes")
                .await?
                .path,
        );
    }
    let volumes: Vec<VolumeAt> = made
        .iter()
        .map(|p| VolumeAt::before_delete(ctx, p))
        .collect();
    let new: Vec<_> = (0..4).map(|_| ctx.request()).collect();
    let race = &Race::new(ctx.calls(), reqs.len() + new.len(), round);
    let deletes = reqs.iter().zip(&made).map(|(r, p)| {
        let req = DeleteRequest::for_created(r, p);
        async move {
            let step = "one of 8 concurrent deletes";
            ctx.calls()
                .delete_with(&req, Expect::Success, step, Start::Raced(race))
                .await
                .into_call()
        }
    });
    let creates = new.iter().map(|r| async move {
        ctx.calls()
            .create_with(
                r,
                Expect::Success,
                "a create racing the deletes",
                Start::Raced(race),
            )
            .await
            .into_call()
    });
    let (calls, created) = futures_pair(join_all(deletes), join_all(creates)).await;
    tally.judge_deletes(&made, &volumes, &calls, &created).await;
    tally.judge_racing_creates(ctx.host(), &created);
    let cleaned = join_all(new.iter().zip(&created).filter_map(|(req, call)| {
        let resp = call.result.as_ref().ok()?;
        Some(
            ctx.calls()
                .delete(req, &resp.path, Expect::Success, "delete after the race"),
        )
    }))
    .await;
    // A failed (or hung) delete ends the rounds; it is the check's finding
    // through its ledger.
    Ok(cleaned.iter().all(|d| d.ok()))
}

impl DeleteTally {
    /// Judges the raced deletes of the volumes `made` (measured before as
    /// `volumes`): each succeeds and its volume is gone, unless a racing
    /// create (`created`) was given its path.
    async fn judge_deletes(
        &mut self,
        made: &[String],
        volumes: &[VolumeAt],
        calls: &[PluginCall<()>],
        created: &[PluginCall<CreateResponse>],
    ) {
        // The paths the racing creates were given: a deleted path among them
        // was made again by one of them, whatever the delete did.
        let given: Vec<&str> = created
            .iter()
            .filter_map(|c| Some(c.result.as_ref().ok()?.path.as_str()))
            .collect();
        for (i, (call, at)) in calls.iter().zip(volumes).enumerate() {
            if let Err(e) = &call.result {
                self.problems.push(format!("#{} failed: {e}", i + 1));
            } else if given.contains(&made[i].as_str()) {
                self.remade.push(format!("{:?}", made[i]));
            } else if !at.gone().await && at.is_block() {
                self.problems
                    .push(format!("#{}: {}", i + 1, at.still_there()));
            } else if !at.gone().await {
                self.problems
                    .push(format!("#{}'s path {:?} still exists", i + 1, made[i]));
            }
        }
    }

    /// Judges the creates racing the deletes: each succeeds with a path that
    /// exists.
    fn judge_racing_creates(&mut self, host: &dyn Host, created: &[PluginCall<CreateResponse>]) {
        for call in created {
            match &call.result {
                Ok(resp) if !host.exists(Path::new(&resp.path)) => self.problems.push(format!(
                    "a create racing the deletes returned {:?}, which does not exist",
                    resp.path
                )),
                Ok(_) => {}
                Err(e) => {
                    self.problems
                        .push(format!("a create racing the deletes failed: {e}"));
                    self.creates_failed.push(e.to_string());
                }
            }
        }
    }
}

/// Awaits two futures together.
async fn futures_pair<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    tokio::join!(a, b)
}

pub(crate) const SAME_VOLUME: CheckSpec = CheckSpec {
    id: "concurrency.same-volume",
    level: Level::Should,
    rule: "6 identical creates of one volume at once (started aligned, held at their first change of state and let go together, a different one first each round; 8 rounds, a fresh volume each) all exit 0 with the same path; where volumes are mounts, each is mounted once at its path, and every other round races creates of a volume that exists, with 1000 other mounts after its own (in the run's own mount namespace, as on a busy node)",
    why: "Restore and an update can race on one volume: both calls create the same volume at the same time. On a node the mount table is long and a volume's line is followed by others: a test for \"mounted?\" that reads it through a pipe (`mount | grep -q` under `pipefail`) can read \"no\" for a mounted volume, and a second mount hides the first.",
    fix: "Make create of one volume safe to run twice at once: `mkdir -p`, or a per-volume lock around the steps. Test for a mount with `mountpoint -q`, or read the whole table before matching (`grep -q` ends its reader early).",
    varies: Some(
        "names which of the identical concurrent creates failed or got another path: whichever ran first wins",
    ),
    samples: &["check-then-mkdir"],
    needs: Needs::Concurrent,
    subject: Some(Operation::Create),
    run: scenario!(same_volume),
};

/// Identical creates of one volume at once, aligned, agree, for
/// [`SAME_VOLUME_ROUNDS`] rounds on fresh volumes.
async fn same_volume(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    let mounts = ctx.prereqs().create_probe().await.mounted;
    let (mut filler, table) = node_mount_table(ctx, mounts);
    let mut tally = SameVolumeTally::default();
    for round in 0..SAME_VOLUME_ROUNDS {
        let cleaned = same_volume_round(ctx, round, mounts, filler.as_mut(), &mut tally).await;
        if !tally.problems.is_empty() || !cleaned {
            break;
        }
    }
    // The fillers go before the verdict: nothing of them outlives the check.
    drop(filler.take());
    same_volume_verdict(ctx, mounts, &table, tally).await
}

/// The verdict of `concurrency.same-volume` on what its rounds found; `table`
/// says which mount table they ran with.
async fn same_volume_verdict(
    ctx: &Ctx,
    mounts: bool,
    table: &str,
    tally: SameVolumeTally,
) -> FindingResult {
    let SameVolumeTally {
        problems,
        creates_failed,
        failed,
        split,
    } = tally;
    if problems.is_empty() {
        Ok(Finding::Pass(format!(
            "{SAME_VOLUME_BURST} at once, {SAME_VOLUME_ROUNDS} rounds: all exit 0, one path{}{table}",
            unheld(ctx)
        )))
    } else if let Some(needs) = match failed && !split {
        // Creating an existing volume fails even one at a time: not a race.
        true => ctx.prereqs().create_again_fails().await,
        false => None,
    } {
        Err(Finding::Skip(needs))
    } else if let Some(cited) = match problems.len() == creates_failed.len() {
        // Its creates failed only as concurrency.create's did: one cause,
        // reported there.
        true => super::company::cited(ctx, "its identical creates", &creates_failed).await,
        false => None,
    } {
        Err(cited)
    } else {
        Err(Finding::Fail(format!(
            "expected {SAME_VOLUME_BURST} identical concurrent creates (restore racing an update) to all \
             exit 0 with the same path{}; {}{table}",
            match mounts {
                true => ", mounted once",
                false => "",
            },
            problems.join("; ")
        )))
    }
}
