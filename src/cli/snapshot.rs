//! `snapshot review|accept|reject PATH...`: the pending snapshots that
//! `check --snapshot FILE --bless` wrote beside their snapshots (`FILE.new`),
//! shown with what changed and moved over `FILE` or removed, as `cargo insta
//! review` does with insta's. `review` asks for each; `accept` and `reject`
//! ask nothing, for scripts and CI.

use std::io::BufRead;
use std::path::PathBuf;

use super::{CliError, CliResult, EXIT_OK, EXIT_SNAPSHOT, print_stderr, print_stdout};
use crate::report::{self, Pending};

/// The `snapshot` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum SnapshotCommand {
    /// Show each pending snapshot (what changed, and a diff) and ask: accept, reject or skip.
    ///
    /// The answers are read from stdin, one line each (`a`, `r` or `s`); at its
    /// end the rest is skipped. Exit 0 when nothing is left pending, 3 when
    /// something is (skipped), 2 for a bad PATH or a file that cannot be
    /// read or written.
    Review(Paths),
    /// Accept every pending snapshot at PATH without asking: each replaces its snapshot.
    ///
    /// Exit 0 (nothing pending is no error), 2 for a bad PATH or a file that
    /// cannot be read or written.
    Accept(Paths),
    /// Reject every pending snapshot at PATH without asking: each is removed.
    ///
    /// Exit 0 (nothing pending is no error), 2 for a bad PATH or a file that
    /// cannot be removed.
    Reject(Paths),
}

/// Where to look for pending snapshots.
#[derive(Debug, clap::Args)]
pub struct Paths {
    /// A snapshot (FILE: its FILE.new), a pending file (FILE.new), or a
    /// directory (every pending dhv-conform snapshot in it, not below).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

/// Runs a `snapshot` subcommand.
pub fn run(cmd: SnapshotCommand) -> CliResult {
    match cmd {
        SnapshotCommand::Review(p) => {
            let found = pending_at(&p.paths)?;
            let stdin = std::io::stdin();
            review(&found, &mut stdin.lock())
        }
        SnapshotCommand::Accept(p) => {
            for pending in pending_at(&p.paths)? {
                report::accept(&pending).map_err(failed)?;
                print_stderr(&format!(
                    "dhv-conform: accepted {}\n",
                    pending.snapshot.display()
                ));
            }
            Ok(EXIT_OK)
        }
        SnapshotCommand::Reject(p) => {
            for pending in pending_at(&p.paths)? {
                report::reject(&pending).map_err(failed)?;
                print_stderr(&format!(
                    "dhv-conform: rejected {} (removed)\n",
                    pending.pending.display()
                ));
            }
            Ok(EXIT_OK)
        }
    }
}

/// Every pending snapshot at `paths`, each once, before anything is changed:
/// a bad path is exit 2 with nothing done. A path with nothing pending says so.
fn pending_at(paths: &[PathBuf]) -> Result<Vec<Pending>, CliError> {
    let mut all: Vec<Pending> = Vec::new();
    for path in paths {
        let found = report::find_pending(path).map_err(failed)?;
        if found.is_empty() {
            print_stderr(&format!(
                "dhv-conform: nothing pending for {}\n",
                path.display()
            ));
        }
        for pending in found {
            if !all.contains(&pending) {
                all.push(pending);
            }
        }
    }
    Ok(all)
}

/// Shows each pending snapshot on stdout and asks on stderr; answers come
/// from `answers`, one line each.
fn review(found: &[Pending], answers: &mut dyn BufRead) -> CliResult {
    let (mut accepted, mut rejected, mut left) = (0, 0, 0);
    for pending in found {
        print_stdout(&shown(pending).map_err(failed)?);
        match ask(answers) {
            Some('a') => {
                report::accept(pending).map_err(failed)?;
                accepted += 1;
            }
            Some('r') => {
                report::reject(pending).map_err(failed)?;
                rejected += 1;
            }
            _ => left += 1,
        }
    }
    print_stderr(&format!(
        "dhv-conform: {accepted} accepted, {rejected} rejected, {left} left pending\n"
    ));
    Ok(if left > 0 { EXIT_SNAPSHOT } else { EXIT_OK })
}

/// One pending snapshot as a review shows it: which, what changed, the diff.
fn shown(pending: &Pending) -> Result<String, report::SnapshotError> {
    let proposed = pending.proposed()?;
    let name = pending.snapshot.display().to_string();
    let shown = pending.pending.display();
    // An unreadable snapshot is what the pending one mends: shown as nothing.
    let (stored, mut out) = match pending.stored() {
        Ok(Some(stored)) => (stored, format!("pending snapshot {shown}:\n")),
        Ok(None) => (
            String::new(),
            format!("pending snapshot {shown} (new: there is no {name} yet):\n"),
        ),
        Err(e) => (
            String::new(),
            format!("pending snapshot {shown} (in place of {name}, which cannot be read: {e})\n"),
        ),
    };
    if !stored.is_empty() {
        for change in report::changes(&stored, &proposed) {
            out.push_str(&format!("  {change}\n"));
        }
    }
    let new_name = pending.pending.display().to_string();
    out.push_str(&report::diff(&stored, &proposed, &name, &new_name));
    Ok(out)
}

/// Asks until the answer is `a`, `r` or `s` (the first letter of a word
/// counts); `None` at the end of the answers.
fn ask(answers: &mut dyn BufRead) -> Option<char> {
    loop {
        print_stderr("accept (a), reject (r) or skip (s)? ");
        let mut line = String::new();
        match answers.read_line(&mut line) {
            Ok(0) | Err(_) => {
                print_stderr("\n");
                return None;
            }
            Ok(_) => {}
        }
        match line.trim().chars().next().map(|c| c.to_ascii_lowercase()) {
            Some(c @ ('a' | 'r' | 's')) => return Some(c),
            _ => continue,
        }
    }
}

fn failed(e: report::SnapshotError) -> CliError {
    let why = std::error::Error::source(&e)
        .map(|s| format!(": {s}"))
        .unwrap_or_default();
    CliError::usage(format!("{e}{why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn pending_in(dir: &Path, name: &str, stored: Option<&str>, proposed: &str) -> Pending {
        let snapshot = dir.join(name);
        if let Some(text) = stored {
            fs::write(&snapshot, text).unwrap();
        }
        report::write_pending(&snapshot, proposed).unwrap();
        Pending {
            pending: report::pending_path(&snapshot),
            snapshot,
        }
    }

    /// A review takes one answer per pending snapshot, asks again after a
    /// word it does not know, and leaves the rest pending at the end of its
    /// input (exit 3).
    #[test]
    fn review_accepts_rejects_and_skips_by_the_answers() {
        let dir = tempfile::tempdir().unwrap();
        let head = "schema: dhv-conform/report/v1\nverdict: conformant\npassed: 1 of 2 checks; the others are listed below\n\n";
        let a = pending_in(
            dir.path(),
            "a.snap",
            Some(&format!("{head}x.y must fail\n")),
            head,
        );
        let b = pending_in(dir.path(), "b.snap", Some("old\n"), "new\n");
        let c = pending_in(dir.path(), "c.snap", None, head);
        let d = pending_in(dir.path(), "d.snap", None, head);
        let found = [a.clone(), b.clone(), c.clone(), d.clone()];
        let mut answers = "what?\naccept\nR\ns\n".as_bytes();
        assert_eq!(review(&found, &mut answers).unwrap(), EXIT_SNAPSHOT);
        assert_eq!(fs::read_to_string(&a.snapshot).unwrap(), head);
        assert!(!a.pending.exists());
        assert_eq!(fs::read_to_string(&b.snapshot).unwrap(), "old\n");
        assert!(!b.pending.exists());
        for left in [&c, &d] {
            assert!(left.pending.exists() && !left.snapshot.exists());
        }
        let mut all = "a\na\n".as_bytes();
        assert_eq!(review(&[c, d], &mut all).unwrap(), EXIT_OK);
    }

    /// What a review shows: the change, line by line, and the diff.
    #[test]
    fn a_review_shows_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let head = "schema: dhv-conform/report/v1\nverdict: conformant\npassed: 1 of 2 checks; the others are listed below\n\n";
        let p = pending_in(
            dir.path(),
            "a.snap",
            Some(&format!("{head}x.y must fail\n")),
            head,
        );
        let text = shown(&p).unwrap();
        assert!(
            text.contains("  x.y: fail before, passed or not run now\n"),
            "{text}"
        );
        assert!(text.contains("\n-x.y must fail\n"), "{text}");
        let new = pending_in(dir.path(), "n.snap", None, head);
        assert!(shown(&new).unwrap().contains("(new: there is no"));
    }
}
