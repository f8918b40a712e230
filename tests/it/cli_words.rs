//! The manager's and `run`'s words, through the binary: `updated` for an update, a
//! restore failure that names the plugin and shows what it printed, a zero time
//! limit refused, and plugin output that cannot drive the terminal.

use crate::util::{Node, Scratch};
use assert_cmd::Command;

const ID: &str = "aaaaaaaa-1111-4111-8111-111111111111";

fn volume(node: &Node, verb: &str) -> Command {
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    cmd.arg("volume")
        .arg(verb)
        .arg("--plugin-dir")
        .arg(node.plugins.path())
        .arg("--state-dir")
        .arg(node.state())
        .arg("--volumes-dir")
        .arg(node.volumes());
    cmd
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(cmd.assert().success().get_output().stdout.clone()).unwrap()
}

#[test]
fn create_of_an_existing_id_says_updated() {
    let node = Node::new();
    let args = ["--plugin", "mkdir", "--name", "db", "--id", ID];
    let first = stdout(volume(&node, "create").args(args));
    assert!(
        first.starts_with(&format!("created {ID} name \"db\"")),
        "{first}"
    );
    let again = stdout(
        volume(&node, "create")
            .args(args)
            .args(["--capacity-min", "5"]),
    );
    assert!(
        again.starts_with(&format!("updated {ID} name \"db\"")),
        "{again}"
    );
}

/// A plugin that starts failing after the volume was made: restore names it and shows
/// the first line it printed on each stream, not only the decoder's words.
#[test]
fn restore_failure_names_the_plugin_and_what_it_printed() {
    let node = Node::new();
    let flag = node.work.path().join("broken");
    node.plugins.plugin(
        "flaky",
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\nif [ -e {flag} ]; then echo 'starting up'; echo '{{\"path\": \"x\"}}'; echo 'disk gone' >&2; exit 0; fi\n\
             mkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"\nprintf '{{\"path\": \"%s\"}}' \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"\n",
            flag = flag.display()
        ),
    );
    stdout(volume(&node, "create").args(["--plugin", "flaky", "--name", "v", "--id", ID]));
    std::fs::write(&flag, "").unwrap();
    let out = volume(&node, "restore").assert().code(1);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("FAILED"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("plugin \"flaky\": "), "{line}");
    assert!(
        line.contains("; stdout: starting up; stderr: disk gone"),
        "{line}"
    );
}

#[test]
fn run_with_a_zero_timeout_is_exit_2() {
    for zero in ["0s", "0", "0ms"] {
        let out = Command::cargo_bin("dhv-conform")
            .unwrap()
            .args(["run", "mkdir", "fingerprint", "--timeout", zero])
            .env("TMPDIR", "/nonexistent-dhv-test")
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("the time limit must be more than 0"), "{err}");
    }
}

/// Escapes printed by a plugin reach neither `run`'s nor `volume`'s output raw.
#[test]
fn plugin_text_cannot_drive_the_terminal() {
    let s = Scratch::new();
    let plugin = s.plugin(
        "loud",
        "#!/bin/sh\nprintf '\\033[2J\\033]0;pwned\\007 hi\\n'\nprintf '\\033[31merr\\000\\n' >&2\nexit 1\n",
    );
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("run")
        .arg(&plugin)
        .arg("fingerprint")
        .arg("--volumes-dir")
        .arg(s.path().join("volumes"))
        .assert()
        .code(1);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        !text.contains('\x1b') && !text.contains('\0') && !text.contains('\x07'),
        "{text:?}"
    );
    assert!(text.contains("\\u{1b}[2J"), "{text}");

    let node = Node::new();
    node.plugins.plugin(
        "loud",
        "#!/bin/sh\nprintf '{\"error\": \"\\\\u001b[2Jboom\"}'\nexit 1\n",
    );
    let out = volume(&node, "create")
        .args(["--plugin", "loud", "--name", "v"])
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains('\x1b'), "{err:?}");
    assert!(err.contains("boom"), "{err}");
}
