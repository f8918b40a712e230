//! Plays one history on a fresh node: every operation through the check's
//! calls (the run's sandbox, limits and supervisor), the node's model
//! ([`Node`]) kept, and its oracle run after each operation.

use std::collections::BTreeMap;
use std::path::Path;

use super::history::{Capacity, Op, Params, Step, Task};
use crate::conformance::context::{Ctx, Expect, VolumeAt};
use crate::conformance::node_model::Node;
use crate::contract::CreateRequest;
use crate::plugin::{PluginCall, PluginRun};

/// A history played: each operation's step, and whether the oracle saw
/// something wrong (the last step's `oracle` then says what).
pub(super) struct Played {
    pub steps: Vec<Step>,
    pub failed: bool,
}

/// What a deleted volume was, for a delete again.
struct Gone {
    req: CreateRequest,
    path: String,
}

/// One history on the node of `ctx`.
struct Player<'c> {
    node: Node<'c>,
    /// The live volumes' letters, in the model's order.
    letters: Vec<char>,
    gone: BTreeMap<char, Gone>,
    /// The fresh node's fingerprint, as the plugin's version in words.
    baseline: Option<String>,
    files: usize,
    /// The link new volumes are made through, once [`Op::LinkVolumesDir`]
    /// made it.
    volumes: Option<std::path::PathBuf>,
}

/// Plays `ops` on the fresh node of `ctx`, stopping at the first step the
/// oracle faults, or at `deadline` (the budget's end: the history is left
/// unfinished); `baseline` is the fresh node's fingerprint.
pub(super) async fn play(
    ctx: &Ctx,
    ops: &[Op],
    baseline: Option<&str>,
    deadline: Option<std::time::Instant>,
) -> Played {
    let mut p = Player {
        node: Node::new(ctx),
        letters: Vec::new(),
        gone: BTreeMap::new(),
        baseline: baseline.map(str::to_owned),
        files: 0,
        volumes: None,
    };
    let mut steps = Vec::new();
    for op in ops {
        if ctx.cancelled() || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break;
        }
        let mut step = Step {
            op: op.clone(),
            did: String::new(),
            calls: Vec::new(),
            oracle: None,
        };
        let seen = p.step(op, &mut step).await;
        step.oracle = seen.or_else(|| p.node.untouched(p.index(op.vol())));
        let failed = step.oracle.is_some();
        steps.push(step);
        if failed {
            return Played { steps, failed };
        }
    }
    Played {
        steps,
        failed: false,
    }
}

impl Player<'_> {
    fn index(&self, vol: Option<char>) -> Option<usize> {
        let vol = vol?;
        self.letters.iter().position(|l| *l == vol)
    }

    fn ctx(&self) -> &Ctx {
        self.node.ctx
    }

    /// Notes a call's `env -i` line in `step`.
    fn noted<T>(&mut self, step: &mut Step, call: &PluginCall<T>) {
        step.calls.push(call.run.as_ref().map_or_else(
            || format!("(built-in) {}", env_line(&call.request)),
            PluginRun::reproduce,
        ));
    }

    /// Plays `op`, its words in `step`; what the oracle saw of the operated
    /// volume, if anything wrong.
    async fn step(&mut self, op: &Op, step: &mut Step) -> Option<String> {
        let skipped = |step: &mut Step, vol: char| {
            step.did = format!("skipped: {vol} is not live (its create was refused)");
            None
        };
        match op {
            Op::Create { vol, name } => self.create(*vol, name, step).await,
            Op::Update { vol, .. } => match self.index(Some(*vol)) {
                Some(i) => self.update(i, op, step).await,
                None => skipped(step, *vol),
            },
            Op::Delete { vol } => match self.index(Some(*vol)) {
                Some(i) => self.delete(i, step).await,
                None => skipped(step, *vol),
            },
            Op::DeleteAgain { vol } => self.delete_again(*vol, step).await,
            Op::Restore => self.restore(step).await,
            Op::Fingerprint => self.fingerprint(step).await,
            Op::LinkVolumesDir => {
                self.link_volumes_dir(step);
                None
            }
            Op::Write { vol, what } => {
                match self.index(Some(*vol)) {
                    Some(i) => self.write(i, what, step),
                    None => {
                        skipped(step, *vol);
                    }
                }
                None
            }
        }
    }

    /// Makes the link to the volumes dir that new volumes are made through.
    fn link_volumes_dir(&mut self, step: &mut Step) {
        let dirs = self.ctx().dirs();
        match dirs.plant_link(dirs.dir(), "volumes-link", dirs.volumes()) {
            Ok(link) => {
                step.did = format!("ok: {} links to the volumes dir", link.display());
                self.volumes = Some(link);
            }
            Err(e) => step.did = format!("skipped: the link could not be made: {e}"),
        }
    }

    async fn create(&mut self, vol: char, name: &str, step: &mut Step) -> Option<String> {
        if self.node.live.iter().any(|v| v.req.volume_name == name) {
            step.did = "skipped: a live volume has this name (Nomad refuses it)".into();
            return None;
        }
        let mut req = match &self.volumes {
            Some(link) => self.ctx().request_in(link),
            None => self.ctx().request(),
        };
        req.volume_name = name.to_owned();
        let call = self
            .ctx()
            .calls()
            .create(&req, Expect::Either, &op_words(vol, "create"))
            .await
            .into_call();
        self.noted(step, &call);
        let resp = match call.result {
            Ok(resp) => resp,
            Err(e) => {
                step.did = format!("refused: {e}");
                return None;
            }
        };
        step.did = format!("ok: path {:?}", resp.path);
        let new = Path::new(&resp.path);
        if let Some(other) = self.node.live.iter().find(|v| {
            let old = Path::new(&v.path);
            new.starts_with(old) || old.starts_with(new)
        }) {
            return Some(format!(
                "volume {vol} {name:?} was given the path {:?}, where live volume {} is at {:?}",
                resp.path,
                other.named(),
                other.path
            ));
        }
        self.node.adopt(vol, req, resp.path);
        self.letters.push(vol);
        None
    }

    async fn update(&mut self, i: usize, op: &Op, step: &mut Step) -> Option<String> {
        let Op::Update {
            vol,
            name,
            capacity,
            parameters,
        } = op
        else {
            return None;
        };
        let mut req = self.node.live[i].req.clone();
        if let Some(name) = name {
            if self.node.live.iter().any(|v| v.req.volume_name == *name) {
                step.did = "skipped: a live volume has this name (Nomad refuses it)".into();
                return None;
            }
            req.volume_name = name.clone();
        }
        match capacity {
            Some(Capacity::Up) => {
                req.capacity_min_bytes = req.capacity_min_bytes.saturating_mul(2);
                req.capacity_max_bytes = req.capacity_max_bytes.saturating_mul(2);
            }
            Some(Capacity::Down) => {
                req.capacity_min_bytes /= 2;
                req.capacity_max_bytes /= 2;
            }
            None => {}
        }
        match parameters {
            Some(Params::Extra) => {
                let mut p = req.parameters.clone().unwrap_or_default();
                p.insert("explore".into(), "1".into());
                req.parameters = Some(p);
            }
            Some(Params::Null) => req.parameters = None,
            None => {}
        }
        let call = self
            .ctx()
            .calls()
            .create(&req, Expect::Either, &op_words(*vol, "update"))
            .await
            .into_call();
        self.noted(step, &call);
        let v = &self.node.live[i];
        let damage = self.node.damage(v).or_else(|| self.node.links_lost(v));
        let result = call.result;
        step.did = match &result {
            Ok(resp) => format!("ok: path {:?}", resp.path),
            Err(e) => format!("refused: {e}"),
        };
        if let Some(damage) = damage {
            return Some(format!("volume {} {damage}", v.named()));
        }
        match result {
            Ok(resp) if resp.path != v.path => Some(format!(
                "the update of {} answered the path {:?}, not the volume's {:?}",
                v.named(),
                resp.path,
                v.path
            )),
            Ok(_) => {
                self.node.live[i].req = req;
                None
            }
            Err(_) => None,
        }
    }

    async fn delete(&mut self, i: usize, step: &mut Step) -> Option<String> {
        let v = self.node.live.remove(i);
        let vol = self.letters.remove(i);
        let at = VolumeAt::before_delete(self.ctx(), &v.path);
        let call = self
            .ctx()
            .calls()
            .delete(&v.req, &v.path, Expect::Either, &op_words(vol, "delete"))
            .await
            .into_call();
        self.noted(step, &call);
        let named = v.named();
        self.gone.insert(
            vol,
            Gone {
                req: v.req,
                path: v.path,
            },
        );
        if let Err(e) = call.result {
            step.did = format!("failed: {e}");
            return Some(format!("the delete of live volume {named} failed: {e}"));
        }
        step.did = "ok".into();
        if !at.gone().await {
            return Some(format!(
                "after delete {named}, its volume is still there: {}",
                at.still_there()
            ));
        }
        None
    }

    async fn delete_again(&mut self, vol: char, step: &mut Step) -> Option<String> {
        let Some(g) = self.gone.get(&vol) else {
            step.did = format!("skipped: {vol} was never deleted");
            return None;
        };
        let (req, path) = (g.req.clone(), g.path.clone());
        let call = self
            .ctx()
            .calls()
            .delete(&req, &path, Expect::Either, &op_words(vol, "delete again"))
            .await
            .into_call();
        self.noted(step, &call);
        match call.result {
            Ok(()) => {
                step.did = "ok".into();
                None
            }
            Err(e) => {
                step.did = format!("failed: {e}");
                Some(format!(
                    "deleting the deleted volume {vol} again failed (Nomad retries a delete): {e}"
                ))
            }
        }
    }

    async fn restore(&mut self, step: &mut Step) -> Option<String> {
        let mut did = Vec::new();
        for i in 0..self.node.live.len() {
            let req = self.node.live[i].req.clone();
            let vol = self.letters[i];
            let call = self
                .ctx()
                .calls()
                .create(&req, Expect::Either, &op_words(vol, "restore"))
                .await
                .into_call();
            self.noted(step, &call);
            let v = &self.node.live[i];
            match call.result {
                Err(e) => {
                    step.did = format!("{vol} refused: {e}");
                    return Some(format!(
                        "restore: create again of {} with its last accepted request was \
                         refused (the volume is wedged): {e}",
                        v.named()
                    ));
                }
                Ok(resp) if resp.path != v.path => {
                    step.did = format!("{vol} ok: path {:?}", resp.path);
                    return Some(format!(
                        "restore: create again of {} answered the path {:?}, not the volume's {:?}",
                        v.named(),
                        resp.path,
                        v.path
                    ));
                }
                Ok(_) => did.push(format!("{vol} ok")),
            }
            if let Some(damage) = self.node.damage(v).or_else(|| self.node.links_lost(v)) {
                step.did = did.join(", ");
                return Some(format!("after its restore, volume {} {damage}", v.named()));
            }
        }
        step.did = if did.is_empty() {
            "no live volume".into()
        } else {
            did.join(", ")
        };
        None
    }

    async fn fingerprint(&mut self, step: &mut Step) -> Option<String> {
        let call = self
            .ctx()
            .calls()
            .fingerprint(Expect::Either, "explore: fingerprint")
            .await
            .into_call();
        self.noted(step, &call);
        let now = match call.result {
            Ok(fp) => format!("{:?}", fp.version),
            // A fingerprint that fails on a fresh node too is no history's
            // finding: the fingerprint checks' own.
            Err(e) if self.baseline.is_none() => {
                step.did = format!("failed (as on a fresh node): {e}");
                return None;
            }
            Err(e) => {
                step.did = format!("failed: {e}");
                return Some(format!(
                    "the fingerprint failed with the node in this state (on a fresh node it did not): {e}"
                ));
            }
        };
        step.did = format!("ok: {now}");
        match &self.baseline {
            Some(fresh) if *fresh != now => Some(format!(
                "the fingerprint changed with the node's state: {now}, where a fresh node's was {fresh}"
            )),
            _ => None,
        }
    }

    fn write(&mut self, i: usize, what: &Task, step: &mut Step) {
        self.files += 1;
        let n = self.files;
        let written = match what {
            Task::File { mode } => self
                .node
                .write_file(i, &format!(".explore-file-{n}"), *mode),
            Task::Subdir => self.node.write_subdir(i, &format!(".explore-dir-{n}")),
            Task::Link { to } => match self.index(Some(*to)) {
                Some(j) => {
                    let other = &self.node.live[j];
                    let target = other
                        .files
                        .first()
                        .map_or_else(|| other.path.clone().into(), |(f, _)| f.clone());
                    self.node
                        .write_link(i, &format!(".explore-link-{n}"), &target)
                }
                None => Ok(()),
            },
            Task::LinkOutside => match self.node.outside.clone() {
                Some(target) => self
                    .node
                    .write_link(i, &format!(".explore-outside-{n}"), &target),
                None => Ok(()),
            },
        };
        step.did = match written {
            Ok(()) => "written".into(),
            // Not the plugin's finding: a volume that is no writable dir is
            // other checks' to judge.
            Err(e) => format!("not written (the volume is not a writable dir here): {e}"),
        };
    }
}

/// The fingerprint of a fresh node, as [`play`] compares it.
pub(super) async fn fresh_fingerprint(ctx: &Ctx) -> Option<String> {
    let call = ctx
        .calls()
        .fingerprint(Expect::Either, "explore: fresh fingerprint")
        .await
        .into_call();
    call.result.ok().map(|fp| format!("{:?}", fp.version))
}

fn op_words(vol: char, what: &str) -> String {
    format!("explore: {what} {vol}")
}

/// `env -i K=V ...` of a call's variables, for the built-in's calls.
fn env_line(vars: &[(String, String)]) -> String {
    let mut line = String::from("env -i");
    for (k, v) in vars {
        line.push(' ');
        line.push_str(&format!("{k}={v:?}"));
    }
    line
}
