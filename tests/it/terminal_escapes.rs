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

/// A plugin whose error text holds code points XML 1.0 cannot carry (U+FFFE,
/// U+FFFF, C0 controls) and other hidden characters gets them escaped in
/// every format: the JUnit file stays well-formed XML, the Markdown, HTML
/// and terminal hold none of them raw, and each is shown as what it was.
#[test]
fn code_points_a_format_cannot_carry_are_escaped_in_every_format() {
    let dir = util::Scratch::new();
    // U+FFFE, U+FFFF and U+FDD0 as raw UTF-8; U+0001, U+000B and U+202E as JSON escapes.
    // The file name too: the suite's name in JUnit, the first line on the terminal.
    let plugin = dir.plugin(
        "nonchars\u{fffe}\u{1}",
        r#"#!/bin/sh
case "$1" in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
  printf 'bad \357\277\276 \357\277\277 \357\267\220\n' >&2
  printf '{"error": "bad \357\277\276 \357\277\277 \\u0001 \\u000b \\u202e end"}\n'
  exit 1 ;;
delete) exit 0 ;;
esac
"#,
    );
    let junit = dir.path().join("junit.xml");
    let markdown = dir.path().join("summary.md");
    let html = dir.path().join("report.html");
    let out = util::check::check([
        plugin.as_os_str(),
        "create.succeeds".as_ref(),
        "--color".as_ref(),
        "never".as_ref(),
        "--junit".as_ref(),
        junit.as_os_str(),
        "--markdown".as_ref(),
        markdown.as_os_str(),
        "--html".as_ref(),
        html.as_os_str(),
    ])
    .run();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    let invalid = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    assert!(
        !xml.contains(invalid),
        "invalid XML 1.0 characters in:\n{xml}"
    );
    assert!(
        xml.contains("\\u{fffe}") && xml.contains("\\u{ffff}"),
        "{xml}"
    );
    assert!(xml.contains("nonchars\\u{fffe}\\u{1}"), "{xml}");
    let mut reader = quick_xml::Reader::from_str(&xml);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("the JUnit file is not XML: {e}\n{xml}"),
        }
    }
    let hidden = [
        '\u{fffe}', '\u{ffff}', '\u{fdd0}', '\u{1}', '\u{b}', '\u{202e}',
    ];
    for (what, text) in [
        ("markdown", std::fs::read_to_string(&markdown).unwrap()),
        ("html", std::fs::read_to_string(&html).unwrap()),
        ("stdout", out.stdout.clone()),
        ("stderr", out.stderr.clone()),
    ] {
        for c in hidden {
            assert!(!text.contains(c), "{what}: raw {c:?} in:\n{text}");
        }
    }
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("\\u{fffe}"), "{md}");
    assert!(out.stdout.contains("\\u{ffff}"), "{}", out.stdout);
}
