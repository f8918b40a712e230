//! `check --work-dir DIR`: the run's temp dir (every sandbox) is made in DIR, not in
//! TMPDIR; a DIR that is not a directory is a usage error before anything runs.

use crate::util;

use assert_cmd::Command;

#[test]
fn the_sandboxes_live_in_the_work_dir() {
    let work = util::Scratch::new();
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args([
            "check",
            "mkdir",
            "create.succeeds",
            "--exact",
            "--keep",
            "-q",
        ])
        .arg("--work-dir")
        .arg(work.path())
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let kept: Vec<_> = std::fs::read_dir(work.path()).unwrap().flatten().collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0]
            .file_name()
            .to_string_lossy()
            .starts_with("dhv-conform-"),
        "{kept:?}"
    );
    assert!(kept[0].path().join("create.succeeds").is_dir(), "{kept:?}");
    let in_tmp: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(in_tmp.is_empty(), "TMPDIR was used: {in_tmp:?}");
}

#[test]
fn a_work_dir_that_is_not_a_directory_is_a_usage_error() {
    let scratch = util::Scratch::new();
    let file = scratch.path().join("file");
    std::fs::write(&file, "").unwrap();
    for (dir, says) in [
        (file.clone(), "not a directory"),
        (scratch.path().join("missing"), "No such file or directory"),
    ] {
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .args(["check", "mkdir", "--work-dir"])
            .arg(&dir)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--work-dir") && stderr.contains(says),
            "{stderr}"
        );
    }
}

/// The next run with a `--work-dir` cleans what a killed run left there,
/// even when a process the run left holds its owner lock: a run is dead by
/// its process (the pid and start time of its owner file), not by its lock;
/// the holder is killed and named.
#[test]
fn the_next_run_in_a_work_dir_cleans_a_dead_runs_dir_whose_lock_a_leftover_holds() {
    let work = util::Scratch::new();
    let tmp = util::Scratch::new();
    let dead = work.path().join("dhv-conform-killed");
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(dead.join("left-by-a-plugin"), "x").unwrap();
    let owner = dead.join(dhv_conform::conformance::OWNER_FILE);
    // A pid beyond any pid_max: the run's process is gone.
    std::fs::write(
        &owner,
        format!("pid=2147483646\nstart=1\nroot={}\n", dead.display()),
    )
    .unwrap();
    let mut holder = util::LockHolder::new(&owner);
    assert!(holder.grabbed(), "the lock was never free to take");
    let holder_pid = holder.id();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["check", "mkdir", "create.succeeds", "--exact", "-q"])
        .arg("--work-dir")
        .arg(work.path())
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    // Ended by the run, or killed when the test ends.
    let status = holder.ended();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stderr.contains("dhv-conform: cleaned leftovers of run 2147483646 (its process is gone): ")
            && stderr.contains(&format!("{holder_pid} (flock")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("temp dir {} removed", dead.display())),
        "{stderr}"
    );
    assert_eq!(
        status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
        Some(9),
        "the holder was not killed by the run"
    );
    assert!(!dead.exists());
    assert!(std::fs::read_dir(work.path()).unwrap().next().is_none());
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

#[test]
fn clean_with_a_work_dir_that_is_not_a_directory_is_a_usage_error() {
    let scratch = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["clean", "--work-dir"])
        .arg(scratch.path().join("missing"))
        .env("TMPDIR", scratch.path())
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--work-dir"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
