//! `dhv-conform report html REPORT [-o FILE]` through the binary: a saved report
//! renders to its page, and an input that is not a report is one line and exit 2,
//! never a panic or a wait.

use crate::util;

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::util::Scratch;
use assert_cmd::Command;
use dhv_conform::report::{self, PluginInfo, Report, RunOptions};

fn report_html(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["report", "html"])
        .args(args)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn saved(dir: &Path) -> std::path::PathBuf {
    let report = Report::new(
        "nomad-1.10",
        PluginInfo {
            path: "/opt/plugins/<b>x</b>".into(),
            ..PluginInfo::default()
        },
        RunOptions::default(),
        Vec::new(),
        Vec::new(),
    );
    let path = dir.join("report.json");
    fs::write(&path, report::to_json(&report)).unwrap();
    path
}

#[test]
fn a_saved_report_renders_to_stdout_or_a_file() {
    let dir = Scratch::new();
    let json = saved(dir.path());
    let (code, page, stderr) = report_html(&[json.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains("<body data-verdict=\"conformant\">"));
    assert!(page.contains("/opt/plugins/&lt;b&gt;x&lt;/b&gt;"));
    let out = dir.path().join("page.html");
    let (code, stdout, _) = report_html(&[json.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, Some(0));
    assert!(stdout.is_empty());
    assert_eq!(fs::read_to_string(&out).unwrap(), page);
}

#[test]
fn what_is_not_a_report_is_one_line_and_exit_2() {
    let dir = Scratch::new();
    let write = |name: &str, body: &[u8]| {
        let path = dir.path().join(name);
        fs::write(&path, body).unwrap();
        path
    };
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let cases = [
        (write("truncated.json", b"{\"schema\":"), "not JSON"),
        (write("binary.json", b"\xff\xfe\0garbage"), "not JSON"),
        (
            write("other.json", br#"{"schema": "dhv-conform/fleet/v1"}"#),
            "schema \"dhv-conform/fleet/v1\" is not dhv-conform/report/v1",
        ),
        (
            write(
                "shape.json",
                br#"{"schema": "dhv-conform/report/v1", "checks": 3}"#,
            ),
            "not a dhv-conform/report/v1 report",
        ),
        (dir.path().join("missing.json"), "cannot read"),
        (dir.path().to_path_buf(), "not a regular file"),
        (fifo, "not a regular file"),
    ];
    for (path, want) in cases {
        let (code, stdout, stderr) = report_html(&[path.as_os_str()]);
        assert_eq!(code, Some(2), "{}: {stderr}", path.display());
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(want), "{}: {stderr}", path.display());
    }
}

/// `check --html` writes the page `report html` renders from the run's `--json`: the
/// page is a pure function of the report.
#[test]
fn check_html_is_report_html_of_its_json() {
    let dir = Scratch::new();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("check")
        .arg(util::sample("reference"))
        .args(["-q", "--json"])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .env("TMPDIR", dir.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = fs::read_to_string(&html).unwrap();
    let (code, again, _) = report_html(&[json.as_os_str()]);
    assert_eq!(code, Some(0));
    assert!(again == page, "the same page");
    let report = report::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    for check in &report.checks {
        assert!(page.contains(&format!("id=\"check-{}\"", check.id)));
        for call in &check.invocations {
            assert!(
                call.started_ms.is_some(),
                "{}: every call has its start",
                check.id
            );
        }
    }
    assert!(report.timing.iter().all(|t| !t.alone_ms.is_empty()));
    assert!(page.contains("<svg class=\"timeline\""));
}
