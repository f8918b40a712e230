//! One root cause, one finding: what every create and delete of a plugin
//! leaves behind is `delete.no-residue`'s finding, and the other checks that
//! see the same leftovers cite it rather than warn or fail again. Shown on a
//! plugin that keeps a metadata dir beside the volumes dir, through the binary.

use crate::util;

use serde_json::Value;

/// Plain directories, plus `$DHV_VOLUMES_DIR/../.meta/<id>.json` written by
/// create and never removed.
const META_BESIDE: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
meta="$DHV_VOLUMES_DIR/../.meta"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	mkdir -p -- "$p" "$meta" || { echo '{"error": "cannot make the volume"}'; exit 1; }
	echo '{}' > "$meta/$DHV_VOLUME_ID.json" || { echo '{"error": "cannot write its metadata"}'; exit 1; }
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete) rm -rf -- "$p" || { echo '{"error": "cannot remove the volume"}'; exit 1; } ;;
*) exit 1 ;;
esac
"#;

#[test]
fn metadata_left_beside_the_volumes_dir_is_one_finding_that_the_others_cite() {
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("meta-beside", META_BESIDE);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(&scratch, &[&plugin], util::check::RUN_LIMIT);
    let checks = report["checks"].as_array().unwrap();
    let status = |c: &Value| c["status"].as_str().unwrap().to_owned();
    let findings: Vec<String> = checks
        .iter()
        .filter(|c| ["fail", "warn"].contains(&status(c).as_str()))
        .map(|c| format!("{} {}: {}", c["id"], status(c), c["message"]))
        .collect();
    assert_eq!(findings.len(), 1, "one finding expected: {findings:#?}");
    assert!(
        findings[0].starts_with("\"delete.no-residue\" warn") && findings[0].contains("../.meta/"),
        "{findings:?}"
    );
    let message = |id: &str| {
        checks
            .iter()
            .find(|c| c["id"] == id)
            .map(|c| c["message"].as_str().unwrap().to_owned())
            .unwrap()
    };
    // The traversal check sees the metadata appear outside the volumes dir,
    // and knows it for what every volume gets, not the name used as a path.
    assert!(
        message("input.name-traversal").contains("not a traversal"),
        "{}",
        message("input.name-traversal")
    );
}

/// Plain directories; a create whose name holds a shell character is refused
/// after the directory was made, which it leaves behind (a half-made volume).
const HALF_MADE_ON_REFUSAL: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	mkdir -p -- "$p" || { echo '{"error": "cannot make the volume"}'; exit 1; }
	case $DHV_VOLUME_NAME in
	*[\$\`\;\'\"]*) echo '{"error": "unsupported volume name"}'; exit 1 ;;
	esac
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete) rm -rf -- "$p" || { echo '{"error": "cannot remove the volume"}'; exit 1; } ;;
*) exit 1 ;;
esac
"#;

/// A failed create that leaves files is `failure.clean`'s finding; the input
/// check whose names it refused passes (no command ran) and names the owner.
#[test]
fn what_a_refused_create_leaves_is_failure_clean_s_not_the_input_check_s() {
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("half-made", HALF_MADE_ON_REFUSAL);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(&scratch, &[&plugin], util::check::RUN_LIMIT);
    let checks = report["checks"].as_array().unwrap();
    let status = |c: &Value| c["status"].as_str().unwrap().to_owned();
    let findings: Vec<String> = checks
        .iter()
        .filter(|c| ["fail", "warn"].contains(&status(c).as_str()))
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(findings, ["failure.clean"], "{report:#}");
    let injection = checks
        .iter()
        .find(|c| c["id"] == "input.name-injection")
        .unwrap();
    let message = injection["message"].as_str().unwrap();
    assert!(message.contains("failure.clean's finding"), "{message}");
}

/// Each volume's data in an image file beside its dir (as loop-ext4 keeps
/// it); delete removes `$DHV_CREATED_PATH/.*.img` and the volume's dir. Sent
/// Nomad's delete after a failed state write (DHV_CREATED_PATH = the volumes
/// dir), it unlinks every other volume's image while their dirs stay: data
/// lost at the next unmount, which `delete.auto-delete-safe` must see.
const UNLINKS_IMAGES: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	mkdir -p -- "$p" || exit 1
	: > "$DHV_VOLUMES_DIR/.$DHV_VOLUME_ID.img" || exit 1
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete)
	rm -f -- "$DHV_CREATED_PATH"/.*.img "$DHV_VOLUMES_DIR/.$DHV_VOLUME_ID.img"
	rm -rf -- "$p" ;;
*) exit 1 ;;
esac
"#;

#[test]
fn an_auto_delete_that_unlinks_other_volumes_images_is_a_data_loss_hazard() {
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("unlinks-images", UNLINKS_IMAGES);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(
        &scratch,
        &[&plugin, "--exact", "delete.auto-delete-safe"],
        util::check::RUN_LIMIT,
    );
    let check = &report["checks"][0];
    assert_eq!(check["status"], "warn", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains("DATA LOSS HAZARD") && message.contains(".img"),
        "{message}"
    );
}

/// Plain directories by id, and a record per volume named after its *name*,
/// `$DHV_VOLUMES_DIR/.conformance-<name>.owner`, holding its id. Delete finds
/// the volume's record by the id it holds (the name may be empty, as in
/// Nomad's delete after a failed state write) and removes it with the dir:
/// the record is the volume's own, made by its own create.
const RECORD_PER_NAME: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	mkdir -p -- "$p" || exit 1
	echo "$DHV_VOLUME_ID" > "$DHV_VOLUMES_DIR/.$DHV_VOLUME_NAME.owner" || exit 1
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete)
	for r in "$DHV_VOLUMES_DIR"/.*.owner; do
		[ -f "$r" ] && [ "$(cat -- "$r")" = "$DHV_VOLUME_ID" ] && { rm -f -- "$r" || exit 1; }
	done
	rm -rf -- "$p" ;;
*) exit 1 ;;
esac
"#;

/// The record a compensating delete removes is the new volume's own, made by
/// its create, though named by the volume's name, not its id: no hazard
/// (the unrelated volume keeps its dir and its record). A delete that removes
/// every record removes the unrelated volume's too: the hazard.
#[test]
fn an_auto_delete_that_removes_the_new_volumes_record_named_by_its_name_is_safe() {
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("record-per-name", RECORD_PER_NAME);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(
        &scratch,
        &[&plugin, "--exact", "delete.auto-delete-safe"],
        util::check::RUN_LIMIT,
    );
    let check = &report["checks"][0];
    assert_eq!(check["id"], "delete.auto-delete-safe", "{check}");
    assert_eq!(check["status"], "pass", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(message.contains("exited 0"), "{message}");
    // The same records, every one removed by that delete: the unrelated
    // volume's record, made by its own create, is lost.
    let every = RECORD_PER_NAME.replace(
        "\t\t[ -f \"$r\" ] && [ \"$(cat -- \"$r\")\" = \"$DHV_VOLUME_ID\" ] && { rm -f -- \"$r\" || exit 1; }",
        "\t\trm -f -- \"$r\"",
    );
    assert_ne!(every, RECORD_PER_NAME);
    let plugin = scratch.plugin("every-record", &every);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(
        &scratch,
        &[&plugin, "--exact", "delete.auto-delete-safe"],
        util::check::RUN_LIMIT,
    );
    let check = &report["checks"][0];
    assert_eq!(check["status"], "warn", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains("DATA LOSS HAZARD") && message.contains(".owner"),
        "{message}"
    );
}

/// A delete that fails once its volume is gone, and that dawdles after the
/// removal, so that every kill of the crash check lands after it.
const DELETE_NOT_IDEMPOTENT: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	mkdir -p -- "$p" || exit 1
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete)
	[ -d "$p" ] || { echo '{"error": "no such volume"}'; exit 1; }
	rm -rf -- "$p" || exit 1
	i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done ;;
*) exit 1 ;;
esac
"#;

#[test]
fn a_delete_again_after_a_crash_that_fails_as_any_second_delete_is_delete_idempotent_s() {
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("delete-once", DELETE_NOT_IDEMPOTENT);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(&scratch, &[&plugin, "delete"], util::check::RUN_LIMIT);
    let check = |id: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {report}"))
    };
    assert_eq!(check("delete.idempotent")["status"], "fail", "{report}");
    let crash = check("lifecycle.crash-delete");
    assert_eq!(crash["status"], "skip", "{crash}");
    assert!(
        crash["message"]
            .as_str()
            .unwrap()
            .starts_with("needs delete.idempotent"),
        "{crash}"
    );
}

/// Plain directories, given their mode by a `chmod` whose failure fails the
/// create without undoing the `mkdir`: a failed create that leaves a
/// half-made volume, whichever step failed.
const HALF_MADE_ON_REFUSED_CHMOD: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case ${1-} in
fingerprint) echo '{"version": "1.0.0"}' ;;
create)
	mkdir -p -- "$p" || exit 1
	chmod 0700 -- "$p" 2>/dev/null || { echo '{"error": "cannot set the mode of the volume"}'; exit 1; }
	echo "{\"path\": \"$p\", \"bytes\": 0}" ;;
delete) rm -rf -- "$p" || exit 1 ;;
*) exit 1 ;;
esac
"#;

/// What a create failed by a refused `chmod` left is failure.clean's
/// finding: failure.chmod-refused names it rather than warning again, and
/// failure.clean reports it, naming the check that met it.
#[test]
fn a_half_made_volume_left_by_a_refused_step_is_failure_cleans_finding_alone() {
    let test = "a_half_made_volume_left_by_a_refused_step_is_failure_cleans_finding_alone";
    if !dhv_host::exec::can_refuse() {
        util::skip(test, "system calls cannot be refused to a call here");
        return;
    }
    let scratch = util::Scratch::new();
    let plugin = scratch.plugin("chmod-half-made", HALF_MADE_ON_REFUSED_CHMOD);
    let plugin = plugin.to_string_lossy();
    let report = util::check::json_report(&scratch, &[&plugin, "failure."], util::check::RUN_LIMIT);
    let check = |id: &str| {
        let c = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {report}"));
        (
            c["status"].as_str().unwrap().to_owned(),
            c["message"].as_str().unwrap().to_owned(),
        )
    };
    let (status, message) = check("failure.chmod-refused");
    assert_eq!(status, "pass", "{message}");
    assert!(
        message.contains("cannot set the mode of the volume), and what it left is failure.clean's finding; then create made the volume as the default"),
        "{message}"
    );
    let (status, message) = check("failure.clean");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains(
            "failure.chmod-refused (create with every mode change (chmod) refused): failed ("
        ) && message.contains("and left files: "),
        "{message}"
    );
}
