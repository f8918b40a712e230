//! `dhv-conform run` against Nomad 2.0.5's own behaviour where the capture
//! cap, a pipe held after exit and the plugin lookup used to make it differ
//! (docs/nomad-fidelity.md, sections 4, 5 and 6). Each test holds Nomad's
//! exact words.

use std::os::unix::fs::symlink;
use std::time::Duration;

use crate::util::{Scratch, processes_mentioning};
use assert_cmd::Command;
use serde_json::Value;

fn run(s: &Scratch, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.arg("run")
        .args(args)
        .arg("--volumes-dir")
        .arg(s.path().join("volumes"))
        .timeout(Duration::from_secs(60));
    let human = cmd.output().unwrap();
    let out = cmd.arg("--json").output().unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&human.stdout).into_owned(),
    )
}

fn notes(j: &Value) -> Vec<String> {
    j["not_reproduced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

const MIB: usize = 1 << 20;

/// A create that prints a valid answer padded to 2 MiB with an unknown key.
fn padded_answer(s: &Scratch, exit: u8) -> std::path::PathBuf {
    s.plugin(
        "padded",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n\
             printf '{{\"path\":\"/srv/v\",\"error\":\"'\nhead -c {} /dev/zero | tr '\\0' e\n\
             printf '\"}}\\n'\nexit {exit}\n",
            2 * MIB
        ),
    )
}

#[test]
fn a_2_mib_answer_decodes_as_nomad_decodes_it() {
    let s = Scratch::new();
    let p = padded_answer(&s, 0);
    let (code, j, _) = run(&s, &[p.to_str().unwrap(), "create"]);
    assert_eq!(code, Some(0), "{j}");
    assert!(j["error"].is_null(), "{}", j["error"]);
    assert_eq!(j["response"]["path"], "/srv/v");
    assert!(j["stdout_bytes"].as_u64().unwrap() > 2 * MIB as u64);
    // The excerpt kept stays small.
    assert_eq!(j["stdout"].as_str().unwrap().len(), MIB);
    assert_eq!(j["stdout_truncated"], true);
}

#[test]
fn a_2_mib_error_text_is_shown_whole() {
    let s = Scratch::new();
    let p = padded_answer(&s, 1);
    let (code, j, _) = run(&s, &[p.to_str().unwrap(), "create"]);
    assert_eq!(code, Some(1));
    let error = j["error"].as_str().unwrap();
    let want = format!(": exit status 1: {}", "e".repeat(2 * MIB));
    assert!(error.starts_with("error creating volume "), "{error:.200}");
    assert!(
        error.ends_with(&want),
        "the error text was cut: {} bytes",
        error.len()
    );
}

#[test]
fn an_answer_past_16_mib_is_too_large_to_judge_never_a_decoding_error() {
    let s = Scratch::new();
    let p = s.plugin(
        "huge",
        "#!/bin/sh\nPATH=/usr/bin:/bin\nhead -c 17000000 /dev/zero | tr '\\0' ' '\necho '{\"path\":\"/srv/v\"}'\n",
    );
    let (code, j, human) = run(&s, &[p.to_str().unwrap(), "create"]);
    assert_eq!(code, Some(1));
    let error = j["error"].as_str().unwrap();
    assert_eq!(
        error,
        "output too large to judge: the create of plugin \"huge\" printed 17000018 bytes on stdout; \
         dhv-conform decodes at most 16777216 bytes (Nomad reads all of it)"
    );
    assert!(
        notes(&j)
            .iter()
            .any(|n| n.starts_with("stdout was 17000018 bytes")),
        "{:?}",
        notes(&j)
    );
    assert!(
        human.contains("not reproduced: stdout was 17000018 bytes"),
        "{human}"
    );
}

#[test]
fn output_a_child_writes_after_the_exit_is_decoded_as_nomad_reads_it() {
    let s = Scratch::new();
    let p = s.plugin(
        "late",
        "#!/bin/sh\nPATH=/usr/bin:/bin\n( sleep 0.3; echo late ) &\necho '{\"path\":\"/srv/v\"}'\n",
    );
    let (code, j, human) = run(&s, &[p.to_str().unwrap(), "create"]);
    // Nomad waits for EOF and decodes the extra bytes too.
    assert_eq!(code, Some(1));
    assert_eq!(j["error"], "invalid character 'l' after top-level value");
    assert_eq!(j["leaked"], true);
    assert!(j["closed_after_exit_ms"].as_f64().unwrap() > 0.0, "{j}");
    assert!(human.contains("Nomad waits for that"), "{human}");
}

#[test]
fn a_child_holding_stdout_past_the_follow_bound_is_said_plainly() {
    let s = Scratch::new();
    let p = s.plugin(
        "holder",
        "#!/bin/sh\nsleep 2004.5 &\necho '{\"path\":\"/srv/v\"}'\n",
    );
    let (code, j, human) = run(&s, &[p.to_str().unwrap(), "create", "--follow", "200ms"]);
    assert_eq!(code, Some(0), "the verdict is on what Nomad read meanwhile");
    assert_eq!(j["leaked"], true);
    assert!(j["closed_after_exit_ms"].is_null());
    assert!(
        notes(&j)
            .iter()
            .any(|n| n.contains("it would still be waiting for that process")),
        "{:?}",
        notes(&j)
    );
    assert!(
        human.contains("not reproduced: a process still held stdout"),
        "{human}"
    );
    assert!(processes_mentioning("2004.5").is_empty());
}

/// A plugin dir with a good plugin, a symlink leading out of it, and a file
/// without an execute bit.
fn plugin_dir(s: &Scratch) -> std::path::PathBuf {
    let dir = s.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let good = "#!/bin/sh\necho '{\"version\":\"1.0.0\"}'\n";
    let outside = s.plugin("outside", good);
    std::fs::write(dir.join("good"), good).unwrap();
    std::fs::write(dir.join("noexec"), good).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("good"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink(&outside, dir.join("escape")).unwrap();
    dir
}

#[test]
fn run_by_id_uses_nomads_lookup_confined_to_the_plugin_dir() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let dir = dir.to_str().unwrap();
    let outside = s.path().join("outside");
    for (id, want) in [
        ("escape", "no such plugin: \"escape\""),
        ("../outside", "no such plugin: \"../outside\""),
        (
            outside.to_str().unwrap(),
            &*format!("no such plugin: \"{}\"", outside.display()),
        ),
        ("missing", "no such plugin: \"missing\""),
        ("noexec", "plugin not executable: \"noexec\""),
    ] {
        let (code, j, human) = run(&s, &[id, "fingerprint", "--plugin-dir", dir]);
        assert_eq!(code, Some(1), "{id}");
        assert_eq!(j["error"], want, "{id}");
        assert_eq!(j["run_by"], "id");
        assert!(human.contains(&format!("Nomad says: {want}")), "{human}");
    }
    let (code, j, _) = run(&s, &["good", "fingerprint", "--plugin-dir", dir]);
    assert_eq!(code, Some(0), "{j}");
    assert_eq!(j["run_by"], "id");
    // Only the process group and cgroup every process run has differ.
    let notes = notes(&j);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("the plugin ran in a process group of its own"));
}

#[test]
fn run_by_path_says_so_and_what_nomads_lookup_would_say() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let link = dir.join("escape");
    let (code, j, human) = run(&s, &[link.to_str().unwrap(), "fingerprint"]);
    assert_eq!(code, Some(0), "the file itself runs by path");
    assert_eq!(j["run_by"], "path");
    assert_eq!(j["lookup_error"], "no such plugin: \"escape\"");
    assert!(
        human.contains("not reproduced: run by path, not by id from a plugin dir")
            && human.contains("(no such plugin: \"escape\")"),
        "{human}"
    );
    let (_, j, _) = run(&s, &[dir.join("good").to_str().unwrap(), "fingerprint"]);
    assert_eq!(j["run_by"], "path");
    assert!(j["lookup_error"].is_null());
}

/// `check` of a plugin installed as a symlink leading out of its dir: the
/// file runs by path, but Nomad 2.0.5 would never find it, which
/// `fingerprint.lookup` says at should level, in Nomad's words.
#[test]
fn check_warns_when_nomads_lookup_would_refuse_the_plugin() {
    let s = Scratch::new();
    let dir = plugin_dir(&s);
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(dir.join("escape"))
        .args(["fingerprint.lookup", "--exact", "--json", "-", "-q"])
        .env("TMPDIR", s.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &j["checks"][0];
    assert_eq!(c["id"], "fingerprint.lookup");
    assert_eq!(c["status"], "warn", "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.contains("Nomad 2.0.5 says: no such plugin: \"escape\": it leads to"),
        "{message}"
    );
    assert_eq!(out.status.code(), Some(0), "a should-level finding");
}
