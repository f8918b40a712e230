//! The model of a node that histories play on ([`Node`]), shared by the
//! `history.*` checks and `dhv-conform explore`: for every live volume,
//! what Nomad knows (its request and path) and what a task left in it
//! (files with their content and mode, the volume's own mode, links into
//! its neighbours and out of the volumes dir). Its oracle
//! ([`Node::damage`], [`Node::oracle`]) compares every volume with the
//! model after each operation: the operated one as the contract says,
//! every other one untouched.

use std::path::{Path, PathBuf};

use super::context::{Ctx, Expect, Finding, VolumeAt, canary_intact};
use crate::contract::CreateRequest;

/// The mode the task gives its second file, and what every file's mode is
/// held to afterwards.
pub(crate) const TASK_MODE: u32 = 0o600;

/// One volume of the model: what Nomad knows, and what a task left in it.
pub(crate) struct Volume {
    /// Its letter in the history's words (`A`).
    pub(crate) letter: char,
    pub(crate) req: CreateRequest,
    pub(crate) path: String,
    /// The volume's own mode, as the task found it.
    pub(crate) mode: Option<u32>,
    /// The files the task wrote, each with its mode.
    pub(crate) files: Vec<(PathBuf, u32)>,
    /// The links the task left (checked by `explore`'s oracle).
    pub(crate) links: Vec<PathBuf>,
}

impl Volume {
    /// `A "hist"`, in a history's words.
    pub(crate) fn named(&self) -> String {
        format!("{} {:?}", self.letter, self.req.volume_name)
    }
}

/// The model of the node: its live volumes, the history so far, and a file
/// of the harness's outside the volumes dir that links point at.
pub(crate) struct Node<'c> {
    pub(crate) ctx: &'c Ctx,
    pub(crate) live: Vec<Volume>,
    pub(crate) steps: Vec<String>,
    pub(crate) outside: Option<PathBuf>,
    next_letter: u8,
}

impl<'c> Node<'c> {
    pub(crate) fn new(ctx: &'c Ctx) -> Node<'c> {
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
    pub(crate) fn history(&self) -> String {
        self.steps
            .iter()
            .enumerate()
            .map(|(n, s)| format!("{}. {s}", n + 1))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The last operation, in the history's words.
    pub(crate) fn last_step(&self) -> &str {
        self.steps.last().map_or("the first step", String::as_str)
    }

    /// A failure after the history so far: what the oracle saw.
    pub(crate) fn fail(&self, saw: String) -> Finding {
        Finding::Fail(format!("{saw} (history: {})", self.history()))
    }

    /// Creates a new volume named `name`, and lets a task write into it.
    /// `Ok(None)` when the plugin refused the name (the refusal is judged by
    /// the oracle: it changed nothing).
    pub(crate) async fn create(&mut self, name: &str) -> Result<Option<usize>, Finding> {
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
            links: Vec::new(),
        };
        self.task_writes(&mut volume)?;
        self.live.push(volume);
        Ok(Some(self.live.len() - 1))
    }

    /// What a task leaves in `volume`: two files (the second with a mode of
    /// its own), links between it and the previous volume's first files,
    /// and one out of the volumes dir. Nothing written is a skip: the volumes are not
    /// writable dirs here, which other checks judge.
    pub(crate) fn task_writes(&mut self, volume: &mut Volume) -> Result<(), Finding> {
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
    pub(crate) fn note_written(&mut self) {
        if let Some(step) = self.steps.last_mut() {
            step.push_str(", a task writes into it");
        }
    }

    /// Deletes the live volume at `index`: it must be gone afterwards.
    pub(crate) async fn delete(&mut self, index: usize) -> Result<(), Finding> {
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
    pub(crate) fn oracle(&self, operated: Option<usize>) -> Result<(), Finding> {
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
    pub(crate) fn damage(&self, v: &Volume) -> Option<String> {
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

    /// Takes a volume a caller created itself (`explore`'s player) into the
    /// model, as volume `letter`, its own mode as it is now.
    pub(crate) fn adopt(&mut self, letter: char, req: CreateRequest, path: String) {
        let mode = self.ctx.host().entry(Path::new(&path)).ok().map(|i| i.mode);
        self.live.push(Volume {
            letter,
            req,
            path,
            mode,
            files: Vec::new(),
            links: Vec::new(),
        });
    }

    /// A task writes the new file `name` (unique content) into the live
    /// volume `index`, with `mode` when given; the model holds it.
    pub(crate) fn write_file(
        &mut self,
        index: usize,
        name: &str,
        mode: Option<u32>,
    ) -> std::io::Result<()> {
        let (dirs, host) = (self.ctx.dirs(), self.ctx.host());
        let volume = &mut self.live[index];
        if volume.mode.is_none() {
            volume.mode = host.entry(Path::new(&volume.path)).ok().map(|i| i.mode);
        }
        let file = dirs.plant(Path::new(&volume.path), name)?;
        if let Some(mode) = mode.filter(|_| !host.is_block_device(&file)) {
            host.set_mode(&file, mode)?;
        }
        let mode = host.entry(&file)?.mode;
        volume.files.push((file, mode));
        Ok(())
    }

    /// A task makes the new dir `name` in the live volume `index` and writes
    /// a file into it; the model holds the file (a lost dir loses it).
    pub(crate) fn write_subdir(&mut self, index: usize, name: &str) -> std::io::Result<()> {
        let (dirs, host) = (self.ctx.dirs(), self.ctx.host());
        let volume = &mut self.live[index];
        if volume.mode.is_none() {
            volume.mode = host.entry(Path::new(&volume.path)).ok().map(|i| i.mode);
        }
        let sub = dirs.plant_dir(Path::new(&volume.path), name)?;
        let file = dirs.plant(&sub, "kept")?;
        let mode = host.entry(&file)?.mode;
        volume.files.push((file, mode));
        Ok(())
    }

    /// A task leaves the link `name` in the live volume `index`, pointing at
    /// `target` (a neighbour's file, or the harness's file outside).
    pub(crate) fn write_link(
        &mut self,
        index: usize,
        name: &str,
        target: &Path,
    ) -> std::io::Result<()> {
        let volume = &mut self.live[index];
        let link = self
            .ctx
            .dirs()
            .plant_link(Path::new(&volume.path), name, target)?;
        volume.links.push(link);
        Ok(())
    }

    /// What changed of any live volume but `operated` (its files, modes,
    /// links), or of the harness's file outside the volumes dir, in words.
    pub(crate) fn untouched(&self, operated: Option<usize>) -> Option<String> {
        for (i, v) in self.live.iter().enumerate() {
            if Some(i) == operated {
                continue;
            }
            if let Some(damage) = self.damage(v).or_else(|| self.links_lost(v)) {
                return Some(format!("volume {} {damage}", v.named()));
            }
        }
        if let Some(outside) = self.outside.as_ref() {
            if !canary_intact(self.ctx.host(), outside) {
                return Some(format!(
                    "the file {} outside the volumes dir (a task's link pointed at it) is gone \
                     or changed",
                    outside.display()
                ));
            }
        }
        None
    }

    /// A link the task left in `v` that is no longer there, in words.
    pub(crate) fn links_lost(&self, v: &Volume) -> Option<String> {
        v.links
            .iter()
            .find(|l| self.ctx.host().entry(l).is_err())
            .map(|l| format!("lost the link {} a task left in it", l.display()))
    }

    /// Deletes what is still live (the ledger would too; this keeps the
    /// order of the history's words).
    pub(crate) async fn clear(&mut self) {
        while let Some(v) = self.live.pop() {
            self.ctx
                .calls()
                .delete(&v.req, &v.path, Expect::Either, "delete at the end")
                .await;
        }
    }
}
