//! A failed call is attributed to its cause, never to a bystander: a delete
//! that fails once by the plugin's own chance inside an input check is made
//! again alone; it then succeeds, so the input check passes and
//! `process.repeatable` reports the race once, with both outcomes and their
//! stderr.

use crate::util;

use std::time::Duration;

/// A plugin whose first delete of the volume named `a/b` (one of
/// `input.name-traversal`'s) fails, as a race would; every other call works.
const FAILS_ONCE: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
case $1 in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
    p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
    mkdir -p "$p" || { echo '{"error": "cannot make the volume"}'; exit 1; }
    printf '{"path": "%s"}\n' "$p" ;;
delete)
    p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
    if [ "$DHV_VOLUME_NAME" = "a/b" ] && [ -d "$p" ] && mkdir "$p.failed-once" 2>/dev/null; then
        echo "mount: broken pipe" >&2
        echo '{"error": "cannot tell whether it is mounted"}'
        exit 1
    fi
    rm -rf "$p" "$p.failed-once" || { echo '{"error": "cannot remove the volume"}'; exit 1; } ;;
*) echo '{"error": "unknown operation"}'; exit 1 ;;
esac
"#;

#[test]
fn a_delete_that_fails_by_chance_in_a_bystander_is_process_repeatable_s_finding() {
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("fails-once", FAILS_ONCE);
    let tmp = util::Scratch::new();
    let report =
        util::check::json_report(&tmp, &[plugin.to_str().unwrap()], Duration::from_secs(240));
    util::check::assert_left_nothing(&tmp);
    let check = |id: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {report}"))
            .clone()
    };
    let traversal = check("input.name-traversal");
    assert_eq!(traversal["status"], "pass", "{traversal}");
    let repeatable = check("process.repeatable");
    assert_eq!(repeatable["status"], "fail", "{repeatable}");
    let message = repeatable["message"].as_str().unwrap();
    for part in [
        "input.name-traversal (delete of volume \"a/b\")",
        "stderr: \"mount: broken pipe\"",
        "made again alone it succeeded",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    let failing: Vec<_> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail" || c["status"] == "warn")
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(failing, ["process.repeatable"], "one cause, one finding");
}

/// A plugin with four causes, sample-like (the reference's code but for
/// them): (1) one create at a time, by a lock that fails instead of waiting
/// (`flock -n`: a killed create leaves no stale lock), so any two creates of
/// the run that overlap fail one of them; (2) a state file beside each
/// volume that delete leaves; (3) `bytes` 1, below the minimum asked for;
/// (4) a plain-text error when min > max. `@REFERENCE@` and `@LOCK@` are
/// filled in by the test.
const FOUR_CAUSES: &str = r#"#!/bin/sh
DHV_SAMPLE_AS_LIBRARY=1 . "@REFERENCE@"
PROG=four-causes

do_create() {
	volume_path
	if [ "$DHV_CAPACITY_MAX_BYTES" -gt 0 ] 2>/dev/null &&
		[ "$DHV_CAPACITY_MIN_BYTES" -gt "$DHV_CAPACITY_MAX_BYTES" ] 2>/dev/null; then
		# CAUSE 4: the error is plain text.
		echo "something went wrong"
		exit 1
	fi
	# CAUSE 1: a second create at the same time fails instead of waiting.
	exec 9>>"@LOCK@"
	flock -n 9 || fail "another create is under way"
	make_volume
	# CAUSE 2: a state file delete does not remove.
	echo created >"$dir/.state-$DHV_VOLUME_ID" || fail "cannot write the state file"
	sleep 0.02
	log "volume ready at $path"
	json_string "$path"
	# CAUSE 3: 1 byte, below DHV_CAPACITY_MIN_BYTES.
	printf '{"path": "%s", "bytes": %s}\n' "$json" 1
}
main "$@"
"#;

/// The checks of a report that failed or warned, by id.
fn findings(report: &serde_json::Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail" || c["status"] == "warn")
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `check` on the four-cause plugin: its findings, and the report.
fn four_causes_run() -> (Vec<String>, serde_json::Value) {
    four_causes_run_with(&[])
}

/// [`four_causes_run`] with more arguments after the plugin's path.
fn four_causes_run_with(more: &[&str]) -> (Vec<String>, serde_json::Value) {
    let scratch = util::Scratch::new();
    let lock = scratch.path().join("create.lock");
    std::fs::write(&lock, "").unwrap();
    let reference =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-plugins/reference");
    let body = FOUR_CAUSES
        .replace("@REFERENCE@", reference.to_str().unwrap())
        .replace("@LOCK@", lock.to_str().unwrap());
    let plugin = scratch.plugin("four-causes", &body);
    let tmp = util::Scratch::new();
    let args: Vec<&str> = [plugin.to_str().unwrap()]
        .into_iter()
        .chain(more.iter().copied())
        .collect();
    let report = util::check::json_report(&tmp, &args, Duration::from_secs(600));
    util::check::assert_left_nothing(&tmp);
    (findings(&report), report)
}

/// What the one cause of a create lock met in company must give: one
/// finding, `concurrency.create`'s (its question is exactly creates at once,
/// and it meets the lock by design in every run). The checks whose own
/// create lost it elsewhere go on from the create made again alone and
/// cite `process.repeatable`, which itself cites `concurrency.create`; the
/// other checks that make creates at once on purpose (`concurrency.delete`,
/// `concurrency.same-volume`, `lifecycle.restore`) cite it too: skipped as
/// inconclusive, never failed or warned.
fn assert_one_cause_one_finding(found: &[String], report: &serde_json::Value, when: &str) {
    eprintln!(
        "{when}: {} failing or warning checks: {found:?}",
        found.len()
    );
    // One finding per cause, each by its owner: the create lock's by
    // concurrency.create, the state file's, the 1 byte's and the plain-text
    // error's by theirs. At most 6 in all, the issue's bound: it leaves room
    // for a verdict that a loaded host moves on its own (process.no-stdio-leak
    // was once seen to fail at 16x with no holder named), which is not this
    // ledger's to hide, nor a cause counted twice.
    for owner in [
        "concurrency.create",
        "create.bytes-in-range",
        "delete.no-residue",
        "failure.error-json",
    ] {
        assert!(
            found.iter().any(|f| f == owner),
            "{when}: {owner} does not report its cause: {found:?}\n{report}"
        );
    }
    assert!(found.len() <= 6, "{when}: {found:?}\n{report}");
    for id in [
        "concurrency.delete",
        "concurrency.same-volume",
        "lifecycle.restore",
        "process.repeatable",
    ] {
        let check = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {report}"));
        assert!(
            !found.iter().any(|f| f == id),
            "{when}: {id} reports the create lock again: {check}"
        );
        let message = check["message"].as_str().unwrap_or_default();
        // Each met the lock (creates that overlap), or passed: when it met
        // it, it cites the owner, as a skip, inconclusive.
        if check["status"] != "pass" {
            assert_eq!(check["status"], "skip", "{when}: {check}");
            assert!(
                message.starts_with("inconclusive:")
                    && message.contains("(see concurrency.create)"),
                "{when}: {check}"
            );
        }
    }
}

/// One cause, one finding, for a race the run's own company provokes.
#[test]
fn a_create_lock_lost_in_company_is_one_finding_idle_and_loaded() {
    let (found, report) = four_causes_run();
    assert_one_cause_one_finding(&found, &report, "idle");
    let cited = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["message"]
                .as_str()
                .is_some_and(|m| m.contains("see process.repeatable"))
        })
        .count();
    assert!(cited > 0, "no check cites process.repeatable: {report}");
    let _load = util::Load::oversubscribed(Duration::from_secs(600), 16);
    let (found, report) = four_causes_run();
    assert_one_cause_one_finding(&found, &report, "16 busy threads per core");
}

/// The checks that cite `concurrency.create` wait for its end, which runs
/// first in its phase: one check at a time, nothing waits for a check not
/// yet started (no hang), and the verdicts are the same. Without it in the
/// run there is no finding to cite: each check that met the lock reports
/// what it met, as before.
#[test]
fn the_owner_is_waited_for_one_check_at_a_time_and_cited_only_when_it_ran() {
    let (found, report) = four_causes_run_with(&["--test-threads", "1"]);
    assert_one_cause_one_finding(&found, &report, "one check at a time");
    let (found, report) = four_causes_run_with(&["--skip", "concurrency.create"]);
    // Its racing creates are held at their first change and let go
    // together: the lock is met in every run.
    assert!(
        found.iter().any(|f| f == "concurrency.delete"),
        "without concurrency.create, concurrency.delete reports the lock: {found:?}\n{report}"
    );
    let cited = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["message"]
                .as_str()
                .is_some_and(|m| m.contains("see concurrency.create"))
        })
        .count();
    assert_eq!(cited, 0, "nothing cites a check that did not run: {report}");
}
