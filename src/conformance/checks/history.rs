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

use std::path::{Path, PathBuf};

use super::{CheckSpec, FindingResult, Level, Needs, create_update::UPDATE};
use crate::conformance::context::{Ctx, Expect, Fact, Finding, VolumeAt, canary_intact};
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

/// The mode the task gives its second file, and what every file's mode is
/// held to afterwards.
const TASK_MODE: u32 = 0o600;

/// One volume of the model: what Nomad knows, and what a task left in it.
struct Volume {
    /// Its letter in the history's words (`A`).
    letter: char,
    req: CreateRequest,
    path: String,
    /// The volume's own mode, as the task found it.
    mode: Option<u32>,
    /// The files the task wrote, each with its mode.
    files: Vec<(PathBuf, u32)>,
}

impl Volume {
    /// `A "hist"`, in a history's words.
    fn named(&self) -> String {
        format!("{} {:?}", self.letter, self.req.volume_name)
    }
}

/// The model of the node: its live volumes, the history so far, and a file
/// of the harness's outside the volumes dir that links point at.
struct Node<'c> {
    ctx: &'c Ctx,
    live: Vec<Volume>,
    steps: Vec<String>,
    outside: Option<PathBuf>,
    next_letter: u8,
}

impl<'c> Node<'c> {
    fn new(ctx: &'c Ctx) -> Node<'c> {
        // A file of the harness's beside the volumes dir: a link a task
        // leaves pointing out of its volume points here, never at the host.
        let outside = ctx
            .dirs()
            .make_dirs(Path::new("outside"))
            .ok()
            .and_then(|dir| ctx.dirs().plant(&dir, "kept").ok());
        Node {
            ctx,
            live: Vec::new(),
            steps: Vec::new(),
            outside,
            next_letter: b'A',
        }
    }

    /// The history so far, as numbered steps.
    fn history(&self) -> String {
        self.steps
            .iter()
            .enumerate()
            .map(|(n, s)| format!("{}. {s}", n + 1))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The last operation, in the history's words.
    fn last_step(&self) -> &str {
        self.steps.last().map_or("the first step", String::as_str)
    }

    /// A failure after the history so far: what the oracle saw.
    fn fail(&self, saw: String) -> Finding {
        Finding::Fail(format!("{saw} (history: {})", self.history()))
    }

    /// Creates a new volume named `name`, and lets a task write into it.
    /// `Ok(None)` when the plugin refused the name (the refusal is judged by
    /// the oracle: it changed nothing).
    async fn create(&mut self, name: &str) -> Result<Option<usize>, Finding> {
        let mut req = self.ctx.request();
        req.volume_name = name.to_string();
        let letter = char::from(self.next_letter);
        self.next_letter += 1;
        let step = format!("create {letter} {name:?}");
        let call = self.ctx.calls().create(&req, Expect::Either, &step).await;
        let Ok(resp) = call.into_call().result else {
            self.steps.push(format!("{step} (refused)"));
            self.oracle(None)?;
            return Ok(None);
        };
        self.steps.push(step);
        if let Some(other) = self.live.iter().find(|v| v.path == resp.path) {
            return Err(self.fail(format!(
                "volume {letter} {name:?} was given the path of live volume {}: {:?}",
                other.named(),
                resp.path
            )));
        }
        self.oracle(None)?;
        let mut volume = Volume {
            letter,
            req,
            path: resp.path,
            mode: None,
            files: Vec::new(),
        };
        self.task_writes(&mut volume)?;
        self.live.push(volume);
        Ok(Some(self.live.len() - 1))
    }

    /// What a task leaves in `volume`: two files (the second with a mode of
    /// its own), links between it and the previous volume's first files,
    /// and one out of the volumes dir. Nothing written is a skip: the volumes are not
    /// writable dirs here, which other checks judge.
    fn task_writes(&mut self, volume: &mut Volume) -> Result<(), Finding> {
        let dirs = self.ctx.dirs();
        let host = self.ctx.host();
        let path = volume.path.clone();
        let dir = Path::new(&path);
        let named = volume.named();
        let inconclusive = |e: std::io::Error| {
            Finding::Skip(format!(
                "inconclusive: a task's file could not be written into volume {named} at \
                 {path:?}: {e}"
            ))
        };
        volume.mode = host.entry(dir).ok().map(|i| i.mode);
        if host.is_block_device(dir) {
            // A device holds no names: a task's data is a mark at its start.
            let mark = dirs.plant(dir, ".hist-data").map_err(inconclusive)?;
            let mode = host.entry(&mark).map_err(inconclusive)?.mode;
            volume.files.push((mark, mode));
            self.note_written();
            return Ok(());
        }
        for (name, mode) in [(".hist-data", None), (".hist-private", Some(TASK_MODE))] {
            let file = dirs.plant(dir, name).map_err(inconclusive)?;
            if let Some(mode) = mode {
                host.set_mode(&file, mode).map_err(inconclusive)?;
            }
            let mode = host.entry(&file).map_err(inconclusive)?.mode;
            volume.files.push((file, mode));
        }
        // Links both ways between this volume and the one before it: each
        // volume deleted in a history has a link into a live neighbour.
        if let Some(previous) = self.live.last() {
            if let Some((target, _)) = previous.files.first() {
                dirs.plant_link(dir, ".hist-link-previous", target)
                    .map_err(inconclusive)?;
            }
            if let Some((target, _)) = volume.files.first() {
                // Only what the task could: the previous volume may be gone
                // or not writable by now, which the oracle judges.
                let _ = dirs.plant_link(Path::new(&previous.path), ".hist-link-next", target);
            }
        }
        if let Some(target) = &self.outside {
            dirs.plant_link(dir, ".hist-link-outside", target)
                .map_err(inconclusive)?;
        }
        self.note_written();
        Ok(())
    }

    /// Says in the history that a task wrote into the volume just made.
    fn note_written(&mut self) {
        if let Some(step) = self.steps.last_mut() {
            step.push_str(", a task writes into it");
        }
    }

    /// Deletes the live volume at `index`: it must be gone afterwards.
    async fn delete(&mut self, index: usize) -> Result<(), Finding> {
        let volume = self.live.remove(index);
        let step = format!("delete {}", volume.named());
        self.steps.push(step.clone());
        // A block device's node outlives its volume: what is gone is what
        // backed it (see `VolumeAt`).
        let at = VolumeAt::before_delete(self.ctx, &volume.path);
        self.ctx
            .steps()
            .delete_ok(&volume.req, &volume.path, &step)
            .await?;
        if !at.gone().await {
            return Err(self.fail(format!(
                "after delete {}, expected its volume gone; {}",
                volume.named(),
                at.still_there()
            )));
        }
        self.oracle(None)
    }

    /// The oracle: every live volume (but `operated`, judged by its caller)
    /// as the model has it, and the harness's file outside the volumes dir
    /// untouched.
    fn oracle(&self, operated: Option<usize>) -> Result<(), Finding> {
        for (i, v) in self.live.iter().enumerate() {
            if Some(i) == operated {
                continue;
            }
            if let Some(damage) = self.damage(v) {
                return Err(self.fail(format!(
                    "after {}, volume {} {damage}",
                    self.last_step(),
                    v.named()
                )));
            }
        }
        if let Some(outside) = &self.outside {
            if !canary_intact(self.ctx.host(), outside) {
                return Err(self.fail(format!(
                    "after {}, the file {} outside the volumes dir (a task's link pointed at it) \
                     is gone or changed",
                    self.last_step(),
                    outside.display()
                )));
            }
        }
        Ok(())
    }

    /// What changed of `v` since the task wrote into it, if anything.
    fn damage(&self, v: &Volume) -> Option<String> {
        let host = self.ctx.host();
        let dir = Path::new(&v.path);
        let Ok(info) = host.entry(dir) else {
            return Some(format!("lost its path {:?}", v.path));
        };
        if let Some(mode) = v.mode.filter(|m| *m != info.mode) {
            return Some(format!(
                "had its mode changed from {mode:04o} to {:04o}",
                info.mode
            ));
        }
        for (file, mode) in &v.files {
            if !canary_intact(host, file) {
                return Some(format!(
                    "lost the file {} a task wrote into it (gone or changed)",
                    file.display()
                ));
            }
            let now = host.entry(file).map(|i| i.mode).ok();
            if now != Some(*mode) {
                return Some(format!(
                    "had the mode of {} changed from {mode:04o} to {}",
                    file.display(),
                    now.map_or("?".into(), |m| format!("{m:04o}"))
                ));
            }
        }
        None
    }

    /// Deletes what is still live (the ledger would too; this keeps the
    /// order of the history's words).
    async fn clear(&mut self) {
        while let Some(v) = self.live.pop() {
            self.ctx
                .calls()
                .delete(&v.req, &v.path, Expect::Either, "delete at the end")
                .await;
        }
    }
}

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
