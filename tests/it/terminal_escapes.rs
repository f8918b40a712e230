//! Strings from a plugin or the disk reach the terminal escaped, the same way
//! on every output: no ESC/OSC sequence, no C0/C1 control, no bidi override
//! (U+202E) and no newline that forges a line of its own.

use crate::util;

use std::time::Duration;

use assert_cmd::Command;

/// What no terminal output may hold raw.
fn assert_clean(what: &str, text: &str) {
    for bad in ['\x1b', '\x07', '\u{9b}', '\u{202e}', '\u{2066}', '\r'] {
        assert!(!text.contains(bad), "{what}: raw {bad:?} in:\n{text}");
    }
    assert!(
        !text.lines().any(|l| l.starts_with("forged")),
        "{what}: a forged line in:\n{text}"
    );
}

const HOSTILE: &str = "evil\x1b]0;pwned\x07\u{9b}2J\u{202e}txt\u{2066}\nforged";

#[test]
fn plugins_attribute_lines_escape_the_plugin_file_name_and_output() {
    let dir = util::Scratch::new();
    let body = format!(
        "#!/bin/sh\nprintf '%s\\n' '{{\"version\": \"1.0.0\"}}'\nprintf '{}' >&2\n",
        HOSTILE.replace('\n', "\\n")
    );
    dir.plugin(&format!("p{HOSTILE}"), &body);
    dir.plugin("good", &body);
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["plugins", "--plugin-dir"])
        .arg(dir.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("plugins.host_volume.good.version"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\\u{202e}"),
        "the override is shown escaped: {stdout}"
    );
    assert_clean("plugins", &stdout);
}

#[test]
fn the_human_report_escapes_paths_and_output_from_the_plugin() {
    let dir = util::Scratch::new();
    let plugin = dir.plugin(
        "hostile",
        &format!(
            r#"#!/bin/sh
case "$1" in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
  printf '{}' >&2
  d="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"; /bin/mkdir -p "$d"
  printf '{{"path": "%s/\\u001b]0;x\\u0007\\u202e\\nforged", "bytes": 0}}\n' "$d" ;;
delete) /bin/rm -rf "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
esac
"#,
            HOSTILE.replace('\n', "\\n")
        ),
    );
    let out = util::check::check([plugin.to_str().unwrap(), "create.", "--color", "never"]).run();
    assert!(matches!(out.code, Some(1) | Some(0)), "{}", out.stderr);
    assert!(out.stdout.contains("\\u{202e}"), "{}", out.stdout);
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
}

#[test]
fn run_shows_a_hostile_name_on_one_escaped_line() {
    let dir = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["run", "mkdir", "create", "--name", HOSTILE, "--volumes-dir"])
        .arg(dir.path().join("volumes"))
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("DHV_VOLUME_NAME=evil"), "{stdout}");
    assert_clean("run", &stdout);
}
