//! What `check` writes once its run is over (the report files, then the
//! snapshot gate's comparison), and the check, made before the run, that
//! every one of those outputs can be written: a typo fails in a second, not
//! after minutes of checks.

use std::path::Path;

use super::check_args::CheckArgs;
use super::report_files::write_to;
use super::{CliError, CliResult, EXIT_OK, EXIT_SNAPSHOT, print_stderr};
use crate::report::{self, Redactions, SnapshotOutcome};

/// Writes the requested report files; returns the snapshot gate's exit code.
pub(super) fn write_reports(args: &CheckArgs, report: &report::Report) -> CliResult {
    write_files(args, report)?;
    match &args.snapshot {
        Some(path) => snapshot_gate(report, path, args.bless),
        None => Ok(EXIT_OK),
    }
}

/// Writes the requested report files, one per format named (see
/// [`FORMATS`](crate::report::FORMATS)).
pub(super) fn write_files(args: &CheckArgs, report: &report::Report) -> Result<(), CliError> {
    for (format, dest) in args.reports.requested() {
        write_to(dest, &(format.run)(report))?;
    }
    Ok(())
}

/// Compares (or blesses) the normalised report.
fn snapshot_gate(report: &report::Report, path: &Path, bless: bool) -> CliResult {
    let text = report::normalise(report, &Redactions::for_report(report));
    if bless {
        report::bless(path, &text)
            .map_err(|e| CliError::usage(format!("{e}: {}", source_of(&e))))?;
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

/// Every output path can be written, checked before the run so that a typo
/// fails in a second, not after minutes of checks; two reports aimed at one
/// file would keep only the last, so that is refused too.
pub(super) fn check_outputs(args: &CheckArgs) -> Result<(), CliError> {
    // JSON to stdout is no file; --bless writes the snapshot, whose dir must
    // exist, as every output's must.
    let reports = args.reports.requested().map(|(f, path)| (f.flag, path));
    let snapshot = args.snapshot.as_deref().filter(|_| args.bless);
    let files: Vec<(&str, &Path)> = reports
        .filter(|(flag, path)| !(*flag == "--json" && *path == Path::new("-")))
        .chain(snapshot.map(|path| ("--snapshot", path)))
        .collect();
    for (_, path) in &files {
        crate::safe_fs::check_target(path).map_err(|e| CliError::usage(e.to_string()))?;
    }
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
