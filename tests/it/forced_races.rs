//! Races forced by design (`exec::Rendezvous`): a burst's calls are held at
//! their first change of state and let go together, so a check-then-act
//! window of microseconds is met in every round, and a race-free plugin is
//! never troubled.

use std::time::Duration;

use crate::util::{self, Scratch};
use dhv_host::exec::{Call, ExitReason, HoldPoint, Rendezvous};

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

/// `concurrency.same-volume`'s status for `plugin` in one default run of it.
fn same_volume_status(plugin: &std::path::Path) -> String {
    crate::util::check::only(plugin, "concurrency.same-volume")
        .0
        .to_string()
}

/// The race of a Python create that tests for its directory and then makes
/// it (a window of microseconds after 50 ms of start-up, met by aligned
/// starts in about one run of three) is found in every run, and the same
/// plugin made race-free is never warned.
#[test]
fn the_check_finds_a_tight_race_every_run_and_never_warns_a_race_free_plugin() {
    if !need_holds("the_check_finds_a_tight_race_every_run_and_never_warns_a_race_free_plugin") {
        return;
    }
    let s = Scratch::new();
    let body = |make: &str| {
        format!(
            "#!/usr/bin/python3\nimport json, os, sys\nif sys.argv[1] == 'fingerprint':\n    print(json.dumps({{'version': '1.0.0'}}))\n    sys.exit(0)\np = os.path.join(os.environ['DHV_VOLUMES_DIR'], os.environ['DHV_VOLUME_ID'])\nif sys.argv[1] == 'create':\n    {make}\n    print(json.dumps({{'path': p, 'bytes': 0}}))\nelif sys.argv[1] == 'delete':\n    if os.path.isdir(p):\n        os.rmdir(p)\nelse:\n    sys.exit(1)\n"
        )
    };
    let racy = s.plugin("racy", &body("if not os.path.exists(p): os.mkdir(p)"));
    let safe = s.plugin("safe", &body("os.makedirs(p, exist_ok=True)"));
    for run in 0..5 {
        assert_eq!(
            same_volume_status(&racy),
            "warn",
            "run {run}: the race was missed"
        );
        assert_eq!(same_volume_status(&safe), "pass", "run {run}");
    }
}

/// A call's changes of state are recorded in order, and a crash at the `n`th
/// kills it before that change runs: the state a crash leaves is the plugin's
/// own, whatever the host's speed.
#[test]
fn a_crash_at_a_change_kills_the_call_before_that_change_runs() {
    if !need_holds("a_crash_at_a_change_kills_the_call_before_that_change_runs") {
        return;
    }
    use dhv_host::exec::AtChanges;
    let s = Scratch::new();
    let p = s.plugin(
        "steps",
        "#!/usr/bin/python3\nimport os\nd = os.environ['D']\nfor n in ('a', 'b', 'c'):\n    os.mkdir(os.path.join(d, n))\nos.rename(os.path.join(d, 'c'), os.path.join(d, 'done'))\n",
    );
    let run = |dir: &std::path::Path, watch: AtChanges| {
        let call = Call::new(&p)
            .env(vec![("D".into(), dir.to_string_lossy().into_owned())])
            .timeout(Duration::from_secs(60))
            .at_changes(Some(watch));
        util::runtime().block_on(call.run()).unwrap()
    };
    let dir = s.path().join("record");
    std::fs::create_dir(&dir).unwrap();
    let recorded = run(&dir, AtChanges::Record(dir.clone()));
    let names: Vec<_> = recorded.changes.iter().map(|c| c.describe()).collect();
    let d = std::fs::canonicalize(&dir).unwrap();
    assert_eq!(
        names,
        ["a", "b", "c"]
            .map(|n| format!("mkdir {}", d.join(n).display()))
            .into_iter()
            .chain([format!("rename {}", d.join("c").display())])
            .collect::<Vec<_>>()
    );
    assert!(!recorded.killed_at_change && recorded.exit == ExitReason::Code(0));
    for n in 1..=4 {
        let dir = s.path().join(format!("crash-{n}"));
        std::fs::create_dir(&dir).unwrap();
        let crashed = run(&dir, AtChanges::KillAt(dir.clone(), n));
        assert!(crashed.killed_at_change, "{n}: {crashed:?}");
        assert_eq!(crashed.exit, ExitReason::Signal(libc::SIGKILL));
        assert_eq!(crashed.changes.len(), n);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let made = ["a", "b", "c"];
        assert_eq!(left, made[..n - 1], "killed before change {n}");
    }
}

/// What a call makes outside a dir is recorded, by name and by its own
/// processes (a rename by its target), and nothing it makes inside the dir,
/// nothing it only removes: where a plugin writes on the node, told apart
/// from whatever else runs there.
#[test]
fn names_made_outside_a_dir_are_recorded_and_nothing_inside_it() {
    if !need_holds("names_made_outside_a_dir_are_recorded_and_nothing_inside_it") {
        return;
    }
    use dhv_host::exec::AtChanges;
    let s = Scratch::new();
    let p = s.plugin(
        "writer",
        "#!/usr/bin/python3\nimport os\nd, o = os.environ['D'], os.environ['O']\nos.mkdir(os.path.join(d, 'in'))\nopen(os.path.join(o, 'log.tmp'), 'w').close()\nos.rename(os.path.join(o, 'log.tmp'), os.path.join(o, 'log'))\nos.mkdir(os.path.join(o, 'state'))\nos.rmdir(os.path.join(o, 'state'))\n",
    );
    let (inside, outside) = (s.path().join("inside"), s.path().join("outside"));
    std::fs::create_dir(&inside).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let call = Call::new(&p)
        .env(vec![
            ("D".into(), inside.to_string_lossy().into_owned()),
            ("O".into(), outside.to_string_lossy().into_owned()),
        ])
        .timeout(Duration::from_secs(60))
        .at_changes(Some(AtChanges::RecordOutside(inside.clone())));
    let recorded = util::runtime().block_on(call.run()).unwrap();
    assert_eq!(recorded.exit, ExitReason::Code(0));
    let o = std::fs::canonicalize(&outside).unwrap();
    let names: Vec<_> = recorded.changes.iter().map(|c| c.describe()).collect();
    assert_eq!(
        names,
        [
            format!("openat {}", o.join("log.tmp").display()),
            format!("rename {}", o.join("log").display()),
            format!("mkdir {}", o.join("state").display()),
        ]
    );
}

/// A create that takes a lock outside the burst's dir, then makes its
/// directory in it: the first call to get the lock is held at its mkdir,
/// and the others wait for a lock only it can give back. They can never
/// arrive, so the held call is let go as soon as they are seen blocked,
/// not at the bound (20 s here): the burst costs what the calls cost.
#[test]
fn siblings_blocked_on_a_held_calls_lock_are_not_waited_for() {
    if !need_holds("siblings_blocked_on_a_held_calls_lock_are_not_waited_for") {
        return;
    }
    let s = Scratch::new();
    let lock = s.path().join("lock");
    let p = s.plugin(
        "locked",
        &format!(
            "#!/usr/bin/python3\nimport fcntl, os\nf = open({lock:?}, 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\np = os.path.join(os.environ['D'], 'v')\nos.makedirs(p, exist_ok=True)\nprint(p)\n",
            lock = lock.display().to_string()
        ),
    );
    std::fs::write(&lock, "").unwrap();
    let dir = s.path().join("scope");
    std::fs::create_dir(&dir).unwrap();
    let started = std::time::Instant::now();
    let out = burst(&p, &dir, 3, 0);
    let elapsed = started.elapsed();
    assert!(
        out.iter().all(|(e, _)| *e == ExitReason::Code(0)),
        "{out:?}"
    );
    let held: Vec<&HoldPoint> = out.iter().filter_map(|(_, h)| h.as_ref()).collect();
    assert_eq!(
        held.len(),
        1,
        "one call held, the others blocked on its lock: {out:?}"
    );
    assert_eq!((held[0].together, held[0].of), (1, 3), "{held:?}");
    // Let go at the bound, the burst would take 20 s.
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
}

/// What a call makes under a dir is recorded by name (a rename by its
/// target), and nothing it only removes, nothing it makes elsewhere: whose a
/// file in the dir is, told by the call that made it.
#[test]
fn names_made_under_a_dir_are_recorded_and_nothing_it_only_removes() {
    if !need_holds("names_made_under_a_dir_are_recorded_and_nothing_it_only_removes") {
        return;
    }
    use dhv_host::exec::AtChanges;
    let s = Scratch::new();
    let p = s.plugin(
        "maker",
        "#!/usr/bin/python3\nimport os\nd, o = os.environ['D'], os.environ['O']\nos.mkdir(os.path.join(o, 'elsewhere'))\nopen(os.path.join(d, 'rec.tmp'), 'w').close()\nos.rename(os.path.join(d, 'rec.tmp'), os.path.join(d, 'rec'))\nos.mkdir(os.path.join(d, 'gone'))\nos.rmdir(os.path.join(d, 'gone'))\n",
    );
    let (inside, outside) = (s.path().join("inside"), s.path().join("outside"));
    std::fs::create_dir(&inside).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let call = Call::new(&p)
        .env(vec![
            ("D".into(), inside.to_string_lossy().into_owned()),
            ("O".into(), outside.to_string_lossy().into_owned()),
        ])
        .timeout(Duration::from_secs(60))
        .at_changes(Some(AtChanges::RecordMade(inside.clone())));
    let recorded = util::runtime().block_on(call.run()).unwrap();
    assert_eq!(recorded.exit, ExitReason::Code(0));
    let d = std::fs::canonicalize(&inside).unwrap();
    let names: Vec<_> = recorded.changes.iter().map(|c| c.describe()).collect();
    assert_eq!(
        names,
        [
            format!("openat {}", d.join("rec.tmp").display()),
            format!("rename {}", d.join("rec").display()),
            format!("mkdir {}", d.join("gone").display()),
        ]
    );
}
