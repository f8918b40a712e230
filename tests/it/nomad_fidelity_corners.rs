//! `dhv-conform run` against Nomad 2.0.5 in the corners issue 42 found:
//! Go's `%q` of runes Go does not print, the lookup and `fork/exec` errors
//! of every file kind, `$0` of a plugin that is a symlink, the kill on a time
//! limit, the volumes dir as a Nomad client treats it, and every input Go
//! takes (docs/nomad-fidelity.md, section 9). Each test holds Nomad's words.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::Scratch;
use assert_cmd::Command;
use serde_json::Value;

mod runs;
use runs::{plugin_dir, run_in, run_json, write_plugin};

const ID: &str = "6e1a3f0c-1b2d-4c5e-8f90-a1b2c3d4e5f6";

const NAMED: &str = "#!/bin/sh\nprintf '{\"error\": \"named\"}'\nexit 1\n";

/// Class 1: the plugin id, a mkdir parameter name and a mode value with
/// runes Go 1.26 does not print are escaped as Nomad's `%q` escapes them.
#[test]
fn ids_parameter_names_and_modes_are_quoted_as_go_1_26_quotes_them() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let volumes = s.path().join("volumes");
    write_plugin(&dir.join("fmt\u{8e2}char"), NAMED);
    let (code, j, _) = run_in(&dir, &volumes, OsStr::new("fmt\u{8e2}char"), "create", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        format!(
            r#"error creating volume "{ID}" with plugin "fmt\u08e2char": exit status 1: named"#
        )
    );
    for (params, want) in [
        (
            "{\"mo\u{110bd}de\":\"1\"}",
            r#"invalid value for "mo\U000110bdde": unknown mkdir parameter: "mo\U000110bdde""#,
        ),
        (
            "{\"mode\":\"7\u{378}\u{fffe}\u{1d173}\"}",
            r#"invalid value for "mode": strconv.ParseUint: parsing "7\u0378\ufffe\U0001d173": invalid syntax"#,
        ),
        (
            "{\"mode\":\"é\"}",
            r#"invalid value for "mode": strconv.ParseUint: parsing "é": invalid syntax"#,
        ),
    ] {
        let (code, j, _) = run_json([
            "mkdir",
            "create",
            "--volumes-dir",
            volumes.to_str().unwrap(),
            "--parameters",
            params,
        ]);
        assert_eq!(code, Some(1), "{params}");
        assert_eq!(j["error"], want, "{params}");
    }
}

/// Class 2: a directory, or a symlink to one, passes `os.Root.Stat` and fails
/// `helper.IsExecutable`.
#[test]
fn a_directory_or_a_link_to_one_is_not_executable() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::set_permissions(dir.join("sub"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("sub", dir.join("to-sub")).unwrap();
    for id in ["sub", "to-sub", "."] {
        let (code, j, _) = run_in(&dir, &s.path().join("v"), OsStr::new(id), "create", &[]);
        assert_eq!(code, Some(1), "{id}");
        assert_eq!(
            j["error"],
            format!("plugin not executable: \"{id}\""),
            "{id}"
        );
    }
}

/// Class 3: a FIFO with execute bits passes the lookup and fails to start,
/// in each operation's own words.
#[test]
fn a_fifo_with_execute_bits_fails_at_fork_exec() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let fifo = dir.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o755)).unwrap();
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = format!("fork/exec {}: permission denied", fifo.display());
    let volumes = s.path().join("v");
    for (op, want) in [
        (
            "create",
            format!(r#"error creating volume "{ID}" with plugin "pipe": {exec}"#),
        ),
        (
            "delete",
            format!(
                r#"error reading plugin response when deleting volume "{ID}" with plugin "pipe": original error: {exec}"#
            ),
        ),
        (
            "fingerprint",
            format!(r#"error fingerprinting plugin "pipe": {exec}"#),
        ),
    ] {
        let (code, j, _) = run_in(&dir, &volumes, OsStr::new("pipe"), op, &[]);
        assert_eq!(code, Some(1), "{op}: {j}");
        assert_eq!(j["error"], want, "{op}");
    }
}

/// Class 4: a plugin that is a symlink to another file of the dir runs as
/// `<plugin_dir>/<id>`, the link: `$0` is that path, not the target's.
#[test]
fn a_plugin_reached_through_a_symlink_sees_the_links_path_as_dollar_0() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    write_plugin(
        &dir.join("real"),
        "#!/bin/sh\nprintf '{\"error\": \"%s\"}' \"$0\"\nexit 1\n",
    );
    symlink("real", dir.join("link")).unwrap();
    // An absolute target, even one inside the dir, is an escape to os.Root.
    symlink(dir.join("real"), dir.join("abs")).unwrap();
    let (code, j, _) = run_in(&dir, &s.path().join("v"), OsStr::new("abs"), "create", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(j["error"], r#"no such plugin: "abs""#);
    let (code, j, _) = run_in(&dir, &s.path().join("v"), OsStr::new("link"), "create", &[]);
    assert_eq!(code, Some(1));
    let want = format!(": exit status 1: {}", dir.join("link").display());
    assert!(
        j["error"].as_str().unwrap().ends_with(&want),
        "{}",
        j["error"]
    );
    assert!(
        j["reproduce"].as_str().unwrap().contains("/plugins/link"),
        "{}",
        j["reproduce"]
    );
}

/// Class 5: at the time limit the plugin's process alone gets SIGKILL, as Go's
/// `exec.CommandContext` sends it: a SIGTERM handler never runs, and the
/// error JSON printed before the kill is Nomad's error text.
#[test]
fn a_time_limit_kills_the_plugin_alone_with_sigkill() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let tag = "4242.5";
    write_plugin(
        &dir.join("slow"),
        &format!(
            "#!/bin/sh\ntrap 'printf \" spoiled\"; exit 3' TERM\nprintf '{{\"error\": \"before\"}}'\n\
             sleep {tag} >/dev/null 2>&1 &\nwait\n"
        ),
    );
    let (code, j, stderr) = run_in(
        &dir,
        &s.path().join("v"),
        OsStr::new("slow"),
        "create",
        &["--timeout", "500ms"],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        format!(r#"error creating volume "{ID}" with plugin "slow": signal: killed: before"#)
    );
    assert_eq!(j["timed_out"], true);
    assert_eq!(j["signal"], 9);
    assert_eq!(j["stdout"], r#"{"error": "before"}"#);
    // The sleep it started outlived it, as under Nomad, and was then killed:
    // the deliberate difference is said, on stderr too.
    assert!(
        stderr.contains(
            "was still running after the call and killed then: Nomad 2.0.5 leaves them running"
        ) && stderr.contains("the plugin started (pid "),
        "{stderr}"
    );
    assert!(crate::util::processes_mentioning(tag).is_empty());
}

/// Class 6: a Nomad client never makes or checks its volumes dir: a missing
/// one reaches an external plugin missing, and the built-in mkdir's own
/// texts come out for one that is a file or a dangling symlink.
#[test]
fn the_volumes_dir_is_handed_over_as_a_nomad_client_hands_it() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    write_plugin(
        &dir.join("plain"),
        "#!/bin/sh\nmkdir \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\" 2>/dev/null || { printf '{\"error\": \"no dir\"}'; exit 1; }\n\
         printf '{\"path\": \"%s\"}' \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"\n",
    );
    let missing = s.path().join("missing");
    let (code, j, _) = run_in(&dir, &missing, OsStr::new("plain"), "create", &[]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(
        j["error"],
        format!(r#"error creating volume "{ID}" with plugin "plain": exit status 1: no dir"#)
    );
    assert!(!missing.exists(), "run made the volumes dir");
    let note = j["volumes_dir_note"].as_str().unwrap();
    assert!(
        note.starts_with("missing; passed to the plugin as it is"),
        "{note}"
    );
    assert!(
        note.contains("neither makes nor checks host_volumes_dir"),
        "{note}"
    );

    let file = s.path().join("file");
    std::fs::write(&file, "").unwrap();
    let dangling = s.path().join("dangling");
    symlink(s.path().join("nowhere"), &dangling).unwrap();
    let looped = s.path().join("loop");
    symlink(&looped, &looped).unwrap();
    let eloop = "too many levels of symbolic links";
    let vol = |d: &Path| d.join(ID).display().to_string();
    for (volumes, op, want) in [
        (
            &file,
            "create",
            format!("stat {}: not a directory", vol(&file)),
        ),
        (
            &file,
            "delete",
            format!("unlinkat {}: not a directory", vol(&file)),
        ),
        (
            &dangling,
            "create",
            format!(
                "error creating directory: mkdir {}: file exists",
                dangling.display()
            ),
        ),
        (&looped, "create", format!("stat {}: {eloop}", vol(&looped))),
        (
            &looped,
            "delete",
            format!("open {}: {eloop}", looped.display()),
        ),
    ] {
        let (code, j, _) = run_json(["mkdir", op, "--volumes-dir", volumes.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{op} {}: {j}", volumes.display());
        assert_eq!(j["error"], want);
    }
    assert!(!s.path().join("nowhere").exists());
}

/// Class 7: what Go takes, `run` takes: a negative capacity as two
/// arguments, a lone surrogate in the parameters (U+FFFD, as Go's decoder
/// makes it), and a plugin id that is not UTF-8 (quoted with `\x` escapes).
#[test]
fn every_input_go_takes_is_taken() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let volumes = s.path().join("v");
    write_plugin(&dir.join("env"), NAMED);
    let (code, j, _) = run_in(
        &dir,
        &volumes,
        OsStr::new("env"),
        "create",
        &[
            "--capacity-min",
            "-5",
            "--capacity-max",
            "-1",
            "--parameters",
            r#"{"k":"\ud800x"}"#,
        ],
    );
    assert_eq!(code, Some(1), "{j}");
    let env: Vec<&str> = j["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for want in [
        "DHV_CAPACITY_MIN_BYTES=-5",
        "DHV_CAPACITY_MAX_BYTES=-1",
        "DHV_PARAMETERS={\"k\":\"\u{fffd}x\"}",
    ] {
        assert!(env.contains(&want), "{want} not in {env:?}");
    }

    let raw = OsStr::from_bytes(b"bad\xffid");
    write_plugin(&dir.join(raw), NAMED);
    let (code, j, _) = run_in(&dir, &volumes, raw, "create", &[]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(
        j["error"],
        format!(r#"error creating volume "{ID}" with plugin "bad\xffid": exit status 1: named"#)
    );
    let (_, j, _) = run_in(
        &dir,
        &volumes,
        OsStr::from_bytes(b"gone\xfe"),
        "create",
        &[],
    );
    assert_eq!(j["error"], r#"no such plugin: "gone\xfe""#);
}

/// A path with `--plugin-dir`: a file of that dir runs as its id; any other
/// path is looked up as the id it is (Nomad's verdict), and one line says
/// what `--plugin-dir` means.
#[test]
fn a_path_with_plugin_dir_runs_as_its_id_or_says_what_plugin_dir_means() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    write_plugin(
        &dir.join("my-plugin"),
        "#!/bin/sh\necho '{\"version\": \"1.0.0\"}'\n",
    );
    let path = dir.join("my-plugin");
    let (code, j, _) = run_in(
        &dir,
        &s.path().join("v"),
        path.as_os_str(),
        "fingerprint",
        &[],
    );
    assert_eq!(code, Some(0), "{j}");
    assert_eq!(j["run_by"], "id");
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .current_dir(&dir)
        .args([
            "run",
            "./my-plugin",
            "fingerprint",
            "--plugin-dir",
            ".",
            "--json",
        ])
        .arg("--volumes-dir")
        .arg(s.path().join("v"))
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let elsewhere = s.plugin("elsewhere", "#!/bin/sh\necho '{\"version\": \"1.0.0\"}'\n");
    let (code, j, stderr) = run_in(
        &dir,
        &s.path().join("v"),
        elsewhere.as_os_str(),
        "fingerprint",
        &[],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        format!("no such plugin: \"{}\"", elsewhere.display())
    );
    let hint: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("--plugin-dir"))
        .collect();
    assert_eq!(hint.len(), 1, "{stderr}");
    assert!(
        hint[0].contains("PLUGIN is a plugin id looked up in"),
        "{stderr}"
    );
}

/// Deliberate differences are said for the call they touched: the process
/// group of its own every process run has (the plugin is its group's
/// leader, where under Nomad it is in the agent's), and output shown cut
/// at the cap; each on stderr as well as in `not_reproduced`.
#[test]
fn each_deliberate_difference_that_touched_the_call_is_said() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    write_plugin(
        &dir.join("group"),
        "#!/bin/sh\nPATH=/usr/bin:/bin\nhead -c 2000000 /dev/zero | tr '\\0' x >&2\n\
         read -r _ _ _ _ pgid _ < /proc/$$/stat\nprintf '{\"error\": \"%s %s\"}' \"$$\" \"$pgid\"\nexit 1\n",
    );
    let (code, j, stderr) = run_in(
        &dir,
        &s.path().join("v"),
        OsStr::new("group"),
        "create",
        &[],
    );
    assert_eq!(code, Some(1), "{j}");
    let text = j["error"].as_str().unwrap();
    let ids: Vec<&str> = text.rsplit(": ").next().unwrap().split(' ').collect();
    assert_eq!(
        ids[0], ids[1],
        "the plugin leads a process group of its own: {text}"
    );
    let notes: Vec<&str> = j["not_reproduced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("the plugin ran in a process group of its own")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("stderr was 2000000 bytes: what is shown is its first 1048576")),
        "{notes:?}"
    );
    for note in notes {
        assert!(
            stderr.contains(&format!("dhv-conform: not as Nomad: {note}")),
            "{stderr}"
        );
    }
}

/// Several bad mkdir parameters: Nomad names whichever its map walk meets
/// first, `run` the first in key order, and says so for that call.
#[test]
fn several_bad_mkdir_parameters_are_said_to_be_named_in_key_order() {
    let s = Scratch::new();
    let volumes = s.path().join("v");
    let (code, j, stderr) = run_json([
        "mkdir",
        "create",
        "--volumes-dir",
        volumes.to_str().unwrap(),
        "--parameters",
        r#"{"size":"1","mode":"9"}"#,
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        r#"invalid value for "mode": strconv.ParseUint: parsing "9": invalid syntax"#
    );
    let note = "2 mkdir parameters are invalid: Go walks the parameter map in random order";
    assert!(stderr.contains(note), "{stderr}");
    let (_, j, _) = run_json([
        "mkdir",
        "create",
        "--volumes-dir",
        volumes.to_str().unwrap(),
        "--parameters",
        r#"{"mode":"9"}"#,
    ]);
    assert_eq!(
        j["not_reproduced"],
        serde_json::json!([]),
        "one bad parameter is named as Nomad names it"
    );
}
