//! The Nomad job that runs the harness across a fleet
//! (examples/nomad/conformance.nomad.hcl): what it asks Nomad for, and that its
//! script checks every plugin in the dir.

use crate::util;

use std::fs;
use std::time::Duration;

use assert_cmd::Command;

use crate::util::{bin, repo, sample};

/// How long any one run of the binary may take before the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// The fleet job: examples/nomad/conformance.nomad.hcl.
// ---------------------------------------------------------------------------

fn job_file() -> hcl::Body {
    let text = fs::read_to_string(repo().join("examples/nomad/conformance.nomad.hcl")).unwrap();
    hcl::from_str::<hcl::Body>(&text).expect("the job file is valid HCL")
}

fn block<'a>(body: &'a hcl::Body, id: &str) -> &'a hcl::Block {
    body.blocks()
        .find(|b| b.identifier() == id)
        .unwrap_or_else(|| panic!("no {id} block"))
}

fn attr<'a>(body: &'a hcl::Body, key: &str) -> &'a hcl::Expression {
    body.attributes()
        .find(|a| a.key() == key)
        .map(|a| a.expr())
        .unwrap_or_else(|| panic!("no {key} attribute"))
}

#[test]
fn the_nomad_job_is_a_sysbatch_job_on_raw_exec() {
    let body = job_file();
    let job = block(&body, "job");
    assert_eq!(job.labels()[0].as_str(), "dhv-conformance");
    assert_eq!(attr(job.body(), "type"), &hcl::Expression::from("sysbatch"));
    let task = block(block(job.body(), "group").body(), "task");
    assert_eq!(
        attr(task.body(), "driver"),
        &hcl::Expression::from("raw_exec")
    );
}

/// The wrapper script the job's template renders (it uses no variables).
fn rendered_script() -> String {
    use hcl::eval::Evaluate;
    let body = job_file();
    let task = block(block(block(&body, "job").body(), "group").body(), "task");
    let template = block(task.body(), "template");
    match attr(template.body(), "data")
        .evaluate(&hcl::eval::Context::new())
        .expect("the script needs no variables")
    {
        hcl::Value::String(s) => s,
        other => panic!("template data is not a string: {other:?}"),
    }
}

/// The wrapper script the job renders, run by hand against a plugin dir with a
/// conformant and a broken plugin: one verdict line and four files per plugin
/// (named after the node), the JSON copied to the collect dir, the worst exit code,
/// and the collected reports merge into one fleet report.
#[test]
fn the_nomad_job_script_checks_every_plugin_in_the_dir() {
    let script = rendered_script();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");

    let area = util::Scratch::new();
    let plugins = area.path().join("plugins");
    let (tmp, cwd) = (area.path().join("tmp"), area.path().join("cwd"));
    for dir in [&plugins, &tmp, &cwd] {
        fs::create_dir(dir).unwrap();
    }
    for name in ["reference", "logs-on-stdout"] {
        fs::copy(sample(name), plugins.join(name)).unwrap();
    }
    fs::write(plugins.join("README"), "not a plugin\n").unwrap();
    let wrapper = area.plugin("check-plugins.sh", &script);
    let reports = area.path().join("alloc/data/dhv-conform");
    let collected = area.path().join("collected");
    fs::create_dir(&collected).unwrap();
    let out = Command::new("/bin/sh")
        .arg(&wrapper)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("DHV_CONFORM", bin())
        // What Nomad leaves when the node has no such meta.
        .env("PLUGIN_DIR_META", "${meta.dhv_plugin_dir}")
        .env("PLUGIN_DIR_DEFAULT", &plugins)
        .env("REPORT_DIR", &reports)
        .env("NODE_NAME", "client-1")
        .env("COLLECT_DIR", &collected)
        .env("TMPDIR", &tmp)
        .current_dir(&cwd)
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("reference: conformant\n"), "{stdout}");
    assert!(
        stdout.contains("logs-on-stdout: NOT conformant\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("README"), "{stdout}");
    for name in ["reference", "logs-on-stdout"] {
        for ext in ["json", "junit.xml", "md", "log"] {
            let file = reports.join(format!("client-1.{name}.{ext}"));
            assert!(file.is_file(), "missing {}", file.display());
        }
        let report: serde_json::Value = serde_json::from_slice(
            &fs::read(collected.join(format!("client-1.{name}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(report["schema"], "dhv-conform/report/v1");
        assert_eq!(report["node"]["name"], "client-1");
    }
    let merged = Command::new(bin())
        .args(["report", "merge"])
        .arg(&reports)
        .args(["--json", "-"])
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    assert_eq!(merged.status.code(), Some(1));
    let fleet: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    assert_eq!(fleet["schema"], "dhv-conform/fleet/v1");
    assert_eq!(fleet["summary"]["nodes"], 2);
    assert_eq!(fleet["nodes"][0]["name"], "client-1");
    assert_eq!(fleet["nodes"][0]["plugin"], "logs-on-stdout");
}
