//! Limits per call: `pids.max` and the memory limit on each call's cgroup
//! (`[limits]` in `dhv-conform.toml`), set through the cgroup2 hierarchy
//! where it offers the controller, else through the controller's v1
//! hierarchy (a hybrid host, as CI's machines are). A call that reaches one
//! fails by the plugin's doing, with a message naming the limit; the harness
//! carries on, and leaves no dir of its run in any hierarchy.

use crate::util::dead_run::DeadAndLiveRuns;
use crate::util::{self, Scratch, bin, wait_for};

mod pids_cap;

use pids_cap::PidsCap;
use std::fs;
use std::path::{Path, PathBuf};

/// The `cgroup` mounts: (controllers or "" for cgroup2, mount point, root).
fn cgroup_mounts() -> Vec<(String, PathBuf, String)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let controllers = match *right.first()? {
                "cgroup2" => String::new(),
                "cgroup" => right.get(2)?.to_string(),
                _ => return None,
            };
            Some((
                controllers,
                PathBuf::from(left.get(4)?),
                left.get(3)?.to_string(),
            ))
        })
        .collect()
}

/// The dir of `rel`, a path of `/proc/PID/cgroup`, in the hierarchy of
/// `controller` ("" for cgroup2).
fn hierarchy_dir(controller: &str, rel: &str) -> Option<PathBuf> {
    let (_, point, root) = cgroup_mounts()
        .into_iter()
        .find(|(c, _, _)| match controller {
            "" => c.is_empty(),
            name => c.split(',').any(|o| o == name),
        })?;
    let below = match root.as_str() {
        "/" => rel,
        root => rel.strip_prefix(root)?,
    };
    Some(point.join(below.trim_start_matches('/')))
}

/// The path in `/proc/self/cgroup` of this process in the hierarchy of
/// `controller` ("" for cgroup2).
fn own_rel(controller: &str) -> Option<String> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ours = match controller {
            "" => names.is_empty(),
            name => names.split(',').any(|n| n == name),
        };
        ours.then(|| path.to_owned())
    })
}

/// Where a run of the binary would set `controller`'s limit (`pids`,
/// `memory`): the dir of this process's own cgroup in the hierarchy that
/// offers it to cgroups made there (cgroup2's first, as the harness does),
/// with whether it is a v1 one. `Err` says why none can be used here.
fn limit_hierarchy(controller: &str) -> Result<(PathBuf, bool), String> {
    let probe = |base: &Path| -> Result<(), String> {
        let dir = base.join(format!("dhv-test-probe-{}", std::process::id()));
        fs::create_dir(&dir)
            .map_err(|e| format!("cannot make a cgroup in {}: {e}", base.display()))?;
        let writable = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .is_ok();
        let _ = fs::remove_dir(&dir);
        match writable {
            true => Ok(()),
            false => Err(format!(
                "cannot move a process into a cgroup made in {}",
                base.display()
            )),
        }
    };
    let v2 = own_rel("").and_then(|rel| hierarchy_dir("", &rel));
    if let Some(base) = v2 {
        let offered = fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
        if offered.split_whitespace().any(|c| c == controller) {
            return probe(&base).map(|()| (base, false));
        }
    }
    let v1 = own_rel(controller).and_then(|rel| hierarchy_dir(controller, &rel));
    match v1 {
        Some(base) => probe(&base).map(|()| (base, true)),
        None => Err(format!(
            "neither the cgroup2 hierarchy nor a v1 one offers the {controller} controller here: calls run without that limit"
        )),
    }
}

/// [`limit_hierarchy`], or a visible skip (a failure where
/// `DHV_REQUIRE_PRIVILEGED` says privileged tests must run).
fn limit_hierarchy_or_skip(test: &str, controller: &str) -> Option<(PathBuf, bool)> {
    match limit_hierarchy(controller) {
        Ok(found) => Some(found),
        Err(why) => {
            util::skip(test, &why);
            None
        }
    }
}

/// A plugin whose create first runs `attack` and writes its own
/// `/proc/self/cgroup` to `cgroups`, then is the reference.
fn attacker(dir: &Scratch, attack: &str, cgroups: &Path) -> PathBuf {
    dir.plugin(
        "attacker",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             if [ \"$1\" = create ]; then\n\
             cat /proc/self/cgroup > '{}'\n{attack}\n\
             fi\n\
             exec {} \"$@\"\n",
            cgroups.display(),
            util::sample("reference")
        ),
    )
}

/// Runs `check PLUGIN create.succeeds --exact --json -` with the plugin's
/// config `limits`: the check's status and message. The run must end as a
/// verdict on the plugin (exit 1), never a harness error (exit 4).
fn create_under(plugin: &Path, limits: &str) -> (dhv_conform::report::Status, String) {
    fs::write(plugin.parent().unwrap().join("dhv-conform.toml"), limits).unwrap();
    let out = util::check::check([
        plugin.as_os_str(),
        "create.succeeds".as_ref(),
        "--exact".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
    ])
    .run();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    util::check::status_of(&out.report(), "create.succeeds")
}

/// The run's dir (`dhv-conform-run-<pid>-<start>`) in `controller`'s
/// hierarchy, from the call's `/proc/self/cgroup` text: the call's cgroup
/// there must be `c<n>` in it.
fn run_dir_of_call(cgroups: &str, controller: &str) -> PathBuf {
    let rel = cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
            let ours = match controller {
                "" => names.is_empty(),
                name => names.split(',').any(|n| n == name),
            };
            ours.then(|| path.to_owned())
        })
        .unwrap_or_else(|| panic!("no {controller:?} line in {cgroups}"));
    let (run, call) = rel.rsplit_once('/').unwrap();
    assert!(
        call.starts_with('c'),
        "the call ran in {rel}, not a call's cgroup"
    );
    assert!(
        run.rsplit('/')
            .next()
            .unwrap()
            .starts_with("dhv-conform-run-"),
        "the call ran in {rel}, not a run's cgroup"
    );
    hierarchy_dir(controller, run).unwrap()
}

/// The call ran in a call cgroup of its run in `controller`'s hierarchy (a
/// v1 one, or cgroup2's), and that run's dir is gone now that it ended.
fn ran_bounded_and_left_nothing(cgroups: &Path, controller: &str, v1: bool) {
    let text = fs::read_to_string(cgroups).expect("the plugin's create ran");
    let run = run_dir_of_call(&text, if v1 { controller } else { "" });
    assert!(!run.exists(), "the run's dir {} is left", run.display());
}

/// A plugin whose create starts more processes than its `pids_max` allows
/// fails that create, the check says `pids.max`, and the run ends as a
/// verdict on the plugin (exit 1), not a harness error.
#[test]
fn a_call_that_reaches_pids_max_fails_naming_the_limit() {
    let test = "a_call_that_reaches_pids_max_fails_naming_the_limit";
    let Some((_, v1)) = limit_hierarchy_or_skip(test, "pids") else {
        return;
    };
    let dir = Scratch::new();
    let cgroups = dir.path().join("cgroups");
    let plugin = attacker(
        &dir,
        "i=0; while [ $i -lt 64 ]; do /bin/sleep 5 & i=$((i+1)); done 2>/dev/null",
        &cgroups,
    );
    let (status, message) = create_under(&plugin, "[limits]\npids_max = 32\n");
    assert_eq!(status, dhv_conform::report::Status::Fail, "{message}");
    assert!(
        message.contains("the call reached its limit of 32 processes (pids.max)"),
        "{message}"
    );
    assert!(!message.contains("harness error"), "{message}");
    ran_bounded_and_left_nothing(&cgroups, "pids", v1);
}

/// A plugin whose create uses more memory than its `memory_max` allows has a
/// process OOM-killed there, not the host's memory filled: that create
/// fails, naming the limit, and the run ends as a verdict on the plugin.
#[test]
fn a_call_that_reaches_its_memory_limit_fails_naming_the_limit() {
    let test = "a_call_that_reaches_its_memory_limit_fails_naming_the_limit";
    let Some((_, v1)) = limit_hierarchy_or_skip(test, "memory") else {
        return;
    };
    let dir = Scratch::new();
    let cgroups = dir.path().join("cgroups");
    // dd's one 256 MiB buffer, filled: far past 16 MiB.
    let plugin = attacker(
        &dir,
        "dd if=/dev/zero of=/dev/null bs=256M count=1 2>/dev/null",
        &cgroups,
    );
    let (status, message) = create_under(&plugin, "[limits]\nmemory_max = \"16MiB\"\n");
    assert_eq!(status, dhv_conform::report::Status::Fail, "{message}");
    let (limit, events) = match v1 {
        false => ("memory.max", "memory.events"),
        true => ("memory.limit_in_bytes", "memory.oom_control"),
    };
    assert!(
        message.contains(&format!(
            "the call reached its memory limit of 16 MiB ({limit})"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "the kernel's OOM killer killed 1 of its processes ({events})"
        )),
        "{message}"
    );
    ran_bounded_and_left_nothing(&cgroups, "memory", v1);
}

/// The v1 dirs a killed run left (named for a pid and start time that no
/// live process has) are removed by `clean`, with the process still in
/// them; those of a live run (a sleeping process's, here) stay.
#[test]
fn clean_removes_the_v1_dirs_of_dead_runs_only() {
    let test = "clean_removes_the_v1_dirs_of_dead_runs_only";
    let base = match limit_hierarchy("pids") {
        Ok((base, true)) => base,
        Ok((_, false)) => {
            // The cgroup2 hierarchy offers the controller: no v1 dir is made.
            println!("SKIPPED {test}: the cgroup2 hierarchy offers the pids controller here");
            return;
        }
        Err(why) => return util::skip(test, &why),
    };
    let runs = DeadAndLiveRuns::plant(&base, "1040.5");
    let s = Scratch::new();
    let out = assert_cmd::Command::new(bin())
        .arg("clean")
        .env("TMPDIR", s.path())
        .timeout(util::check::RUN_LIMIT)
        .output()
        .unwrap();
    let swept = runs.swept(util::check::RUN_LIMIT);
    assert!(out.status.success(), "{out:?}");
    assert!(
        swept.ended,
        "the process in the dead run's dir was not killed"
    );
    assert_eq!(swept.signal, Some(libc::SIGKILL));
    let left = swept.left;
    assert_eq!(left, (false, true), "(dead run's left, live run's left)");
}

/// A plugin that jails the harness in a pids cgroup of its own with room for
/// one process (as root may) fails none of the run's calls: a call the
/// kernel refuses to start (`EAGAIN`) brings the harness home and starts
/// after all. The run ends exit 1, `process.agent-untouched` failing and
/// saying the plugin moved the harness; no other check fails.
#[test]
fn a_plugin_jailing_the_harness_in_a_pids_cgroup_fails_no_call() {
    let test = "a_plugin_jailing_the_harness_in_a_pids_cgroup_fails_no_call";
    let base = match limit_hierarchy("pids") {
        Ok((base, true)) => base,
        Ok((_, false)) => {
            println!("SKIPPED {test}: the cgroup2 hierarchy offers the pids controller here");
            return;
        }
        Err(why) => return util::skip(test, &why),
    };
    let jail = base.join(format!("dhv-test-jail-{}", std::process::id()));
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = wait_for(std::time::Duration::from_secs(5), || {
                fs::remove_dir(&self.0).is_ok()
            });
        }
    }
    let _remove = Remove(jail.clone());
    let dir = Scratch::new();
    let plugin = dir.plugin(
        "jailer",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             if [ \"$1\" = create ] && mkdir '{jail}' 2>/dev/null; then\n\
             echo 1 > '{jail}/pids.max'\n\
             echo $PPID > '{jail}/cgroup.procs'\n\
             fi\n\
             exec {} \"$@\"\n",
            util::sample("reference"),
            jail = jail.display(),
        ),
    );
    let out = assert_cmd::Command::new(bin())
        .arg("check")
        .arg(&plugin)
        .args(["create.", "--color", "never"])
        .env("TMPDIR", dir.path())
        .timeout(util::check::RUN_LIMIT)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stdout.contains("process.agent-untouched"), "{stdout}");
    assert!(
        stdout.contains("it moved the harness into pids cgroup"),
        "{stdout}"
    );
    assert!(stdout.contains(", failed: 1, warnings: 0,"), "{stdout}");
    assert!(
        !stdout.contains("resource temporarily unavailable"),
        "{stdout}"
    );
}

/// A plugin whose create forks without end (each process forks two more,
/// then sleeps 30 s, so none outlives the bound) in a pids cgroup of 1,024
/// tasks above the harness: the call meets its own `pids.max`, set below
/// what the cap leaves the harness, long before the cap. The harness never
/// crashes (it used to exit by SIGABRT: no task was left for its threads);
/// the create fails naming the limit, the run ends exit 1, and nothing is
/// left: no process in the cap, no cgroup dir of the run, no temp dir.
#[test]
fn a_fork_bomb_under_a_pids_cap_above_the_harness_is_a_finding() {
    let test = "a_fork_bomb_under_a_pids_cap_above_the_harness_is_a_finding";
    let Some((base, v1)) = limit_hierarchy_or_skip(test, "pids") else {
        return;
    };
    const CAP: u64 = 1024;
    let cap = PidsCap::make(&base, v1, CAP);
    let dir = Scratch::new();
    let cgroups = dir.path().join("cgroups");
    // The leader gives the bomb 10 s (it met its limit in under 3 s on a
    // loaded 2-core machine), then fails. It sleeps rather than forks in a
    // loop until a fork is refused: such a loop took the CPUs from the bomb,
    // and dash goes on looping when the fork of its condition is refused.
    let plugin = attacker(
        &dir,
        "bomb() { bomb & bomb & /bin/sleep 30; }\n\
         bomb &\n\
         /bin/sleep 10\n\
         exit 1",
        &cgroups,
    );
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let started = std::time::Instant::now();
    // Only the harness and what it starts are in the cap.
    let out = assert_cmd::Command::new("/bin/sh")
        .arg("-c")
        .arg("echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"")
        .arg("sh")
        .arg(&cap.0)
        .arg(bin())
        .arg("check")
        .arg(&plugin)
        .args(["create.succeeds", "--exact", "--json", "-"])
        .env("TMPDIR", &work)
        .timeout(util::check::RUN_LIMIT)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "not a verdict on the plugin: {:?} ({stderr})",
        out.status
    );
    let report = dhv_conform::report::from_json(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_else(|e| panic!("not one JSON report ({e}): {stderr}"));
    let (status, message) = util::check::status_of(&report, "create.succeeds");
    assert_eq!(status, dhv_conform::report::Status::Fail, "{message}");
    // The limit named is the call's, below what the cap leaves the harness.
    let limit = message
        .split("the call reached its limit of ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no call limit named: {message}"));
    assert!(limit < CAP, "the call's limit {limit} is not below the cap");
    assert!(message.contains("processes (pids.max)"), "{message}");
    assert!(!message.contains("harness error"), "{message}");
    assert!(took < util::check::RUN_LIMIT, "took {took:?}");
    // Nothing left: the bomb's processes (killed with the call), the run's
    // cgroup dirs (cgroup2's and the v1 one's, in the cap) and its temp dir.
    assert!(
        wait_for(std::time::Duration::from_secs(10), || cap
            .procs()
            .is_empty()),
        "left in the cap: {:?}",
        cap.procs()
    );
    assert_eq!(cap.children(), Vec::<String>::new(), "dirs left in the cap");
    ran_bounded_and_left_nothing(&cgroups, "pids", v1);
    if v1 {
        let text = fs::read_to_string(&cgroups).unwrap();
        let run = run_dir_of_call(&text, "");
        assert!(!run.exists(), "the run's cgroup {} is left", run.display());
    }
    let left: Vec<_> = fs::read_dir(&work)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in the work dir: {left:?}");
}
