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
