//! What the binary does about plugins that play with cgroups: a daemon that
//! leaves its call's cgroup or nests its own is still named and killed, dead
//! runs' cgroups are removed, and a plugin that moves, freezes or traces the
//! harness does not get it killed or hung.

use super::*;
use crate::util::dead_run::{DeadAndLiveRuns, KillTagged};

/// The cgroup2 mount and this process's own cgroup in it (where the binary
/// makes its run's cgroup), when this test can use them: as root, with a
/// cgroup2 hierarchy we may write. Otherwise why not: a skip, said, or a
/// failure under CI (which runs as root).
fn cgroups_or_skip(test: &str) -> Option<(PathBuf, PathBuf)> {
    let why = match cgroup2() {
        Ok(found) => return Some(found),
        Err(why) => why,
    };
    assert!(std::env::var_os("CI").is_none(), "{test} cannot run: {why}");
    println!("SKIPPED {test}: {why}");
    None
}

fn cgroup2() -> Result<(PathBuf, PathBuf), String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err("needs root to move processes between cgroups".into());
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let root = mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .ok_or("no cgroup2 hierarchy here")?;
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("not in a cgroup2 cgroup")?;
    let base = root.join(rel.trim_start_matches('/'));
    let probe = base.join(format!("dhv-test-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| format!("cannot make a cgroup: {e}"))?;
    let _ = std::fs::remove_dir(&probe);
    Ok((root, base))
}

/// A plugin whose every call moves itself to the cgroup2 root, or (`nest`)
/// into a cgroup two levels below its call's, then starts a daemon in a new
/// session with an empty environment: neither group, session, environment
/// nor the call's cgroup holds it.
fn cgroup_mover(s: &Scratch, tag: &str, nest: bool) -> PathBuf {
    let to = match nest {
        false => "\"$root\"".to_owned(),
        true => format!(
            "\"$root$(sed -n 's/^0:://p' /proc/self/cgroup)/nest-{tag}/deeper\"; mkdir -p \"$to\""
        ),
    };
    s.plugin(
        "mover",
        &format!(
            r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
while read -r _ mnt type _; do [ "$type" = cgroup2 ] && root=$mnt && break; done </proc/mounts
to={to}
echo $$ > "$to/cgroup.procs"
setsid env -i sleep {tag} >/dev/null 2>&1 </dev/null &
case "$DHV_OPERATION" in
fingerprint) echo '{{"version":"1.0.0"}}' ;;
create)
	mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" || exit 1
	printf '{{"path": "%s", "bytes": 0}}\n' "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
delete) rm -rf "$DHV_CREATED_PATH" ;;
*) exit 1 ;;
esac
"#
        ),
    )
}

/// `check` names the daemons in `process.no-orphans` and leaves none
/// running (nor, with `nest`, a cgroup); `volume create` kills its daemon.
fn cgroup_mover_is_caught(test: &str, tag: &'static str, nest: bool) {
    let Some((root, _)) = cgroups_or_skip(test) else {
        return;
    };
    let _guard = KillTagged(tag);
    let s = Scratch::new();
    let plugin = cgroup_mover(&s, tag, nest);
    let out = Command::new(bin())
        .args(["check", plugin.to_str().unwrap(), "process.", "--json", "-"])
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = report["checks"].as_array().unwrap();
    let check = checks.iter().find(|c| c["id"] == "process.no-orphans");
    let check = check.unwrap();
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["message"]
            .as_str()
            .unwrap()
            .contains(&format!("sleep {tag}"))
    );
    let gone = || processes_mentioning(tag).is_empty();
    assert!(wait_for(RUN_LIMIT, gone), "check left daemons running");
    let nests = cgroup_dirs_named(&root, &format!("nest-{tag}"));
    assert!(nests.is_empty(), "check left cgroups: {nests:?}");

    let created = Command::new(bin())
        .args(["volume", "create", "--plugin", "mover", "--name", "v"])
        .arg("--plugin-dir")
        .arg(plugin.parent().unwrap())
        .arg("--state-dir")
        .arg(s.path().join("state"))
        .arg("--volumes-dir")
        .arg(s.path())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    assert!(wait_for(RUN_LIMIT, gone), "volume create left a daemon");
    assert!(cgroup_dirs_named(&root, &format!("nest-{tag}")).is_empty());
}

/// Every cgroup below `root` named `name`.
fn cgroup_dirs_named(root: &Path, name: &str) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if entry.file_name() == name {
                    found.push(entry.path());
                }
                dirs.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn a_daemon_started_after_leaving_the_call_cgroup_is_named_and_killed() {
    cgroup_mover_is_caught(
        "a_daemon_started_after_leaving_the_call_cgroup_is_named_and_killed",
        "1019.71",
        false,
    );
}

#[test]
fn a_plugin_nesting_cgroups_leaves_neither_daemon_nor_cgroup() {
    cgroup_mover_is_caught(
        "a_plugin_nesting_cgroups_leaves_neither_daemon_nor_cgroup",
        "1019.81",
        true,
    );
}

/// The cgroups a killed run left (named for a pid and start time that no
/// live process has) are removed by the next run, with the process still in
/// them; those of a live run (a sleeping process's, here) stay.
#[test]
fn the_next_run_removes_the_cgroups_of_dead_runs_only() {
    let test = "the_next_run_removes_the_cgroups_of_dead_runs_only";
    let Some((_, base)) = cgroups_or_skip(test) else {
        return;
    };
    let runs = DeadAndLiveRuns::plant(&base, "1019.82");
    let s = Scratch::new();
    let plugin = s.plugin("fp", "#!/bin/sh\necho '{\"version\":\"1.0.0\"}'\n");
    let out = Command::new(bin())
        .args(["plugins", "--plugin-dir"])
        .arg(plugin.parent().unwrap())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let swept = runs.swept(RUN_LIMIT);
    assert!(out.status.success(), "{out:?}");
    assert!(
        swept.ended,
        "the process in the dead run's cgroup was not killed"
    );
    assert_eq!(swept.signal, Some(libc::SIGKILL));
    let left = swept.left;
    assert_eq!(left, (false, true), "(dead run's left, live run's left)");
}

/// Runs `check` on a plugin whose create first runs `attack` (sh, with `$root`
/// the cgroup2 mount point), then is the reference; asserts the run ends
/// within a bound, exit 1 (non-conformant, not inconclusive), with
/// `process.agent-untouched` failing and saying each of `said` in every
/// report form, and that nothing of the run is left: no process of the
/// plugin's, no run temp dir.
fn touched_by_the_plugin(attack: &str, checks: &[&str], said: &[&str]) {
    let s = Scratch::new();
    let reports = Scratch::new();
    let plugin = s.plugin(
        "attacker",
        &format!(
            "#!/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
             while read -r _ mnt type _; do [ \"$type\" = cgroup2 ] && root=$mnt && break; done </proc/mounts\n\
             if [ \"$1\" = create ]; then\n{attack}\nfi\n\
             exec '{}' \"$@\"\n",
            util::sample("reference")
        ),
    );
    let (json, junit, markdown) = (
        reports.path().join("report.json"),
        reports.path().join("report.xml"),
        reports.path().join("report.md"),
    );
    let out = assert_cmd::Command::new(util::bin())
        .arg("check")
        .arg(&plugin)
        .args(checks)
        .args(["--color", "never", "--json"])
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .arg("--markdown")
        .arg(&markdown)
        .env("TMPDIR", s.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!stdout.contains("interrupted by"), "{stdout}");
    assert!(stdout.contains("verdict: NON-CONFORMANT"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["summary"]["verdict"], "non-conformant", "{report}");
    assert_eq!(report.get("interrupted"), None, "{report}");
    let failed: Vec<&serde_json::Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    let ids: Vec<&str> = failed.iter().filter_map(|c| c["id"].as_str()).collect();
    assert!(
        ids.contains(&"process.agent-untouched"),
        "{ids:?}: {report}"
    );
    let untouched = failed
        .iter()
        .find(|c| c["id"] == "process.agent-untouched")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default();
    for text in said {
        assert!(untouched.contains(text), "{text:?} not said: {untouched}");
        assert!(
            stdout.contains(text),
            "{text:?} not on the terminal: {stdout}"
        );
    }
    let junit = std::fs::read_to_string(&junit).unwrap();
    let case = junit
        .split("<testcase ")
        .find(|c| c.contains(r#"name="id" value="process.agent-untouched""#))
        .unwrap_or_default();
    assert!(case.contains("<failure"), "{junit}");
    let markdown = std::fs::read_to_string(&markdown).unwrap();
    assert!(markdown.contains("**non-conformant**"), "{markdown}");
    assert!(markdown.contains("process.agent-untouched"), "{markdown}");
    let needle = s.path().to_string_lossy().into_owned();
    let gone = || {
        util::processes_mentioning(&needle).is_empty()
            && util::processes_with_env_containing(&needle).is_empty()
    };
    assert!(
        wait_for(Duration::from_secs(10), gone),
        "the run left processes"
    );
    let left: Vec<_> = std::fs::read_dir(s.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "attacker")
        .collect();
    assert!(left.is_empty(), "the run left {left:?}");
}

/// A plugin that moves the harness into its own call cgroup (as root may)
/// does not get the harness killed by that call's sweep: the harness steps
/// back into its own cgroup before any kill, and the run ends exit 1,
/// `process.agent-untouched` failing and saying what the plugin did. (It was
/// killed, exit 137; then it ended exit 4, inconclusive.)
#[test]
fn a_plugin_moving_the_harness_into_its_cgroup_does_not_get_it_killed() {
    let test = "a_plugin_moving_the_harness_into_its_cgroup_does_not_get_it_killed";
    if cgroups_or_skip(test).is_none() {
        return;
    }
    touched_by_the_plugin(
        "echo $PPID > \"$root$(sed -n 's/^0:://p' /proc/self/cgroup)/cgroup.procs\"",
        &["create.succeeds", "--exact"],
        &[
            "it moved the harness into cgroup",
            "the harness moved itself back",
            "(by a create call of create.succeeds)",
        ],
    );
}

/// What a plugin did to capture the harness belongs to its run: in a
/// process that runs the suite twice (the library), a plugin that moved the
/// harness into its call cgroup in the first run ends that run exit 1,
/// `process.agent-untouched` failing, and the second run, of the reference
/// plugin, passes it (it was said to be interrupted too: the record was the
/// process's, not the run's).
#[test]
fn a_plugin_that_captured_one_run_leaves_the_next_run_of_the_process_alone() {
    let test = "a_plugin_that_captured_one_run_leaves_the_next_run_of_the_process_alone";
    if cgroups_or_skip(test).is_none() || !util::in_a_process_of_its_own(test) {
        return;
    }
    let s = Scratch::new();
    let plugin = s.plugin(
        "mover",
        &format!(
            "#!/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
             while read -r _ mnt type _; do [ \"$type\" = cgroup2 ] && root=$mnt && break; done </proc/mounts\n\
             if [ \"$1\" = create ]; then\n\
             echo $PPID > \"$root$(sed -n 's/^0:://p' /proc/self/cgroup)/cgroup.procs\"\n\
             fi\n\
             exec '{}' \"$@\"\n",
            util::sample("reference")
        ),
    );
    let run = |plugin: &str| {
        let mut config = dhv_conform::suite::SuiteConfig::new(plugin);
        config.filter = Some("create.succeeds".into());
        config.work_dir = Some(s.path().to_owned());
        dhv_conform::suite::run_blocking(config).expect("the suite ran")
    };
    let captured = run(plugin.to_str().unwrap());
    let untouched = |run: &dhv_conform::suite::SuiteRun| {
        let check = run
            .report
            .checks
            .iter()
            .find(|c| c.id == "process.agent-untouched");
        check.map(|c| (c.status, c.message.clone()))
    };
    assert_eq!(captured.exit_code(), 1, "{:?}", captured.report.summary);
    assert_eq!(captured.report.interrupted, None);
    let (status, said) = untouched(&captured).expect("process.agent-untouched reported");
    assert_eq!(status, dhv_conform::report::Status::Fail, "{said}");
    assert!(said.contains("it moved the harness into cgroup"), "{said}");
    let next = run(&util::sample("reference"));
    assert_eq!(next.report.interrupted, None);
    assert_eq!(
        untouched(&next),
        None,
        "a filter left it out, and nothing touched the harness"
    );
    assert_eq!(next.exit_code(), 0, "{:?}", next.report.summary);
}

/// A plugin that freezes the run's cgroup (its parent's `cgroup.freeze`, as
/// root may) does not hang the harness: the next call cloned into the frozen
/// tree would never reach its exec. The run's cgroup is thawed at once, the
/// run ends, exit 1, `process.agent-untouched` failing and saying what the
/// plugin did. (It hung until killed; then it ended exit 4, inconclusive.)
#[test]
fn a_plugin_freezing_the_runs_cgroup_does_not_hang_the_harness() {
    let test = "a_plugin_freezing_the_runs_cgroup_does_not_hang_the_harness";
    if cgroups_or_skip(test).is_none() {
        return;
    }
    touched_by_the_plugin(
        "own=$(sed -n 's/^0:://p' /proc/self/cgroup)\necho 1 > \"$root${own%/*}/cgroup.freeze\"",
        &["create."],
        &["it froze the run's cgroup", "the harness thawed it"],
    );
}

/// A plugin that leaves a tracer attached to the harness (`strace -f -p
/// $PPID`, as root may) does not hang it: the sweep that would stop the
/// tracer with the rest of the call (and so every traced thread of the
/// harness, its own too) kills it instead, and the run ends exit 1,
/// `process.agent-untouched` failing and saying what the plugin did. (It hung
/// 150 s; then it ended exit 4, inconclusive.)
#[test]
fn a_plugin_leaving_a_tracer_on_the_harness_does_not_hang_it() {
    let test = "a_plugin_leaving_a_tracer_on_the_harness_does_not_hang_it";
    if !nix::unistd::Uid::effective().is_root() {
        util::skip(test, "needs root (to trace the harness)");
        return;
    }
    let strace = ["/usr/bin/strace", "/bin/strace", "/usr/local/bin/strace"]
        .into_iter()
        .map(std::path::Path::new)
        .find(|p| p.exists());
    let Some(strace) = strace else {
        util::skip(test, "needs strace (.ci/run installs it)");
        return;
    };
    touched_by_the_plugin(
        &format!(
            "'{}' -f -o /dev/null -p $PPID >/dev/null 2>&1 </dev/null &\n\
             n=0; until grep -q '^TracerPid:[[:space:]]*[1-9]' /proc/$PPID/status || [ $n -ge 500 ]; do n=$((n+1)); sleep 0.01; done",
            strace.display()
        ),
        &["create.succeeds", "--exact"],
        &[
            "it attached a tracer to the harness",
            "the harness killed it",
            "(by a create call of create.succeeds)",
        ],
    );
}

/// A plugin whose create moves itself into a frozen cgroup of the v1
/// `freezer` hierarchy (as root may on a hybrid host), where SIGKILL does
/// not act until it is thawed, does not hang the harness: the timed-out
/// create's leader is moved out of that cgroup (and so thawed) and dies of
/// its kill; the run ends as a verdict on the plugin, and the plugin's
/// freezer cgroup, not the harness's, is left as the plugin made it.
#[test]
fn a_leader_frozen_in_a_v1_freezer_cgroup_is_still_killed() {
    let test = "a_leader_frozen_in_a_v1_freezer_cgroup_is_still_killed";
    if !nix::unistd::Uid::effective().is_root() {
        return util::skip(test, "needs root to move a process between cgroups");
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let freezer = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let ours = right.first() == Some(&"cgroup")
            && right.get(2)?.split(',').any(|o| o == "freezer")
            && left.get(5)?.split(',').any(|o| o == "rw");
        ours.then(|| PathBuf::from(left[4]))
    });
    let Some(freezer) = freezer else {
        // A unified host has no v1 freezer: there is nothing to attack with.
        println!("SKIPPED {test}: no v1 freezer hierarchy here (a unified host)");
        return;
    };
    let frozen = freezer.join(format!("dhv-test-frozen-{}", std::process::id()));
    // Thawed and removed, whatever happens: the process in it goes with the run.
    struct Thaw(PathBuf);
    impl Drop for Thaw {
        fn drop(&mut self) {
            let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
            let _ = wait_for(Duration::from_secs(5), || {
                std::fs::remove_dir(&self.0).is_ok()
            });
        }
    }
    let _thaw = Thaw(frozen.clone());
    let s = Scratch::new();
    let plugin = s.plugin(
        "freezer",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             if [ \"$1\" = create ]; then\n\
             d='{}'\nmkdir -p \"$d\"\n\
             sh -c \"sleep 0.3; echo FROZEN > $d/freezer.state\" </dev/null >/dev/null 2>&1 &\n\
             echo $$ > \"$d/cgroup.procs\"\n\
             sleep 100\n\
             fi\n\
             exec '{}' \"$@\"\n",
            frozen.display(),
            util::sample("reference")
        ),
    );
    let started = std::time::Instant::now();
    let out = assert_cmd::Command::new(util::bin())
        .arg("check")
        .arg(&plugin)
        .args(["create.succeeds", "--exact", "--timeout-scale", "0.05"])
        .args(["--color", "never"])
        .env("TMPDIR", s.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "after {:?}: {out:?}",
        started.elapsed()
    );
    assert!(stdout.contains("was killed"), "{stdout}");
    // The plugin's cgroup was never thawed by the harness: it is still frozen.
    let state = std::fs::read_to_string(frozen.join("freezer.state")).unwrap_or_default();
    assert_eq!(state.trim(), "FROZEN");
}
