//! The runner's promises, each proven with a throwaway plugin: exact env, stdin,
//! timeouts that kill even a SIGTERM-ignoring plugin, leaks, escaped daemons,
//! output floods, start failures, and cancellation.

use crate::util;

use std::time::Duration;

use crate::util::{Scratch, processes_mentioning};
use dhv_conform::exec::{Call, ExitReason, KillMode, Supervisor};

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
fn an_output_flood_is_capped_drained_and_memory_stays_flat() {
    let s = Scratch::new();
    let p = s.plugin(
        "p",
        "#!/bin/sh\nhead -c 300000000 /dev/zero\nhead -c 3000000 /dev/zero >&2\n",
    );
    let before = peak_rss_kib();
    let out = rt()
        .block_on(Call::new(&p).output_cap(1 << 20).run())
        .unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert_eq!(out.stdout.len(), 1 << 20);
    assert_eq!(out.stderr.len(), 1 << 20);
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "peak RSS grew by {grown} KiB");
}

/// A plugin that writes the numbers `1..=n`, one per line, to stdout and, in
/// reverse, to stderr, in many small writes: what was captured must be exactly
/// that, in order, however the reads were cut.
fn numbers_plugin(s: &Scratch, n: u32) -> std::path::PathBuf {
    s.plugin(
        "numbers",
        &format!(
            "#!/bin/sh
i=1
while [ $i -le {n} ]; do echo $i; echo $(({n} + 1 - i)) >&2; i=$((i + 1)); done
"
        ),
    )
}

fn numbers(range: impl Iterator<Item = u32>) -> Vec<u8> {
    range
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn output_below_the_cap_is_kept_whole_and_in_order() {
    let s = Scratch::new();
    // About 34 KiB on each stream: several reads, on both pipes at once.
    let p = numbers_plugin(&s, 6000);
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert_eq!(out.stdout, numbers(1..=6000));
    assert_eq!(out.stderr, numbers((1..=6000).rev()));
    assert!(!out.stdout_truncated && !out.stderr_truncated && !out.leaked);
}

#[test]
fn output_exactly_at_the_cap_is_whole_and_one_byte_more_is_truncated() {
    let s = Scratch::new();
    let p = numbers_plugin(&s, 3000);
    let whole = numbers(1..=3000);
    let at_cap = rt()
        .block_on(Call::new(&p).output_cap(whole.len()).run())
        .unwrap();
    assert_eq!(at_cap.stdout, whole);
    assert!(!at_cap.stdout_truncated && !at_cap.stderr_truncated);

    let below = rt()
        .block_on(Call::new(&p).output_cap(whole.len() - 1).run())
        .unwrap();
    assert_eq!(below.stdout, whole[..whole.len() - 1]);
    assert!(below.stdout_truncated && below.stderr_truncated);

    let none = rt().block_on(Call::new(&p).output_cap(0).run()).unwrap();
    assert!(none.stdout.is_empty() && none.stderr.is_empty());
    assert!(none.stdout_truncated && none.stderr_truncated);
    assert_eq!(none.exit, ExitReason::Code(0));
}

#[test]
fn a_silent_plugin_gives_empty_output_untruncated() {
    let s = Scratch::new();
    let p = s.plugin(
        "quiet",
        "#!/bin/sh
exit 3
",
    );
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(3));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    assert!(!out.stdout_truncated && !out.stderr_truncated && !out.leaked);
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

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
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

#[test]
fn each_call_runs_in_a_cgroup_of_its_own_where_the_machine_allows() {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(rel) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        println!("skipped: no cgroup2 hierarchy here; the subreaper alone finds escaped daemons");
        return;
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        right
            .starts_with("cgroup2 ")
            .then(|| left.split(' ').nth(4))?
    });
    let probe = mount.map(|m| {
        std::path::Path::new(m)
            .join(rel.trim_start_matches('/'))
            .join(format!("dhv-test-probe-{}", std::process::id()))
    });
    let writable = probe
        .as_ref()
        .is_some_and(|p| std::fs::create_dir(p).is_ok());
    if let Some(p) = &probe {
        let _ = std::fs::remove_dir(p);
    }
    if !writable {
        println!(
            "skipped: our cgroup is not writable here; the subreaper alone finds escaped daemons"
        );
        return;
    }
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\nexec cat /proc/self/cgroup\n");
    let cgroup_of = |out: &dhv_conform::exec::Outcome| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            .unwrap()
    };
    // Two at once have a cgroup each; a later call reuses an emptied one.
    let (first, second, later) = rt().block_on(async {
        let slow = s.plugin("slow", "#!/bin/sh\ncat /proc/self/cgroup\nexec sleep 0.2\n");
        let (slow, fast) = (Call::new(&slow), Call::new(&p));
        let (a, b) = tokio::join!(slow.run(), fast.run());
        let c = Call::new(&p).run().await.unwrap();
        (
            cgroup_of(&a.unwrap()),
            cgroup_of(&b.unwrap()),
            cgroup_of(&c),
        )
    });
    let mine = format!("/dhv-conform-run-{}-", std::process::id());
    assert!(
        first.contains(&mine) && second.contains(&mine),
        "{first} {second}"
    );
    assert_ne!(first, second);
    assert!(later == first || later == second, "{later}: not reused");
}

/// Each removal and mode refusal (`Call::refuse`) refuses exactly its calls,
/// to the leader and to what it starts, on this kernel: with files refused a
/// file stays and an empty directory goes; with directories refused, the
/// other way round; with mode changes refused, `chmod` fails and `mkdir -m`
/// (which needs none here) works. Without a refusal, everything works.
#[test]
fn a_refusal_refuses_its_calls_and_only_them() {
    use dhv_conform::exec::Refusal;
    if !dhv_conform::exec::can_refuse() {
        util::skip(
            "a_refusal_refuses_its_calls_and_only_them",
            "system calls cannot be refused to a call here (x86-64 and clone3 needed)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = r#"cd "$1" || exit 9
mkdir d && : > f && : > g || exit 9
sh -c 'rm -f f'; echo "rm-file $?"
sh -c 'rmdir d'; echo "rmdir $?"
chmod 0600 g; echo "chmod $?"
mkdir -m 0700 m; echo "mkdir-m $?"
"#;
    let run = |refusal: Option<Refusal>| {
        let work = dir.path().join(format!("{refusal:?}"));
        std::fs::create_dir(&work).unwrap();
        let out = rt()
            .block_on(
                Call::new("/bin/sh")
                    .arg("-c")
                    .arg(script)
                    .arg("sh")
                    .arg(&work)
                    .env(vec![("PATH".into(), "/usr/bin:/bin".into())])
                    .refuse(refusal)
                    .run(),
            )
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let all_work = "rm-file 0\nrmdir 0\nchmod 0\nmkdir-m 0\n";
    assert_eq!(run(None), all_work);
    assert_eq!(
        run(Some(Refusal::FileRemovals)),
        "rm-file 1\nrmdir 0\nchmod 0\nmkdir-m 0\n"
    );
    assert_eq!(
        run(Some(Refusal::DirRemovals)),
        "rm-file 0\nrmdir 1\nchmod 0\nmkdir-m 0\n"
    );
    assert_eq!(
        run(Some(Refusal::ModeChanges)),
        "rm-file 0\nrmdir 0\nchmod 1\nmkdir-m 0\n"
    );
    assert_eq!(run(Some(Refusal::Mounts)), all_work);
}

/// A plugin runs in a session of its own, as under a Nomad agent: no
/// controlling terminal of ours reaches it (no `/dev/tty`, no `TIOCSTI`, no
/// taking the terminal's foreground).
#[test]
fn a_plugin_leads_a_session_of_its_own_with_no_terminal() {
    let s = Scratch::new();
    let p = s.plugin(
        "p",
        "#!/bin/sh\nread -r stat < /proc/$$/stat\nset -- ${stat#*) }\necho \"pid=$$ pgrp=$3 sid=$4 tty=$5\"\nif (: > /dev/tty) 2>/dev/null; then echo has-tty; else echo no-tty; fi\n",
    );
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let pid = out.pid;
    assert!(
        text.starts_with(&format!("pid={pid} pgrp={pid} sid={pid} tty=0\n")),
        "{text}"
    );
    assert!(text.ends_with("no-tty\n"), "{text}");
}

/// A refusal needs no cgroup per call (nor root): a harness without one
/// (`DHV_CONFORM_NO_CGROUP`, as one that is not root) judges the refusal
/// checks of the reference plugin as one with, rather than skipping them.
#[test]
fn refusal_checks_judge_without_a_cgroup_per_call() {
    if !dhv_conform::exec::can_refuse() {
        util::skip(
            "refusal_checks_judge_without_a_cgroup_per_call",
            "system calls cannot be refused to a call here (x86-64 and clone3 needed)",
        );
        return;
    }
    let out = util::check::check([
        util::sample("reference").as_str(),
        "failure.",
        "--json",
        "-",
    ])
    .env(dhv_conform::exec::NO_CGROUP_VAR, "1")
    .run();
    let report = out.report();
    for id in ["failure.chmod-refused", "failure.remove-refused"] {
        let check = util::check::find(&report, id);
        assert_eq!(check.status.as_str(), "pass", "{id}: {}", check.message);
    }
}

/// A plugin starts with stdin, stdout and stderr and nothing else of ours, even
/// a descriptor we left without close-on-exec: the clone's child closes them
/// before anything else, so that no file the harness has closed stays open in
/// a child on its way to the exec (a volume a check let go of could not be
/// unmounted while a neighbour's call was starting on a loaded host).
#[test]
fn a_plugin_inherits_no_descriptor_of_ours_but_its_stdio() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\nls /proc/$$/fd\n");
    let file = std::fs::File::open(s.path()).unwrap();
    // F_DUPFD (not F_DUPFD_CLOEXEC): a descriptor the exec would keep.
    let inherited = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_DUPFD(100)).unwrap();
    let out = rt().block_on(Call::new(&p).run());
    // SAFETY: a descriptor this test made and owns.
    drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(inherited) });
    let out = out.unwrap();
    let fds: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    // `ls` opens one more of its own, to read the directory.
    assert!(
        !fds.contains(&inherited.to_string()),
        "the plugin inherited descriptor {inherited}: {fds:?}"
    );
    assert!(
        fds.len() <= 4 && ["0", "1", "2"].iter().all(|f| fds.contains(&f.to_string())),
        "{fds:?}"
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
