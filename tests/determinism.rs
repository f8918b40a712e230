//! Snapshots are deterministic: the same plugin gets the same normalised
//! report every run, on an idle machine and with the CPUs oversubscribed by a
//! load generator (twice as many busy threads as cores), because timing is
//! judged on calls made alone and every verdict rests on calls whose number
//! does not depend on the machine. Longer sweeps: `scripts/determinism.sh`.

mod util;

use std::path::{Path, PathBuf};

use std::time::Duration;

use dhv_conform::report::{self, Redactions, Report};

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins")
}

/// One run of `check SAMPLE`, its report normalised as snapshots are.
fn normalised_run(sample: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let tmp = std::fs::canonicalize(scratch.path()).unwrap();
    let out = assert_cmd::Command::cargo_bin("dhv-conform")
        .unwrap()
        .args([
            "check",
            samples_dir().join(sample).to_str().unwrap(),
            "-q",
            "--json",
            "-",
        ])
        .env("TMPDIR", &tmp)
        .timeout(Duration::from_secs(240))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let json = &text[text.find('{').unwrap_or(0)..];
    let report: Report = serde_json::from_str(json).unwrap_or_else(|e| {
        panic!(
            "{sample}: no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let redactions = Redactions::for_report(&report)
        .path(&tmp.to_string_lossy(), "[TMP]")
        .path(&samples_dir().to_string_lossy(), "[SAMPLES]");
    report::normalise(&report, &redactions)
}

/// The same report `runs` times in a row.
fn assert_stable(sample: &str, runs: usize, how: &str) {
    let first = normalised_run(sample);
    for i in 1..runs {
        let again = normalised_run(sample);
        assert!(
            again == first,
            "{sample}, {how}: run {} differs from run 1:\n{}",
            i + 1,
            report::diff(&first, &again, "run 1", "this run")
        );
    }
}

/// The samples whose report must not move; a sample whose fault is itself a
/// race is left out (declared in tests/reports.rs, `VARIES`).
const STABLE: &[&str] = &["reference", "rmdir-delete", "busy-pool"];

#[test]
fn reports_are_identical_run_after_run_idle_and_loaded() {
    for sample in STABLE {
        assert_stable(sample, 2, "idle");
    }
    let _load = util::Load::start(Duration::from_secs(180));
    for sample in STABLE {
        assert_stable(sample, 2, "CPUs oversubscribed twice over");
    }
}
