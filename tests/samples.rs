//! Every sample plugin gets exactly the verdicts its header promises.
//!
//! Each sample's header has `# expect: <check-id> <fail|warn>` lines (the checks
//! it must not pass) and optional `# may: <check-id> <status>` lines (findings
//! that depend on where a kill lands). The test runs `dhv-conform check` on it
//! through the binary and compares; it also proves the run left no process and
//! no temp dir behind.

mod util;

use std::collections::BTreeSet;
use std::path::Path;

use assert_cmd::Command;

fn header(plugin: &Path, tag: &str) -> BTreeSet<String> {
    let text = String::from_utf8_lossy(&std::fs::read(plugin).unwrap()).into_owned();
    text.lines()
        .filter_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix(&format!("# {tag}: "))
                .map(str::to_string)
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(":"))
        .collect()
}

/// Runs the suite on a sample and returns `id:status` for every fail and warn.
fn findings(name: &str, scale: &str) -> BTreeSet<String> {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-plugins")
        .join(name);
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args([
            "check",
            plugin.to_str().unwrap(),
            "--json",
            "-",
            "-q",
            "--timeout-scale",
            scale,
        ])
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let got: BTreeSet<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail" || c["status"] == "warn")
        .map(|c| {
            format!(
                "{}:{}",
                c["id"].as_str().unwrap(),
                c["status"].as_str().unwrap()
            )
        })
        .collect();
    let code = out.status.code();
    let must_failed = got.iter().any(|f| f.ends_with(":fail"));
    assert_eq!(
        code,
        Some(if must_failed { 1 } else { 0 }),
        "{name}: exit code"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{name}: temp files left behind: {left:?}");
    let procs = util::processes_with_env_containing(&tmp.path().to_string_lossy());
    assert!(procs.is_empty(), "{name}: processes left behind: {procs:?}");
    got
}

fn assert_sample(name: &str, scale: &str) {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-plugins")
        .join(name);
    let expected = header(&plugin, "expect");
    let optional = header(&plugin, "may");
    let got = findings(name, scale);
    let unexpected: Vec<_> = got
        .difference(&expected)
        .filter(|f| !optional.contains(*f))
        .collect();
    let missing: Vec<_> = expected.difference(&got).collect();
    assert!(
        unexpected.is_empty() && missing.is_empty(),
        "{name}: unexpected findings {unexpected:?}, missing findings {missing:?}"
    );
}

macro_rules! samples {
    ($($test:ident => $name:literal $(at $scale:literal)?),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                #[allow(unused_mut, unused_assignments)]
                let mut scale = "1";
                $(scale = $scale;)?
                assert_sample($name, scale);
            }
        )*
    };
}

samples! {
    reference => "reference",
    bad_version => "bad-version",
    blind_delete => "blind-delete",
    bytes_out_of_range => "bytes-out-of-range",
    crash_unsafe => "crash-unsafe",
    crlf_shebang => "crlf-shebang",
    eval_name => "eval-name",
    fails_on_existing_dir => "fails-on-existing-dir",
    fails_on_missing_dir => "fails-on-missing-dir",
    hanging_create => "hanging-create" at "0.05",
    ignores_sigterm => "ignores-sigterm" at "0.05",
    leaked_child => "leaked-child",
    logs_on_stdout => "logs-on-stdout",
    missing_shebang => "missing-shebang",
    missing_version => "missing-version",
    name_as_path => "name-as-path",
    needs_home => "needs-home",
    needs_path => "needs-path",
    non_semver_version => "non-semver-version",
    nonexistent_path => "nonexistent-path",
    not_executable => "not-executable",
    null_version => "null-version",
    racy_concurrency => "racy-concurrency",
    relative_path => "relative-path",
    setsid_daemon => "setsid-daemon",
    shared_path => "shared-path",
    side_file => "side-file",
    slow_fingerprint => "slow-fingerprint",
    string_bytes => "string-bytes",
    text_error => "text-error",
    writes_cwd => "writes-cwd",
}

#[test]
fn every_sample_plugin_is_tested() {
    let listed = include_str!("samples.rs");
    for entry in
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins")).unwrap()
    {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") || name.starts_with('.') || name == "loop-ext4" {
            continue;
        }
        assert!(
            listed.contains(&format!("=> \"{name}\"")),
            "sample {name} has no test"
        );
    }
}
