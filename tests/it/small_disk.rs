//! A small work filesystem limits the run, never the plugin: `check --work-dir`
//! on an ext4 filesystem of its own (an image the test makes, loop-mounted in a
//! private mount namespace), for `loop-ext4`, whose images are real ext4
//! filesystems (mkfs writes their metadata). Before the run was planned by
//! space, the run's own volumes filled such a filesystem and the conformant
//! sample failed must checks ("not enough free space for a ... byte volume").
//! Now every check either gets its verdict of the snapshot (made on a large
//! disk) or, when what it holds at once cannot fit, ends skip "inconclusive:
//! needs N bytes at once, ...", and the report says the run was limited by
//! space; the run leaves no loop device, mount or temp dir behind.

use std::collections::BTreeMap;
use std::process::Command as StdCommand;

use assert_cmd::Command;

use crate::util;

/// The statuses `sample`'s snapshot lists, by check id (a snapshot lists
/// only what does not pass: every other check passes).
fn snapshot_statuses(sample: &str) -> BTreeMap<String, String> {
    let path = util::repo().join(format!("snapshots/sample-{sample}.snap"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut listed = BTreeMap::new();
    let mut below = false;
    for line in text.lines() {
        if line.starts_with("passed: ") {
            below = true;
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if below && words.len() >= 3 {
            let status = words[2].trim_end_matches(':').to_owned();
            listed.insert(words[0].to_owned(), status);
        }
    }
    assert!(below && !listed.is_empty(), "{path:?} lists nothing");
    listed
}

/// Runs `cmd`; its stdout, once it succeeded.
fn run(cmd: &mut StdCommand) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Makes an ext4 filesystem of `mib` MiB in an image in `scratch` and mounts it
/// (in this test's private mount namespace) at `scratch/work`.
fn small_filesystem(scratch: &util::Scratch, mib: u32) -> std::path::PathBuf {
    let image = scratch.path().join("work.img");
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::File::create(&image)
        .unwrap()
        .set_len(u64::from(mib) << 20)
        .unwrap();
    run(StdCommand::new("mkfs.ext4").args(["-q", "-F"]).arg(&image));
    run(StdCommand::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&work));
    work
}

#[test]
fn a_small_work_filesystem_limits_the_run_not_the_plugin() {
    const NAME: &str = "a_small_work_filesystem_limits_the_run_not_the_plugin";
    if let Some(why) = util::loop_devices_unusable() {
        util::skip(NAME, &why);
        return;
    }
    if !util::in_private_mount_ns(NAME) {
        return;
    }
    let scratch = util::Scratch::new();
    // 80 MiB: room for the run's probes and a few of loop-ext4's 48 MiB
    // images, not for what its checks make at once.
    let work = small_filesystem(&scratch, 80);
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(util::sample("loop-ext4"))
        .arg("--work-dir")
        .arg(&work)
        .args(["--json", "-", "-q"])
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr: {stderr}"));
    // The run's temp dir is gone from the work filesystem (it holds only
    // mkfs's lost+found).
    let left: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "lost+found")
        .collect();
    let unmounted = StdCommand::new("umount").arg(&work).status().unwrap();
    assert!(left.is_empty(), "left in the work dir: {left:?}");

    let listed = snapshot_statuses("loop-ext4");
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.len() > listed.len(), "{checks:?}");
    let mut not_run = Vec::new();
    for check in checks {
        let id = check["id"].as_str().unwrap();
        let status = check["status"].as_str().unwrap();
        let message = check["message"].as_str().unwrap();
        if !message.starts_with("inconclusive: needs ") {
            // Run: the snapshot's verdict, never a finding the run's own
            // volumes caused.
            let expected = listed.get(id).map_or("pass", String::as_str);
            assert_eq!(status, expected, "{id}: {message}");
            continue;
        }
        // Not run: the plan's skip, and nothing else.
        assert_eq!(status, "skip", "{id}: {message}");
        assert!(
            message.contains(" bytes at once, the work filesystem has ")
                && message.ends_with(
                    " free (use --work-dir on a larger filesystem, or a smaller capacity in the fixture)"
                ),
            "{id}: {message}"
        );
        not_run.push(id.to_owned());
    }
    for check in checks {
        let message = check["message"].as_str().unwrap();
        assert!(
            !message.contains("No space left on device") && !message.contains("free space"),
            "{}: {message}",
            check["id"]
        );
    }
    // The multi-volume checks cannot fit here; the fingerprint's ran.
    assert!(
        not_run.contains(&"concurrency.delete".to_owned()),
        "{not_run:?}"
    );
    assert_eq!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "fingerprint.runs")
            .map(|c| c["status"].clone()),
        Some("pass".into())
    );
    // The report says the run was limited by space, and which checks it did
    // not run; so does the terminal summary.
    let limited = &report["space_limited"];
    let listed_not_run: Vec<&str> = limited["not_run"]
        .as_array()
        .unwrap_or_else(|| panic!("no space_limited in the report: {limited}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    not_run.sort();
    let mut listed_not_run = listed_not_run.clone();
    listed_not_run.sort();
    assert_eq!(listed_not_run, not_run);
    assert!(limited["free_bytes"].as_u64().unwrap() < 80 << 20);
    assert!(
        stderr.contains("the run was limited by space"),
        "stderr: {stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");

    // Nothing else left: the work filesystem unmounted (nothing held it),
    // no loop device on anything of the scratch dir (its own is let go of at
    // its unmount), no mount below it.
    assert!(unmounted.success(), "the work filesystem was busy");
    let needle = scratch.path().to_string_lossy().into_owned();
    let no_loop = || {
        let losetup = run(StdCommand::new("losetup").arg("-a"));
        !losetup.contains(&needle)
    };
    assert!(
        util::wait_for(std::time::Duration::from_secs(20), no_loop),
        "loop devices left: {}",
        run(StdCommand::new("losetup").arg("-a"))
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&needle), "mounts left: {mounts}");
}
