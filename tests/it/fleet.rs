//! `dhv-conform check --node-name` and `dhv-conform report merge` end to end through the
//! binary: real sample reports from several nodes and builds merged into one fleet
//! report, the exit codes, and every kind of unusable input.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::util::Scratch;
use assert_cmd::Command;
use dhv_conform::report::fleet::{FLEET_SCHEMA, FleetReport, from_fleet_json};
use dhv_conform::report::{
    self, CheckResult, Level, NodeInfo, PluginInfo, Report, RunOptions, Status,
};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-plugins")
        .join(name)
}

fn bin(scratch: &Scratch) -> Command {
    let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
    // Whatever a check run leaves in its temp dir stays inside the scratch dir.
    cmd.env("TMPDIR", scratch.path())
        .timeout(std::time::Duration::from_secs(120));
    cmd
}

/// Runs `check PLUGIN --node-name NODE --json OUT`, returning OUT.
fn check(scratch: &Scratch, plugin: &Path, node: &str, out: &Path) -> PathBuf {
    let assert = bin(scratch)
        .arg("check")
        .arg(plugin)
        .args(["--quiet", "--node-name", node, "--json"])
        .arg(out)
        .assert();
    let code = assert.get_output().status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "check {}: {code:?}",
        plugin.display()
    );
    out.to_owned()
}

/// `report merge ARGS…`: exit code, stdout, stderr.
fn merge(scratch: &Scratch, args: &[&Path], flags: &[&str]) -> (Option<i32>, String, String) {
    let out = bin(scratch)
        .args(["report", "merge"])
        .args(args)
        .args(flags)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// A small synthetic report of one node, for the input-error tests.
fn synthetic(node: &str, status: Status) -> Report {
    let check = CheckResult {
        id: "create.succeeds".into(),
        group: "create".into(),
        level: Level::Must,
        status,
        message: String::new(),
        duration_ms: 1,
        invocations: vec![],
        unpinned: None,
        needs: None,
        phase: None,
    };
    let plugin = PluginInfo {
        path: "/opt/plugins/lvm".into(),
        sha256: Some("ab".repeat(32)),
        ..PluginInfo::default()
    };
    let mut report = Report::new(
        "nomad-1.10",
        plugin,
        RunOptions::default(),
        vec![check],
        vec![],
    );
    report.node = Some(NodeInfo { name: node.into() });
    report
}

fn write(path: &Path, report: &Report) -> PathBuf {
    fs::write(path, report::to_json(report)).unwrap();
    path.to_owned()
}

/// Four nodes' reports in `scratch/reports`: the reference plugin on node-1 and node-2
/// (one build), another build of it on node-3, and `needs-home` (non-conformant) on
/// node-4; plus a Markdown file the merge must ignore.
fn sample_reports(scratch: &Scratch) -> PathBuf {
    let reports = scratch.path().join("reports");
    fs::create_dir(&reports).unwrap();
    // Another build of the reference plugin: same version, another hash.
    let rebuilt_dir = scratch.path().join("rebuilt");
    fs::create_dir(&rebuilt_dir).unwrap();
    let text = fs::read_to_string(sample("reference")).unwrap();
    let rebuilt = rebuilt_dir.join("reference");
    fs::write(&rebuilt, format!("{text}\n# rebuilt\n")).unwrap();
    fs::set_permissions(&rebuilt, fs::Permissions::from_mode(0o755)).unwrap();
    let reference = sample("reference");
    let needs_home = sample("needs-home");
    check(scratch, &reference, "node-1", &reports.join("n1.json"));
    check(scratch, &reference, "node-2", &reports.join("n2.json"));
    check(scratch, &rebuilt, "node-3", &reports.join("n3.json"));
    check(scratch, &needs_home, "node-4", &reports.join("n4.json"));
    fs::write(reports.join("n4.md"), "not a report").unwrap();
    let recorded = report::from_json(&fs::read_to_string(reports.join("n3.json")).unwrap());
    assert_eq!(recorded.unwrap().node.unwrap().name, "node-3");
    reports
}

#[test]
fn samples_from_several_nodes_and_builds_merge_into_one_matrix() {
    let scratch = Scratch::new();
    let reports = sample_reports(&scratch);
    let (json, md, junit) = (
        scratch.path().join("fleet.json"),
        scratch.path().join("fleet.md"),
        scratch.path().join("fleet.xml"),
    );
    let flags = [
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = merge(&scratch, &[&reports], &flags);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stdout, "", "with outputs named, nothing goes to stdout");

    let text = fs::read_to_string(&json).unwrap();
    documented(&serde_json::from_str(&text).unwrap(), "");
    let fleet: FleetReport = from_fleet_json(&text).unwrap();
    assert_eq!(fleet.schema, FLEET_SCHEMA);
    assert_eq!((fleet.summary.nodes, fleet.summary.non_conformant), (4, 1));
    let first = &fleet.nodes[0];
    assert_eq!(
        (first.name.as_str(), first.plugin.as_str()),
        ("node-4", "needs-home")
    );
    let failing: Vec<&str> = first.failing().map(|p| p.id.as_str()).collect();
    assert!(failing.contains(&"create.succeeds"), "{failing:?}");
    let reproduce = first
        .failing()
        .find_map(|p| p.reproduce.as_deref())
        .unwrap();
    assert!(
        reproduce.starts_with("env -i DHV_OPERATION="),
        "{reproduce}"
    );
    let builds: Vec<(&str, usize, bool)> = fleet
        .builds
        .iter()
        .map(|b| (b.plugin.as_str(), b.nodes, b.most_common))
        .collect();
    assert_eq!(
        builds,
        [
            ("needs-home", 1, true),
            ("reference", 2, true),
            ("reference", 1, false)
        ]
    );
    let node3 = fleet.nodes.iter().find(|n| n.name == "node-3").unwrap();
    assert_eq!(node3.build, 2, "the rebuilt plugin is the odd build");
    for check in &fleet.checks {
        let c = &check.counts;
        assert_eq!(
            c.pass + c.fail + c.warn + c.skip + c.info + c.absent,
            4,
            "{}",
            check.id
        );
    }

    let md = fs::read_to_string(&md).unwrap();
    assert!(
        md.starts_with("**dhv-conform fleet**: **non-conformant** — 1 of 4"),
        "{md}"
    );
    assert!(md.contains("| `node-4` | `needs-home` |"), "{md}");
    assert!(
        md.contains("⚠️ not the most common build of `reference`"),
        "{md}"
    );
    let junit = fs::read_to_string(&junit).unwrap();
    let parsed = quick_junit::Report::deserialize_from_str(&junit).unwrap();
    assert_eq!(parsed.test_suites.len(), 4);
    assert_eq!(parsed.test_suites[0].name.as_str(), "needs-home on node-4");
}

/// Every key of the fleet JSON has a row in docs/fleet-schema.md.
fn documented(value: &serde_json::Value, path: &str) {
    let docs =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet-schema.md"))
            .unwrap();
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                // `tool` and `counts` document their keys inline, in their own row.
                let inline = ["tool", "checks[].counts"].contains(&path);
                assert!(
                    inline || docs.contains(&format!("| `{key}` |")),
                    "docs/fleet-schema.md does not document `{path}.{key}`"
                );
                documented(
                    child,
                    &format!("{path}{}{key}", if path.is_empty() { "" } else { "." }),
                );
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                documented(item, &format!("{path}[]"));
            }
        }
        _ => {}
    }
}

#[test]
fn a_conformant_fleet_exits_0_and_prints_markdown_without_outputs() {
    let scratch = Scratch::new();
    let a = write(
        &scratch.path().join("a.json"),
        &synthetic("a", Status::Pass),
    );
    let b = write(
        &scratch.path().join("b.json"),
        &synthetic("b", Status::Pass),
    );
    let (code, stdout, stderr) = merge(&scratch, &[&a, &b], &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("**dhv-conform fleet**: **conformant** — 0 of 2"),
        "{stdout}"
    );
    assert!(stdout.contains("| Check | a | b |"), "{stdout}");
}

#[test]
fn check_records_the_host_name_by_default() {
    let scratch = Scratch::new();
    let out = scratch.path().join("r.json");
    let assert = bin(&scratch)
        .args(["check", "mkdir", "fingerprint.runs", "--quiet", "--json"])
        .arg(&out)
        .assert();
    assert_eq!(assert.get_output().status.code(), Some(0));
    let host = nix_hostname();
    let report = report::from_json(&fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report.node.map(|n| n.name), Some(host));
}

fn nix_hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim_end()
        .to_owned()
}

/// Each unusable input exits 2 with one line naming it, and writes no output.
#[test]
fn unusable_inputs_exit_2_naming_the_file() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    let good = write(&dir.join("good.json"), &synthetic("a", Status::Fail));
    let corrupt = dir.join("corrupt.json");
    let text = report::to_json(&synthetic("b", Status::Pass));
    fs::write(&corrupt, &text[..text.len() / 2]).unwrap();
    let foreign = dir.join("foreign.json");
    fs::write(
        &foreign,
        text.replace("dhv-conform/report/v1", "dhv-conform/fleet/v1"),
    )
    .unwrap();
    let twin = write(&dir.join("twin.json"), &synthetic("a", Status::Pass));
    let empty = dir.join("empty");
    fs::create_dir(&empty).unwrap();
    let missing = dir.join("missing.json");
    let out = dir.join("fleet.json");

    let cases: [(&[&Path], &str); 5] = [
        (
            &[&good, &corrupt],
            "corrupt.json: not a dhv-conform report: EOF while parsing",
        ),
        (
            &[&good, &foreign],
            "foreign.json: schema \"dhv-conform/fleet/v1\" is not dhv-conform/report/v1",
        ),
        (
            &[&good, &twin],
            "node \"a\" has two reports for plugin \"lvm\"",
        ),
        (
            &[&good, &empty],
            "empty: no *.json report in this directory",
        ),
        (&[&missing, &good], "cannot read"),
    ];
    for (inputs, want) in cases {
        let (code, stdout, stderr) = merge(&scratch, inputs, &["--json", out.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{inputs:?}: {stderr}");
        assert!(stderr.contains(want), "{inputs:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains("panicked"));
        assert_eq!(stdout, "");
        assert!(!out.exists(), "no output after an input error");
    }
    let (code, _, stderr) = merge(&scratch, &[&good, &twin], &[]);
    assert!(
        stderr.contains("good.json and ") && stderr.contains("twin.json"),
        "{stderr}"
    );
    assert_eq!(code, Some(2));
}
