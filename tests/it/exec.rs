//! The runner's promises, each proven with a throwaway plugin: exact env, stdin,
//! timeouts that kill even a SIGTERM-ignoring plugin, leaks, escaped daemons,
//! output floods, start failures, and cancellation.

use crate::util;

use std::time::Duration;

use crate::util::{Scratch, processes_mentioning};
use dhv_host::exec::{Call, ExitReason, KillMode, Supervisor};

mod confinement;
mod output;

fn rt() -> tokio::runtime::Runtime {
    util::runtime()
}

#[test]
fn env_is_exactly_the_given_vars_in_order_and_stdin_is_null() {
    let s = Scratch::new();
    let p = s.plugin(
        "p",
        "#!/bin/sh\ntr '\\0' '\\n' < /proc/$$/environ\necho \"args=$#:$1\"\nif read -r line; then echo got-stdin; else echo stdin-eof; fi\n",
    );
    let env = vec![
        ("DHV_OPERATION".to_string(), "create".to_string()),
        ("DHV_B".to_string(), String::new()),
        ("DHV_A".to_string(), "x y".to_string()),
    ];
    let out = rt()
        .block_on(Call::new(&p).arg("create").env(env).run())
        .unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "DHV_OPERATION=create\nDHV_B=\nDHV_A=x y\nargs=1:create\nstdin-eof\n"
    );
    assert!(!out.leaked && out.leftovers.is_empty() && !out.timed_out);
}

#[test]
fn timeout_kills_a_plugin_that_ignores_sigterm() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\ntrap '' TERM\nexec sleep 1001.5\n");
    let out = rt()
        .block_on(
            Call::new(&p)
                .timeout(Duration::from_millis(200))
                .term_grace(Duration::from_millis(100))
                .run(),
        )
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit, ExitReason::Signal(9));
    assert!(processes_mentioning("1001.5").is_empty());
}

#[test]
fn timeout_stops_a_cooperative_plugin_with_sigterm() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\nexec sleep 1002.5\n");
    let out = rt()
        .block_on(Call::new(&p).timeout(Duration::from_millis(100)).run())
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit, ExitReason::Signal(15));
}

#[test]
fn nomad_mode_kills_the_leader_only_and_sees_the_leak() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\nsleep 1003.5 &\nexec sleep 1003.6\n");
    let out = rt()
        .block_on(
            Call::new(&p)
                .timeout(Duration::from_millis(100))
                .kill_mode(KillMode::NomadLeader)
                .run(),
        )
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit, ExitReason::Signal(9));
    assert!(out.leaked, "the background sleep holds stdout");
    assert!(out.leftovers.iter().any(|l| l.cmdline.contains("1003.5")));
    assert!(processes_mentioning("1003.5").is_empty());
}

#[test]
fn a_leaked_background_child_is_recorded_and_killed() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\nsleep 1004.5 &\necho '{}'\n");
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert!(out.leaked);
    let child = out
        .leftovers
        .iter()
        .find(|l| l.cmdline.contains("sleep"))
        .expect("the sleep is recorded");
    assert!(child.held_stdio && !child.escaped_group);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "{}\n");
    assert!(processes_mentioning("1004.5").is_empty());
}

#[test]
fn a_setsid_daemon_is_found_recorded_and_killed() {
    let s = Scratch::new();
    let ready = s.path().join("ready");
    let p = s.plugin(
        "p",
        &format!(
            "#!/bin/sh\nsetsid sh -c 'touch {r}; exec sleep 1005.5' >/dev/null 2>&1 </dev/null &\nwhile [ ! -e {r} ]; do :; done\necho done\n",
            r = ready.display()
        ),
    );
    let out = rt().block_on(Call::new(&p).env(dhv_env()).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert!(!out.leaked, "the daemon closed its stdio");
    assert!(
        out.leftovers
            .iter()
            .any(|l| l.escaped_group && !l.held_stdio),
        "{:?}",
        out.leftovers
    );
    assert!(processes_mentioning("1005.5").is_empty());
}

#[test]
fn start_failures_are_spawn_errors_with_the_os_reason() {
    let s = Scratch::new();
    let no_shebang = s.plugin("no-shebang", "echo hi\n");
    let err = rt().block_on(Call::new(&no_shebang).run()).unwrap_err();
    assert_eq!(err.source.raw_os_error(), Some(libc::ENOEXEC));

    let crlf = s.plugin("crlf", "#!/bin/sh\r\necho hi\r\n");
    let err = rt().block_on(Call::new(&crlf).run()).unwrap_err();
    assert_eq!(err.source.raw_os_error(), Some(libc::ENOENT));

    let not_exec = s.path().join("not-exec");
    std::fs::write(&not_exec, "#!/bin/sh\necho hi\n").unwrap();
    let err = rt().block_on(Call::new(&not_exec).run()).unwrap_err();
    assert_eq!(err.source.raw_os_error(), Some(libc::EACCES));
}

#[test]
fn a_dropped_call_kills_everything_it_started() {
    let s = Scratch::new();
    let ready = s.path().join("ready");
    let p = s.plugin(
        "p",
        &format!(
            "#!/bin/sh\nsetsid sh -c 'exec sleep 1006.5' >/dev/null 2>&1 </dev/null &\nsleep 1006.6 &\ntouch {}\nwait\n",
            ready.display()
        ),
    );
    rt().block_on(async {
        let inv = Call::new(&p).env(dhv_env());
        let call = inv.run();
        tokio::pin!(call);
        let wait_ready = async {
            while !ready.exists() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        tokio::select! {
            _ = &mut call => panic!("the plugin waits forever"),
            _ = tokio::time::timeout(Duration::from_secs(10), wait_ready) => {}
        }
    });
    // The sweep runs on a helper thread: wait for it, with a bound.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_mentioning("1006.").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            processes_mentioning("1006.")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Escaped daemons are attributed to a call through the env it was given.
fn dhv_env() -> Vec<(String, String)> {
    vec![
        ("DHV_OPERATION".to_string(), "create".to_string()),
        (
            "DHV_VOLUME_ID".to_string(),
            uuid::Uuid::new_v4().to_string(),
        ),
    ]
}

/// Waits, bounded, until `path` exists.
async fn appears(path: &std::path::Path) {
    let wait = async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("{} never appeared", path.display()));
}

#[test]
fn cancelling_one_supervisor_leaves_another_supervisors_calls_alone() {
    let s = Scratch::new();
    let (ready_a, ready_b, go_b) = (
        s.path().join("ready-a"),
        s.path().join("ready-b"),
        s.path().join("go"),
    );
    let a_plugin = s.plugin(
        "a",
        &format!(
            "#!/bin/sh\nsetsid sh -c 'exec sleep 1007.1' >/dev/null 2>&1 </dev/null &\ntouch {}\nexec sleep 1007.2\n",
            ready_a.display()
        ),
    );
    let b_plugin = s.plugin(
        "b",
        &format!(
            "#!/bin/sh\nsleep 1007.3 &\ntouch {}\nwhile [ ! -e {} ]; do sleep 0.01; done\nkill $!\necho b-done\n",
            ready_b.display(),
            go_b.display()
        ),
    );
    let (a, b) = (Supervisor::new(), Supervisor::new());
    rt().block_on(async {
        let inv_a = Call::new(&a_plugin).env(dhv_env()).supervised_by(&a);
        let call_a = tokio::spawn(async move { inv_a.run().await });
        let inv_b = Call::new(&b_plugin).env(dhv_env()).supervised_by(&b);
        let call_b = tokio::spawn(async move { inv_b.run().await });
        appears(&ready_a).await;
        appears(&ready_b).await;
        assert_eq!((a.live_calls(), b.live_calls()), (1, 1));

        a.cancel();
        let out_a = tokio::time::timeout(Duration::from_secs(5), call_a)
            .await
            .expect("a cancelled call returns promptly")
            .unwrap()
            .unwrap();
        assert_eq!(out_a.exit, ExitReason::Signal(9));
        assert!(
            processes_mentioning("1007.1").is_empty(),
            "a's daemon survived"
        );
        assert!(a.is_cancelled() && !b.is_cancelled());
        // b's call and the child it started are untouched.
        assert_eq!(b.live_calls(), 1);
        assert_eq!(processes_mentioning("1007.3").len(), 1);

        // Nothing starts through the cancelled supervisor any more...
        let refused = Call::new(&a_plugin).supervised_by(&a).run().await;
        assert_eq!(
            refused.unwrap_err().source.raw_os_error(),
            Some(libc::ECANCELED)
        );
        // ...while a fresh one works.
        let fresh = Supervisor::new();
        let ok = Call::new("/bin/true")
            .supervised_by(&fresh)
            .run()
            .await
            .unwrap();
        assert_eq!(ok.exit, ExitReason::Code(0));

        std::fs::write(&go_b, "").unwrap();
        let out_b = tokio::time::timeout(Duration::from_secs(10), call_b)
            .await
            .expect("b finishes")
            .unwrap()
            .unwrap();
        assert_eq!(out_b.exit, ExitReason::Code(0));
        assert_eq!(String::from_utf8_lossy(&out_b.stdout), "b-done\n");
        assert_eq!(b.live_calls(), 0);
    });
    assert!(processes_mentioning("1007.").is_empty());
}

#[test]
fn a_daemon_that_leaves_the_session_and_wipes_its_env_is_found_and_killed() {
    let s = Scratch::new();
    let ready = s.path().join("ready");
    // Double fork, a new session, and an environment with nothing of ours: no
    // group, session or variable ties the daemon to the call any more.
    let p = s.plugin(
        "p",
        &format!(
            "#!/bin/sh\nsetsid sh -c '(exec env -i /bin/sleep 1008.5) & touch {}' >/dev/null 2>&1 </dev/null &\nwhile [ ! -e {} ]; do sleep 0.01; done\necho done\n",
            ready.display(),
            ready.display()
        ),
    );
    let out = rt().block_on(Call::new(&p).env(dhv_env()).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    let escaped: Vec<_> = out
        .leftovers
        .iter()
        .filter(|l| l.cmdline.contains("1008.5"))
        .collect();
    // The daemon, and perhaps the shell that started it, still exiting.
    assert!(!escaped.is_empty(), "{:?}", out.leftovers);
    assert!(escaped.iter().all(|l| l.escaped_group));
    assert!(processes_mentioning("1008.5").is_empty());
}

#[test]
fn the_plugin_starts_with_no_signal_ignored_or_blocked() {
    let s = Scratch::new();
    // `exec`: the shell blocks signals for a moment while it forks a child.
    let p = s.plugin(
        "p",
        "#!/bin/sh\nexec grep -E '^Sig(Ign|Blk)' /proc/self/status\n",
    );
    // Rust ignores SIGPIPE in this process; the plugin must not inherit that.
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
    );
}

/// The output a run's calls keep is bounded for the run, not only per call:
/// past the budget each call keeps its first bytes (64 KiB of stdout, 4 KiB
/// of stderr), counts the rest and says it was truncated.
#[test]
fn a_runs_calls_share_one_output_budget() {
    let s = Scratch::new();
    // 300 KiB on stderr and 100 KiB on stdout, every call.
    let p = s.plugin(
        "p",
        "#!/bin/sh\nhead -c 307200 /dev/zero | tr '\\0' e >&2\nhead -c 102400 /dev/zero | tr '\\0' o\n",
    );
    let supervisor = Supervisor::with_output_budget(1 << 20);
    let rt = rt();
    let outs: Vec<_> = (0..6)
        .map(|_| {
            rt.block_on(Call::new(&p).supervised_by(&supervisor).run())
                .unwrap()
        })
        .collect();
    let kept: usize = outs.iter().map(|o| o.stdout.len() + o.stderr.len()).sum();
    let free = 6 * (64 * 1024 + 4 * 1024);
    assert!(
        kept <= (1 << 20) + free,
        "kept {kept} bytes past a budget of 1 MiB + {free}"
    );
    // The first call keeps everything; the last, past the budget, its free bytes.
    assert_eq!(outs[0].stderr.len(), 307200);
    assert!(!outs[0].stderr_truncated && !outs[0].stdout_truncated);
    let last = outs.last().unwrap();
    assert_eq!(last.stderr.len(), 4 * 1024);
    assert_eq!(last.stdout.len(), 64 * 1024);
    assert!(last.stderr_truncated && last.stdout_truncated);
    assert_eq!((last.stderr_len, last.stdout_len), (307200, 102400));
    assert!(supervisor.output_budget_spent());
    // A supervisor of its own is a budget of its own.
    let fresh = rt.block_on(Call::new(&p).run()).unwrap();
    assert_eq!(fresh.stderr.len(), 307200);
}
