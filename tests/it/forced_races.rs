//! Races forced by design (`exec::Rendezvous`): a burst's calls are held at
//! their first change of state and let go together, so a check-then-act
//! window of microseconds is met in every round, and a race-free plugin is
//! never troubled.

use std::time::Duration;

use crate::util::{self, Scratch};
use dhv_conform::exec::{Call, ExitReason, HoldPoint, Rendezvous};

/// A create that tests for its directory, then makes it: the window between
/// the two is a few microseconds of Python.
const CHECK_THEN_MKDIR: &str = "#!/usr/bin/python3\nimport os, sys\np = os.path.join(os.environ['D'], 'v')\nif not os.path.exists(p):\n    os.mkdir(p)\nprint(p)\n";

/// The same, race-free.
const MAKEDIRS_EXIST_OK: &str = "#!/usr/bin/python3\nimport os\np = os.path.join(os.environ['D'], 'v')\nos.makedirs(p, exist_ok=True)\nprint(p)\n";

/// Runs `burst` copies of `plugin` held at one rendezvous over `dir`: how
/// each ended and where it was held.
fn burst(
    plugin: &std::path::Path,
    dir: &std::path::Path,
    burst: usize,
    first: usize,
) -> Vec<(ExitReason, Option<HoldPoint>)> {
    let rt = util::runtime();
    let r = Rendezvous::with_bound(burst, first, dir, Duration::from_secs(20));
    rt.block_on(async {
        let tasks: Vec<_> = (0..burst)
            .map(|_| {
                let call = Call::new(plugin)
                    .env(vec![("D".into(), dir.to_string_lossy().into_owned())])
                    .timeout(Duration::from_secs(60))
                    .hold(Some(r.clone()));
                tokio::spawn(async move { call.run().await })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            let o = t.await.unwrap().unwrap();
            out.push((o.exit, o.held));
        }
        out
    })
}

fn need_holds(test: &str) -> bool {
    if !Rendezvous::available() {
        util::skip(
            test,
            "calls cannot be held here (no seccomp user notification)",
        );
        return false;
    }
    true
}

#[test]
fn a_check_then_mkdir_race_is_met_in_every_round() {
    if !need_holds("a_check_then_mkdir_race_is_met_in_every_round") {
        return;
    }
    let s = Scratch::new();
    let p = s.plugin("racy", CHECK_THEN_MKDIR);
    for round in 0..5 {
        let dir = s.path().join(format!("round-{round}"));
        std::fs::create_dir(&dir).unwrap();
        let out = burst(&p, &dir, 4, round);
        let failed = out
            .iter()
            .filter(|(e, _)| *e != ExitReason::Code(0))
            .count();
        assert_eq!(
            failed, 3,
            "round {round}: one mkdir wins, three meet EEXIST: {out:?}"
        );
        for (_, held) in &out {
            let held = held.as_ref().expect("every call held");
            assert_eq!(held.syscall, "mkdir", "{held:?}");
            assert_eq!(held.together, 4, "{held:?}");
        }
        let mut order: Vec<_> = out
            .iter()
            .filter_map(|(_, h)| h.as_ref()?.released)
            .collect();
        order.sort();
        assert_eq!(order, [1, 2, 3, 4]);
    }
}

#[test]
fn a_race_free_create_is_never_troubled() {
    if !need_holds("a_race_free_create_is_never_troubled") {
        return;
    }
    let s = Scratch::new();
    let p = s.plugin("safe", MAKEDIRS_EXIST_OK);
    for round in 0..5 {
        let dir = s.path().join(format!("round-{round}"));
        std::fs::create_dir(&dir).unwrap();
        let out = burst(&p, &dir, 4, round);
        assert!(
            out.iter().all(|(e, _)| *e == ExitReason::Code(0)),
            "round {round}: {out:?}"
        );
        assert!(
            out.iter()
                .all(|(_, h)| h.as_ref().is_some_and(|h| h.together == 4)),
            "{out:?}"
        );
    }
}

#[test]
fn a_call_that_changes_nothing_in_scope_is_not_held_and_does_not_stall_the_burst() {
    if !need_holds("a_call_that_changes_nothing_in_scope_is_not_held_and_does_not_stall_the_burst")
    {
        return;
    }
    let s = Scratch::new();
    // Writes outside the scope only (its stdout, /dev/null).
    let p = s.plugin("quiet", "#!/bin/sh\necho hi >/dev/null\necho done\n");
    let dir = s.path().join("scope");
    std::fs::create_dir(&dir).unwrap();
    let started = std::time::Instant::now();
    let out = burst(&p, &dir, 3, 0);
    assert!(
        out.iter()
            .all(|(e, h)| *e == ExitReason::Code(0) && h.is_none()),
        "{out:?}"
    );
    // The bound is 20 s: nothing waited for it.
    assert!(started.elapsed() < Duration::from_secs(15));
}
