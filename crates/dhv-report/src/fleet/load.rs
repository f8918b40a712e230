//! Merging many report files: parsed on a few threads, folded in file order.
//!
//! Parsing is nearly all of a merge's time (a node's report is a few hundred KiB of
//! invocations to skip), so files are read and parsed on worker threads, each with its
//! own reused buffer, while one thread folds the lean results into the [`Merger`]. The
//! fold happens in file order whatever order the workers finish in, so the result and
//! the first error reported (the earliest bad file) do not depend on thread timing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

use super::FleetError;
use super::merge::Merger;
use super::model::FleetReport;
use super::read::{NodeReport, read_report};

/// Worker threads at most: beyond this the disk, not the parser, is the limit.
const MAX_WORKERS: usize = 4;
/// Parsed reports in flight between the workers and the fold.
const IN_FLIGHT: usize = 64;

#[cfg(feature = "files")]
/// Reads, checks and merges `files` (as given by [`super::expand_inputs`]).
///
/// Stops at the first file, in order, that cannot be used, and returns its error.
pub fn merge_files(files: &[PathBuf]) -> Result<FleetReport, FleetError> {
    let workers = thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_WORKERS)
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<NodeReport, FleetError>)>(IN_FLIGHT);
    thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(index) else { break };
                    if tx.send((index, read_report(file, &mut buf))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let result = fold(files, &rx);
        // On an error the workers stop claiming files; dropping the receiver wakes any
        // worker blocked on a full channel.
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        result
    })
}

/// Folds the workers' results into a merger in file order.
fn fold(
    files: &[PathBuf],
    rx: &mpsc::Receiver<(usize, Result<NodeReport, FleetError>)>,
) -> Result<FleetReport, FleetError> {
    let mut merger = Merger::new();
    // Results that arrived ahead of their turn; workers claim files in order, so this
    // holds about one result per worker.
    let mut early = BTreeMap::new();
    for (index, file) in files.iter().enumerate() {
        let result = loop {
            if let Some(result) = early.remove(&index) {
                break result;
            }
            match rx.recv() {
                Ok((i, result)) if i == index => break result,
                Ok((i, result)) => {
                    early.insert(i, result);
                }
                // Every worker has gone without sending this file: only a worker that
                // panicked does that (the scope re-raises it), but say so, not crash.
                Err(_) => {
                    return Err(FleetError::Read {
                        path: file.clone(),
                        source: std::io::Error::other("the reading thread stopped"),
                    });
                }
            }
        };
        merger.add(file, result?)?;
    }
    Ok(merger.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeInfo, sample, to_json};
    use std::fs;

    fn write_fleet(dir: &std::path::Path, n: usize) -> Vec<PathBuf> {
        let mut report = sample::report(false);
        (0..n)
            .map(|i| {
                report.node = Some(NodeInfo {
                    name: format!("node-{i:02}"),
                });
                let path = dir.join(format!("{i:02}.json"));
                fs::write(&path, to_json(&report)).unwrap();
                path
            })
            .collect()
    }

    #[test]
    fn threads_give_what_one_reader_gives() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_fleet(dir.path(), 30);
        let mut merger = Merger::new();
        let mut buf = Vec::new();
        for file in &files {
            merger
                .add(file, read_report(file, &mut buf).unwrap())
                .unwrap();
        }
        assert_eq!(merge_files(&files).unwrap(), merger.finish());
    }

    #[test]
    fn the_first_bad_file_in_order_is_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_fleet(dir.path(), 30);
        fs::write(&files[25], "{").unwrap();
        fs::write(&files[12], r#"{"schema":"other"}"#).unwrap();
        for _ in 0..5 {
            let err = merge_files(&files).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("{}: schema \"other\"", files[12].display())),
                "{err}"
            );
        }
    }
}
