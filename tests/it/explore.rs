//! `dhv-conform explore PLUGIN`: random histories find the sequence bugs of
//! glob-delete, name-as-path and (behind a linked volumes dir) realpath-delete,
//! shrunk to a few steps, the same for the same
//! seed, replayed from the JSON file; the correct ones give exit 0; usage
//! errors exit 2; nothing is left behind.

use std::time::Duration;

use assert_cmd::Command;

use crate::util::{self, Scratch, check::assert_left_nothing};

/// One `explore` run with TMPDIR in `tmp`: its exit code and stdout.
fn explore(tmp: &Scratch, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("explore")
        .args(args)
        .env("TMPDIR", tmp.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The numbered steps of the failing history printed.
fn steps(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(str::trim_start)
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .map(|l| l.split(": ok").next().unwrap_or(l).to_owned())
        .collect()
}

/// Finds `sample`'s bug with seed 1: exit 1, a minimal history of at most
/// 4 steps whose last one has the oracle's words, `env -i` lines, and a
/// JSON file that `--replay` reproduces the failure from.
fn finds(sample: &str, oracle_says: &str) {
    let tmp = Scratch::new();
    let json = tmp.path().join("explore.json");
    let plugin = util::sample(sample);
    let json_arg = json.to_string_lossy().into_owned();
    let args = [
        "--seed", "1", "--budget", "30", "--json", &json_arg, &plugin,
    ];
    let (code, stdout, stderr) = explore(&tmp, &args);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let found = steps(&stdout);
    assert!(
        !found.is_empty() && found.len() <= 4,
        "not a minimal history: {found:?}\n{stdout}"
    );
    assert!(stdout.contains("oracle: "), "{stdout}");
    assert!(stdout.contains(oracle_says), "{stdout}");
    assert!(stdout.contains("env -i DHV_OPERATION=create"), "{stdout}");
    assert!(stdout.contains("explore --replay"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["seed"], 1);
    assert_eq!(doc["failing"].as_array().map(Vec::len), Some(found.len()));
    assert!(doc["histories"].as_u64().unwrap() >= 1, "{doc}");

    // The same seed draws and shrinks to the same history.
    std::fs::remove_file(&json).unwrap();
    let (again_code, again, _) = explore(&tmp, &args);
    assert_eq!(again_code, Some(1), "{again}");
    assert_eq!(steps(&again), found);

    // The JSON file replays the failure.
    let (replayed, out, err) = explore(&tmp, &["--replay", &json_arg, &plugin]);
    assert_eq!(replayed, Some(1), "{out}\n{err}");
    assert!(out.contains(oracle_says), "{out}");
    std::fs::remove_file(&json).unwrap();
    assert_left_nothing(&tmp);
}

#[test]
fn finds_glob_delete_removing_a_neighbour() {
    finds("glob-delete", "lost its path");
}

#[test]
fn finds_name_as_path_moving_an_updated_volume() {
    finds("name-as-path", "answered the path");
}

/// A delete that compares a resolved path with the volumes dir as given
/// removes nothing where the volumes dir is a link: a node variation.
#[test]
fn finds_realpath_delete_behind_a_linked_volumes_dir() {
    finds("realpath-delete", "its volume is still there");
}

#[test]
fn correct_plugins_give_exit_0() {
    for sample in ["reference", "labelled-dirs"] {
        let tmp = Scratch::new();
        let plugin = util::sample(sample);
        let args = [
            "--seed",
            "1",
            "--budget",
            "20",
            "--max-histories",
            "25",
            &plugin,
        ];
        let (code, stdout, stderr) = explore(&tmp, &args);
        assert_eq!(code, Some(0), "{sample}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("explored 25 histories"),
            "{sample}: {stdout}"
        );
        assert!(stdout.contains("no failing history"), "{sample}: {stdout}");
        // Not a terminal: no progress line.
        assert!(!stdout.contains('\r'), "{sample}: {stdout:?}");
        assert_left_nothing(&tmp);
    }
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let tmp = Scratch::new();
    let plugin = util::sample("reference");
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"seed\": 1}").unwrap();
    let bad = bad.to_string_lossy().into_owned();
    let missing = tmp.path().join("missing.json");
    let missing = missing.to_string_lossy().into_owned();
    for args in [
        vec!["--seed", "one", &plugin],
        vec!["--no-such-flag", &plugin],
        vec!["--budget", "0", &plugin],
        vec!["--replay", &missing, &plugin],
        vec!["--replay", &bad, &plugin],
    ] {
        let (code, stdout, stderr) = explore(&tmp, &args);
        assert_eq!(code, Some(2), "{args:?}: {stdout}\n{stderr}");
        if args[0] == "--replay" || args[0] == "--budget" {
            assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.starts_with("dhv-conform: "), "{args:?}: {stderr}");
        }
    }
    std::fs::remove_file(tmp.path().join("bad.json")).unwrap();
    assert_left_nothing(&tmp);
}
