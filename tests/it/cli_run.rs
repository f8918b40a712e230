//! `dhv-conform run`: one operation exactly as Nomad runs it, through the binary,
//! with small throwaway plugins for each thing Nomad would see.

use crate::util::{Scratch, processes_mentioning};
use assert_cmd::Command;
use serde_json::Value;

fn run_json(s: &Scratch, args: &[&str]) -> (Option<i32>, Value) {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("run")
        .args(args)
        .args(["--json", "--volumes-dir"])
        .arg(s.path().join("volumes"))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code(), json)
}

const ID: &str = "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10";

#[test]
fn create_gets_nomads_exact_env_in_order() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\ntr '\\0' '\\n' < /proc/$$/environ >&2\necho '{\"path\": \"/x\", \"bytes\": 5}'\n");
    let (code, j) = run_json(
        &s,
        &[
            p.to_str().unwrap(),
            "create",
            "--id",
            ID,
            "--name",
            "db",
            "--namespace",
            "prod",
            "--node-id",
            "n1",
            "--node-pool",
            "pool",
            "--capacity-min",
            "10",
            "--capacity-max",
            "20",
            "--parameters",
            r#"{"b":"<&>","a":"1"}"#,
        ],
    );
    assert_eq!(code, Some(0));
    let vols = s.path().join("volumes");
    let want = [
        "DHV_OPERATION=create".to_string(),
        format!("DHV_VOLUMES_DIR={}", vols.display()),
        format!("DHV_PLUGIN_DIR={}", s.path().display()),
        "DHV_NODE_POOL=pool".into(),
        "DHV_NAMESPACE=prod".into(),
        "DHV_VOLUME_NAME=db".into(),
        format!("DHV_VOLUME_ID={ID}"),
        "DHV_CAPACITY_MIN_BYTES=10".into(),
        "DHV_CAPACITY_MAX_BYTES=20".into(),
        "DHV_NODE_ID=n1".into(),
        r#"DHV_PARAMETERS={"a":"1","b":"\u003c\u0026\u003e"}"#.into(),
    ];
    let seen: Vec<&str> = j["stderr"].as_str().unwrap().lines().collect();
    assert_eq!(seen, want);
    assert_eq!(j["response"], serde_json::json!({"path": "/x", "bytes": 5}));
    assert_eq!(j["exit_code"], 0);
    assert!(j["error"].is_null());
}

#[test]
fn delete_gets_created_path_and_default_parameters_null() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\ntr '\\0' '\\n' < /proc/$$/environ\n");
    let (code, j) = run_json(
        &s,
        &[
            p.to_str().unwrap(),
            "delete",
            "--id",
            ID,
            "--created-path",
            "/made/here",
        ],
    );
    assert_eq!(code, Some(0));
    let env: Vec<&str> = j["stdout"].as_str().unwrap().lines().collect();
    let names: Vec<&str> = env.iter().map(|kv| kv.split('=').next().unwrap()).collect();
    assert_eq!(
        names,
        [
            "DHV_OPERATION",
            "DHV_VOLUMES_DIR",
            "DHV_PLUGIN_DIR",
            "DHV_NODE_POOL",
            "DHV_CREATED_PATH",
            "DHV_NAMESPACE",
            "DHV_VOLUME_NAME",
            "DHV_VOLUME_ID",
            "DHV_NODE_ID",
            "DHV_PARAMETERS"
        ]
    );
    assert!(env.contains(&"DHV_CREATED_PATH=/made/here"));
    assert!(env.contains(&"DHV_PARAMETERS=null"));
}

#[test]
fn a_plugin_ignoring_sigterm_is_killed_at_the_timeout() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\ntrap '' TERM\nexec sleep 2001.5\n");
    let (code, j) = run_json(&s, &[p.to_str().unwrap(), "create", "--timeout", "200ms"]);
    assert_eq!(code, Some(1));
    assert_eq!(j["timed_out"], true);
    assert_eq!(j["signal"], 9);
    assert!(
        j["error"].as_str().unwrap().ends_with("signal: killed"),
        "{}",
        j["error"]
    );
    assert!(processes_mentioning("2001.5").is_empty());
}

#[test]
fn a_leaked_child_and_a_setsid_daemon_are_reported_and_killed() {
    let s = Scratch::new();
    let leak = s.plugin(
        "leak",
        "#!/bin/sh\nsleep 2002.5 &\necho '{\"version\": \"1.0.0\"}'\n",
    );
    let (code, j) = run_json(&s, &[leak.to_str().unwrap(), "fingerprint"]);
    assert_eq!(code, Some(0), "the call itself succeeded");
    assert_eq!(j["leaked"], true);
    assert!(j["leftovers"][0].as_str().unwrap().contains("2002.5"));
    assert!(processes_mentioning("2002.5").is_empty());

    let ready = s.path().join("ready");
    let daemon = s.plugin(
        "daemon",
        &format!(
            // `: >` makes the file in the shell itself: a `touch` could still be
            // exiting when the plugin sees its file, and be found as a second leftover.
            "#!/bin/sh\nsetsid sh -c ': > {r}; exec sleep 2003.5' >/dev/null 2>&1 </dev/null &\nwhile [ ! -e {r} ]; do :; done\necho '{{\"version\": \"1.0.0\"}}'\n",
            r = ready.display()
        ),
    );
    let (code, j) = run_json(&s, &[daemon.to_str().unwrap(), "fingerprint"]);
    assert_eq!(code, Some(0));
    assert_eq!(j["leaked"], false);
    assert_eq!(j["leftovers"].as_array().unwrap().len(), 1, "{j}");
    assert!(processes_mentioning("2003.5").is_empty());
}

#[test]
fn an_output_flood_is_truncated() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\nhead -c 300000000 /dev/zero | tr '\\0' x\n");
    let (code, j) = run_json(&s, &[p.to_str().unwrap(), "fingerprint"]);
    assert_eq!(code, Some(1), "300 MB of x is no JSON");
    assert_eq!(j["stdout_truncated"], true);
    assert_eq!(j["stdout"].as_str().unwrap().len(), 1 << 20);
}

#[test]
fn start_failures_are_explained() {
    let s = Scratch::new();
    let cases = [
        (
            s.plugin("no-shebang", "echo hi\n"),
            "exec format error",
            "no `#!` line",
        ),
        (
            s.plugin("crlf", "#!/bin/sh\r\necho hi\r\n"),
            "no such file or directory",
            "carriage return",
        ),
        (
            s.plugin("no-interp", "#!/nonexistent/interp\necho hi\n"),
            "no such file or directory",
            "`/nonexistent/interp`",
        ),
    ];
    for (plugin, go, why) in cases {
        let (code, j) = run_json(&s, &[plugin.to_str().unwrap(), "fingerprint"]);
        assert_eq!(code, Some(1));
        let err = j["error"].as_str().unwrap();
        assert!(
            err.starts_with("error fingerprinting plugin") && err.ends_with(go),
            "{err}"
        );
        assert!(
            j["start_failure"].as_str().unwrap().contains(why),
            "{}",
            j["start_failure"]
        );
    }
    let not_exec = s.path().join("not-exec");
    std::fs::write(&not_exec, "#!/bin/sh\necho hi\n").unwrap();
    let (code, j) = run_json(&s, &[not_exec.to_str().unwrap(), "fingerprint"]);
    assert_eq!(code, Some(1));
    assert!(j["error"].as_str().unwrap().ends_with("permission denied"));
}

#[test]
fn nomads_error_texts_with_and_without_error_json() {
    let s = Scratch::new();
    let with = s.plugin(
        "with",
        "#!/bin/sh\necho '{\"error\": \"disk full\"}'\nexit 3\n",
    );
    let without = s.plugin("without", "#!/bin/sh\necho oops\nexit 3\n");
    let id = ID;
    let cases = [
        (
            &with,
            "create",
            format!(
                "error creating volume \"{id}\" with plugin \"with\": exit status 3: disk full"
            ),
        ),
        (
            &without,
            "create",
            format!("error creating volume \"{id}\" with plugin \"without\": exit status 3"),
        ),
        (
            &with,
            "delete",
            format!(
                "error deleting volume \"{id}\" with plugin \"with\": exit status 3: disk full"
            ),
        ),
        (
            &without,
            "delete",
            format!(
                "error reading plugin response when deleting volume \"{id}\" with plugin \"without\": original error: exit status 3"
            ),
        ),
    ];
    for (plugin, op, want) in cases {
        let (code, j) = run_json(&s, &[plugin.to_str().unwrap(), op, "--id", id]);
        assert_eq!(code, Some(1));
        assert_eq!(j["error"].as_str().unwrap(), want);
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let s = Scratch::new();
    let p = s.plugin("p", "#!/bin/sh\necho '{}'\n");
    let cases: [&[&str]; 4] = [
        &[p.to_str().unwrap(), "create", "--id", "NOT-A-UUID"],
        &[p.to_str().unwrap(), "create", "--parameters", "{not json"],
        &[p.to_str().unwrap(), "create", "--parameters", r#"{"a": 1}"#],
        &["/no/such/plugin", "create"],
    ];
    for args in cases {
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .arg("run")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("dhv-conform: "), "{err}");
    }
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["run", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_builtin_mkdir_runs_in_process() {
    let s = Scratch::new();
    let (code, j) = run_json(
        &s,
        &[
            "mkdir",
            "create",
            "--id",
            ID,
            "--parameters",
            r#"{"mode": "0750"}"#,
        ],
    );
    assert_eq!(code, Some(0));
    assert_eq!(j["builtin"], true);
    let path = s.path().join("volumes").join(ID);
    assert_eq!(j["response"]["path"], path.to_string_lossy().as_ref());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o750
    );
    let (code, j) = run_json(
        &s,
        &["mkdir", "create", "--parameters", r#"{"colour": "red"}"#],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        r#"invalid value for "colour": unknown mkdir parameter: "colour""#
    );
    // Nomad returns an existing volume before it reads the parameters.
    let (code, j) = run_json(
        &s,
        &[
            "mkdir",
            "create",
            "--id",
            ID,
            "--parameters",
            r#"{"size": "1G"}"#,
        ],
    );
    assert_eq!(code, Some(0), "{j}");
    assert_eq!(j["response"]["path"], path.to_string_lossy().as_ref());
}

#[test]
fn a_create_that_exits_0_with_bad_json_is_gos_bare_error() {
    let s = Scratch::new();
    let p = s.plugin(
        "p",
        "#!/bin/sh\necho '{\"path\": \"/x\", \"bytes\": \"0\"}'\n",
    );
    let (code, j) = run_json(&s, &[p.to_str().unwrap(), "create", "--id", ID]);
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        "json: cannot unmarshal string into Go struct field HostVolumePluginCreateResponse.bytes of type int64"
    );
}

#[test]
fn a_bad_version_fails_the_decode_even_when_a_later_key_is_good() {
    let s = Scratch::new();
    let p = s.plugin(
        "p",
        "#!/bin/sh\necho '{\"version\": \"V1\", \"version\": \"1.0.0\"}'\n",
    );
    let (code, j) = run_json(&s, &[p.to_str().unwrap(), "fingerprint"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        j["error"],
        "error parsing fingerprint output as json: malformed version: V1"
    );
    assert_eq!(j["version"]["raw"], "V1");
    assert!(j["version"]["canonical"].is_null());
}

/// The default volumes dir is made new for each run (a random name in TMPDIR,
/// mode 0700): a symlink planted at a fixed name there is never followed, and
/// two runs get two dirs.
#[test]
fn the_default_volumes_dir_is_new_per_run_and_never_a_planted_link() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = Scratch::new();
    let outside = Scratch::new();
    for name in ["dhv-conform-volumes", "dhv-conform-volumes-"] {
        std::os::unix::fs::symlink(outside.path(), tmp.path().join(name)).unwrap();
    }
    let mut dirs = Vec::new();
    for _ in 0..2 {
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .args(["run", "mkdir", "create", "--json"])
            .env("TMPDIR", tmp.path())
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        let path = std::path::PathBuf::from(j["response"]["path"].as_str().unwrap());
        let dir = path.parent().unwrap().to_path_buf();
        assert_eq!(dir.parent().unwrap(), tmp.path(), "{dir:?}");
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir(), "{dir:?} is a real dir");
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{dir:?}");
        dirs.push(dir);
    }
    assert_ne!(dirs[0], dirs[1], "one dir per run");
    let outside_entries: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(
        outside_entries.is_empty(),
        "made through the link: {outside_entries:?}"
    );
}
