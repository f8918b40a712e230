//! Faults the catalogue once let through, each in a plugin of a few lines
//! built on the reference: a name that leaves a single-quoted shell string,
//! and a name whose path prefix absorbs one `..` so that the escape lands a
//! level higher than a naive traversal would.

use crate::util::check::{check, find};
use crate::util::{Scratch, repo};

/// A plugin: the reference's code, with `body` replacing what it names.
fn plugin(s: &Scratch, name: &str, body: &str) -> std::path::PathBuf {
    let reference = repo().join("sample-plugins/reference");
    s.plugin(
        name,
        &format!(
            "#!/bin/sh\nDHV_SAMPLE_AS_LIBRARY=1 . '{}'\nPROG={name}\n{body}\nmain \"$@\"\n",
            reference.display()
        ),
    )
}

/// `check PLUGIN --exact ID`: the check's status and message.
fn verdict(plugin: &std::path::Path, id: &str) -> (String, String) {
    let out = check([
        plugin.as_os_str(),
        "--exact".as_ref(),
        id.as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
        "-q".as_ref(),
    ])
    .run();
    let report = out.report();
    let c = find(&report, id);
    (c.status.to_string(), c.message.clone())
}

#[test]
fn a_name_that_closes_a_single_quote_and_runs_a_command_is_caught() {
    let s = Scratch::new();
    let p = plugin(
        &s,
        "single-quoted",
        "make_volume() {\n\tsh -c \"echo 'making $DHV_VOLUME_NAME' >&2\"\n\tmkdir -p -m 0700 -- \"$path\" || fail 'cannot create'\n}",
    );
    let (status, message) = verdict(&p, "input.name-injection");
    assert_eq!(status, "fail", "{message}");
    assert!(message.contains("expected no command to run"), "{message}");
}

#[test]
fn an_escape_one_level_above_where_a_naive_traversal_lands_is_caught() {
    let s = Scratch::new();
    // The image's name puts a prefix before the name, and its dir is made
    // first: `img-..` is then a directory, and one `..` of the name is spent.
    let p = plugin(
        &s,
        "prefixed-image",
        "make_volume() {\n\tmkdir -p -m 0700 -- \"$path\" || fail 'cannot create'\n\timg=\"$dir/img-$DHV_VOLUME_NAME.img\"\n\tmkdir -p -- \"${img%/*}\" && : > \"$img\" || true\n}",
    );
    let (status, message) = verdict(&p, "input.name-traversal");
    assert_eq!(status, "fail", "{message}");
    assert!(message.contains("outside the volumes dir"), "{message}");
}

#[test]
fn a_delete_that_removes_every_empty_volume_is_caught() {
    let s = Scratch::new();
    let p = plugin(
        &s,
        "sweeps-empty",
        "remove_volume() {\n\trm -rf -- \"$path\" || fail 'cannot remove'\n\tfind \"$dir\" -mindepth 1 -maxdepth 1 -type d -empty -exec rmdir {} + 2>/dev/null || true\n}",
    );
    let (status, message) = verdict(&p, "delete.isolated");
    assert_eq!(status, "fail", "{message}");
    assert!(message.contains("empty, to survive"), "{message}");
}

#[test]
fn a_delete_that_did_its_work_and_exits_non_zero_says_so() {
    let s = Scratch::new();
    let p = plugin(
        &s,
        "fails-after",
        "remove_volume() {\n\trm -rf -- \"$path\"\n\tfail 'could not update the index'\n}",
    );
    let (status, message) = verdict(&p, "delete.succeeds");
    assert_eq!(status, "fail", "{message}");
    assert!(
        message.contains("it removed the path all the same"),
        "{message}"
    );
}
