//! Every sample plugin, run once through the binary, and every form its report takes.
//!
//! For each sample in `sample-plugins/` the test runs `dhv-conform check --json -` and
//! asserts:
//! - exactly the verdicts its header promises: `# expect: <check-id> <fail|warn>` lines
//!   are the checks it must not pass, `# may: <check-id> <status>` lines are findings
//!   that depend on where a kill lands; every other check passes, is skipped or is info;
//! - the exit code that follows (1 when a must failed, else 0);
//! - that the run left no temp file and no process behind;
//! - its normalised report ([`report::normalise`], the text `--snapshot` compares) equals
//!   the insta snapshot `snapshots/sample-<name>.snap`.
//!
//! Two samples also pin their JUnit XML and Markdown, and the reference plugin pins the
//! key skeleton of the JSON report (docs/report-schema.md documents it).
//!
//! What legitimately changes from run to run is declared once, in [`VARIES`]; nothing
//! else is redacted beyond the one normaliser, [`Redactions`].

mod util;

use util::loop_devices_unusable;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::conformance::CATALOGUE;
use dhv_conform::report::{self, Redactions, Report};

/// A part of some samples' reports that differs between runs of the same plugin, and why.
///
/// In the snapshot the message of each listed check becomes `[VARIES: <why>]`; with
/// `status` set the status word becomes `[VARIES]` too. Everything not listed here is
/// pinned byte for byte, so a new source of nondeterminism fails the snapshot test
/// instead of hiding in it.
struct Varies {
    samples: &'static [&'static str],
    checks: &'static [&'static str],
    status: bool,
    why: &'static str,
}

/// The run-wide checks whose messages count the run's calls (or report their timings
/// per operation, with counts).
const CALL_COUNTS: &[&str] = &[
    "create.deadline",
    "delete.deadline",
    "process.no-orphans",
    "process.no-stdio-leak",
    "timing.profile",
];

/// Every declared source of run-to-run variation (found by running each sample many
/// times, on an idle and on a loaded machine).
const VARIES: &[Varies] = &[
    Varies {
        samples: &["crash-unsafe", "fails-on-existing-dir"],
        checks: &["lifecycle.crash-create"],
        status: false,
        why: "names the kill point (10%, 50% or 90% of the measured create) that first \
              exposed the fault; which one does depends on scheduling",
    },
    Varies {
        samples: &["fails-on-missing-dir"],
        checks: &["lifecycle.crash-delete"],
        status: true,
        why: "a kill exposes the fault only when it lands after `rm -r` removed the \
              directory and before the plugin exited (the sample's `# may:` line)",
    },
    Varies {
        samples: &[
            "crash-unsafe",
            "fails-on-existing-dir",
            "fails-on-missing-dir",
        ],
        checks: CALL_COUNTS,
        status: false,
        why: "counts the run's calls, and a crash check stops at the first kill point \
              that exposes the fault, so the count depends on which one did",
    },
    Varies {
        samples: &["leaked-child", "setsid-daemon"],
        checks: &["process.no-orphans", "process.no-stdio-leak"],
        status: false,
        why: "counts the leftover processes and lists the first calls that left one, \
              in the order checks finished",
    },
    Varies {
        samples: &["racy-concurrency"],
        checks: &["concurrency.create"],
        status: false,
        why: "lists which of the 8 concurrent creates lost the race",
    },
    Varies {
        samples: &["fails-on-existing-dir"],
        checks: &["concurrency.same-volume"],
        status: false,
        why: "lists which of the 4 identical concurrent creates failed: whichever ran \
              `mkdir` first succeeds",
    },
];

/// The samples whose JUnit XML and Markdown are pinned too: the conformant reference
/// and a plugin that fails on hostile input (its message and reproduce lines carry
/// `$(...)`, backticks and quotes through both escapers).
const RENDERED: &[&str] = &["reference", "eval-name"];

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins")
}

/// `id:status` for every `# <tag>: <check-id> <status>` line of a sample's header.
fn header(name: &str, tag: &str) -> BTreeSet<String> {
    let text =
        String::from_utf8_lossy(&std::fs::read(samples_dir().join(name)).unwrap()).into_owned();
    text.lines()
        .filter_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix(&format!("# {tag}: "))
                .map(str::to_string)
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(":"))
        .collect()
}

/// One run of the suite on a sample: the report as the binary printed it.
struct SampleRun {
    report: Report,
    json: serde_json::Value,
    /// The run's TMPDIR, removed by now; its name appears in paths in the report.
    scratch: String,
}

/// Runs `dhv-conform check` on a sample with TMPDIR set to a scratch dir, and proves
/// the run left no temp file and no process behind.
fn run_sample(name: &str, scale: &str) -> SampleRun {
    let plugin = samples_dir().join(name);
    let tmp = util::Scratch::new();
    // Plugins inherit our working directory, as Nomad's do: a sample that
    // writes there (writes-cwd) must not write into the repository.
    let cwd = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(["check", plugin.to_str().unwrap(), "--json", "-", "-q"])
        .args(["--timeout-scale", scale])
        .env("TMPDIR", tmp.path())
        .current_dir(cwd.path())
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("{name}: stdout is not one JSON report ({e}); stderr: {stderr}")
    });
    let report = report::from_json(&stdout)
        .unwrap_or_else(|e| panic!("{name}: the report does not read back ({e})"));

    let must_failed = report
        .checks
        .iter()
        .any(|c| c.status == report::Status::Fail);
    assert_eq!(
        out.status.code(),
        Some(if must_failed { 1 } else { 0 }),
        "{name}: exit code; stderr: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{name}: temp files left behind: {left:?}");
    let scratch = tmp.path().to_string_lossy().into_owned();
    let procs = util::processes_with_env_containing(&scratch);
    assert!(procs.is_empty(), "{name}: processes left behind: {procs:?}");
    SampleRun {
        report,
        json,
        scratch,
    }
}

/// Exactly the findings the header promises: every `expect`, any `may`, nothing else.
fn assert_verdicts(name: &str, report: &Report) {
    let expected = header(name, "expect");
    let optional = header(name, "may");
    let got: BTreeSet<String> = report
        .checks
        .iter()
        .filter(|c| matches!(c.status, report::Status::Fail | report::Status::Warn))
        .map(|c| format!("{}:{}", c.id, c.status))
        .collect();
    let unexpected: Vec<_> = got
        .difference(&expected)
        .filter(|f| !optional.contains(*f))
        .collect();
    let missing: Vec<_> = expected.difference(&got).collect();
    assert!(
        unexpected.is_empty() && missing.is_empty(),
        "{name}: unexpected findings {unexpected:?}, missing findings {missing:?}"
    );
    assert_eq!(
        report.checks.len(),
        CATALOGUE.len(),
        "{name}: every check ran"
    );
}

/// The one set of redactions for a sample's report: the normaliser's own rules and the
/// report's paths, plus this run's scratch dir and the samples dir (which plugins see as
/// DHV_PLUGIN_DIR).
fn redactions(report: &Report, scratch: &str) -> Redactions {
    Redactions::for_report(report)
        .path(scratch, "[TMP]")
        .path(&samples_dir().to_string_lossy(), "[SAMPLES]")
}

/// The [`VARIES`] entry covering a sample's check, if any.
fn varies(name: &str, id: &str) -> Option<&'static Varies> {
    VARIES
        .iter()
        .find(|v| v.samples.contains(&name) && v.checks.contains(&id))
}

/// The report with every declared variation pinned: messages replaced (statuses are
/// rewritten in the normalised text, as the model has no word for "either").
fn pinned(name: &str, report: &Report) -> Report {
    let mut pinned = report.clone();
    for check in &mut pinned.checks {
        if let Some(v) = varies(name, &check.id) {
            check.message = format!("[VARIES: {}]", v.why);
        }
    }
    pinned
}

/// The snapshot text of a sample: its normalised report, declared variations pinned.
fn snapshot_text(name: &str, run: &SampleRun) -> String {
    let pinned = pinned(name, &run.report);
    let text = report::normalise(&pinned, &redactions(&run.report, &run.scratch));
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let status_varies = pinned.checks.iter().find(|c| {
            varies(name, &c.id).is_some_and(|v| v.status)
                && line.starts_with(&format!("{} {} {}: ", c.id, c.level, c.status))
        });
        match status_varies {
            Some(c) => {
                let head = format!("{} {} {}", c.id, c.level, c.status);
                out.push_str(&format!("{} {} [VARIES]", c.id, c.level));
                out.push_str(&line[head.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The report as JUnit and Markdown see it, made stable: declared variations pinned,
/// every text redacted *before* rendering (so escaping cannot hide a path from the
/// normaliser), and what those forms show but the normalised text leaves out made
/// constant: durations, the plugin's hash and the tool version.
fn canonical(name: &str, run: &SampleRun) -> Report {
    let r = redactions(&run.report, &run.scratch);
    let mut report = pinned(name, &run.report);
    report.tool.version = "[VERSION]".to_owned();
    report.plugin.path = r.apply(&report.plugin.path);
    report.plugin.sha256 = report.plugin.sha256.as_ref().map(|_| "[SHA256]".to_owned());
    // When and where the run was made: a fixed, valid date, and a placeholder host.
    report.started_at = report
        .started_at
        .as_ref()
        .map(|_| "2000-01-01T00:00:00Z".to_owned());
    report.duration_ms = report.duration_ms.map(|_| 0);
    if let Some(node) = &mut report.node {
        node.name = "[NODE]".to_owned();
    }
    if let Some(fixture) = &mut report.options.fixture {
        *fixture = r.apply(fixture);
    }
    for check in &mut report.checks {
        check.duration_ms = 0;
        check.message = r.apply(&check.message);
        for inv in &mut check.invocations {
            inv.duration_ms = 0.0;
            for text in inv.env.iter_mut().chain(inv.orphans.iter_mut()) {
                *text = r.apply(text);
            }
            for text in [&mut inv.stdout, &mut inv.stderr, &mut inv.reproduce] {
                *text = r.apply(text);
            }
        }
    }
    report
}

/// Asserts `text` against `snapshots/<name>.snap`.
fn assert_snapshot(name: &str, description: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        description => description,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

/// The dotted path of every object key in a JSON value; arrays add `[]`.
fn key_skeleton(value: &serde_json::Value, prefix: &str, keys: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                keys.insert(path.clone());
                key_skeleton(child, &path, keys);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                key_skeleton(item, &format!("{prefix}[]"), keys);
            }
        }
        _ => {}
    }
}

fn always_usable() -> Option<String> {
    None
}

fn check_sample(name: &str, scale: &str) {
    let run = run_sample(name, scale);
    assert_verdicts(name, &run.report);
    assert_snapshot(
        &format!("sample-{name}"),
        &format!("dhv-conform check sample-plugins/{name}: the normalised report"),
        &snapshot_text(name, &run),
    );
    if RENDERED.contains(&name) {
        let report = canonical(name, &run);
        assert_snapshot(
            &format!("junit-{name}"),
            &format!("dhv-conform check sample-plugins/{name} --junit"),
            &report::to_junit(&report),
        );
        assert_snapshot(
            &format!("markdown-{name}"),
            &format!("dhv-conform check sample-plugins/{name} --markdown"),
            &report::to_markdown(&report),
        );
    }
    if name == "reference" {
        let mut keys = BTreeSet::new();
        key_skeleton(&run.json, "", &mut keys);
        let text: String = keys.iter().map(|k| format!("{k}\n")).collect();
        let docs = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report-schema.md"),
        )
        .unwrap();
        for key in &keys {
            let mut parts = key.rsplit('.').map(|p| p.trim_end_matches("[]"));
            let last = parts.next().unwrap();
            let documented = docs.contains(&format!("| `{last}` |"))
                || parts
                    .next()
                    .is_some_and(|parent| docs.contains(&format!("| `{parent}.{last}` |")));
            assert!(
                documented,
                "docs/report-schema.md does not document `{key}`"
            );
        }
        assert_snapshot(
            "json-shape",
            "every key of the JSON report (schema dhv-conform/report/v1) of the reference \
             plugin; docs/report-schema.md documents each one",
            &text,
        );
    }
}

/// `name => "sample"`, optionally `at "<timeout scale>"` and `if <fn() -> Option<why not>>`.
macro_rules! samples {
    ($($test:ident => $name:literal $(at $scale:literal)? $(if $usable:ident)?),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                #[allow(unused_mut, unused_assignments)]
                let mut scale = "1";
                $(scale = $scale;)?
                #[allow(unused_mut, unused_assignments)]
                let mut usable: fn() -> Option<String> = always_usable;
                $(usable = $usable;)?
                if let Some(why) = usable() {
                    println!("SKIPPED sample {}: {why}", $name);
                    return;
                }
                check_sample($name, scale);
            }
        )*
    };
}

// hanging-create and ignores-sigterm hang until the create limit kills them: a scale
// of 0.2 makes that 12 s instead of 60 s, while the fingerprint limit (200 ms) keeps
// room for eight concurrent fingerprints on a loaded machine (at 0.05 it was 50 ms,
// and loaded runs came within 5 ms of it).
samples! {
    sample_reference => "reference",
    sample_bad_version => "bad-version",
    sample_blind_delete => "blind-delete",
    sample_busy_pool => "busy-pool",
    sample_bytes_out_of_range => "bytes-out-of-range",
    sample_crash_unsafe => "crash-unsafe",
    sample_crlf_shebang => "crlf-shebang",
    sample_eval_name => "eval-name",
    sample_fails_on_existing_dir => "fails-on-existing-dir",
    sample_fails_on_missing_dir => "fails-on-missing-dir",
    sample_hanging_create => "hanging-create" at "0.2",
    sample_ignores_sigterm => "ignores-sigterm" at "0.2",
    sample_leaked_child => "leaked-child",
    sample_logs_on_stdout => "logs-on-stdout",
    sample_loop_ext4 => "loop-ext4" if loop_devices_unusable,
    sample_missing_shebang => "missing-shebang",
    sample_missing_version => "missing-version",
    sample_name_as_path => "name-as-path",
    sample_needs_home => "needs-home",
    sample_needs_path => "needs-path",
    sample_non_semver_version => "non-semver-version",
    sample_nonexistent_path => "nonexistent-path",
    sample_not_executable => "not-executable",
    sample_null_version => "null-version",
    sample_racy_concurrency => "racy-concurrency",
    sample_relative_path => "relative-path",
    sample_rmdir_delete => "rmdir-delete",
    sample_setsid_daemon => "setsid-daemon",
    sample_shared_path => "shared-path",
    sample_side_file => "side-file",
    sample_slow_fingerprint => "slow-fingerprint",
    sample_string_bytes => "string-bytes",
    sample_text_error => "text-error",
    sample_writes_cwd => "writes-cwd",
}

#[test]
fn every_sample_plugin_is_tested() {
    let listed = include_str!("reports.rs");
    for entry in std::fs::read_dir(samples_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") || name.starts_with('.') {
            continue;
        }
        assert!(
            listed.contains(&format!("=> \"{name}\"")),
            "sample {name} has no test"
        );
    }
}

/// The declarations stay true: they name real samples and checks, and every `# may:`
/// line of a sample is declared with its status.
#[test]
fn declared_variations_match_the_samples() {
    let ids: BTreeSet<&str> = CATALOGUE.iter().map(|c| c.id).collect();
    for v in VARIES {
        for sample in v.samples {
            assert!(samples_dir().join(sample).is_file(), "no sample {sample}");
        }
        for check in v.checks {
            assert!(ids.contains(check), "no check {check}");
        }
    }
    let mut may: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(samples_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        for line in header(&name, "may") {
            let id = line.split(':').next().unwrap().to_owned();
            may.entry(name.clone()).or_default().push(id);
        }
    }
    assert!(!may.is_empty(), "no sample has a `# may:` line any more");
    // JUnit and Markdown count statuses, so their samples may vary in messages only.
    for v in VARIES.iter().filter(|v| v.status) {
        for name in RENDERED {
            assert!(
                !v.samples.contains(name),
                "{name}: rendered, yet its statuses vary"
            );
        }
    }
    for (sample, checks) in may {
        for id in checks {
            assert!(
                varies(&sample, &id).is_some_and(|v| v.status),
                "{sample}: `# may: {id}` is not declared in VARIES with status: true"
            );
        }
    }
}

/// The pinning itself: a declared check loses exactly its message (and its status, when
/// declared so), and nothing else in the text changes.
#[test]
fn pinning_touches_only_declared_checks() {
    use report::{CheckResult, Level, PluginInfo, RunOptions, Status};
    let check = |id: &str, level, status, message: &str| CheckResult {
        id: id.to_owned(),
        group: id.split('.').next().unwrap().to_owned(),
        level,
        status,
        message: message.to_owned(),
        duration_ms: 1,
        invocations: Vec::new(),
    };
    let report = Report::new(
        "nomad-1.10",
        PluginInfo::default(),
        RunOptions::default(),
        vec![
            check("create.deadline", Level::Must, Status::Pass, "67 calls"),
            check("delete.idempotent", Level::Must, Status::Fail, "exit 1"),
            check(
                "lifecycle.crash-delete",
                Level::Should,
                Status::Warn,
                "killed at 50%",
            ),
        ],
        Vec::new(),
    );
    let run = SampleRun {
        json: serde_json::Value::Null,
        report,
        scratch: "/nowhere".to_owned(),
    };
    let plain = report::normalise(&run.report, &redactions(&run.report, &run.scratch));
    let text = snapshot_text("fails-on-missing-dir", &run);
    assert_eq!(plain.lines().count(), text.lines().count());
    let changed: Vec<&str> = plain
        .lines()
        .zip(text.lines())
        .filter(|(a, b)| a != b)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(changed.len(), 2, "{text}");
    assert!(
        changed[0].starts_with("create.deadline must pass: [VARIES: counts the run's calls"),
        "{text}"
    );
    assert!(
        changed[1].starts_with("lifecycle.crash-delete should [VARIES]: [VARIES: a kill exposes"),
        "{text}"
    );
    assert!(
        text.contains("\ndelete.idempotent must fail: exit 1\n"),
        "{text}"
    );
}
