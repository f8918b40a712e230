//! `dhv-conform.toml` through the binary: found beside the plugin or named by
//! `--config`, its skips visible in every report, its claims verified by the
//! `volume.*` checks, its mistakes a one-line exit 2.

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::Scratch;
use crate::util::check::{check, status_of};
use dhv_conform::report::Status;

/// A copy of a sample plugin in a dir of its own, with `config` as its
/// `dhv-conform.toml` (none when empty).
fn plugin_with_config(dir: &Scratch, sample: &str, config: &str) -> PathBuf {
    let plugin = dir.path().join(sample);
    fs::copy(util::sample(sample), &plugin).unwrap();
    if !config.is_empty() {
        fs::write(dir.path().join("dhv-conform.toml"), config).unwrap();
    }
    plugin
}

#[test]
fn a_config_beside_the_plugin_skips_with_its_reason_in_every_report() {
    let dir = Scratch::new();
    let plugin = plugin_with_config(
        &dir,
        "reference",
        "[skip]\n\"lifecycle.crash-create\" = \"our images need an fsck after a kill\"\n",
    );
    let junit = dir.path().join("junit.xml");
    let markdown = dir.path().join("summary.md");
    let out = check([
        plugin.as_os_str(),
        "--json".as_ref(),
        "-".as_ref(),
        "--junit".as_ref(),
        junit.as_os_str(),
        "--markdown".as_ref(),
        markdown.as_os_str(),
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    let (status, message) = status_of(&report, "lifecycle.crash-create");
    assert_eq!(status, Status::Skip);
    assert_eq!(
        message,
        "skipped by the config: our images need an fsck after a kill"
    );
    let config = report.config.expect("the report names the config");
    assert_eq!(
        config.path.as_deref().map(Path::new),
        Some(dir.path().join("dhv-conform.toml").as_path())
    );
    assert!(out.stderr.contains("(config "), "{}", out.stderr);
    for file in [&junit, &markdown] {
        let text = fs::read_to_string(file).unwrap();
        assert!(
            text.contains("our images need an fsck after a kill"),
            "{}: {text}",
            file.display()
        );
    }
}

#[test]
fn a_mistake_in_the_config_is_one_line_and_exit_2() {
    let dir = Scratch::new();
    let cases = [
        (
            "strict = true\nstrct = true\n",
            ":2: unknown field `strct`; did you mean `strict`?",
        ),
        (
            "[skip]\n\"create.idempotnt\" = \"flaky\"\n",
            ":2: [skip] names no check \"create.idempotnt\"; did you mean create.idempotent",
        ),
        (
            "[skip]\n\"create.idempotent\" = \"\"\n",
            ":2: [skip] \"create.idempotent\" needs a reason",
        ),
        (
            "[claims]\nattachment = \"block\"\n",
            ":2: unknown variant `block`",
        ),
    ];
    for (text, expected) in cases {
        let config = dir.path().join("bad.toml");
        fs::write(&config, text).unwrap();
        let out = check([
            util::sample("reference").as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
        ])
        .run();
        assert_eq!(out.code, Some(2), "{text}: {}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{text}: {}", out.stderr);
        assert!(lines[0].contains(expected), "{text}: {}", out.stderr);
        assert!(lines[0].contains("bad.toml"), "{}", out.stderr);
    }
    let missing = dir.path().join("none.toml");
    let out = check([
        util::sample("reference").as_ref(),
        "--config".as_ref(),
        missing.as_os_str(),
    ])
    .run();
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("none.toml"), "{}", out.stderr);
}

#[test]
fn several_requests_run_the_suite_for_each_and_the_report_says_so() {
    let dir = Scratch::new();
    let config = format!(
        "[[request]]\nname = \"default\"\nfixture = {:?}\n\n[[request]]\nname = \"database\"\nfixture = {:?}\n",
        util::check::fixture("default.json"),
        util::check::fixture("database.hcl"),
    );
    let plugin = plugin_with_config(&dir, "reference", &config);
    let out = check([
        plugin.as_os_str(),
        "--json".as_ref(),
        "-".as_ref(),
        "create.".as_ref(),
    ])
    .run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    let names: Vec<&str> = report.requests.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["default", "database"]);
    for r in &report.requests {
        assert_eq!(
            r.statuses.get("create.succeeds"),
            Some(&Status::Pass),
            "{}",
            r.name
        );
    }
    let (_, message) = status_of(&report, "create.succeeds");
    assert!(
        message.ends_with("(every request)") || message.contains("request "),
        "{message}"
    );
}

#[test]
fn an_enforced_capacity_claimed_for_a_plain_directory_is_caught() {
    let dir = Scratch::new();
    let plugin = plugin_with_config(&dir, "reference", "[claims]\ncapacity = \"enforced\"\n");
    let report = util::check::volume_report(&plugin);
    let (status, message) = status_of(&report, "volume.capacity-enforced");
    assert_eq!(status, Status::Warn, "{message}");
    assert!(
        message.contains("the capacity is not enforced"),
        "{message}"
    );
    // Without the claim it is not judged.
    let out = check([util::sample("reference").as_str(), "--json", "-", "volume."]).run();
    let (status, message) = status_of(&out.report(), "volume.capacity-enforced");
    assert_eq!(
        (status, message.as_str()),
        (Status::Skip, "not claimed (capacity = \"enforced\")")
    );
}

#[test]
fn a_plugin_reporting_the_size_asked_for_a_plain_directory_is_caught_by_bytes_true_alone() {
    let out = check([util::sample("lies-about-bytes").as_str(), "--json", "-"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report = out.report();
    let flagged: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(flagged, ["volume.bytes-true"]);
}

#[test]
fn the_builtin_mkdir_verifies_nomads_own_parameters() {
    let out = check(["mkdir", "--json", "-", "volume.parameters"]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (status, message) = status_of(&out.report(), "volume.parameters");
    assert_eq!(status, Status::Pass, "{message}");
    for held in [
        "default mode 0700",
        "mode = \"0750\" sets the mode",
        "sets the uid",
        "sets the gid",
    ] {
        assert!(message.contains(held), "{message}");
    }
}

/// loop-ext4 makes an ext4 filesystem of its own size on a loop device: it
/// enforces its capacity and reports its bytes truly; a claim of another
/// filesystem is caught by volume.parameters and no other check.
#[test]
fn loop_ext4_claims_hold_and_a_false_filesystem_claim_is_caught() {
    if let Some(why) = util::loop_devices_unusable() {
        util::skip(
            "loop_ext4_claims_hold_and_a_false_filesystem_claim_is_caught",
            &why,
        );
        return;
    }
    if !util::in_private_mount_ns("loop_ext4_claims_hold_and_a_false_filesystem_claim_is_caught") {
        return;
    }
    for (fs, expect) in [("ext4", Status::Pass), ("xfs", Status::Warn)] {
        let dir = Scratch::new();
        let plugin = plugin_with_config(
            &dir,
            "loop-ext4",
            &format!("[claims]\ncapacity = \"enforced\"\nfilesystem = \"{fs}\"\n"),
        );
        let report = util::check::volume_report(&plugin);
        let (status, message) = status_of(&report, "volume.parameters");
        assert_eq!(status, expect, "{fs}: {message}");
        for id in ["volume.bytes-true", "volume.capacity-enforced"] {
            let (status, message) = status_of(&report, id);
            assert_eq!(status, Status::Pass, "{id}: {message}");
        }
    }
}

/// A request whose parameters use Nomad's own names (`mode`) holds a plugin to
/// them without a claim: the reference ignores its parameters.
#[test]
fn a_requested_mode_that_a_plugin_ignores_is_caught_without_a_claim() {
    let dir = Scratch::new();
    let fixture = dir.path().join("moded.json");
    fs::write(
        &fixture,
        r#"{"name": "moded", "parameters": {"mode": "0750"}}"#,
    )
    .unwrap();
    for (plugin, expect) in [
        (util::sample("reference"), Status::Warn),
        ("mkdir".to_owned(), Status::Pass),
    ] {
        let out = check([
            plugin.as_ref(),
            "--fixture".as_ref(),
            fixture.as_os_str(),
            "--json".as_ref(),
            "-".as_ref(),
            "--exact".as_ref(),
            "volume.parameters".as_ref(),
        ])
        .run();
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let (status, message) = status_of(&out.report(), "volume.parameters");
        assert_eq!(status, expect, "{plugin}: {message}");
    }
}

/// A config whose `[skip]` leaves nothing to run is exit 2 before any plugin
/// call, as `--skip .` is: "passed: 0 ... conformant" from a plugin's own
/// config would be the plugin vouching for itself. Skipping all but one
/// check still runs that one.
#[test]
fn a_config_that_skips_every_check_is_exit_2() {
    use dhv_conform::conformance::CATALOGUE;
    let all: String = CATALOGUE
        .iter()
        .map(|c| format!("{:?} = \"trust me\"\n", c.id))
        .collect();
    let dir = Scratch::new();
    let plugin = plugin_with_config(&dir, "hanging-create", &format!("[skip]\n{all}"));
    let started = std::time::Instant::now();
    let out = check([plugin.as_os_str()]).run();
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("leaves no check") && out.stderr.contains("dhv-conform.toml"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // Filtered to skipped checks only: the same.
    let out = check([plugin.as_os_str(), "create.".as_ref()]).run();
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("of those the filter"), "{}", out.stderr);

    let dir = Scratch::new();
    let but_one: String = CATALOGUE
        .iter()
        .filter(|c| c.id != "fingerprint.runs")
        .map(|c| format!("{:?} = \"trust me\"\n", c.id))
        .collect();
    let plugin = plugin_with_config(&dir, "reference", &format!("[skip]\n{but_one}"));
    let out = check([plugin.as_os_str(), "-q".as_ref()]).run();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}
