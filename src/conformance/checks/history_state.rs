//! `history.state-not-path`: what a call answers depends on the volumes the
//! node holds now, not on the way they came to be. One node goes through a
//! history of updates, agent restarts and a delete; a fresh node is given the same live
//! volume by the shortest history (one create). Both are then asked the same
//! question: how many more volumes can be made before the plugin refuses
//! one (up to [`FILL`]). A plugin whose bookkeeping drifts (a ledger that
//! counts an updated volume twice, a volume left "updating", a counter that
//! a delete does not give back) answers the two differently. The plugin's
//! fingerprint is asked at the start, after the history and at the end: the
//! same plugin throughout.

use std::path::Path;

use super::{CheckSpec, FindingResult, Level, Needs};
use crate::conformance::context::{Ctx, Expect, Finding};
use crate::contract::CreateRequest;

pub(crate) const STATE_NOT_PATH: CheckSpec = CheckSpec {
    id: "history.state-not-path",
    level: Level::Must,
    rule: "after a history of updates (another name, a larger and a smaller capacity, the request it was made with), 24 restores (agent restarts) and a neighbour's delete, the node answers as a fresh node holding the same live volume: as many new volumes are made before a refusal (up to 4), and the fingerprint's version is the same throughout",
    why: "Nomad calls create again for an existing volume on every update and every agent restart. A plugin whose ledger counts each of these calls as a new volume, or whose delete does not give back what a create took, refuses volumes the node has room for after enough updates, in production only, long after the change that caused it.",
    fix: "Keep bookkeeping by volume id (a set, not a counter): create of an existing id changes its entry, delete removes it, and every answer is computed from the live set.",
    varies: None,
    samples: &["ledger-drift"],
    needs: Needs::Any,
    subject: None,
    run: scenario!(state_not_path),
};

/// The most new volumes asked for on each node: enough for a ledger that
/// counted four updates twice to refuse sooner than a fresh node does.
const FILL: usize = 4;

/// Agent restarts in the long history, each a create again of the live
/// volume (as Nomad restores every volume at start): a ledger that counts
/// each as a volume of its own is then off by more than [`FILL`] at any
/// quota that leaves room for the concurrency checks' 24 volumes at once.
const RESTARTS: usize = 24;

/// One node's answers: the volumes made before the first refusal (and the
/// refusal's words), and every live volume's request and path, for the end.
#[derive(Default)]
struct Answers {
    made: usize,
    refusal: Option<String>,
    live: Vec<(CreateRequest, String)>,
}

async fn state_not_path(ctx: &Ctx) -> FindingResult {
    ctx.prereqs().require_create().await?;
    ctx.prereqs().require_delete().await?;
    if let Some(needs) = ctx.prereqs().create_again_fails().await {
        return Err(Finding::Skip(needs));
    }
    let first_version = version(ctx, "fingerprint at the start").await;
    let mut long = Answers::default();
    let history = long_history(ctx, &mut long).await;
    let after_version = version(ctx, "fingerprint after the history").await;
    clear(ctx, &mut long).await;
    let history = history?;
    let fresh_dir = ctx
        .dirs()
        .make_dirs(Path::new("fresh-node/volumes"))
        .map_err(|e| Finding::Skip(format!("inconclusive: cannot make a fresh node's dir: {e}")))?;
    let mut fresh = Answers::default();
    let shortest = short_history(ctx, &fresh_dir, &history.kept, &mut fresh).await;
    let end_version = version(ctx, "fingerprint at the end").await;
    clear(ctx, &mut fresh).await;
    let shortest = shortest?;
    let versions = [&first_version, &after_version, &end_version];
    if let Some(changed) = versions.iter().find(|v| **v != &first_version) {
        return Err(Finding::Fail(format!(
            "expected the fingerprint's version to stay {} whatever the node holds; after the \
             history ({}) it was {} (at the end: {})",
            shown_version(&first_version),
            history.words,
            shown_version(changed),
            shown_version(&end_version),
        )));
    }
    if long.made != fresh.made {
        let said = |a: &Answers| match &a.refusal {
            Some(e) => format!("it made {} new volumes, then refused one ({e})", a.made),
            None => format!("it made all {FILL} new volumes"),
        };
        return Err(Finding::Fail(format!(
            "expected the node to answer by the volumes it holds now; after the history ({}), \
             {}; on a fresh node holding the same live volume ({shortest}), {}: the plugin's \
             bookkeeping depends on the way the node came to hold its volumes",
            history.words,
            said(&long),
            said(&fresh),
        )));
    }
    Ok(Finding::Pass(format!(
        "after the history ({}) the node answered as a fresh one holding the same volume: {} \
         more volumes made{}; the fingerprint's version stayed {}",
        history.words,
        long.made,
        long.refusal
            .as_ref()
            .map_or(String::new(), |_| " before a refusal on both".into()),
        shown_version(&first_version),
    )))
}

/// The skip of a history whose update `what` answered `got`, not the
/// volume's `path`: a moved volume is `history.update-keeps`' finding, and
/// nothing more is counted here.
pub(super) fn moved_by_update(what: &str, got: &str, path: &str) -> Finding {
    Finding::Skip(format!(
        "inconclusive: {what} answered another path ({got:?}, not {path:?}), which \
         history.update-keeps judges"
    ))
}

/// The version a fingerprint reported, or its failure, in words.
async fn version(ctx: &Ctx, step: &str) -> Result<String, String> {
    let call = ctx.calls().fingerprint(Expect::Either, step).await;
    call.into_call()
        .result
        .map(|f| f.version.raw)
        .map_err(|e| format!("failed: {e}"))
}

fn shown_version(v: &Result<String, String>) -> String {
    match v {
        Ok(v) => format!("{v:?}"),
        Err(e) => e.clone(),
    }
}

/// What the long history left: the live volume's request, and the history
/// in words.
struct History {
    kept: CreateRequest,
    words: String,
}

/// Creates A and B, updates A four times (another name, a larger capacity,
/// a smaller one, the request it was made with), restores it
/// [`RESTARTS`] times, deletes B, then fills.
async fn long_history(ctx: &Ctx, node: &mut Answers) -> Result<History, Finding> {
    let mut a = ctx.request();
    a.volume_name = "state-a".into();
    let mut b = ctx.request();
    b.volume_name = "state-b".into();
    let mut words = vec!["create A \"state-a\"".to_owned()];
    let path_a = made(ctx, node, &a, "create A").await?;
    words.push("create B \"state-b\"".into());
    made(ctx, node, &b, "create B").await?;
    let mut renamed = a.clone();
    renamed.volume_name = "state-a-renamed".into();
    let mut larger = a.clone();
    larger.capacity_min_bytes = a.capacity_min_bytes.saturating_mul(2);
    if a.capacity_max_bytes > 0 {
        larger.capacity_max_bytes = a.capacity_max_bytes.saturating_mul(2);
    }
    let mut smaller = a.clone();
    smaller.capacity_min_bytes = a.capacity_min_bytes / 2;
    if a.capacity_max_bytes > 0 {
        smaller.capacity_max_bytes = (a.capacity_max_bytes / 2).max(smaller.capacity_min_bytes);
    }
    for (what, req) in [
        ("update A with another name", &renamed),
        ("update A with a larger capacity", &larger),
        ("update A with a smaller capacity", &smaller),
        ("update A with the request it was made with", &a),
    ] {
        let call = ctx.calls().create(req, Expect::Either, what).await;
        words.push(match &call.result {
            Ok(r) if r.path == path_a => what.to_owned(),
            Ok(r) => return Err(moved_by_update(what, &r.path, &path_a)),
            Err(_) => format!("{what} (refused)"),
        });
    }
    // Every agent restart restores every volume by a create again.
    let mut refused = 0;
    for n in 1..=RESTARTS {
        let step = format!("restore A (agent restart {n} of {RESTARTS})");
        let call = ctx.calls().create(&a, Expect::Either, &step).await;
        match &call.result {
            Ok(r) if r.path != path_a => return Err(moved_by_update(&step, &r.path, &path_a)),
            Ok(_) => {}
            Err(_) => refused += 1,
        }
    }
    words.push(format!(
        "restore A {RESTARTS} times (agent restarts){}",
        if refused > 0 {
            format!(", {refused} of them refused")
        } else {
            String::new()
        }
    ));
    let at = node
        .live
        .iter()
        .position(|(r, _)| r.volume_id == b.volume_id);
    if let Some(at) = at {
        let (req, path) = node.live.remove(at);
        ctx.steps().delete_ok(&req, &path, "delete B").await?;
    }
    words.push("delete B".into());
    fill(ctx, node, None).await;
    words.push(format!("create up to {FILL} new volumes"));
    Ok(History {
        kept: a,
        words: words.join(", "),
    })
}

/// The fresh node: A made at once with its request, then the same fill.
async fn short_history(
    ctx: &Ctx,
    volumes: &Path,
    kept: &CreateRequest,
    node: &mut Answers,
) -> Result<String, Finding> {
    let mut a = ctx.request_in(volumes);
    a.volume_id = kept.volume_id.clone();
    a.volume_name = kept.volume_name.clone();
    made(ctx, node, &a, "create A on a fresh node").await?;
    fill(ctx, node, Some(volumes)).await;
    Ok(format!(
        "create A \"{}\", create up to {FILL} new volumes",
        kept.volume_name
    ))
}

/// Creates `req`, which must succeed; keeps it live.
async fn made(
    ctx: &Ctx,
    node: &mut Answers,
    req: &CreateRequest,
    step: &str,
) -> Result<String, Finding> {
    let resp = ctx.steps().create_ok(req, step).await?;
    node.live.push((req.clone(), resp.path.clone()));
    Ok(resp.path)
}

/// New volumes, one at a time, until the first refusal or [`FILL`].
async fn fill(ctx: &Ctx, node: &mut Answers, volumes: Option<&Path>) {
    for n in 1..=FILL {
        let mut req = match volumes {
            Some(dir) => ctx.request_in(dir),
            None => ctx.request(),
        };
        req.volume_name = format!("state-fill-{n}");
        let step = format!("create new volume {n}");
        let call = ctx.calls().create(&req, Expect::Either, &step).await;
        match call.into_call().result {
            Ok(resp) => {
                node.live.push((req, resp.path));
                node.made += 1;
            }
            Err(e) => {
                node.refusal = Some(e.to_string());
                return;
            }
        }
    }
}

/// Deletes every live volume of `node`, the last made first.
async fn clear(ctx: &Ctx, node: &mut Answers) {
    while let Some((req, path)) = node.live.pop() {
        ctx.calls()
            .delete(&req, &path, Expect::Either, "delete at the end")
            .await;
    }
}
