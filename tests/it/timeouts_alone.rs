//! A check that compares or diagnoses never concludes from a call that timed
//! out: the call is made again alone, and the re-run is judged; when that
//! times out too, the check is skipped as "inconclusive: … timed out alone
//! too". Shown through the binary on small plugins that hang on purpose, once
//! (as a call starved by a loaded machine would) or every time.

use crate::util;

use std::time::Duration;

use serde_json::Value;

/// A plain-directory plugin; `hang_if` is a shell condition under which the
/// operation (`$1`) hangs. With `once`, it hangs only the first time for each
/// volume (or, for fingerprint, once in all), as a starved call would.
fn plugin(scratch: &util::Scratch, hang_if: &str, once: bool) -> String {
    let marks = scratch.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let hang = if once {
        format!(
            r#"m="{}/$1-${{DHV_VOLUME_ID:-all}}"; if [ ! -e "$m" ]; then : > "$m"; exec sleep 600; fi"#,
            marks.display()
        )
    } else {
        "exec sleep 600".to_string()
    };
    let body = format!(
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
if {hang_if}; then {hang}; fi
case ${{1-}} in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create) mkdir -p -- "$p" && echo "{{\"path\": \"$p\", \"bytes\": 0}}" ;;
delete) rm -rf -- "$p" ;;
*) exit 1 ;;
esac
"#
    );
    scratch
        .plugin("plugin", &body)
        .to_string_lossy()
        .into_owned()
}

/// Runs one check (its whole id) at a twentieth of Nomad's limits (create and
/// delete 3 s, fingerprint 50 ms); the check's JSON.
fn run_check(scratch: &util::Scratch, plugin: &str, id: &str) -> Value {
    let args = [plugin, id, "--exact", "--timeout-scale", "0.05"];
    let report = util::check::json_report(scratch, &args, Duration::from_secs(120));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in the report"))
        .clone()
}

/// The check's status and message.
fn verdict(check: &Value) -> (&str, &str) {
    (
        check["status"].as_str().unwrap(),
        check["message"].as_str().unwrap(),
    )
}

/// The volume ids of the check's calls of `op` that timed out, and of those
/// that did not.
fn timed_out_and_not(check: &Value, op: &str) -> (Vec<String>, Vec<String>) {
    let id = |inv: &Value| {
        inv["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|kv| kv.strip_prefix("DHV_VOLUME_ID="))
            .unwrap_or("")
            .to_owned()
    };
    let (hung, ran): (Vec<&Value>, Vec<&Value>) = check["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|inv| inv["operation"] == op)
        .partition(|inv| inv["timed_out"] == true);
    (
        hung.into_iter().map(id).collect(),
        ran.into_iter().map(id).collect(),
    )
}

/// A hostile-name create that timed out once is made again alone, and that
/// re-run, which works, is what the check judges.
#[test]
fn an_input_check_judges_the_rerun_alone_of_a_create_that_timed_out() {
    let scratch = util::Scratch::new();
    let plugin = plugin(
        &scratch,
        r#"[ "$1" = create ] && case $DHV_VOLUME_NAME in *touch*) true;; *) false;; esac"#,
        true,
    );
    let check = run_check(&scratch, &plugin, "input.name-injection");
    let (status, message) = verdict(&check);
    assert_eq!(status, "pass", "{message}");
    let (hung, ran) = timed_out_and_not(&check, "create");
    assert!(!hung.is_empty(), "no create timed out: {check}");
    for id in &hung {
        assert!(
            ran.contains(id),
            "the create of {id} that timed out was not made again: {check}"
        );
    }
}

/// A create that times out alone too gives no diagnosis: the check is
/// skipped, saying why.
#[test]
fn an_input_check_is_inconclusive_when_the_rerun_alone_times_out_too() {
    let scratch = util::Scratch::new();
    let plugin = plugin(
        &scratch,
        r#"[ "$1" = create ] && case $DHV_VOLUME_NAME in *touch*) true;; *) false;; esac"#,
        false,
    );
    let check = run_check(&scratch, &plugin, "input.name-injection");
    let (status, message) = verdict(&check);
    assert_eq!(status, "skip", "{message}");
    assert!(
        message.starts_with("inconclusive: create with name")
            && message.ends_with("timed out alone too"),
        "{message}"
    );
    let (hung, _) = timed_out_and_not(&check, "create");
    assert_eq!(hung.len(), 2, "the create and its re-run alone: {check}");
    assert_eq!(hung[0], hung[1], "the re-run is of the same volume");
}

/// The crash check's measuring create timed out once (the run's fourth
/// create: the default create's probe and the create-again probe's two come
/// first): measured again alone, and the check goes on to its verdict.
#[test]
fn a_crash_check_measures_again_alone_after_a_timeout() {
    let scratch = util::Scratch::new();
    let plugin = plugin(&scratch, &nth(&scratch, "create", "4"), false);
    let check = run_check(&scratch, &plugin, "lifecycle.crash-create");
    let (status, message) = verdict(&check);
    assert_eq!(status, "pass", "{message}");
    let (hung, ran) = timed_out_and_not(&check, "create");
    assert!(
        hung.iter().any(|id| ran.contains(id)),
        "no create re-run after its timeout: {check}"
    );
}

/// A shell condition: `op` is the `n`th call of it in the run, for `n` in `nths`.
fn nth(scratch: &util::Scratch, op: &str, nths: &str) -> String {
    let count = scratch.path().join(format!("{op}-calls"));
    format!(
        r#"[ "$1" = {op} ] && echo x >> "{c}" && case $(( $(wc -l < "{c}") )) in {nths}) true;; *) false;; esac"#,
        c = count.display()
    )
}

/// `process.env-self-contained`: its first create (under Nomad's environment)
/// times out, the re-run alone works: no dependence on any variable is
/// claimed, and nothing is blamed.
#[test]
fn the_env_check_claims_nothing_from_a_timeout_that_did_not_repeat() {
    let scratch = util::Scratch::new();
    let plugin = plugin(&scratch, &nth(&scratch, "create", "1"), false);
    let check = run_check(&scratch, &plugin, "process.env-self-contained");
    let (status, message) = verdict(&check);
    assert_eq!(
        (status, message),
        ("pass", "works with only the DHV_* variables")
    );
    let (hung, _) = timed_out_and_not(&check, "create");
    assert_eq!(hung.len(), 1, "{check}");
}

/// The same create timing out again when re-run alone (the run's third create;
/// the second is the shared create probe, which works): inconclusive, neither
/// a pass nor a claim that a variable is needed.
#[test]
fn the_env_check_is_inconclusive_when_the_timeout_repeats_alone() {
    let scratch = util::Scratch::new();
    let plugin = plugin(&scratch, &nth(&scratch, "create", "1|3"), false);
    let check = run_check(&scratch, &plugin, "process.env-self-contained");
    let (status, message) = verdict(&check);
    assert_eq!(
        (status, message),
        (
            "skip",
            "inconclusive: create with Nomad's environment timed out alone too"
        )
    );
}

/// `process.cwd-independent`: the create from the unrelated dir (the run's
/// second; the first is the create probe) times out once: re-run alone, it
/// works, and the working dir is not blamed.
#[test]
fn the_cwd_check_blames_nothing_from_a_timeout_that_did_not_repeat() {
    let scratch = util::Scratch::new();
    let plugin = plugin(&scratch, &nth(&scratch, "create", "2"), false);
    let check = run_check(&scratch, &plugin, "process.cwd-independent");
    let (status, message) = verdict(&check);
    assert_eq!(
        (status, message),
        (
            "pass",
            "works from a read-only unrelated directory, writes nothing there"
        )
    );
    let (hung, _) = timed_out_and_not(&check, "create");
    assert_eq!(hung.len(), 1, "{check}");
}

/// The same create timing out alone too: inconclusive.
#[test]
fn the_cwd_check_is_inconclusive_when_the_timeout_repeats_alone() {
    let scratch = util::Scratch::new();
    let plugin = plugin(&scratch, &nth(&scratch, "create", "2|3"), false);
    let check = run_check(&scratch, &plugin, "process.cwd-independent");
    let (status, message) = verdict(&check);
    assert_eq!(
        (status, message),
        (
            "skip",
            "inconclusive: create from an unrelated read-only dir timed out alone too"
        )
    );
}
