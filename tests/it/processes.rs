//! What the binary does with processes, end to end: escaped daemons are found
//! and killed whatever they shed, plugin files that are not regular files
//! never hang a command, and signals end manager commands cleanly.

use crate::util;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::{Scratch, bin, processes_mentioning, wait_for};
use assert_cmd::Command;

mod cgroups;

/// How long any one run of the binary may take before the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// A plugin that works, except that every create leaves a daemon that double
/// forks into a new session and then sheds every variable it was given:
/// neither its group, its session nor its environment ties it to the call.
/// `tag` makes its command line unique to one test.
fn escaper(s: &Scratch, tag: &str) -> PathBuf {
    s.plugin(
        "escaper",
        &format!(
            r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
case "$DHV_OPERATION" in
fingerprint) echo '{{"version":"1.0.0"}}' ;;
create)
	mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" || exit 1
	setsid sh -c '(exec env -i sleep {tag}) &' >/dev/null 2>&1 </dev/null
	printf '{{"path": "%s", "bytes": 0}}\n' "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
delete) rm -rf "$DHV_CREATED_PATH" ;;
*) exit 1 ;;
esac
"#
        ),
    )
}

/// `check` finds the daemon, names it in `process.no-orphans`, and leaves
/// nothing running; `no_cgroup` holds the subreaper fallback to the same.
fn escaped_daemon_is_reported_and_killed(tag: &str, no_cgroup: bool) {
    let s = Scratch::new();
    let plugin = escaper(&s, tag);
    let mut cmd = Command::new(bin());
    cmd.args(["check", plugin.to_str().unwrap(), "process.", "--json", "-"])
        .timeout(RUN_LIMIT);
    if no_cgroup {
        // Without cgroups, a daemon that kept nothing of its call is given to
        // a call that was live when it appeared: one call at a time makes
        // that the call that started it (with several at once, it may be
        // named under another call of the run).
        cmd.env(dhv_host::exec::NO_CGROUP_VAR, "1")
            .args(["--test-threads", "1"]);
    }
    let out = cmd.output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "process.no-orphans")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "warn", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("sleep {tag}")) && message.contains("left the process group"),
        "{message}"
    );
    assert!(processes_mentioning(tag).is_empty(), "the daemon survived");
}

#[test]
fn a_daemon_that_sheds_group_session_and_env_is_named_and_killed() {
    escaped_daemon_is_reported_and_killed("1009.51", false);
}

#[test]
fn without_cgroups_the_subreaper_still_names_and_kills_it() {
    escaped_daemon_is_reported_and_killed("1009.52", true);
}

/// A FIFO with every execute bit, in a plugin dir of its own.
fn fifo_plugin(s: &Scratch) -> PathBuf {
    let dir = s.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let fifo = dir.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o755)).unwrap();
    fifo
}

#[test]
fn a_fifo_in_the_plugin_dir_is_left_out_not_waited_on() {
    let s = Scratch::new();
    let fifo = fifo_plugin(&s);
    let out = Command::new(bin())
        .args(["plugins", "--plugin-dir"])
        .arg(fifo.parent().unwrap())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("plugins.host_volume.mkdir.version"),
        "{stdout}"
    );
    // Nomad's lookup passes it (execute bits, not a dir); its exec fails.
    assert!(
        stdout.contains(&format!(
            r#"left out "pipe": error fingerprinting plugin "pipe": fork/exec {}: permission denied"#,
            fifo.display()
        )),
        "{stdout}"
    );
}

#[test]
fn a_fifo_given_as_the_plugin_is_an_input_error() {
    let s = Scratch::new();
    let fifo = fifo_plugin(&s);
    for args in [vec!["check"], vec!["run"]] {
        let mut cmd = Command::new(bin());
        cmd.args(&args).arg(&fifo);
        if args == ["run"] {
            cmd.arg("create");
        }
        let out = cmd.timeout(RUN_LIMIT).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("is not a regular file") && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
    }
    let state = s.path().join("state");
    let out = Command::new(bin())
        .args(["volume", "create", "--plugin", "pipe", "--name", "v"])
        .arg("--plugin-dir")
        .arg(fifo.parent().unwrap())
        .arg("--state-dir")
        .arg(&state)
        .arg("--volumes-dir")
        .arg(s.path())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"with plugin "pipe": fork/exec "#)
            && stderr.contains(&format!("{}: permission denied", fifo.display())),
        "{stderr}"
    );
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn a_symlink_swapped_after_the_lookup_never_runs_what_is_outside_the_dir() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let s = Scratch::new();
    let dir = s.path().join("plugins");
    let outside = s.path().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let ran_outside = s.path().join("ran-outside");
    let good = s.plugin(
        "plugins/good",
        "#!/bin/sh\necho '{\"version\": \"1.0.0\"}'\n",
    );
    let bad = s.plugin(
        "outside/bad",
        &format!(
            "#!/bin/sh\n: > {}\necho '{{\"version\": \"6.6.6\"}}'\n",
            ran_outside.display()
        ),
    );
    let link = dir.join("p");
    let tmp = s.path().join("p.tmp");
    // Relative targets: Go's os.Root refuses every absolute one, inside or not.
    let (good, bad) = (
        Path::new(good.file_name().unwrap()),
        Path::new("../outside").join(bad.file_name().unwrap()),
    );
    std::os::unix::fs::symlink(good, &link).unwrap();

    // Flips `p` between the plugin inside and the binary outside, atomically
    // (a new link renamed over it), for as long as the lookups run.
    let stop = AtomicBool::new(false);
    let rt = util::runtime();
    let (mut runs, mut refused) = (0, 0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for flip in 0..1_000_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                repoint(&link, if flip % 4 == 0 { &bad } else { good }, &tmp);
            }
        });
        // At least 200 lookups while the link flips; more (bounded) until
        // both outcomes were seen, since on a loaded machine every lookup in
        // a row can see the link change under it and refuse.
        for attempt in 0..2_000 {
            if attempt >= 200 && runs > 0 && refused > 0 {
                break;
            }
            match found_and_run(&dir, &rt) {
                Some(version) => {
                    assert_eq!(version, "1.0.0");
                    runs += 1;
                }
                None => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        !ran_outside.exists(),
        "the binary outside the plugin dir ran ({runs} runs, {refused} refused)"
    );
    assert!(
        refused > 0,
        "{runs} runs, {refused} refused: the lookups never saw the link point outside"
    );
    // Every refusal was the race's doing: with the link held still on the
    // plugin inside, the same lookup runs it.
    repoint(&link, good, &tmp);
    assert_eq!(
        found_and_run(&dir, &rt).as_deref(),
        Some("1.0.0"),
        "a still link is found and runs the plugin inside"
    );
    assert!(!ran_outside.exists());
}

/// Points `link` at `target` atomically: a new link at `tmp`, renamed over it.
fn repoint(link: &Path, target: &Path, tmp: &Path) {
    let _ = std::fs::remove_file(tmp);
    std::os::unix::fs::symlink(target, tmp).unwrap();
    std::fs::rename(tmp, link).unwrap();
}

/// Looks plugin `p` up in `dir` and fingerprints it: the version it gave, or
/// `None` when the lookup refused it. A plugin that is found must run.
fn found_and_run(dir: &Path, rt: &tokio::runtime::Runtime) -> Option<String> {
    use dhv_conform::plugin::{CallOptions, PluginSource};
    let source = PluginSource::lookup(Some(dir), "p").ok()?;
    let plugin = source.open(&CallOptions::default());
    let fingerprint = rt.block_on(plugin.fingerprint());
    Some(
        fingerprint
            .result
            .expect("the plugin inside runs")
            .version
            .raw,
    )
}

/// Parameters small enough for our own command line, but whose
/// `DHV_PARAMETERS` (Go escapes each `<` as `\u003c`, six bytes) is over what
/// the kernel passes in one variable.
fn oversized_parameters() -> String {
    let count = dhv_host::exec::MAX_ARG_STRLEN / 5;
    serde_json::json!({ "blob": "<".repeat(count) }).to_string()
}

#[test]
fn a_fixture_too_large_for_the_kernel_is_an_input_error_naming_it() {
    let s = Scratch::new();
    let fixture = s.path().join("huge.json");
    std::fs::write(
        &fixture,
        format!(r#"{{"parameters": {}}}"#, oversized_parameters()),
    )
    .unwrap();
    let plugin = escaper(&s, "1010.5");
    let out = Command::new(bin())
        .arg("check")
        .arg(&plugin)
        .arg("--fixture")
        .arg(&fixture)
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("huge.json")
            && stderr.contains("DHV_PARAMETERS")
            && stderr.contains("E2BIG"),
        "{stderr}"
    );
}

#[test]
fn a_volume_too_large_for_the_kernel_is_an_input_error_not_a_plugin_failure() {
    let s = Scratch::new();
    let plugin = escaper(&s, "1010.6");
    let out = Command::new(bin())
        .args(["volume", "create", "--plugin", "escaper", "--name", "v"])
        .arg("--plugin-dir")
        .arg(plugin.parent().unwrap())
        .arg("--state-dir")
        .arg(s.path().join("state"))
        .arg("--volumes-dir")
        .arg(s.path())
        .arg("--parameters")
        .arg(oversized_parameters())
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("argument list too long"), "{stderr}");
}

/// `volume create` of a plugin that hangs in create (with a child in its
/// group), ended by `sig` once the plugin runs: exit 128 + sig, no process
/// left, and a state file that reads back without the volume.
fn signal_ends_a_create_cleanly(sig: nix::sys::signal::Signal, tag: &str) {
    let s = Scratch::new();
    let ready = s.path().join("ready");
    let plugin = s.plugin(
        "slow",
        &format!(
            "#!/bin/sh\ncase \"$DHV_OPERATION\" in\nfingerprint) echo '{{\"version\":\"1.0.0\"}}' ;;\ncreate) sleep {tag} & : > {}; wait ;;\nesac\n",
            ready.display()
        ),
    );
    let state = s.path().join("state");
    let mut child = std::process::Command::new(bin())
        .args(["volume", "create", "--plugin", "slow", "--name", "v"])
        .arg("--plugin-dir")
        .arg(plugin.parent().unwrap())
        .arg("--state-dir")
        .arg(&state)
        .arg("--volumes-dir")
        .arg(s.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for(RUN_LIMIT, || ready.exists()),
        "the create never ran"
    );
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let exited = wait_for(RUN_LIMIT, || child.try_wait().unwrap().is_some());
    if !exited {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    assert!(exited, "volume create did not end on {sig}");
    assert_eq!(status.code(), Some(128 + sig as i32), "{sig}");
    assert!(
        processes_mentioning(tag).is_empty(),
        "{sig}: the plugin's child survived"
    );
    let list = Command::new(bin())
        .args(["volume", "list", "--json", "--state-dir"])
        .arg(&state)
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(0), "{sig}: {list:?}");
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains("\"v\""),
        "{sig}"
    );
}

#[test]
fn sigterm_sigint_and_sighup_end_a_volume_create_cleanly() {
    use nix::sys::signal::Signal;
    signal_ends_a_create_cleanly(Signal::SIGTERM, "1011.51");
    signal_ends_a_create_cleanly(Signal::SIGINT, "1011.52");
    signal_ends_a_create_cleanly(Signal::SIGHUP, "1011.53");
}
