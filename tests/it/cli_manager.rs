//! `dhv-conform plugins` and `dhv-conform volume ...` end to end: output, exit
//! codes, Nomad's messages, and state shared by separate processes.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::util::{Node, Scratch, processes_mentioning};
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

mod state;

const ID1: &str = "aaaaaaaa-1111-4111-8111-111111111111";
const ID2: &str = "bbbbbbbb-2222-4222-8222-222222222222";

const GOOD: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
case "$1" in
fingerprint) echo '{"version": "1.0"}' ;;
create)
  mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" || exit 1
  printf '{"path": "%s", "bytes": 42}\n' "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
delete) rm -rf "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
esac
"#;

impl Node {
    /// `dhv-conform volume VERB` with this node's dirs.
    fn volume(&self, verb: &str) -> Command {
        let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
        cmd.arg("volume")
            .arg(verb)
            .arg("--plugin-dir")
            .arg(self.plugins.path())
            .arg("--state-dir")
            .arg(self.state())
            .arg("--volumes-dir")
            .arg(self.volumes());
        cmd
    }

    fn json(&self, verb: &str, args: &[&str]) -> Value {
        let out = self
            .volume(verb)
            .args(args)
            .arg("--json")
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }
}

fn plugins_cmd(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.arg("plugins").arg("--plugin-dir").arg(dir);
    cmd
}

// ---------------------------------------------------------------- plugins

#[test]
fn plugins_prints_the_node_attributes_then_what_was_left_out() {
    let dir = Scratch::new();
    dir.plugin("good", GOOD);
    dir.plugin(".dot", GOOD);
    dir.plugin("bad", "#!/bin/sh\necho '{\"version\": \"1.2.3.beta\"}'\n");
    dir.plugin("slow", "#!/bin/sh\nexec sleep 30\n");
    dir.plugin("off", GOOD);
    fs::set_permissions(dir.path().join("off"), fs::Permissions::from_mode(0o644)).unwrap();
    plugins_cmd(dir.path())
        .args(["--timeout-scale", "0.5"])
        .assert()
        .success()
        .stdout(
            "plugins.host_volume..dot.version = 1.0.0\n\
             plugins.host_volume.good.version = 1.0.0\n\
             plugins.host_volume.mkdir.version = 0.0.1\n\
             left out \"bad\": error parsing fingerprint output as json: malformed version: 1.2.3.beta\n\
             left out \"slow\": error fingerprinting plugin \"slow\": signal: killed \
             (no answer within the 500ms fingerprint limit)\n",
        );
    let out = plugins_cmd(dir.path())
        .args(["--json", "--timeout-scale", "0.5"])
        .assert()
        .success();
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        doc["attributes"]["plugins.host_volume.good.version"],
        "1.0.0"
    );
    assert_eq!(
        doc["attributes"]["plugins.host_volume.mkdir.version"],
        "0.0.1"
    );
    assert_eq!(doc["attributes"].as_object().unwrap().len(), 3);
    assert_eq!(doc["errors"].as_object().unwrap().len(), 2);
    assert!(
        doc["errors"]["slow"]
            .as_str()
            .unwrap()
            .contains("signal: killed")
    );
    assert!(processes_mentioning(&dir.path().to_string_lossy()).is_empty());
}

#[test]
fn plugins_with_a_missing_dir_has_only_the_builtin_and_an_unreadable_one_exits_2() {
    let dir = Scratch::new();
    plugins_cmd(&dir.path().join("nope"))
        .assert()
        .success()
        .stdout("plugins.host_volume.mkdir.version = 0.0.1\n");
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    plugins_cmd(&file)
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with(format!(
            "dhv-conform: cannot read plugin dir {}: ",
            file.display()
        )));
}

// ---------------------------------------------------------------- volume

#[test]
fn create_list_delete_round_trip_in_json() {
    let node = Node::new();
    node.plugins.plugin("good", GOOD);
    let v = node.json(
        "create",
        &[
            "--plugin",
            "good",
            "--name",
            "data",
            "--id",
            ID1,
            "--namespace",
            "prod",
        ],
    );
    let path = node.volumes().join(ID1);
    assert_eq!(
        v,
        serde_json::json!({
            "id": ID1, "name": "data", "namespace": "prod", "plugin": "good",
            "path": path.to_string_lossy(), "bytes": 42,
        })
    );
    assert!(path.is_dir());
    let list = node.json("list", &[]);
    assert_eq!(list["volumes"], serde_json::json!([v]));
    let del = node.json("delete", &["--id", ID1]);
    assert_eq!(del["result"], "deleted");
    assert!(!path.exists());
    assert_eq!(node.json("list", &[]), serde_json::json!({ "volumes": [] }));
    let again = node.json("delete", &["--id", ID1]);
    assert_eq!(
        again,
        serde_json::json!({ "id": ID1, "result": "not_found" })
    );
}

#[test]
fn human_output_is_one_line_per_volume() {
    let node = Node::new();
    fs::create_dir(node.state()).unwrap();
    node.volume("list")
        .assert()
        .success()
        .stdout("no volumes\n");
    node.volume("create")
        .args(["--plugin", "mkdir", "--name", "two words", "--id", ID1])
        .assert()
        .success()
        .stdout(format!(
            "created {ID1} name \"two words\" namespace \"default\" plugin \"mkdir\" path {} bytes 0\n",
            node.volumes().join(ID1).display()
        ));
    let reg = node.work.path().join("reg");
    fs::create_dir(&reg).unwrap();
    node.volume("register")
        .args(["--name", "r", "--id", ID2, "--path"])
        .arg(&reg)
        .assert()
        .success()
        .stdout(format!(
            "registered {ID2} name \"r\" namespace \"default\" registered path {} bytes 0\n",
            reg.display()
        ));
    node.volume("list").assert().success().stdout(format!(
        "{ID2} name \"r\" namespace \"default\" registered path {} bytes 0\n\
         {ID1} name \"two words\" namespace \"default\" plugin \"mkdir\" path {} bytes 0\n",
        reg.display(),
        node.volumes().join(ID1).display()
    ));
    node.volume("delete")
        .args(["--id", ID2])
        .assert()
        .success()
        .stdout(predicate::str::ends_with("(the path was left in place)\n"));
    assert!(reg.is_dir());
    node.volume("delete")
        .args(["--id", ID2])
        .assert()
        .success()
        .stdout(format!("no volume {ID2} on this node: nothing to delete\n"));
}

#[test]
fn a_name_conflict_exits_1_with_nomads_text() {
    let node = Node::new();
    node.volume("create")
        .args(["--plugin", "mkdir", "--name", "data", "--id", ID1])
        .assert()
        .success();
    node.volume("create")
        .args(["--plugin", "mkdir", "--name", "data", "--id", ID2])
        .assert()
        .code(1)
        .stdout("")
        .stderr("dhv-conform: volume name already exists on this node\n");
    // The same id is an update.
    node.volume("create")
        .args([
            "--plugin",
            "mkdir",
            "--name",
            "data",
            "--id",
            ID1,
            "--capacity-max",
            "1000",
        ])
        .assert()
        .success();
    let state: Value =
        serde_json::from_slice(&fs::read(node.state().join("state.json")).unwrap()).unwrap();
    assert_eq!(
        state["volumes"][ID1]["create_request"]["capacity_max_bytes"],
        1000
    );
}

#[test]
fn a_plugin_error_exits_1_with_nomads_text() {
    let node = Node::new();
    node.plugins.plugin(
        "nope",
        "#!/bin/sh\necho '{\"error\": \"quota exceeded\"}'\nexit 1\n",
    );
    node.volume("create")
        .args(["--plugin", "nope", "--name", "d", "--id", ID1])
        .assert()
        .code(1)
        .stderr(format!(
            "dhv-conform: error creating volume \"{ID1}\" with plugin \"nope\": exit status 1: quota exceeded\n"
        ));
    node.volume("create")
        .args(["--plugin", "../escape", "--name", "d", "--id", ID1])
        .assert()
        .code(1)
        .stderr("dhv-conform: no such plugin: \"../escape\"\n");
}

/// Bad values (ids, parameters, capacities) are bad input: exit 2, one line.
#[test]
fn bad_input_exits_2_with_one_line() {
    let node = Node::new();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--plugin", "mkdir", "--name", "d", "--id", "NOT-A-UUID"],
            "dhv-conform: invalid volume id \"NOT-A-UUID\": expected a lower-case UUID (8-4-4-4-12 hex digits)\n",
        ),
        (
            vec!["--plugin", "mkdir", "--name", "d", "--parameters", "{"],
            "--parameters",
        ),
        (
            vec!["--plugin", "mkdir", "--name", "d", "--parameters", "[1]"],
            "--parameters",
        ),
        (
            vec![
                "--plugin",
                "mkdir",
                "--name",
                "d",
                "--parameters",
                r#"{"mode": 700}"#,
            ],
            "--parameters",
        ),
        (
            vec!["--plugin", "mkdir", "--name", "d", "--capacity-min", "x"],
            "--capacity-min",
        ),
    ];
    for (args, want) in cases {
        let out = node.volume("create").args(&args).assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    node.volume("delete")
        .args(["--id", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with(
            "dhv-conform: invalid volume id \"x\"",
        ));
}

/// A missing dir or option is bad input too: exit 2, one line, nothing made.
#[test]
fn missing_dirs_and_options_exit_2_with_one_line() {
    let node = Node::new();
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.args([
        "volume",
        "create",
        "--plugin",
        "mkdir",
        "--name",
        "d",
        "--state-dir",
    ])
    .arg(node.state())
    .assert()
    .code(2)
    .stderr("dhv-conform: volume create needs --volumes-dir\n");
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.args([
        "volume",
        "create",
        "--plugin",
        "good",
        "--name",
        "d",
        "--state-dir",
    ])
    .arg(node.state())
    .arg("--volumes-dir")
    .arg(node.volumes())
    .assert()
    .code(2)
    .stderr("dhv-conform: volume create with plugin \"good\" needs --plugin-dir\n");
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.args(["volume", "list"]).assert().code(2);
    let missing = node.work.path().join("no-state");
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.args(["volume", "list", "--state-dir"])
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(format!(
            "dhv-conform: state dir {} does not exist\n",
            missing.display()
        ));
    assert!(!missing.exists());
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.args([
        "volume",
        "create",
        "--plugin",
        "mkdir",
        "--name",
        "d",
        "--state-dir",
    ])
    .arg(node.state())
    .arg("--volumes-dir")
    .arg(&missing)
    .assert()
    .code(2)
    .stderr(format!(
        "dhv-conform: volumes dir {} does not exist\n",
        missing.display()
    ));
    assert!(fs::read_dir(node.volumes()).unwrap().next().is_none());
}

#[test]
fn a_corrupt_state_file_exits_2_naming_it() {
    let node = Node::new();
    fs::create_dir(node.state()).unwrap();
    let file = node.state().join("state.json");
    fs::write(&file, "not json").unwrap();
    for verb in ["list", "restore"] {
        node.volume(verb).assert().code(2).stderr(format!(
            "dhv-conform: state file {} is corrupt: expected ident at line 1 column 2\n",
            file.display()
        ));
    }
    node.volume("create")
        .args(["--plugin", "mkdir", "--name", "d"])
        .assert()
        .code(2);
    assert_eq!(fs::read_to_string(&file).unwrap(), "not json");
    assert!(fs::read_dir(node.volumes()).unwrap().next().is_none());
}

#[test]
fn restore_reports_one_result_per_volume_and_exits_1_if_any_failed() {
    let node = Node::new();
    node.plugins.plugin("good", GOOD);
    let doomed = node.plugins.plugin("doomed", GOOD);
    node.json("create", &["--plugin", "good", "--name", "a", "--id", ID1]);
    node.json(
        "create",
        &["--plugin", "doomed", "--name", "b", "--id", ID2],
    );
    fs::remove_dir_all(node.volumes().join(ID1)).unwrap();
    let all_ok = node.volume("restore").arg("--json").assert().success();
    let doc: Value = serde_json::from_slice(&all_ok.get_output().stdout).unwrap();
    assert_eq!(doc["results"].as_array().unwrap().len(), 2);
    assert!(node.volumes().join(ID1).is_dir(), "re-created");

    fs::remove_file(doomed).unwrap();
    let out = node.volume("restore").arg("--json").assert().code(1);
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let path1 = node.volumes().join(ID1);
    assert_eq!(
        doc,
        serde_json::json!({ "results": [
            { "id": ID1, "name": "a", "ok": true, "plugin": "good", "path": path1.to_string_lossy(), "error": null },
            { "id": ID2, "name": "b", "ok": false, "plugin": "doomed", "path": null, "error": "no such plugin: \"doomed\"" },
        ]})
    );
    node.volume("restore")
        .args(["--concurrency", "1"])
        .assert()
        .code(1)
        .stdout(format!(
            "restored {ID1} \"a\" at {}\nFAILED   {ID2} \"b\": plugin \"doomed\": no such plugin: \"doomed\"\n1 restored, 1 failed\n",
            path1.display()
        ));
}
