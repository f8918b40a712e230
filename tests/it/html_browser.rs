//! The HTML report in a real browser: headless Chromium (Debian's `chromium`) opens the
//! pages of the reference plugin, a racy one, one whose output is hostile and a fleet of
//! 50 nodes, and the test reads the DOM the browser built: the verdict, a row per check
//! (or per check and node), the hostile strings shown as text, and no script having run
//! (the hostile output tries to set `document.title`). Each page's screenshot is saved
//! as a test artifact under `target/tmp/html-<name>.png`.
//!
//! Without `chromium` on the PATH the tests say so and skip; with `CI` set they fail
//! (`.ci/run` installs it).

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{Scratch, processes_mentioning, wait_bounded, wait_for};
use dhv_conform::report::{self, Report};

/// How long one browser run may take (start-up included) before the test fails.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// What the hostile plugin's output tries: close the script or comment it would be in,
/// and run a script of its own.
const INJECTION: &str = "</script><script>document.title='PWNED'</script><!--";
const IMG: &str = "<img src=x onerror=\"document.title='PWNED'\">";

/// The browser, or `None` (after saying why) where it is not installed and CI is unset.
fn chromium(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "chromium is not installed (apt-get install -y chromium)";
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: {why}; under CI it must be"
        );
        println!("SKIPPED {test}: {why}");
    }
    found
}

/// One headless browser run over `page` with `args`, in a profile dir of its own that
/// goes with `scratch`; waits, bounded, until none of its processes is left.
fn browse(browser: &Path, scratch: &Scratch, page: &Path, args: &[String], stdout: Stdio) {
    let profile = scratch.path().join("chromium-profile");
    let child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args(["--disable-extensions", "--disable-background-networking"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", scratch.path())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let status = wait_bounded(child, BROWSER_LIMIT);
    assert!(status.success(), "chromium on {}: {status}", page.display());
    let needle = profile.display().to_string();
    assert!(
        wait_for(Duration::from_secs(20), || processes_mentioning(&needle)
            .is_empty()),
        "chromium left processes behind: {:?}",
        processes_mentioning(&needle)
    );
}

/// The DOM the browser built from `page`, and its screenshot saved as
/// `target/tmp/html-<name>.png`.
fn render(browser: &Path, scratch: &Scratch, page: &Path, name: &str) -> String {
    let dom = scratch.path().join(format!("{name}.dom.html"));
    let out = fs::File::create(&dom).unwrap();
    browse(
        browser,
        scratch,
        page,
        &["--dump-dom".to_owned()],
        Stdio::from(out),
    );
    let shots = util::repo().join("target").join("tmp");
    fs::create_dir_all(&shots).unwrap();
    let shot = shots.join(format!("html-{name}.png"));
    let _ = fs::remove_file(&shot);
    browse(
        browser,
        scratch,
        page,
        &[
            "--window-size=1280,2000".to_owned(),
            format!("--screenshot={}", shot.display()),
        ],
        Stdio::null(),
    );
    let png = fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG"), "{} is a PNG", shot.display());
    fs::read_to_string(&dom).unwrap()
}

/// `check PLUGIN --json J --html H`: the report and the page.
fn check(scratch: &Scratch, plugin: &Path, name: &str) -> (Report, PathBuf, PathBuf) {
    let json = scratch.path().join(format!("{name}.json"));
    let html = scratch.path().join(format!("{name}.html"));
    let out = Command::new(util::bin())
        .arg("check")
        .arg(plugin)
        .args(["-q", "--node-name", name, "--json"])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .env("TMPDIR", scratch.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_bounded(out, Duration::from_secs(180));
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "check {}: {status}",
        plugin.display()
    );
    let report = report::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    (report, json, html)
}

/// What every run page must show: the verdict, one row per check, an untouched title,
/// no script or image element, and no URL anywhere in the page.
fn assert_run_page(dom: &str, page: &str, report: &Report) {
    let verdict = report.summary.verdict.as_str();
    assert!(dom.contains(&format!("<body data-verdict=\"{verdict}\">")));
    assert!(dom.contains(&format!(
        "<h1 id=\"verdict\">{}</h1>",
        verdict.to_uppercase()
    )));
    // Had an injected script run, it would have set the title.
    let title = dom
        .split_once("<title>")
        .and_then(|(_, rest)| rest.split_once("</title>"))
        .map(|(title, _)| title)
        .expect("a title");
    assert!(
        title.starts_with(&format!("dhv-conform: {verdict} — ")) && !title.contains("PWNED"),
        "the page's own title: {title:?}"
    );
    for check in &report.checks {
        let row = format!(
            "<details class=\"check\" id=\"check-{}\" data-status=\"{}\"",
            check.id, check.status
        );
        assert!(dom.contains(&row), "a row for {}", check.id);
    }
    assert_eq!(
        dom.matches("<details class=\"check\"").count(),
        report.checks.len()
    );
    for tag in ["<script", "<img", "<iframe", "<link", "<object"] {
        assert!(!dom.contains(tag), "the DOM has no {tag} element");
    }
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page names no URL"
    );
    assert!(
        dom.contains("<svg class=\"timeline\""),
        "the timeline is drawn"
    );
}

#[test]
fn the_reference_page_in_a_browser() {
    let Some(browser) = chromium("the_reference_page_in_a_browser") else {
        return;
    };
    let scratch = Scratch::new();
    let (report, json, html) = check(&scratch, Path::new(&util::sample("reference")), "reference");
    let page = fs::read_to_string(&html).unwrap();
    let dom = render(&browser, &scratch, &html, "reference");
    assert_run_page(&dom, &page, &report);
    assert_eq!(report.summary.verdict, report::Verdict::Conformant);
    for op in ["fingerprint", "create", "delete"] {
        assert!(
            dom.contains(&format!("data-operation=\"{op}\"")),
            "{op}'s durations"
        );
    }
    // The page is a pure function of the report: `report html` renders the same page.
    let again = Command::new(util::bin())
        .args(["report", "html"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8(again.stdout).unwrap() == page);
}

#[test]
fn a_racy_plugins_page_shows_its_overlapping_creates() {
    let Some(browser) = chromium("a_racy_plugins_page_shows_its_overlapping_creates") else {
        return;
    };
    let scratch = Scratch::new();
    let plugin = util::sample("racy-concurrency");
    let (report, _, html) = check(&scratch, Path::new(&plugin), "racy");
    let page = fs::read_to_string(&html).unwrap();
    let dom = render(&browser, &scratch, &html, "racy-concurrency");
    assert_run_page(&dom, &page, &report);
    assert!(dom.contains(
        "<details class=\"check\" id=\"check-concurrency.create\" data-status=\"fail\" open=\"\">"
    ));
    // The failed check's calls overlap in time: the timeline stacks them in lanes.
    let racy = report
        .checks
        .iter()
        .find(|c| c.id == "concurrency.create")
        .unwrap();
    let spans: Vec<(f64, f64)> = racy
        .invocations
        .iter()
        .filter(|c| c.operation == "create")
        .map(|c| {
            let start = c.started_ms.expect("each call has its start");
            (start, start + c.duration_ms)
        })
        .collect();
    let overlapping = spans
        .iter()
        .enumerate()
        .any(|(i, a)| spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(overlapping, "the concurrent creates overlap: {spans:?}");
    assert!(dom.contains("class=\"lbl f-fail\" x=\"4\""));
    assert!(dom.contains("data-check=\"concurrency.create\""));
}

/// A plugin whose every answer is hostile: markup, NUL, ESC, a bidi override, bytes
/// that are not UTF-8, a URL; its creates fail, so the output is in the report.
fn hostile_plugin(scratch: &Scratch) -> PathBuf {
    let body = format!(
        r#"#!/bin/sh
PATH=/usr/bin:/bin
case "$1" in
fingerprint) printf '{{"version": "1.0.0"}}\n' ;;
create)
	cat <<'END'
{INJECTION}
END
	printf 'NUL[\000] ESC[\033[31m] RLO[\342\200\256gnp.exe] BAD[\377\376] https://example.invalid/x\n'
	cat >&2 <<'END'
{IMG}
END
	exit 1 ;;
delete) exit 0 ;;
*) exit 1 ;;
esac
"#
    );
    scratch.plugin("hostile-output", &body)
}

#[test]
fn hostile_output_is_shown_as_text_and_never_runs() {
    let Some(browser) = chromium("hostile_output_is_shown_as_text_and_never_runs") else {
        return;
    };
    let scratch = Scratch::new();
    let plugin = hostile_plugin(&scratch);
    let (report, _, html) = check(&scratch, &plugin, "hostile");
    let page = fs::read_to_string(&html).unwrap();
    let dom = render(&browser, &scratch, &html, "hostile-output");
    assert_run_page(&dom, &page, &report);
    assert!(page.contains("PWNED"), "the hostile output is in the page");
    assert_eq!(report.summary.verdict, report::Verdict::NonConformant);
    // The browser holds each hostile string as text (serialised with its entities).
    let shown = [
        "&lt;/script&gt;&lt;script&gt;document.title='PWNED'&lt;/script&gt;&lt;!--",
        "&lt;img src=x onerror=\"document.title='PWNED'\"&gt;",
        "NUL[<span class=\"ctl\" title=\"U+0000\">\u{2400}</span>]",
        "ESC[<span class=\"ctl\" title=\"U+001B\">\u{241B}</span>[31m]",
        "RLO[<span class=\"ctl\" title=\"U+202E\">\u{27E8}U+202E\u{27E9}</span>gnp.exe]",
        "BAD[<span class=\"ctl\" title=\"invalid UTF-8 in the output\">\u{FFFD}",
    ];
    for text in shown {
        assert!(dom.contains(text), "the DOM shows {text:?} as text");
    }
    assert!(
        !dom.contains('\u{202E}'),
        "no raw bidi override reaches the page"
    );
    assert!(!page.contains('\0') && !page.contains('\u{1b}'));
}

/// 50 node reports: 47 of the reference plugin, 3 of the racy one (as if the same
/// build failed on three nodes), and one of the 47 on another build (another sha256).
fn fleet_reports(scratch: &Scratch, good: &Report, bad: &Report) -> PathBuf {
    let dir = scratch.path().join("fleet");
    fs::create_dir(&dir).unwrap();
    for i in 0..50 {
        let mut node = if (10..13).contains(&i) {
            bad.clone()
        } else {
            good.clone()
        };
        // One build for all but one node: the racy nodes fail on the same build.
        node.plugin.sha256 = if i == 7 {
            Some("0".repeat(64))
        } else {
            good.plugin.sha256.clone()
        };
        node.node = Some(report::NodeInfo {
            name: format!("client-{i:02}"),
        });
        // Every node runs the plugin under the one name a fleet installs it as.
        node.plugin.path = "/opt/nomad/plugins/example".into();
        fs::write(
            dir.join(format!("node-{i:02}.json")),
            report::to_json(&node),
        )
        .unwrap();
    }
    dir
}

#[test]
fn a_fleet_of_50_nodes_in_a_browser() {
    let Some(browser) = chromium("a_fleet_of_50_nodes_in_a_browser") else {
        return;
    };
    let scratch = Scratch::new();
    let (good, _, _) = check(&scratch, Path::new(&util::sample("reference")), "good");
    let (bad, _, _) = check(
        &scratch,
        Path::new(&util::sample("racy-concurrency")),
        "bad",
    );
    let dir = fleet_reports(&scratch, &good, &bad);
    let html = scratch.path().join("fleet.html");
    let out = Command::new(util::bin())
        .args(["report", "merge"])
        .arg(&dir)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a node is non-conformant");
    let page = fs::read_to_string(&html).unwrap();
    let dom = render(&browser, &scratch, &html, "fleet");
    assert!(dom.contains("<body data-verdict=\"non-conformant\">"));
    assert!(dom.contains("<span id=\"nodes\">50 nodes</span>"));
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert_eq!(
        dom.matches("<th class=\"node ").count(),
        50,
        "a column per node"
    );
    assert_eq!(
        dom.matches("<tr data-check=").count(),
        good.checks.len(),
        "a row per check"
    );
    // The racy nodes come first, marked, each linking to its first finding.
    for i in 0..3 {
        assert!(dom.contains(&format!(
            "<th class=\"node non-conformant\"><a href=\"#node-{i}-finding-0\""
        )));
        assert!(dom.contains(&format!("<li id=\"node-{i}-finding-0\">")));
    }
    assert_eq!(dom.matches("<th class=\"node non-conformant").count(), 3);
    // The node on another build stands out.
    assert_eq!(
        dom.matches("<tr id=\"build-1\" class=\"differs\">").count(),
        1
    );
    assert!(dom.contains("title=\"client-07 ("));
    assert_eq!(
        dom.matches("<th class=\"node conformant odd-build\">")
            .count(),
        1
    );
}
