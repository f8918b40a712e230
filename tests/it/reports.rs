//! Every sample plugin, run once through the binary, and every form its report takes.
//!
//! For each sample in `sample-plugins/` the test runs `dhv-conform check --json -` and
//! asserts:
//! - exactly the verdicts its header promises: `# expect: <check-id> <fail|warn>` lines
//!   are the checks it must not pass, `# may: <check-id> <status>` lines are findings
//!   that depend on where a kill lands; every other check passes, is skipped or is info;
//! - the exit code that follows (1 when a must failed, else 0);
//! - that the run left no temp file and no process behind;
//! - its normalised report ([`report::normalise`], the text `--snapshot` compares)
//!   holds the results of the insta snapshot `snapshots/sample-<name>.snap`, compared
//!   as `--snapshot` compares: only the checks that did not pass are listed, so a new
//!   check that passes changes no snapshot.
//!
//! Two samples also pin their JUnit XML and Markdown (of the checks that did not
//! pass and one that did: the renderers, not the catalogue), and the reference plugin
//! pins the key skeleton of the JSON report (docs/report-schema.md documents it).
//!
//! What legitimately changes from run to run is declared on the check
//! (`CheckSpec::varies`) or, for a sample whose fault is a race, by its `# may:`
//! lines; nothing else is redacted beyond the one normaliser, [`Redactions`].

use crate::samples;
use crate::util;

use crate::util::loop_devices_unusable;
use samples::{SampleRun, header, may, pinned, redactions, run_sample, samples_dir, snapshot_text};

use std::collections::BTreeSet;
use std::path::Path;

use dhv_conform::conformance::CATALOGUE;
use dhv_conform::report::{self, Report};

/// The samples whose JUnit XML and Markdown are pinned too: the conformant reference
/// and a plugin that fails on hostile input (its message and reproduce lines carry
/// `$(...)`, backticks and quotes through both escapers).
const RENDERED: &[&str] = &["reference", "eval-name"];

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
    // What the unexpected ones said: a finding that shows up on a loaded CI
    // host is read from this message, not reproduced.
    let said: Vec<String> = report
        .checks
        .iter()
        .filter(|c| unexpected.contains(&&format!("{}:{}", c.id, c.status)))
        .map(|c| format!("{}: {}", c.id, c.message))
        .collect();
    assert!(
        unexpected.is_empty() && missing.is_empty(),
        "{name}: unexpected findings {unexpected:?}, missing findings {missing:?}\n{}",
        said.join("\n")
    );
    assert_eq!(
        report.checks.len(),
        CATALOGUE.len(),
        "{name}: every check ran"
    );
}

/// The one passing check the rendered goldens keep, to pin how a pass is rendered:
/// the first check of the catalogue since its first day.
const PASS_SHOWN: &str = "fingerprint.runs";

/// The report as JUnit and Markdown see it, made stable: declared variations pinned,
/// every text redacted *before* rendering (so escaping cannot hide a path from the
/// normaliser), and what those forms show but the normalised text leaves out made
/// constant: durations, the plugin's hash and the tool version. Of the checks
/// that passed only [`PASS_SHOWN`] is kept (the counts are of what is kept):
/// these goldens pin the renderers, and a new check that passes must not move them.
fn canonical(name: &str, run: &SampleRun) -> Report {
    let r = redactions(&run.report, &run.scratch);
    let mut report = pinned(name, &run.report);
    report
        .checks
        .retain(|c| c.status != report::Status::Pass || c.id == PASS_SHOWN);
    report.summary = report::Summary::from_checks(&report.checks, report.options.strict);
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
        // What the report itself declares unpinned (measurements of speed, a
        // margin near its bound) is held here as the snapshot text holds it:
        // not at all. Its call counts move with the host's load (a call that
        // timed out under load is made again alone).
        if let Some(why) = &check.unpinned {
            check.message = format!("[not pinned: {}]", r.apply(why));
        }
        for inv in &mut check.invocations {
            inv.duration_ms = 0.0;
            for text in inv.env.iter_mut().chain(inv.leftovers.iter_mut()) {
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
        snapshot_path => "../../snapshots",
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

/// `mounts-over-root` mounts only as root: without, its run is another one.
fn mounts_unusable() -> Option<String> {
    (!nix::unistd::Uid::effective().is_root())
        .then(|| "mounts-over-root mounts only as root; its snapshot is a root run's".into())
}

fn check_sample(name: &str) {
    let run = run_sample(name, samples::scale(name));
    assert_verdicts(name, &run.report);
    assert_snapshot(
        &format!("sample-{name}"),
        &format!("dhv-conform check sample-plugins/{name}: the normalised report"),
        &samples::compared_snapshot_text(name, &run),
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
        // Measured only where each call has a cgroup of its own (root, or a
        // delegated cgroup): the shape is the same for a harness without.
        keys.insert("checks[].invocations[].cpu_wait_ms".into());
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

/// `name => "sample"`, optionally `if <fn() -> Option<why not>>`; each runs at its
/// [`samples::scale`].
macro_rules! samples {
    ($($test:ident => $name:literal $(if $usable:ident)?),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                #[allow(unused_mut, unused_assignments)]
                let mut usable: fn() -> Option<String> = always_usable;
                $(usable = $usable;)?
                if let Some(why) = usable() {
                    util::skip(concat!("sample ", $name), &why);
                    return;
                }
                check_sample($name);
            }
        )*
    };
}

samples! {
    sample_reference => "reference",
    sample_bad_version => "bad-version",
    sample_blind_delete => "blind-delete",
    sample_busy_pool => "busy-pool",
    sample_bytes_out_of_range => "bytes-out-of-range",
    sample_check_then_mkdir => "check-then-mkdir",
    sample_crash_unsafe => "crash-unsafe",
    sample_glob_delete => "glob-delete",
    sample_labelled_dirs => "labelled-dirs",
    sample_ledger_drift => "ledger-drift",
    sample_ledger_quota => "ledger-quota",
    sample_realpath_delete => "realpath-delete",
    sample_crlf_shebang => "crlf-shebang",
    sample_eval_name => "eval-name",
    sample_fails_on_existing_dir => "fails-on-existing-dir",
    sample_fails_on_missing_dir => "fails-on-missing-dir",
    sample_hanging_create => "hanging-create",
    sample_ignores_sigterm => "ignores-sigterm",
    sample_leaked_child => "leaked-child",
    sample_logs_on_stdout => "logs-on-stdout",
    sample_loop_block => "loop-block" if loop_devices_unusable,
    sample_loop_ext4 => "loop-ext4" if loop_devices_unusable,
    sample_missing_shebang => "missing-shebang",
    sample_mkfs_on_reboot => "mkfs-on-reboot" if loop_devices_unusable,
    sample_mkfs_crash_window => "mkfs-crash-window" if loop_devices_unusable,
    sample_missing_version => "missing-version",
    sample_mounts_over_root => "mounts-over-root" if mounts_unusable,
    sample_name_as_path => "name-as-path",
    sample_needs_home => "needs-home",
    sample_needs_path => "needs-path",
    sample_non_semver_version => "non-semver-version",
    sample_nonexistent_path => "nonexistent-path",
    sample_not_executable => "not-executable",
    sample_null_version => "null-version",
    sample_racy_concurrency => "racy-concurrency",
    sample_realtime_signal => "realtime-signal",
    sample_lies_about_bytes => "lies-about-bytes",
    sample_relative_path => "relative-path",
    sample_rmdir_delete => "rmdir-delete",
    sample_setsid_daemon => "setsid-daemon",
    sample_shared_path => "shared-path",
    sample_side_file => "side-file",
    sample_slow_fingerprint => "slow-fingerprint",
    sample_slow_start => "slow-start",
    sample_string_bytes => "string-bytes",
    sample_text_error => "text-error",
    sample_tmp_log => "tmp-log",
    sample_writes_cwd => "writes-cwd",
    sample_wipes_on_update => "wipes-on-update",
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

/// The declarations stay true: every `# may:` line names a real check with a
/// status other than pass; a rendered sample has none (JUnit and Markdown count
/// statuses, so their samples may vary in messages only); and each check's own
/// declaration is a reason, worded as the others.
#[test]
fn declared_variations_are_well_formed() {
    let ids: BTreeSet<&str> = CATALOGUE.iter().map(|c| c.id).collect();
    let mut any = false;
    for name in samples::all() {
        for (id, status) in may(&name) {
            any = true;
            assert!(
                ids.contains(id.as_str()),
                "{name}: `# may:` names no check {id}"
            );
            assert_ne!(status, report::Status::Pass, "{name}: `# may: {id} pass`");
            assert!(
                !RENDERED.contains(&name.as_str()),
                "{name}: rendered, yet its statuses vary"
            );
        }
    }
    assert!(any, "no sample has a `# may:` line any more");
    let declared: Vec<_> = CATALOGUE
        .iter()
        .filter_map(|c| Some((c.id, c.varies?)))
        .collect();
    assert!(!declared.is_empty());
    for (id, why) in declared {
        assert!(
            why.len() > 20 && !why.ends_with('.') && !why.contains(']'),
            "{id}: `varies` is a clause saying why, without a full stop or `]`: {why:?}"
        );
    }
}

/// The pinning itself: a check that declares variance loses its message, a
/// `# may:` check its status too, a passing check is only counted, and nothing
/// else in the text changes.
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
        unpinned: None,
        needs: None,
        phase: None,
    };
    let report = Report::new(
        "nomad-1.10",
        PluginInfo::default(),
        RunOptions::default(),
        vec![
            check(
                "concurrency.create",
                Level::Must,
                Status::Fail,
                "3 of 8 lost",
            ),
            check("delete.idempotent", Level::Must, Status::Fail, "exit 1"),
            // Passed this time; `# may: concurrency.same-volume warn` in racy-concurrency.
            check(
                "concurrency.same-volume",
                Level::Should,
                Status::Pass,
                "one path",
            ),
            check("create.succeeds", Level::Must, Status::Pass, "exit 0"),
        ],
        Vec::new(),
    );
    let run = SampleRun {
        json: serde_json::Value::Null,
        report,
        scratch: "/nowhere".to_owned(),
    };
    let text = snapshot_text("racy-concurrency", &run);
    let body: Vec<&str> = text.split_once("\n\n").unwrap().1.lines().collect();
    assert_eq!(body.len(), 3, "{text}");
    assert!(
        body[0].starts_with("concurrency.create must fail: [VARIES: names which"),
        "{text}"
    );
    assert!(
        body[1].starts_with("concurrency.same-volume should [VARIES]: [VARIES: names which"),
        "{text}"
    );
    assert_eq!(body[2], "delete.idempotent must fail: exit 1", "{text}");
    assert!(text.contains("\npassed: 1 of 4 checks"), "{text}");
    // The same run where the race showed: the same text.
    let mut raced = run.report.clone();
    raced.checks[2].status = Status::Warn;
    raced.checks[2].message = "two paths".into();
    let raced = SampleRun {
        report: raced,
        ..run
    };
    assert_eq!(snapshot_text("racy-concurrency", &raced), text);
}

/// The README's example of a snapshot ("Snapshots") is a stored one, word for word.
#[test]
fn the_readme_shows_a_stored_snapshot() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let body = samples::stored_snapshot("setsid-daemon");
    assert!(
        readme.contains(&format!("```text\n{body}\n```\n")),
        "README.md's example snapshot is not snapshots/sample-setsid-daemon.snap: copy it from there"
    );
}
