//! The failure checks judge every plugin's failure path: every failed create and
//! delete of the run, and a create the suite makes fail on purpose (its volumes
//! dir lies under a regular file), through the binary.

use crate::util;

use std::time::Duration;

use serde_json::Value;

/// A small plugin: plain directories; `on_edge` runs when create is asked for a
/// minimum above the maximum (input.capacity-edge asks), `on_error` when the
/// volume directory cannot be made (the provoked failure).
fn plugin(scratch: &util::Scratch, name: &str, on_edge: &str, on_error: &str) -> String {
    let body = format!(
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${{1-}} in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
	if [ "$DHV_CAPACITY_MAX_BYTES" -gt 0 ] && [ "$DHV_CAPACITY_MIN_BYTES" -gt "$DHV_CAPACITY_MAX_BYTES" ]; then
		{on_edge}
	fi
	mkdir -p -- "$p" 2>/dev/null || {{ {on_error}; }}
	echo "{{\"path\": \"$p\", \"bytes\": 0}}" ;;
delete) rm -rf -- "$p" || {{ echo '{{"error": "cannot remove the volume"}}'; exit 1; }} ;;
*) exit 1 ;;
esac
"#
    );
    scratch.plugin(name, &body).to_string_lossy().into_owned()
}

/// Runs the whole suite on `plugin`; the report's checks by id.
fn checks(scratch: &util::Scratch, plugin: &str) -> Value {
    util::check::json_report(scratch, &[plugin], Duration::from_secs(120))
}

fn check<'a>(report: &'a Value, id: &str) -> (&'a str, &'a str) {
    let c = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"));
    (
        c["status"].as_str().unwrap(),
        c["message"].as_str().unwrap(),
    )
}

/// A plugin that never fails by itself still has its failure path judged: the
/// provoked create fails, cleanly, with an error Nomad shows word for word.
#[test]
fn a_plugin_that_never_fails_by_itself_is_made_to() {
    let scratch = util::Scratch::new();
    let p = plugin(
        &scratch,
        "careful",
        ":",
        r#"echo '{"error": "cannot make the volume"}'; exit 1"#,
    );
    let report = checks(&scratch, &p);
    let (status, message) = check(&report, "failure.clean");
    assert_eq!(status, "pass", "{message}");
    assert!(message.contains("provoked on purpose"), "{message}");
    let (status, message) = check(&report, "failure.error-json");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains(r#"with plugin "careful": exit status 1: cannot make the volume`"#),
        "{message}"
    );
}

/// Printing nothing on failure is a warning, and the message says what Nomad
/// then shows: the exit status alone, no reason.
#[test]
fn a_silent_failure_is_shown_as_nomad_shows_it() {
    let scratch = util::Scratch::new();
    let p = plugin(&scratch, "silent", ":", "exit 1");
    let report = checks(&scratch, &p);
    // A failure that exits and says nothing leaves the user with only the
    // exit status: a should-level finding, which quotes what Nomad shows.
    let (status, message) = check(&report, "failure.error-json");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains(r#"nothing on stdout, so Nomad shows only: `error creating volume ""#)
            && message.contains(r#"with plugin "silent": exit status 1`"#),
        "{message}"
    );
    assert!(!message.contains("can show"), "{message}");
}

/// Every failed create of the run is judged: one that fails inside another
/// check (input.capacity-edge) and leaves a half-made dir fails failure.clean,
/// and its plain-text answer fails failure.error-json.
#[test]
fn a_failed_create_anywhere_in_the_run_is_judged() {
    let scratch = util::Scratch::new();
    let p = plugin(
        &scratch,
        "sloppy",
        r#"mkdir -p -- "$p.partial"; echo "min above max"; exit 1"#,
        r#"echo '{"error": "cannot make the volume"}'; exit 1"#,
    );
    let report = checks(&scratch, &p);
    let (status, message) = check(&report, "failure.clean");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains("input.capacity-edge (create): left files [")
            && message.contains(".partial"),
        "{message}"
    );
    let (status, message) = check(&report, "failure.error-json");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains(r#"input.capacity-edge (create): stdout "min above max", so Nomad shows only: `error creating volume"#),
        "{message}"
    );
}

/// A plugin that keeps nothing below DHV_VOLUMES_DIR cannot be made to fail
/// that way: the failure checks skip and say so.
#[test]
fn a_plugin_that_cannot_be_made_to_fail_is_skipped_with_that_reason() {
    let scratch = util::Scratch::new();
    let home = scratch.path().join("its-own-volumes");
    let body = format!(
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="{}/$DHV_VOLUME_ID"
case ${{1-}} in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create) mkdir -p -- "$p" && echo "{{\"path\": \"$p\", \"bytes\": 0}}" ;;
delete) rm -rf -- "$p" || {{ echo '{{"error": "cannot remove the volume"}}'; exit 1; }} ;;
*) exit 1 ;;
esac
"#,
        home.display()
    );
    let p = scratch
        .plugin("elsewhere", &body)
        .to_string_lossy()
        .into_owned();
    let report = checks(&scratch, &p);
    for id in ["failure.clean", "failure.error-json"] {
        let (status, message) = check(&report, id);
        assert_eq!(status, "skip", "{id}: {message}");
        assert!(
            message.starts_with("the plugin could not be made to fail"),
            "{id}: {message}"
        );
    }
}

/// A plugin that goes past a failed `mkdir` answers the create provoked to
/// fail with a path under a regular file, which cannot exist: failure.clean
/// fails it, naming the path (its default volume does exist, so this is no
/// create.path-exists finding).
#[test]
fn a_failure_reported_as_success_fails_failure_clean() {
    let scratch = util::Scratch::new();
    let p = plugin(&scratch, "goes-past", ":", ":");
    let report = checks(&scratch, &p);
    let (status, message) = check(&report, "failure.clean");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains("the create provoked to fail (its volumes dir lies under a regular file) exited 0 with path")
            && message.contains("which cannot exist"),
        "{message}"
    );
    let (status, message) = check(&report, "create.path-exists");
    assert_eq!(status, "pass", "{message}");
}

/// Max 0 is no maximum: a plugin that reads it as a limit, and so refuses a
/// volume spec with `capacity_min` alone (cleanly), is warned by
/// input.capacity-edge, though it meets the default request's range.
#[test]
fn max_zero_read_as_a_limit_is_a_warning() {
    let scratch = util::Scratch::new();
    let body = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	if [ "$DHV_CAPACITY_MIN_BYTES" -gt "$DHV_CAPACITY_MAX_BYTES" ]; then
		echo '{"error": "capacity min is greater than capacity max"}'; exit 1
	fi
	mkdir -p -- "$p" || { echo '{"error": "mkdir failed"}'; exit 1; }
	echo "{\"path\": \"$p\", \"bytes\": $DHV_CAPACITY_MIN_BYTES}" ;;
delete) rm -rf -- "$p" || { echo '{"error": "cannot remove the volume"}'; exit 1; } ;;
*) exit 1 ;;
esac
"#;
    let p = scratch.plugin("max-as-limit", body);
    let report = checks(&scratch, &p.to_string_lossy());
    let (status, message) = check(&report, "input.capacity-edge");
    assert_eq!(status, "warn", "{message}");
    assert!(
        message.contains("min 20 MiB + 1 byte alone: expected create to succeed")
            && message.contains("capacity min is greater than capacity max"),
        "{message}"
    );
    // The default request (min 50 MB, max 100 MB) is met.
    let (status, message) = check(&report, "create.bytes-in-range");
    assert_eq!(status, "pass", "{message}");
}
