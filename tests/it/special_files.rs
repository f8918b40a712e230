//! Every file the harness reads and did not just write is a regular file,
//! read up to a stated size: a FIFO, `/dev/zero` or `/dev/full` given as an
//! input is exit 2 with one line at once (never a hang, never read to the
//! memory cap), and a canary a plugin swaps for a FIFO or a link to
//! `/dev/zero` is evidence of a changed canary, not a hang.

use crate::util;

use std::fs;
use std::time::{Duration, Instant};

use assert_cmd::Command;

use crate::util::Scratch;
use crate::util::check::check;

/// `dhv-conform ARGS` with a scratch TMPDIR, bounded.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let tmp = Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(args)
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fifo(dir: &Scratch, name: &str) -> String {
    let path = dir.path().join(name);
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn special_files_as_inputs_are_exit_2_at_once() {
    let dir = Scratch::new();
    let fifo = fifo(&dir, "fifo");
    let big = dir.path().join("big.json");
    fs::write(&big, vec![b' '; 2 << 20]).unwrap();
    let big = big.to_string_lossy().into_owned();
    let quick = ["check", "mkdir", "create.succeeds", "--exact", "-q"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["check", "--list", "--fixture", &fifo],
            "is a FIFO, not a regular file",
        ),
        (
            vec!["check", "--list", "--fixture", "/dev/zero"],
            "is a character device",
        ),
        (
            vec!["check", "--list", "--fixture", &big],
            "is larger than 1048576 bytes",
        ),
        (
            [&quick[..], &["--snapshot", &fifo]].concat(),
            "is a FIFO, not a regular file",
        ),
        (
            [&quick[..], &["--snapshot", "/dev/zero"]].concat(),
            "is a character device",
        ),
        (
            [&quick[..], &["--snapshot", "/dev/full"]].concat(),
            "is a character device",
        ),
        (
            [&quick[..], &["--snapshot", "/dev/full", "--bless"]].concat(),
            "No space left on device",
        ),
        (
            vec!["report", "merge", &fifo],
            "is a FIFO, not a regular file",
        ),
        (
            vec!["report", "merge", "/dev/zero"],
            "is a character device",
        ),
    ];
    for (args, want) in cases {
        let started = Instant::now();
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{args:?}: took {:?}",
            started.elapsed()
        );
    }
}

/// A plugin whose second create of a volume puts `what` (a shell command on
/// `$c`, the canary's path) in the canary's place.
fn swapping_plugin(dir: &Scratch, what: &str) -> String {
    dir.plugin(
        "swapper",
        &format!(
            r#"#!/bin/sh
case "$1" in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
  d="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"; c="$d/.dhv-conform-canary"
  if [ -e "$c" ]; then /bin/rm -f "$c"; {what}; fi
  /bin/mkdir -p "$d"; printf '{{"path": "%s", "bytes": 0}}\n' "$d" ;;
delete) /bin/rm -rf "$DHV_CREATED_PATH" ;;
esac
"#
        ),
    )
    .to_string_lossy()
    .into_owned()
}

#[test]
fn a_canary_swapped_for_a_fifo_or_dev_zero_is_evidence_not_a_hang() {
    for what in ["/usr/bin/mkfifo \"$c\"", "/bin/ln -s /dev/zero \"$c\""] {
        let dir = Scratch::new();
        let plugin = swapping_plugin(&dir, what);
        let started = Instant::now();
        let out = check([&plugin, "create.idempotent", "--exact", "--json", "-", "-q"]).run();
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what}: {:?}",
            started.elapsed()
        );
        assert_eq!(out.code, Some(1), "{what}: {}", out.stderr);
        let report = out.report();
        let c = util::check::find(&report, "create.idempotent");
        assert!(
            c.message.contains("is gone or changed"),
            "{what}: {}",
            c.message
        );
    }
}
