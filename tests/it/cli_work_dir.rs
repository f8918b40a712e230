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
