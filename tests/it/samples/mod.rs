//! What the sample tests share: running a sample plugin through the binary, and
//! the snapshot form of its report with every declared source of run-to-run
//! variation pinned: a check's own declaration (`CheckSpec::varies`, [`varies`])
//! and a sample's `# may:` lines ([`may`]). `reports.rs` pins that form per sample;
//! `determinism_samples.rs` proves it is the same on every run, idle or loaded.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::report::{self, Redactions, Report};

use crate::util;

/// The timeout scale a sample runs at: 1, except for the samples that hang until
/// the create limit kills them: 0.2 makes that 12 s instead of 60 s, while the
/// fingerprint limit (200 ms) keeps room for eight concurrent fingerprints on a
/// loaded machine (at 0.05 it was 50 ms, and loaded runs came within 5 ms of it).
pub fn scale(name: &str) -> &'static str {
    match name {
        "hanging-create" | "ignores-sigterm" => "0.2",
        _ => "1",
    }
}

pub fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins")
}

/// `id:status` for every `# <tag>: <check-id> <status>` line of a sample's header.
pub fn header(name: &str, tag: &str) -> BTreeSet<String> {
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
pub struct SampleRun {
    pub report: Report,
    pub json: serde_json::Value,
    /// The run's TMPDIR, removed by now; its name appears in paths in the report.
    pub scratch: String,
}

/// Runs `dhv-conform check` on a sample with TMPDIR set to a scratch dir, and proves
/// the run left no temp file and no process behind.
pub fn run_sample(name: &str, scale: &str) -> SampleRun {
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
    remove_node_logs(&tmp.path().to_string_lossy());
    crate::mounts_over_root::remove_outside_as_made(tmp.path());
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

/// Removes what `tmp-log` left in the node's `/tmp` in the run whose TMPDIR is
/// `scratch` (its fault, which the run reports): its logs name the volume they
/// made, under `scratch`, so another run's are never touched.
pub fn remove_node_logs(scratch: &str) {
    let Ok(dir) = std::fs::read_dir("/tmp") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("tmp-log-mkfs.") && name.ends_with(".log")) {
            continue;
        }
        if std::fs::read_to_string(entry.path()).is_ok_and(|t| t.contains(scratch)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The one set of redactions for a sample's report: the normaliser's own rules and the
/// report's paths, plus this run's scratch dir and the samples dir (which plugins see as
/// DHV_PLUGIN_DIR).
pub fn redactions(report: &Report, scratch: &str) -> Redactions {
    Redactions::for_report(report)
        .path(scratch, "[TMP]")
        .path(&samples_dir().to_string_lossy(), "[SAMPLES]")
}

/// Why a check's message can differ between runs of one plugin: its
/// declaration in the catalogue (`CheckSpec::varies`), the one place such
/// variance is declared, for `check --snapshot` and for these tests alike.
pub fn varies(id: &str) -> Option<&'static str> {
    dhv_conform::conformance::catalogue::find(id).and_then(|c| c.varies)
}

/// The checks of a sample whose status can differ between runs, with the status
/// it has when it does not pass: its `# may: <check-id> <status>` lines. The
/// fault is a race the sample means, not the check's wording, so it is declared
/// on the sample, not on the check.
pub fn may(name: &str) -> BTreeMap<String, report::Status> {
    header(name, "may")
        .into_iter()
        .map(|line| {
            let (id, status) = line.split_once(':').expect("`# may: <id> <status>`");
            let status = serde_json::from_value(serde_json::Value::from(status))
                .unwrap_or_else(|e| panic!("{name}: `# may: {id} {status}`: {e}"));
            (id.to_owned(), status)
        })
        .collect()
}

/// What a `# may:` check's message becomes when its check declares no variance.
const STATUS_VARIES: &str = "its status differs between runs (the sample's `# may:` line)";

/// The report with every declared variation pinned: a `# may:` check takes
/// the status it may have, so that it is listed either way (the snapshot text
/// then shows `[VARIES]` for it, as the model has no word for "either"), and
/// the message of each check that fails or warns and declares variance (or is
/// a `# may:` check) is the reason, as `check --snapshot` shows it.
pub fn pinned(name: &str, report: &Report) -> Report {
    let may = may(name);
    let mut pinned = report.clone();
    for check in &mut pinned.checks {
        let either = may.get(&check.id);
        if let Some(status) = either {
            check.status = *status;
        }
        let why = match either {
            Some(_) => Some(varies(&check.id).unwrap_or(STATUS_VARIES)),
            None => varies(&check.id),
        };
        let finding = matches!(check.status, report::Status::Fail | report::Status::Warn);
        if let Some(why) = why.filter(|_| finding) {
            check.message = format!("[VARIES: {why}]");
        }
    }
    pinned
}

/// The snapshot text of a sample: its normalised report, declared variations pinned.
pub fn snapshot_text(name: &str, run: &SampleRun) -> String {
    let may = may(name);
    let pinned = pinned(name, &run.report);
    let text = report::normalise(&pinned, &redactions(&run.report, &run.scratch), varies);
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let status_varies = pinned.checks.iter().find(|c| {
            may.contains_key(&c.id)
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

/// Samples whose fault is itself a race, so that no two runs need see it the same
/// way even with every declared variation pinned: they are left out of the
/// determinism sweep (`determinism_samples.rs`), each with the reason. Everything else,
/// including every sample not listed, must give byte-identical snapshots on an
/// idle and on a loaded machine. The list may only shrink, and it is empty: every
/// race-born variation is pinned instead (on the check, `CheckSpec::varies`, or by
/// the sample's `# may:` line), so the rest of
/// those samples' snapshots is still held to the byte. `determinism_samples.rs` holds it empty.
pub const RACES: &[(&str, &str)] = &[];

/// The snapshot text of a sample as it is compared with the stored one, as
/// `check --snapshot` compares: the stored text itself when it holds the run's
/// results (a new check that passes, or a count or harness line that moved, is
/// no change: see `report::same_results`), else the run's text, a check not
/// pinned on either side (a measurement near its bound) given its stored block.
pub fn compared_snapshot_text(name: &str, run: &SampleRun) -> String {
    let text = snapshot_text(name, run);
    if !stored_snapshot_path(name).exists() {
        return text;
    }
    let stored = stored_snapshot(name);
    match dhv_conform::report::same_results(&stored, &text) {
        true => stored,
        false => dhv_conform::report::pin_as_stored(&stored, &text),
    }
}

fn stored_snapshot_path(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("snapshots")
        .join(format!("sample-{name}.snap"))
}

/// The snapshot of a sample as stored in `snapshots/` (its body, after insta's header).
pub fn stored_snapshot(name: &str) -> String {
    let path = stored_snapshot_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let body = text
        .strip_prefix("---\n")
        .and_then(|t| t.split_once("\n---\n"))
        .map(|(_, body)| body)
        .unwrap_or_else(|| panic!("{}: no insta header", path.display()));
    body.trim_end().to_owned()
}

/// Every sample plugin's name.
pub fn all() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(samples_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".md") && !n.starts_with('.'))
        .collect();
    names.sort();
    names
}
