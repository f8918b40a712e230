//! What `check` writes once its run is over (the report files, then the
//! snapshot gate's comparison), and the outputs it opens before the run:
//! every one can be written (a typo fails in a second, not after minutes of
//! checks), none is one of the run's inputs, and each is written through
//! what was opened then, whatever a plugin did to its path meanwhile.

use std::path::{Path, PathBuf};

use super::check_args::CheckArgs;
use super::print_stdout;
use super::{CliError, CliResult, EXIT_OK, EXIT_SNAPSHOT, print_stderr};
use crate::report::{self, Format, Normalised, Redactions, SnapshotOutcome};
use crate::safe_fs::{Output, WriteOptions};

/// Every output of a run, opened before it (see [`open_outputs`]).
pub(super) struct Outputs {
    reports: Vec<(&'static Format, Dest)>,
    /// Where `--bless` writes, when given.
    blessed: Option<Bless>,
}

enum Dest {
    Stdout,
    File(Output),
}

/// Where `--bless` writes the snapshot.
enum Bless {
    /// Beside the snapshot, as its pending file, for a review to accept.
    Pending(Output),
    /// The snapshot itself (`--accept`).
    Accepted(Output),
    /// The snapshot itself, without comparing: a device or FIFO (`/dev/stdout`)
    /// is no file to compare with or to put a pending file beside.
    InPlace(Output),
}

/// Writes the requested report files; returns the snapshot gate's exit code.
pub(super) fn write_reports(
    args: &CheckArgs,
    outputs: &Outputs,
    report: &report::Report,
) -> CliResult {
    write_files(outputs, report)?;
    match &args.snapshot {
        // Which plugin the results are of is unknown: nothing to compare,
        // and nothing to bless; the verdict (inconclusive) gives the exit.
        Some(path) if report.plugin_changed.is_some() => {
            print_stderr(&format!(
                "dhv-conform: the plugin file changed mid-run: snapshot {} was neither compared nor written\n",
                path.display()
            ));
            Ok(EXIT_OK)
        }
        Some(path) => {
            let snapshot = Normalised::of(report, &Redactions::for_report(report), |id| {
                crate::conformance::catalogue::find(id).and_then(|c| c.varies)
            });
            match &outputs.blessed {
                Some(bless) => bless_snapshot(&snapshot, path, bless),
                None => compare_snapshot(&snapshot, path),
            }
        }
        None => Ok(EXIT_OK),
    }
}

/// Writes the requested report files, one per format named (see
/// [`FORMATS`](crate::report::FORMATS)).
pub(super) fn write_files(outputs: &Outputs, report: &report::Report) -> Result<(), CliError> {
    for (format, dest) in &outputs.reports {
        let text = (format.run)(report);
        match dest {
            Dest::Stdout => print_stdout(&text),
            Dest::File(out) => out
                .write(text.as_bytes())
                .map_err(|e| CliError::usage(e.to_string()))?,
        }
    }
    Ok(())
}

/// The gate: the run's snapshot compared with the one stored at `path`
/// (missing or different: exit 3, with what changed and a diff).
fn compare_snapshot(snapshot: &Normalised, path: &Path) -> CliResult {
    let outcome = report::compare(path, snapshot).map_err(read_error)?;
    if matches!(
        outcome,
        SnapshotOutcome::Matched | SnapshotOutcome::MatchedOlder { .. }
    ) {
        return Ok(EXIT_OK);
    }
    let review = format!("dhv-conform snapshot review {}", path.display());
    let pending = report::pending_path(path);
    let waiting = match pending.exists() {
        true => format!(
            "; {} is pending from an earlier --bless: `{review}`",
            pending.display()
        ),
        false => String::new(),
    };
    if let SnapshotOutcome::Missing { path } = &outcome {
        let hint = if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            "under CI a missing snapshot is an error: bless it locally with --bless, review it and commit it"
        } else {
            "run again with --bless to write it for review"
        };
        print_stderr(&format!(
            "dhv-conform: snapshot {} does not exist; {hint}{waiting}\n",
            path.display()
        ));
    } else {
        print_stderr(&format!(
            "dhv-conform: the results differ from snapshot {} (to accept them: --bless, then `{review}`){waiting}:\n",
            path.display()
        ));
    }
    print_outcome(&outcome, snapshot);
    Ok(EXIT_SNAPSHOT)
}

/// `--bless`: a snapshot that still holds the run's results is left as it is
/// (its count and harness line included); otherwise the run's snapshot is
/// written as the pending file (or, with `--accept`, over the snapshot), with
/// what changed and a diff on stderr.
fn bless_snapshot(snapshot: &Normalised, path: &Path, bless: &Bless) -> CliResult {
    let write_error =
        |e: crate::safe_fs::WriteError| CliError::usage(format!("cannot write the snapshot: {e}"));
    let written = |to: &Path| {
        print_stderr(&format!(
            "dhv-conform: snapshot written to {}\n",
            to.display()
        ))
    };
    let out = match bless {
        Bless::InPlace(out) => {
            out.write(snapshot.text.as_bytes()).map_err(write_error)?;
            written(path);
            return Ok(EXIT_OK);
        }
        Bless::Pending(out) | Bless::Accepted(out) => out,
    };
    // A stored snapshot that cannot be read (not UTF-8, say) is no reason to
    // refuse the one that replaces it: blessing is how it gets mended.
    let outcome = report::compare(path, snapshot).unwrap_or_else(|e| {
        print_stderr(&format!(
            "dhv-conform: {e}: {}; the new one replaces it once accepted\n",
            source_of(&e)
        ));
        SnapshotOutcome::Missing {
            path: path.to_owned(),
        }
    });
    if outcome == SnapshotOutcome::Matched {
        drop_stale_pending(path)?;
        print_stderr(&format!(
            "dhv-conform: snapshot {} holds this run's results: left as it is\n",
            path.display()
        ));
        return Ok(EXIT_OK);
    }
    print_outcome(&outcome, snapshot);
    out.write(snapshot.text.as_bytes()).map_err(write_error)?;
    match bless {
        Bless::Accepted(_) => {
            drop_stale_pending(path)?;
            written(path);
        }
        _ => print_stderr(&format!(
            "dhv-conform: pending snapshot written to {}: review it with `dhv-conform snapshot review {shown}`, or accept it with `dhv-conform snapshot accept {shown}`\n",
            report::pending_path(path).display(),
            shown = path.display(),
        )),
    }
    Ok(EXIT_OK)
}

/// What changed and the diff, on stderr; for a missing snapshot, the whole
/// new one as a diff from nothing.
fn print_outcome(outcome: &SnapshotOutcome, snapshot: &Normalised) {
    match outcome {
        SnapshotOutcome::Missing { path } => print_stderr(&report::diff(
            "",
            &snapshot.text,
            "(none)",
            &path.display().to_string(),
        )),
        SnapshotOutcome::Differs {
            path,
            diff,
            changes,
            other_harness,
            older_form,
        } => {
            if let Some(old) = other_harness {
                let now = report::harness_of(&snapshot.text).unwrap_or_default();
                print_stderr(&format!(
                    "dhv-conform: snapshot {} was written by {old}, this is {now}: some of the differences below may be the harness's, not the plugin's (pin the harness version the snapshot was blessed with)\n",
                    path.display()
                ));
            }
            if *older_form {
                print_stderr(&format!(
                    "dhv-conform: snapshot {} is in the older form (a line per check, compared as before); --bless rewrites it in the current one (what did not pass, the rest counted)\n",
                    path.display()
                ));
            }
            let list: String = changes.iter().map(|c| format!("  {c}\n")).collect();
            print_stderr(&list);
            print_stderr(diff);
        }
        SnapshotOutcome::Matched | SnapshotOutcome::MatchedOlder { .. } => {}
    }
}

/// Removes a pending snapshot an earlier `--bless` left, now that it is out
/// of date: a review must never offer what this run contradicts.
fn drop_stale_pending(path: &Path) -> Result<(), CliError> {
    let pending = report::Pending {
        snapshot: path.to_owned(),
        pending: report::pending_path(path),
    };
    if !pending.pending.exists() {
        return Ok(());
    }
    report::reject(&pending).map_err(read_error)?;
    print_stderr(&format!(
        "dhv-conform: removed {}, out of date\n",
        pending.pending.display()
    ));
    Ok(())
}

fn read_error(e: report::SnapshotError) -> CliError {
    CliError::usage(format!("{e}: {}", source_of(&e)))
}

fn source_of(e: &dyn std::error::Error) -> String {
    e.source().map(|s| s.to_string()).unwrap_or_default()
}

/// Opens every output before the run (see the module docs): a path that
/// cannot be written, two reports aimed at one file (only the last would be
/// kept), and an output that is one of the run's `inputs` (each with what it
/// is, e.g. "the plugin") are refused, exit 2.
pub(super) fn open_outputs(
    args: &CheckArgs,
    inputs: &[(&str, PathBuf)],
) -> Result<Outputs, CliError> {
    // JSON to stdout is no file; --bless writes the snapshot (or its pending
    // file beside it), whose dir must exist, as every output's must. The
    // snapshot is opened in either case: a review accepts the pending file over it.
    let reports = args.reports.requested().map(|(f, path)| (f.flag, path));
    let snapshot = args.snapshot.as_deref().filter(|_| args.bless);
    // A device or FIFO is written in place, as before: nothing sits beside it.
    let in_place = snapshot.is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| !m.is_file()));
    let pending = snapshot
        .filter(|_| !args.accept && !in_place)
        .map(report::pending_path);
    let files: Vec<(&str, &Path)> = reports
        .filter(|(flag, path)| !(*flag == "--json" && *path == Path::new("-")))
        .chain(snapshot.map(|path| ("--snapshot", path)))
        .chain(pending.as_deref().map(|path| ("--bless", path)))
        .collect();
    let opened = open_each(&files, inputs)?;
    refuse_one_file_twice(&files)?;
    Ok(outputs_of(args, opened, in_place))
}

/// Opens each of `files` (flag, path), in order; none may be one of `inputs`.
fn open_each(files: &[(&str, &Path)], inputs: &[(&str, PathBuf)]) -> Result<Vec<Output>, CliError> {
    let mut opened = Vec::new();
    for (flag, path) in files {
        let opts = if matches!(*flag, "--snapshot" | "--bless") {
            // A snapshot is committed: flushed to disk before the rename.
            WriteOptions {
                durable: true,
                temp_prefix: ".snapshot",
                ..Default::default()
            }
        } else {
            WriteOptions::default()
        };
        let out = Output::open(path, opts).map_err(|e| CliError::usage(e.to_string()))?;
        if let Some(what) = an_input(&out, inputs) {
            return Err(CliError::usage(format!(
                "{flag} {}: that is {what}, an input of the run: refusing to write over it",
                path.display()
            )));
        }
        opened.push(out);
    }
    Ok(opened)
}

/// Two of `files` (flag, path) that end in one file are refused: only the
/// last written would be kept.
fn refuse_one_file_twice(files: &[(&str, &Path)]) -> Result<(), CliError> {
    for (i, (flag, path)) in files.iter().enumerate() {
        if let Some((other, _)) = files[..i].iter().find(|(_, p)| same_file(p, path)) {
            return Err(CliError::usage(format!(
                "{other} and {flag} name the same file {}: each report needs its own",
                path.display()
            )));
        }
    }
    Ok(())
}

/// The [`Outputs`], from what was `opened` in [`open_outputs`]' order: the
/// report files, then the snapshot, then its pending file.
fn outputs_of(args: &CheckArgs, opened: Vec<Output>, in_place: bool) -> Outputs {
    let mut opened = opened.into_iter();
    let mut outputs = Outputs {
        reports: Vec::new(),
        blessed: None,
    };
    for (format, path) in args.reports.requested() {
        if format.flag == "--json" && path == Path::new("-") {
            outputs.reports.push((format, Dest::Stdout));
        } else if let Some(out) = opened.next() {
            outputs.reports.push((format, Dest::File(out)));
        }
    }
    let snapshot = opened.next();
    outputs.blessed = match (snapshot, opened.next()) {
        (Some(_), Some(pending)) => Some(Bless::Pending(pending)),
        (Some(out), None) if in_place => Some(Bless::InPlace(out)),
        (Some(out), None) => Some(Bless::Accepted(out)),
        (None, _) => None,
    };
    outputs
}

/// Which of `inputs` the output `out` would write over: the same file (device
/// and inode, links followed, hard links included), or the same path (a file
/// not made yet, such as a missing snapshot the output would create).
fn an_input<'a>(out: &Output, inputs: &'a [(&'a str, PathBuf)]) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    inputs.iter().find_map(|(what, path)| {
        let same_id = std::fs::metadata(path).ok().is_some_and(|m| {
            out.existing()
                .is_some_and(|id| id.dev == m.dev() && id.ino == m.ino())
        });
        let same_path = crate::safe_fs::resolved_path(path) == out.resolved();
        (same_id || same_path).then(|| format!("{what} {}", path.display()))
    })
}

/// Whether two output paths end in one regular file (or one file yet to be
/// made), so one write would replace the other. A device or FIFO named twice
/// is written in place twice, which loses nothing.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.is_file() && x.dev() == y.dev() && x.ino() == y.ino(),
        (Err(_), Err(_)) => match (std::path::absolute(a), std::path::absolute(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        },
        _ => false,
    }
}
