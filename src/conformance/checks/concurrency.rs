//! `concurrency.*`: Nomad runs creates and deletes of different volumes at the
//! same time, and restore can race an update of the same volume.

use std::collections::BTreeSet;
use std::path::Path;

use super::{CheckResult, join_all};
use crate::conformance::context::{Ctx, Expect, Finding, VolumeAt};

/// `concurrency.create` (must): 8 distinct creates at once.
pub async fn create(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let reqs: Vec<_> = (0..8).map(|_| ctx.request()).collect();
    let calls = join_all(
        reqs.iter()
            .map(|r| ctx.create(r, Expect::Success, "one of 8 concurrent creates")),
    )
    .await;
    let mut problems = Vec::new();
    let mut paths = BTreeSet::new();
    // Whether every problem is a path given twice.
    let mut collisions_only = true;
    for (i, call) in calls.iter().enumerate() {
        match &call.result {
            Ok(resp) => {
                if !paths.insert(resp.path.clone()) {
                    problems.push(format!(
                        "#{} got the same path as another: {:?}",
                        i + 1,
                        resp.path
                    ));
                } else if !Path::new(&resp.path).exists() {
                    collisions_only = false;
                    problems.push(format!("#{}'s path {:?} does not exist", i + 1, resp.path));
                }
            }
            Err(e) => {
                collisions_only = false;
                problems.push(format!("#{} failed: {e}", i + 1));
            }
        }
    }
    // At once too: a plugin whose deletes hang costs one delete limit here.
    join_all(reqs.iter().zip(&calls).filter_map(|(req, call)| {
        let resp = call.result.as_ref().ok()?;
        Some(ctx.delete(
            req,
            &resp.path,
            Expect::Success,
            "delete after the concurrent creates",
        ))
    }))
    .await;
    if problems.is_empty() {
        Ok(Finding::Pass(
            "8 at once: 8 distinct, existing paths".into(),
        ))
    } else if let Some(needs) = match collisions_only {
        // Two volumes get one path even one after the other: not a race.
        true => ctx.paths_not_distinct().await,
        false => None,
    } {
        Err(Finding::Skip(needs))
    } else {
        Err(Finding::Fail(format!(
            "expected 8 concurrent creates of distinct volumes to succeed with distinct, existing paths; {}",
            problems.join("; ")
        )))
    }
}

/// `concurrency.delete` (must): 8 deletes at once.
pub async fn delete(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let reqs: Vec<_> = (0..8).map(|_| ctx.request()).collect();
    let mut made = Vec::new();
    for req in &reqs {
        made.push(
            ctx.create_ok(req, "create before the concurrent deletes")
                .await?
                .path,
        );
    }
    let volumes: Vec<VolumeAt> = made.iter().map(|p| VolumeAt::before_delete(p)).collect();
    let calls = join_all(
        reqs.iter()
            .zip(&made)
            .map(|(r, p)| ctx.delete(r, p, Expect::Success, "one of 8 concurrent deletes")),
    )
    .await;
    let mut problems = Vec::new();
    for (i, (call, at)) in calls.iter().zip(&volumes).enumerate() {
        if let Err(e) = &call.result {
            problems.push(format!("#{} failed: {e}", i + 1));
        } else if !at.gone().await && at.is_block() {
            problems.push(format!("#{}: {}", i + 1, at.still_there()));
        } else if !at.gone().await {
            problems.push(format!("#{}'s path {:?} still exists", i + 1, made[i]));
        }
    }
    if problems.is_empty() {
        Ok(Finding::Pass("8 at once: all gone".into()))
    } else {
        Err(Finding::Fail(format!(
            "expected 8 concurrent deletes to succeed and remove every path; {}",
            problems.join("; ")
        )))
    }
}

/// `concurrency.same-volume` (should): 4 identical creates at once agree.
pub async fn same_volume(ctx: &Ctx) -> CheckResult {
    ctx.require_create().await?;
    let req = ctx.request();
    // Either: the rule judges each outcome below.
    let calls = join_all((0..4).map(|_| {
        ctx.create(
            &req,
            Expect::Either,
            "one of 4 identical concurrent creates",
        )
    }))
    .await;
    let mut problems = Vec::new();
    let mut paths = BTreeSet::new();
    for (i, call) in calls.iter().enumerate() {
        match &call.result {
            Ok(resp) => {
                paths.insert(resp.path.clone());
            }
            Err(e) => problems.push(format!("#{} failed: {e}", i + 1)),
        }
    }
    if paths.len() > 1 {
        problems.push(format!("different paths: {paths:?}"));
    }
    if let Some(path) = paths.iter().next() {
        ctx.delete(
            &req,
            path,
            Expect::Success,
            "delete after the identical creates",
        )
        .await;
    }
    let failed = calls.iter().any(|c| !c.ok());
    if problems.is_empty() {
        Ok(Finding::Pass("4 at once: all exit 0, one path".into()))
    } else if let Some(needs) = match failed && paths.len() <= 1 {
        // Creating an existing volume fails even one at a time: not a race.
        true => ctx.create_again_fails().await,
        false => None,
    } {
        Err(Finding::Skip(needs))
    } else {
        Err(Finding::Fail(format!(
            "expected 4 identical concurrent creates (restore racing an update) to all exit 0 with the same path; {}",
            problems.join("; ")
        )))
    }
}
