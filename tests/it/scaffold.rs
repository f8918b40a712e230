//! `dhv-conform new` and `dhv-conform init` through the binary: every new
//! plugin passes its own check with no warning and matches the snapshot it
//! was written with; `init` writes a config that claims only what it saw.

use crate::util;

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::util::Scratch;
use crate::util::check::check;
use assert_cmd::Command;
use dhv_conform::report::Status;

/// `dhv-conform ARGS` with a scratch TMPDIR, bounded; (exit, stderr).
fn dhv(tmp: &Scratch, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(args)
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    util::check::assert_left_nothing(tmp);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn new_plugin_passes_its_own_check(lang: &str) {
    let work = Scratch::new();
    let tmp = Scratch::new();
    let name = format!("my-{lang}");
    let dir = work.path().join(&name);
    let (code, stderr) = dhv(
        &tmp,
        &[
            "new".as_ref(),
            "--lang".as_ref(),
            lang.as_ref(),
            dir.as_os_str(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    for file in [
        "dhv-conform.toml",
        ".github/workflows/dhv-conform.yml",
        ".gitlab-ci.yml",
        &format!("snapshots/{name}.snap"),
    ] {
        assert!(dir.join(file).is_file(), "{file} missing: {stderr}");
    }
    // Its CI files pin the release the action and the GitLab template name.
    let pin = format!("v{}", env!("CARGO_PKG_VERSION"));
    let github = fs::read_to_string(dir.join(".github/workflows/dhv-conform.yml")).unwrap();
    assert!(github.contains(&format!("/dhv-conform@{pin} ")), "{github}");
    let gitlab = fs::read_to_string(dir.join(".gitlab-ci.yml")).unwrap();
    assert!(
        gitlab.contains(&format!("DHV_CONFORM_REF: {pin}\n")),
        "{gitlab}"
    );
    // The config beside it says strict: a single warning would fail this run.
    let plugin = dir.join(&name);
    let snapshot = dir.join("snapshots").join(format!("{name}.snap"));
    let out = check([
        plugin.as_os_str(),
        "--snapshot".as_ref(),
        snapshot.as_os_str(),
        "--json".as_ref(),
        "-".as_ref(),
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    assert!(report.options.strict, "the new config is strict");
    let flagged: Vec<_> = report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .map(|c| format!("{}: {}", c.id, c.message))
        .collect();
    assert!(flagged.is_empty(), "{flagged:#?}");
}

#[test]
fn a_new_sh_plugin_is_conformant_with_no_warning() {
    new_plugin_passes_its_own_check("sh");
}

#[test]
fn a_new_python_plugin_is_conformant_with_no_warning() {
    new_plugin_passes_its_own_check("python");
}

#[test]
fn a_new_go_plugin_builds_with_the_standard_library_and_is_conformant() {
    let found = std::process::Command::new("go").arg("version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        util::skip(
            "a_new_go_plugin_builds_with_the_standard_library_and_is_conformant",
            "go is not installed (.ci/run installs golang-go)",
        );
        return;
    }
    new_plugin_passes_its_own_check("go");
}

#[test]
fn new_refuses_a_dir_that_is_not_empty_and_an_unknown_language() {
    let work = Scratch::new();
    let tmp = Scratch::new();
    fs::write(work.path().join("keep-me"), "mine").unwrap();
    let (code, stderr) = dhv(
        &tmp,
        &[
            "new".as_ref(),
            "--lang".as_ref(),
            "sh".as_ref(),
            work.path().as_os_str(),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(
        fs::read_to_string(work.path().join("keep-me")).unwrap(),
        "mine"
    );
    let dir = work.path().join("p");
    let (code, stderr) = dhv(
        &tmp,
        &[
            "new".as_ref(),
            "--lang".as_ref(),
            "rust".as_ref(),
            dir.as_os_str(),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--lang must be sh, python or go"),
        "{stderr}"
    );
    assert!(!dir.exists());
}

/// A copy of a sample, alone in a dir, so that `init` writes beside it.
fn copied(work: &Scratch, sample: &str) -> std::path::PathBuf {
    let plugin = work.path().join(sample);
    fs::copy(util::sample(sample), &plugin).unwrap();
    plugin
}

#[test]
fn init_writes_a_config_of_what_it_saw_and_never_overwrites_one() {
    let work = Scratch::new();
    let tmp = Scratch::new();
    let plugin = copied(&work, "reference");
    let (code, stderr) = dhv(&tmp, &["init".as_ref(), plugin.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    let config = work.path().join("dhv-conform.toml");
    let text = fs::read_to_string(&config).unwrap();
    assert!(text.contains("a plain directory"), "{text}");
    assert!(text.contains("\nattachment = \"file-system\""), "{text}");
    assert!(
        !text.contains("\ncapacity ="),
        "claims nothing it did not see: {text}"
    );
    // `check` reads it from beside the plugin, and the plugin passes.
    let report = util::check::volume_report(&plugin);
    assert!(report.config.is_some_and(|c| c.path.is_some()));
    let (code, stderr) = dhv(&tmp, &["init".as_ref(), plugin.as_os_str()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(fs::read_to_string(&config).unwrap(), text);
}

/// A create that fails is exit 1 with the error on stderr, not only in a
/// comment of the config (written all the same, claiming nothing).
#[test]
fn init_exits_1_with_the_error_on_stderr_when_create_fails() {
    let work = Scratch::new();
    let tmp = Scratch::new();
    let plugin = copied(&work, "needs-home");
    let (code, stderr) = dhv(&tmp, &["init".as_ref(), plugin.as_os_str()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("init: the plugin's create of the default request failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("exit status 2"),
        "the call's own error: {stderr}"
    );
    let text = fs::read_to_string(work.path().join("dhv-conform.toml")).unwrap();
    assert!(
        text.contains("# A create with the default request failed"),
        "{text}"
    );
    assert!(!text.contains("\ncapacity ="), "{text}");
}

#[test]
fn init_sees_loop_ext4s_filesystem_and_its_claims_hold() {
    let test = "init_sees_loop_ext4s_filesystem_and_its_claims_hold";
    if let Some(why) = util::loop_devices_unusable() {
        util::skip(test, &why);
        return;
    }
    if !util::in_private_mount_ns(test) {
        return;
    }
    let work = Scratch::new();
    let tmp = Scratch::new();
    let plugin = copied(&work, "loop-ext4");
    let (code, stderr) = dhv(&tmp, &["init".as_ref(), plugin.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    let text = fs::read_to_string(work.path().join("dhv-conform.toml")).unwrap();
    assert!(text.contains("\nfilesystem = \"ext4\""), "{text}");
    assert!(text.contains("\ncapacity = \"enforced\""), "{text}");
    assert!(util::mounts_below(Path::new(tmp.path())).is_empty());
    let report = util::check::volume_report(&plugin);
    for c in report.checks {
        let expected = if c.id == "volume.block-device" {
            Status::Skip
        } else {
            Status::Pass
        };
        assert_eq!(c.status, expected, "{}: {}", c.id, c.message);
    }
}
