//! What `check` writes once its run is over (the report files, then the
//! snapshot gate's comparison), and the outputs it opens before the run:
//! every one can be written (a typo fails in a second, not after minutes of
//! checks), none is one of the run's inputs, and each is written through
//! what was opened then, whatever a plugin did to its path meanwhile.

use std::path::{Path, PathBuf};

use super::check_args::CheckArgs;
use super::print_stdout;
use super::{CliError, CliResult, EXIT_OK, EXIT_SNAPSHOT, print_stderr};
use crate::report::{self, Format, Redactions, SnapshotOutcome};
use crate::safe_fs::{Output, WriteOptions};

/// Every output of a run, opened before it (see [`open_outputs`]).
pub(super) struct Outputs {
    reports: Vec<(&'static Format, Dest)>,
    /// The `--snapshot` file when blessing.
    blessed: Option<Output>,
}

enum Dest {
    Stdout,
    File(Output),
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
        Some(path) => snapshot_gate(report, path, outputs.blessed.as_ref()),
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

/// Compares the normalised report with `path`, or blesses it into the
/// snapshot opened before the run.
fn snapshot_gate(report: &report::Report, path: &Path, blessed: Option<&Output>) -> CliResult {
    let text = report::normalise(report, &Redactions::for_report(report));
    if let Some(out) = blessed {
        out.write(text.as_bytes())
            .map_err(|e| CliError::usage(format!("cannot write the snapshot: {e}")))?;
        print_stderr(&format!(
            "dhv-conform: snapshot written to {}\n",
            path.display()
        ));
        return Ok(EXIT_OK);
    }
    match report::compare(path, &text)
        .map_err(|e| CliError::usage(format!("{e}: {}", source_of(&e))))?
    {
        SnapshotOutcome::Matched => Ok(EXIT_OK),
        SnapshotOutcome::Missing { path } => {
            let hint = if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                "under CI a missing snapshot is an error: bless it locally with --bless and commit it"
            } else {
                "run again with --bless to write it"
            };
            print_stderr(&format!(
                "dhv-conform: snapshot {} does not exist; {hint}\n",
                path.display()
            ));
            print_stderr(&report::diff(
                "",
                &text,
                "(none)",
                &path.display().to_string(),
            ));
            Ok(EXIT_SNAPSHOT)
        }
        SnapshotOutcome::Differs {
            path,
            diff,
            other_harness,
        } => {
            if let Some(old) = other_harness {
                let now = report::harness_of(&text).unwrap_or_default();
                print_stderr(&format!(
                    "dhv-conform: snapshot {} was written by {old}, this is {now}: some of the differences below may be the harness's, not the plugin's (pin the harness version the snapshot was blessed with)\n",
                    path.display()
                ));
            }
            print_stderr(&format!(
                "dhv-conform: the results differ from snapshot {} (review, then --bless to accept):\n",
                path.display()
            ));
            print_stderr(&diff);
            Ok(EXIT_SNAPSHOT)
        }
    }
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
    // JSON to stdout is no file; --bless writes the snapshot, whose dir must
    // exist, as every output's must.
    let reports = args.reports.requested().map(|(f, path)| (f.flag, path));
    let snapshot = args.snapshot.as_deref().filter(|_| args.bless);
    let files: Vec<(&str, &Path)> = reports
        .filter(|(flag, path)| !(*flag == "--json" && *path == Path::new("-")))
        .chain(snapshot.map(|path| ("--snapshot", path)))
        .collect();
    let mut opened = Vec::new();
    for (flag, path) in &files {
        let opts = if *flag == "--snapshot" {
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
        opened.push((*flag, out));
    }
    for (i, (flag, path)) in files.iter().enumerate() {
        if let Some((other, _)) = files[..i].iter().find(|(_, p)| same_file(p, path)) {
            return Err(CliError::usage(format!(
                "{other} and {flag} name the same file {}: each report needs its own",
                path.display()
            )));
        }
    }
    let mut opened = opened.into_iter();
    let mut outputs = Outputs {
        reports: Vec::new(),
        blessed: None,
    };
    for (format, path) in args.reports.requested() {
        if format.flag == "--json" && path == Path::new("-") {
            outputs.reports.push((format, Dest::Stdout));
        } else if let Some((_, out)) = opened.next() {
            outputs.reports.push((format, Dest::File(out)));
        }
    }
    outputs.blessed = opened.next().map(|(_, out)| out);
    Ok(outputs)
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
