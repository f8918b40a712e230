//! The runner's promises about what confines a call: a cgroup of its own where
//! the machine allows, refusals that refuse its calls and only them (and judge
//! without a cgroup), a session of its own with no terminal, and no descriptor
//! of ours but its stdio.

use super::*;

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
    let cgroup_of = |out: &dhv_host::exec::Outcome| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            .unwrap()
    };
    // Two at once have a cgroup each; a later call has one of the run's.
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
    // A later call takes a prepared cgroup of the run's pool: one handed
    // back and checked, or a spare made ahead (which one depends on the
    // other tests of this process that run calls meanwhile).
    assert!(later.contains(&mine), "{later}: not one of the run's");
}

/// Each removal and mode refusal (`Call::refuse`) refuses exactly its calls,
/// to the leader and to what it starts, on this kernel: with files refused a
/// file stays and an empty directory goes; with directories refused, the
/// other way round; with mode changes refused, `chmod` fails and `mkdir -m`
/// (which needs none here) works. Without a refusal, everything works.
#[test]
fn a_refusal_refuses_its_calls_and_only_them() {
    use dhv_host::exec::Refusal;
    if !dhv_host::exec::can_refuse() {
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
    if !dhv_host::exec::can_refuse() {
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
    .env(dhv_host::exec::NO_CGROUP_VAR, "1")
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
