//! `dhv-conform check` end to end through the binary: exit codes, fixtures
//! and the libtest-style selection of checks. The report files and colour
//! are in cli_check_reports.rs, the snapshot gate in snapshot_gate.rs.
//!
//! Every run gets a scratch TMPDIR, and every run is shown to leave nothing in it (no
//! temp dir, no process). Files a test asks for (reports, snapshots) go to a separate
//! output dir. Exit code 4 (the harness itself failed) is not tested: nothing a test can
//! do from outside breaks the harness without breaking the machine it runs on.

use crate::util;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use dhv_conform::conformance::CATALOGUE;
use dhv_conform::report::Report;

use crate::util::check::{check, find, fixture};
use crate::util::{repo, sample};

// ---- exit codes ------------------------------------------------------------------

#[test]
fn reference_is_conformant_and_exits_0() {
    let out = check([sample("reference").as_str(), "-q"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.ends_with("verdict: conformant\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_failed_must_exits_1() {
    let out = check([sample("fails-on-missing-dir").as_str(), "-q"]).run();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stdout.ends_with("verdict: NON-CONFORMANT\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_failed_should_exits_1_only_under_strict() {
    let plugin = sample("non-semver-version");
    let lenient = check([plugin.as_str(), "fingerprint.", "-q"]).run();
    assert_eq!(lenient.code, Some(0), "{}", lenient.stderr);
    assert!(lenient.stdout.contains("warnings: 1"), "{}", lenient.stdout);
    let strict = check([plugin.as_str(), "fingerprint.", "-q", "--strict"]).run();
    assert_eq!(strict.code, Some(1), "{}", strict.stderr);
    assert!(
        strict.stdout.ends_with("verdict: NON-CONFORMANT\n"),
        "{}",
        strict.stdout
    );
}

/// Usage errors exit 2 before any check runs (the helper proves no temp dir was made).
#[test]
fn usage_errors_exit_2() {
    let reference = sample("reference");
    let dir = repo().join("sample-plugins").to_string_lossy().into_owned();
    let missing = repo().join("no-such-plugin").to_string_lossy().into_owned();
    let cases: &[(&[&str], &str)] = &[
        (&[&reference, "--bogus"], "unexpected argument '--bogus'"),
        (&[&missing], "no-such-plugin: No such file or directory"),
        (&[&dir], "is a directory, not an executable"),
        (
            &[&reference, "--timeout-scale", "0"],
            "--timeout-scale must be a number greater than 0 and at most 100, not 0",
        ),
        (
            &[&reference, "--timeout-scale", "NaN"],
            "--timeout-scale must be a number greater than 0 and at most 100, not NaN",
        ),
        (
            &[&reference, "--timeout-scale", "1e300"],
            "--timeout-scale must be a number greater than 0 and at most 100, not 1e300",
        ),
        (
            &[&reference, "--timeout-scale", "inf"],
            "at most 100, not inf",
        ),
        (&[&reference, "--slow-after", "0"], "--slow-after must be"),
        (&[&reference, "--bless"], "--snapshot <FILE>"),
        (
            &[&reference, "--color", "sometimes"],
            "--color must be auto, always or never",
        ),
        (
            &[&reference, "--format", "xml"],
            "--format must be pretty, terse or json",
        ),
        (
            &[&reference, "--test-threads", "0"],
            "--test-threads must be at least 1",
        ),
    ];
    for (args, says) in cases {
        let out = check(*args).run();
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
}

// ---- fixtures --------------------------------------------------------------------

/// Every malformed fixture exits 2 with one line that names the file and, for syntax
/// errors, the line where the parser gave up.
#[test]
fn bad_fixtures_exit_2_with_one_line_naming_the_file() {
    let cases: &[(&str, &str)] = &[
        ("bad/truncated.json", "invalid JSON at line 6 column 0"),
        ("bad/syntax-error.hcl", "invalid HCL at line 6 column 15"),
        (
            "bad/csi-type.hcl",
            "type: expected \"host\" (a dynamic host volume), got \"csi\"",
        ),
        (
            "bad/number-parameter.json",
            "parameters.replicas: parameter values must be strings",
        ),
        (
            "bad/number-parameter.hcl",
            "parameters.replicas: parameter values must be strings",
        ),
        ("bad/does-not-exist.json", "cannot read fixture"),
    ];
    // Files only: bad/hostile/ has its own test (tests/it/hostile_fixtures.rs).
    let on_disk: BTreeSet<String> = fs::read_dir(repo().join("fixtures/bad"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| format!("bad/{}", e.file_name().to_string_lossy()))
        .collect();
    let tested: BTreeSet<String> = cases.iter().map(|(f, _)| f.to_string()).collect();
    let untested: Vec<_> = on_disk.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "bad fixtures without a case: {untested:?}"
    );

    for (name, says) in cases {
        let path = fixture(name);
        let out = check([sample("reference").as_str(), "--fixture", path.as_str()]).run();
        assert_eq!(out.code, Some(2), "{name}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {}", out.stderr);
        let line = out.stderr.trim_end();
        assert!(line.starts_with("dhv-conform: "), "{name}: {line}");
        assert!(
            line.contains(&path),
            "{name}: does not name the file: {line}"
        );
        assert!(line.contains(says), "{name}: {line}");
        assert!(out.stdout.is_empty(), "{name}: {}", out.stdout);
    }
}

/// `fixtures/default.json` spells out the defaults: loading it gives exactly the
/// request a run without a fixture starts from.
#[test]
fn default_fixture_spells_out_the_defaults() {
    use dhv_conform::conformance::{RequestTemplate, fixture};
    let loaded = fixture::load(Path::new(&fixture("default.json"))).unwrap();
    assert_eq!(loaded.template, RequestTemplate::default());
}

/// The environment of the create calls behind a check.
fn create_env(report: &Report, id: &str) -> Vec<String> {
    find(report, id)
        .invocations
        .iter()
        .find(|i| i.operation == "create")
        .unwrap_or_else(|| panic!("{id} made no create call"))
        .env
        .clone()
}

/// A Nomad volume spec in HCL passes with the reference plugin, and what it sets
/// reaches the plugin.
#[test]
fn hcl_volume_spec_reaches_the_plugin() {
    let spec = fixture("database.hcl");
    let out = check([
        sample("reference").as_str(),
        "--fixture",
        spec.as_str(),
        "--json",
        "-",
        "-q",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    assert_eq!(report.options.fixture.as_deref(), Some(spec.as_str()));
    // create.succeeds is judged on a shared probe whose calls the report does not carry;
    // create.idempotent creates from the same request with calls of its own.
    let env = create_env(&report, "create.idempotent");
    // Every volume of a run has a name of its own, derived from the spec's:
    // `database`, `database-1`, …
    let name = env
        .iter()
        .find_map(|e| e.strip_prefix("DHV_VOLUME_NAME="))
        .unwrap();
    let suffix = name.strip_prefix("database").unwrap_or("?");
    assert!(
        suffix.is_empty()
            || suffix
                .strip_prefix('-')
                .is_some_and(|n| n.parse::<u32>().is_ok()),
        "{name}"
    );
    for var in [
        "DHV_NAMESPACE=prod",
        "DHV_NODE_POOL=default",
        "DHV_CAPACITY_MIN_BYTES=10737418240",
        "DHV_CAPACITY_MAX_BYTES=21474836480",
    ] {
        assert!(env.iter().any(|e| e == var), "{var} not in {env:#?}");
    }
    let params = env
        .iter()
        .find_map(|e| e.strip_prefix("DHV_PARAMETERS="))
        .unwrap();
    let params: serde_json::Value = serde_json::from_str(params).unwrap();
    assert_eq!(
        params,
        serde_json::json!({"mode": "0700", "owner": "postgres", "tier": "ssd"})
    );
}

/// Parameter values full of shell and markup syntax reach the plugin byte for byte, and
/// nothing runs from them.
#[test]
fn hostile_parameters_reach_the_plugin_verbatim() {
    let path = fixture("hostile-parameters.json");
    let cwd = util::Scratch::new();
    let mut run = check([
        sample("reference").as_str(),
        "--fixture",
        path.as_str(),
        "--json",
        "-",
        "-q",
    ]);
    run.cmd.current_dir(cwd.path());
    let out = run.run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    let env = create_env(&report, "create.idempotent");
    let sent: serde_json::Value = serde_json::from_str(
        env.iter()
            .find_map(|e| e.strip_prefix("DHV_PARAMETERS="))
            .unwrap(),
    )
    .unwrap();
    let fixture: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(sent, fixture["parameters"]);
    let ran: Vec<_> = fs::read_dir(cwd.path()).unwrap().flatten().collect();
    assert!(ran.is_empty(), "something ran from the parameters: {ran:?}");
}

// ---- selecting checks -------------------------------------------------------------

/// `--exact ID` runs that check alone. (The shared create probe runs too, but only the
/// selected check is reported.)
#[test]
fn exact_selects_one_check() {
    let out = check([
        sample("reference").as_str(),
        "--exact",
        "create.idempotent",
        "--json",
        "-",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.ids(), BTreeSet::from(["create.idempotent".to_owned()]));
    assert!(out.report().options.filtered);
    assert!(out.stderr.contains("running 1 check"), "{}", out.stderr);
}

#[test]
fn list_prints_the_whole_catalogue() {
    let out = check([sample("reference").as_str(), "--list"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let listed: BTreeSet<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let catalogue: BTreeSet<&str> = CATALOGUE.iter().map(|c| c.id).collect();
    assert_eq!(listed, catalogue, "{}", out.stdout);
}

/// FILTER keeps ids containing it; each `--skip` drops ids containing it.
#[test]
fn filter_and_skip_select_by_substring() {
    let out = check([
        sample("reference").as_str(),
        "fingerprint.",
        "--skip",
        "stable",
        "--skip",
        "version",
        "--json",
        "-",
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let want: BTreeSet<String> = CATALOGUE
        .iter()
        .map(|c| c.id)
        .filter(|id| id.contains("fingerprint.") && !id.contains("stable"))
        .filter(|id| !id.contains("version"))
        .map(str::to_owned)
        .collect();
    assert_eq!(want.len(), 4, "{want:?}");
    assert_eq!(out.ids(), want);
}
