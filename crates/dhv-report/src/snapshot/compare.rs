//! Comparing a run's snapshot with a stored one: of results, not of bytes (the
//! rules are in the module docs above), with a diff and a list of what changed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use similar::TextDiff;

use super::form::{Block, Parsed, harness_of};
use super::{Normalised, SCHEMA_KEY};

/// Lines of unchanged context around each change in a diff.
const DIFF_CONTEXT: usize = 3;

/// The result of comparing a normalised report with a stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotOutcome {
    /// The stored snapshot holds the run's results (see [`same_results`]).
    Matched,
    /// The stored snapshot is in the older form, one line per check, and equals
    /// the run's in that form (but for the harness that wrote it).
    MatchedOlder {
        /// The snapshot file compared with.
        path: PathBuf,
    },
    /// There is no snapshot file yet.
    Missing {
        /// The snapshot file that was looked for.
        path: PathBuf,
    },
    /// The stored snapshot's results differ from the run's.
    Differs {
        /// The snapshot file compared with.
        path: PathBuf,
        /// A unified diff from the stored snapshot to this run.
        diff: String,
        /// What changed, one line per check (and one for the header): the id,
        /// what it was, what it is now.
        changes: Vec<String>,
        /// The harness that wrote the stored snapshot, when it is not this run's (or the
        /// snapshot names none): the difference may be the harness's wording, not the
        /// plugin's behaviour.
        other_harness: Option<String>,
        /// The stored snapshot is in the older form, compared as it was.
        older_form: bool,
    },
}

/// Compares `run` with `stored`, the text of the snapshot at `path` (`None`:
/// there is none), as `compare` (the `files` feature) does once it has read the file.
pub fn compare_stored(path: &Path, stored: Option<&str>, run: &Normalised) -> SnapshotOutcome {
    let Some(stored) = stored else {
        return SnapshotOutcome::Missing {
            path: path.to_owned(),
        };
    };
    // A file that is no snapshot at all (no schema line) is compared with the
    // current form: that is what blessing would write over it.
    let current = Parsed::of(stored).is_current() || !stored.starts_with(SCHEMA_KEY);
    let run = if current { &run.text } else { &run.older };
    if same_results(stored, run) {
        return match current {
            true => SnapshotOutcome::Matched,
            false => SnapshotOutcome::MatchedOlder {
                path: path.to_owned(),
            },
        };
    }
    let shown = pin_as_stored(stored, run);
    let other_harness = match (harness_of(stored), harness_of(run)) {
        (old, new) if old == new => None,
        (old, _) => Some(old.unwrap_or("an unnamed harness").to_owned()),
    };
    let old_name = path.display().to_string();
    let new_name = format!("{old_name} (this run)");
    SnapshotOutcome::Differs {
        path: path.to_owned(),
        diff: diff(stored, &shown, &old_name, &new_name),
        changes: changes(stored, &shown),
        other_harness,
        older_form: !current,
    }
}

/// Whether `run` (a normalised report) holds the results `stored` holds: the
/// same form, the same header but for the harness and the count of checks that
/// passed, and the same check lines, a check not pinned on either side aside
/// (see [`pin_as_stored`]). Line ends `\r\n` in `stored` count as `\n`, and
/// trailing blank lines on either side count for nothing.
pub fn same_results(stored: &str, run: &str) -> bool {
    let stored = stored.replace("\r\n", "\n");
    let shown = pin_as_stored(&stored, run);
    let (a, b) = (Parsed::of(&stored), Parsed::of(&shown));
    a.is_current() == b.is_current()
        && a.results_header() == b.results_header()
        && a.blocks.len() == b.blocks.len()
        && a.blocks
            .iter()
            .zip(&b.blocks)
            .all(|(x, y)| x.trimmed() == y.trimmed())
}

/// `run` (a normalised report) with every check that is not pinned on either
/// side (`<id> <level> [not pinned: …]`: a measurement near its bound, which the
/// host's load can move across it) given its block from `stored`, or none when
/// `stored` (in the current form) leaves it out as passed: such a check is not
/// compared, so neither a quiet nor a busy machine makes a difference of it. A
/// check that is pinned on both sides is compared as it is.
pub fn pin_as_stored(stored: &str, run: &str) -> String {
    let (s, r) = (Parsed::of(stored), Parsed::of(run));
    let unpinned: BTreeSet<&str> = s
        .blocks
        .iter()
        .chain(&r.blocks)
        .filter(|b| b.unpinned())
        .map(|b| b.id)
        .collect();
    if unpinned.is_empty() {
        return run.to_owned();
    }
    // In the current form a check the stored snapshot leaves out passed; in
    // the older form every check it held has its line.
    let current = s.is_current();
    let mut ids: Vec<&str> = r.blocks.iter().map(|b| b.id).collect();
    if current {
        ids.extend(s.blocks.iter().filter(|b| b.unpinned()).map(|b| b.id));
        ids.sort_unstable();
        ids.dedup();
    }
    let mut out = run[..r.body_start].to_owned();
    for id in ids {
        let block = match (s.block(id), r.block(id)) {
            (_, Some(run)) if !unpinned.contains(id) => Some(run),
            (Some(stored), _) => Some(stored),
            (None, run) if !current => run,
            (None, _) => None,
        };
        if let Some(block) = block {
            out.push_str(block.text.trim_end_matches('\n'));
            out.push('\n');
        }
    }
    if !run.ends_with('\n') && out.len() > r.body_start {
        out.pop();
    }
    out
}

/// What differs between two snapshots, one line per check that changed (and one
/// for the header): `<id>: <before> before, <now> now`.
pub fn changes(stored: &str, run: &str) -> Vec<String> {
    let (s, r) = (Parsed::of(stored), Parsed::of(run));
    let mut out = Vec::new();
    let (a, b) = (s.results_header(), r.results_header());
    if a != b {
        let gone: Vec<&str> = a.iter().filter(|l| !b.contains(l)).copied().collect();
        let came: Vec<&str> = b.iter().filter(|l| !a.contains(l)).copied().collect();
        out.push(format!(
            "header: `{}` before, `{}` now",
            gone.join("; "),
            came.join("; ")
        ));
    }
    let absent = match s.is_current() {
        true => "passed or not run",
        false => "not run",
    };
    let state = |block: Option<&Block<'_>>, absent: &'static str| match block {
        Some(b) => b.status().unwrap_or("not pinned").to_owned(),
        None => absent.to_owned(),
    };
    let ids: BTreeSet<&str> = s.blocks.iter().chain(&r.blocks).map(|b| b.id).collect();
    for id in ids {
        let (old, new) = (s.block(id), r.block(id));
        if old.map(Block::trimmed) == new.map(Block::trimmed) {
            continue;
        }
        let (before, now) = (state(old, absent), state(new, absent));
        out.push(match before == now {
            true => format!("{id}: {now}, another message"),
            false => format!("{id}: {before} before, {now} now"),
        });
    }
    out
}

/// A unified diff from `old` to `new` with three lines of context, headed
/// `--- old_name` / `+++ new_name`.
pub fn diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(old_name, new_name)
        .to_string()
}
