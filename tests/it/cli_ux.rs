//! The CLI around the checks, through the binary: `explain` and docs/checks.md,
//! `--list`, empty selections, progress lines that agree with the table, JSON-only
//! stdout, closed pipes, help text.

use crate::util;

use std::io::Read as _;
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use dhv_conform::conformance::CATALOGUE;

const RUN_LIMIT: Duration = Duration::from_secs(120);

use crate::util::{repo, sample};

mod progress;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `dhv-conform ARGS` in `cwd`, with a scratch TMPDIR that must be empty afterwards.
fn dhv_in(cwd: &Path, args: &[&str]) -> Out {
    let tmp = util::Scratch::new();
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .args(args)
        .current_dir(cwd)
        .env("TMPDIR", tmp.path())
        .env_remove("NO_COLOR")
        .env_remove("CI")
        .timeout(RUN_LIMIT)
        .output()
        .unwrap();
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "{args:?} left {left:?}");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn dhv(args: &[&str]) -> Out {
    dhv_in(repo(), args)
}

// ---- the rules travel with the tool ------------------------------------------------

/// docs/checks.md is exactly what `explain --all --markdown` prints. To regenerate it:
/// `DHV_CONFORM_UPDATE_DOCS=1 cargo test --test it cli_ux::docs_checks_md` writes
/// the new text beside it as `docs/checks.md.new`, for `scripts/review-goldens`
/// (as `INSTA_UPDATE=new` does for insta's snapshots); `DHV_CONFORM_UPDATE_DOCS=accept`
/// writes docs/checks.md itself.
#[test]
fn docs_checks_md_is_generated_from_the_catalogue() {
    let out = dhv(&["explain", "--all", "--markdown"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let path = repo().join("docs/checks.md");
    let pending = repo().join("docs/checks.md.new");
    let update = std::env::var("DHV_CONFORM_UPDATE_DOCS").ok();
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk == out.stdout || update.as_deref() == Some("accept") {
        // What an earlier update proposed is out of date (or taken now).
        let _ = std::fs::remove_file(&pending);
    }
    if on_disk != out.stdout {
        match update.as_deref() {
            Some("accept") => std::fs::write(&path, &out.stdout).unwrap(),
            Some(_) => {
                std::fs::write(&pending, &out.stdout).unwrap();
                panic!(
                    "docs/checks.md is out of date: the new text is in docs/checks.md.new; \
                     review it with scripts/review-goldens (or accept it: scripts/review-goldens --accept)"
                );
            }
            None => panic!(
                "docs/checks.md is out of date: run DHV_CONFORM_UPDATE_DOCS=1 cargo test --test it \
                 cli_ux::docs_checks_md, then scripts/review-goldens (DHV_CONFORM_UPDATE_DOCS=accept \
                 writes it without review)"
            ),
        }
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    for spec in CATALOGUE {
        assert!(
            on_disk.contains(&format!("### `{}` ({})", spec.id, spec.level)),
            "{}",
            spec.id
        );
    }
    for heading in [
        "**Why Nomad cares:**",
        "**How to fix it:**",
        "**Sample plugin:**",
    ] {
        assert_eq!(
            on_disk.matches(heading).count(),
            CATALOGUE.len(),
            "{heading}"
        );
    }
}

#[test]
fn readme_links_the_checks_and_points_nowhere_outside() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains("(docs/checks.md)"),
        "README must link docs/checks.md"
    );
    assert!(
        !readme.contains(&format!("..{}", "/shared")),
        "README points outside the project"
    );
}

/// Nothing in the project names a file outside it: no spec it was written from, no
/// sibling directory, no upper-case `.md` file the repository does not hold (beside the file
/// that names it, or at the root).
#[test]
fn nothing_points_outside_the_repository() {
    let needles = [format!("{}.md", "CONFORMANCE"), format!("..{}", "/shared")];
    let cited = regex::Regex::new(r"\b[A-Z][A-Z0-9_-]+\.md\b").unwrap();
    let mut found = Vec::new();
    let mut dirs = vec![repo().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name == ".git" {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                for needle in &needles {
                    if text.contains(needle.as_str()) {
                        found.push(format!("{}: {needle}", path.display()));
                    }
                }
                for name in cited.find_iter(&text).map(|m| m.as_str()) {
                    let held = repo().join(name).is_file() || dir.join(name).is_file();
                    if !held {
                        found.push(format!("{}: {name}", path.display()));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn explain_prints_one_entry() {
    let out = dhv(&["explain", "delete.auto-delete-safe"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.starts_with("delete.auto-delete-safe (should)\n"));
    for part in [
        "rule: ",
        "why Nomad cares: ",
        "how to fix it: ",
        "sample-plugins/blind-delete",
    ] {
        assert!(out.stdout.contains(part), "{part}: {}", out.stdout);
    }
}

#[test]
fn explain_of_an_unknown_id_exits_2_with_close_ids() {
    let out = dhv(&["explain", "create.idempotnet"]);
    assert_eq!(out.code, Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("no check has the id \"create.idempotnet\"; did you mean create.idempotent?"),
        "{}",
        out.stderr
    );
}

/// Every failure and warning block of the terminal output ends with its explain line.
#[test]
fn failures_and_warnings_end_with_see_explain() {
    let out = dhv(&[
        "check",
        &sample("non-semver-version"),
        "fingerprint.version",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let block = out
        .stdout
        .split("---- ")
        .find(|b| b.starts_with("fingerprint.version-semver (should, warn)"))
        .unwrap_or_else(|| panic!("no warning block: {}", out.stdout));
    let block = block.split("\n\n").next().unwrap();
    let last = block.trim_end().lines().last().unwrap();
    assert_eq!(
        last.trim(),
        "see: dhv-conform explain fingerprint.version-semver"
    );
}

// ---- --list ---------------------------------------------------------------------------

#[test]
fn list_prints_level_id_and_rule() {
    let out = dhv(&["check", "--list"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), CATALOGUE.len());
    let w = CATALOGUE.iter().map(|c| c.id.len()).max().unwrap();
    for (line, spec) in lines.iter().zip(CATALOGUE) {
        let want = format!("{:<6}  {:<w$}  {}", spec.level.as_str(), spec.id, spec.rule);
        assert_eq!(*line, want);
    }
}

#[test]
fn list_as_json_lines() {
    let out = dhv(&["check", "mkdir", "--list", "--format", "json", "delete."]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let entries: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want: Vec<_> = CATALOGUE
        .iter()
        .filter(|c| c.id.contains("delete."))
        .collect();
    assert_eq!(entries.len(), want.len());
    for (e, spec) in entries.iter().zip(want) {
        assert_eq!(e["id"], spec.id);
        assert_eq!(e["level"], spec.level.as_str());
        assert_eq!(e["rule"], spec.rule);
        assert_eq!(e["group"], "delete");
    }
}

// ---- what runs ------------------------------------------------------------------------

#[test]
fn a_selection_of_nothing_exits_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["create.idempotnt"],
            "no check matches the filter \"create.idempotnt\"; did you mean create.idempotent?",
        ),
        (
            &["--exact", "create"],
            "no check matches the filter \"create\" (--exact)",
        ),
        (
            &["fingerprint.", "--skip", "fingerprint"],
            "no check matches the filter \"fingerprint.\" with --skip fingerprint",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["check", "mkdir"];
        all.extend_from_slice(args);
        let out = dhv(&all);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stdout);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.contains("verdict"), "{}", out.stdout);
    }
}

/// `check mkdir` with a file `./mkdir` in the working directory: the built-in is
/// checked, and the output says so; `./mkdir` checks the file.
#[test]
fn mkdir_says_which_one_is_checked() {
    let s = util::Scratch::new();
    let reference = std::fs::read_to_string(sample("reference")).unwrap();
    s.plugin("mkdir", &reference);
    let builtin = dhv_in(s.path(), &["check", "mkdir", "--exact", "fingerprint.runs"]);
    assert_eq!(builtin.code, Some(0), "{}", builtin.stderr);
    assert!(
        builtin.stdout.contains("checking the built-in mkdir plugin (not the file ./mkdir: name it ./mkdir to check that)"),
        "{}",
        builtin.stdout
    );
    let file = dhv_in(
        s.path(),
        &["check", "./mkdir", "--exact", "fingerprint.runs"],
    );
    assert_eq!(file.code, Some(0), "{}", file.stderr);
    assert!(
        file.stdout.contains("checking ./mkdir\n"),
        "{}",
        file.stdout
    );
}

#[test]
fn check_help_lists_exit_codes_and_optional_plugin() {
    let out = dhv(&["check", "--help"]);
    assert_eq!(out.code, Some(0));
    assert!(
        out.stdout
            .contains("Usage: dhv-conform check [OPTIONS] [PLUGIN] [FILTER]"),
        "{}",
        out.stdout
    );
    for line in [
        "0  conformant",
        "1  non-conformant",
        "2  usage or input error",
        "3  --snapshot",
        "4  the harness itself failed",
    ] {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
}

// ---- --keep ---------------------------------------------------------------------------

/// `--keep` leaves the run's temp dir (named at the end), so a reproduce line pasted
/// into a shell runs the plugin against the dirs it names; without it the output says
/// the dirs are gone and how to keep them.
#[test]
fn keep_makes_reproduce_lines_work() {
    let tmp = util::Scratch::new();
    let run = |keep: bool| {
        let mut cmd = Command::cargo_bin("dhv-conform").unwrap();
        cmd.args([
            "check",
            &sample("fails-on-existing-dir"),
            "--exact",
            "create.idempotent",
        ])
        .env("TMPDIR", tmp.path())
        .timeout(RUN_LIMIT);
        if keep {
            cmd.arg("--keep");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    let removed = run(false);
    assert!(
        removed.contains("was removed, so the dirs in the reproduce lines are gone; run again with --keep to keep them"),
        "{removed}"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

    let kept = run(true);
    let dir = kept
        .lines()
        .find_map(|l| l.strip_prefix("the run's temp dir is kept (--keep): "))
        .and_then(|l| l.split(';').next())
        .unwrap_or_else(|| panic!("{kept}"));
    assert!(Path::new(dir).is_dir(), "{dir}");
    let reproduce = kept
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("env -i DHV_OPERATION=create"))
        .unwrap();
    // The check deleted its volume on the way out; the kept volumes dir lets the
    // pasted line create it again, in the dir the line names.
    let again = StdCommand::new("sh")
        .args(["-c", reproduce])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    // In the check's own dir, or the dir of the shared probe it judges.
    assert!(
        stdout.contains(&format!("\"path\": \"{dir}/create.idempotent/volumes/"))
            || stdout.contains(&format!(
                "\"path\": \"{dir}/probe-create.idempotent/volumes/"
            )),
        "{stdout}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

// ---- SLOW -----------------------------------------------------------------------------

/// A response Nomad cannot decode is explained by what the plugin printed, not only
/// by Go's decoder error.
#[test]
fn an_undecodable_response_names_what_the_plugin_printed() {
    let out = dhv(&[
        "check",
        &sample("logs-on-stdout"),
        "--exact",
        "create.response",
    ]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let block = out
        .stdout
        .split("---- create.response (must, fail) ----\n")
        .nth(1)
        .unwrap();
    assert!(
        block.starts_with(
            "text before the JSON on stdout — logs belong on stderr (first line: \"volume ready at "
        ),
        "{block}"
    );
    assert!(
        block.contains("Nomad's decoder says: invalid character 'v'"),
        "{block}"
    );
}
