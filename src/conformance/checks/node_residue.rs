//! What a plugin's calls leave on the node outside the dirs they were given:
//! a log in `/tmp`, a state file in `/var/tmp` or `/run`, a segment in
//! `/dev/shm`. Plugins run with the node's temp dirs (a private `/tmp` per
//! call is not what Nomad gives them), so what they leave there is observed,
//! not prevented.
//!
//! Told by the plugin's own processes where they can be watched: each name a
//! call's processes make outside the run's dir is recorded as they make it
//! ([`AtChanges::RecordOutside`]), so nothing another process on the node
//! makes at the same time is counted. Residue is such a name that is still
//! there after every volume was deleted, born during the check, and made for
//! one volume only: a name the calls of both volumes make (a lock file kept
//! for the whole plugin) is shared state, not a volume's leftover.
//!
//! Where calls cannot be watched (no seccomp user notification), the node's
//! temp dirs are listed before and after (two levels, bounded), and a new
//! name counts only when it holds a volume's id or name: a neighbour's file
//! cannot be told from the plugin's by time alone, and the message says that
//! the attribution was by name.
//!
//! The working dir is not looked at here: `process.cwd-independent` gives
//! the plugin one of its own and sees exactly what lands there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::conformance::host::Host;
use crate::contract::CreateRequest;
use crate::exec::Change;

/// The dirs any program may write in on a node, and the plugin's calls
/// with them.
pub(super) const NODE_DIRS: &[&str] = &["/tmp", "/var/tmp", "/run", "/dev/shm"];

/// The most names listed in one dir, and in all, when calls cannot be watched:
/// a node's `/tmp` can hold anything, and a listing must end.
const PER_DIR: usize = 4096;
const IN_ALL: usize = 50_000;

/// Names of the harness's own temp dirs and of its test suite's: never a
/// plugin's.
const OURS: &[&str] = &["dhv-conform-", "dhv-test-"];

/// The node's temp dirs, each to one level below it (bounded).
pub(super) fn listing(host: &dyn Host) -> BTreeSet<PathBuf> {
    let mut all = BTreeSet::new();
    for dir in NODE_DIRS {
        for entry in entries(host, Path::new(dir)) {
            if all.len() >= IN_ALL {
                return all;
            }
            let is_dir = host.entry(&entry).is_ok_and(|m| m.is_dir());
            if is_dir {
                all.extend(entries(host, &entry).into_iter().take(IN_ALL - all.len()));
            }
            all.insert(entry);
        }
    }
    all
}

fn entries(host: &dyn Host, dir: &Path) -> Vec<PathBuf> {
    let names = host.dir_names(dir, PER_DIR).unwrap_or_default();
    names.into_iter().map(|n| dir.join(n)).collect()
}

/// Whether the name at `path` was born at or after `since` (its birth time,
/// or its change time where the file system keeps none): a name the node had
/// before is not the check's.
fn born_since(host: &dyn Host, path: &Path, since: SystemTime) -> bool {
    let Ok(meta) = host.entry(path) else {
        return false;
    };
    let born = meta.born;
    // File times are taken from a coarse clock: a name made just after
    // `since` can carry a time a tick before it.
    let slack = std::time::Duration::from_millis(20);
    born.is_some_and(|b| b + slack >= since)
}

/// Whether `path` lies in the harness's own temp dirs (another run's,
/// listed beside the plugin's names), as far as the listing goes: its name
/// or its dir's.
fn ours(path: &Path) -> bool {
    path.iter().rev().take(2).any(|n| {
        let n = n.to_string_lossy();
        OURS.iter().any(|o| n.starts_with(o))
    })
}

/// Whether `path` is a node's device or kernel state, not a file left
/// behind: a loop device node `losetup` made where no udev does, say. Only
/// `/dev/shm`, a temp dir, is looked at under `/dev`.
fn kernel_state(path: &Path) -> bool {
    ["/proc", "/sys"].iter().any(|d| path.starts_with(d))
        || (path.starts_with("/dev") && !path.starts_with("/dev/shm"))
}

/// Whether `path` landed directly in the working dir: process.cwd-independent's
/// to judge (it gives the plugin a dir of its own to see it), not this check's.
fn in_cwd(path: &Path, cwd: Option<&Path>) -> bool {
    cwd.is_some_and(|c| path.parent() == Some(c))
}

/// What the watched calls of each volume made outside the run's dir that is
/// still there: every name born since `since`, made by the calls of one
/// volume only, in order.
pub(super) fn left_by_calls(
    host: &dyn Host,
    per_volume: &[Vec<Change>],
    since: SystemTime,
) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().ok();
    let mut made_for: BTreeMap<PathBuf, BTreeSet<usize>> = BTreeMap::new();
    for (volume, changes) in per_volume.iter().enumerate() {
        for path in changes.iter().filter_map(|c| c.path.clone()) {
            made_for.entry(path).or_default().insert(volume);
        }
    }
    made_for
        .into_iter()
        .filter(|(_, volumes)| volumes.len() == 1)
        .map(|(path, _)| path)
        .filter(|p| !in_cwd(p, cwd.as_deref()) && !kernel_state(p))
        .filter(|p| born_since(host, p, since))
        .collect()
}

/// What is new in the node's temp dirs since `before` and names one of
/// `tags` (a volume's id or name), born since `since`: the attribution where
/// calls cannot be watched.
pub(super) fn left_by_name(
    host: &dyn Host,
    before: &BTreeSet<PathBuf>,
    tags: &[String],
    since: SystemTime,
) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().ok();
    listing(host)
        .difference(before)
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| tags.iter().any(|t| !t.is_empty() && n.contains(t.as_str())))
        })
        .filter(|p| !ours(p) && !in_cwd(p, cwd.as_deref()))
        .filter(|p| born_since(host, p, since))
        .cloned()
        .collect()
}

/// How delete.no-residue tells what the plugin left on the node outside the
/// run's dirs: by the calls' own processes where they are `watched`, else by
/// a listing of the node's temp dirs before and after.
pub(super) struct NodeWatch {
    since: SystemTime,
    /// The node's temp dirs before, where calls cannot be watched.
    listed: Option<BTreeSet<PathBuf>>,
}

/// What is left outside the run's dirs, and how it was told the plugin's.
pub(super) type Elsewhere = (Vec<String>, &'static str);

impl NodeWatch {
    /// Starts watching, before the check's first call.
    pub(super) fn start(host: &dyn Host, watched: bool) -> Self {
        let since = SystemTime::now();
        NodeWatch {
            since,
            listed: (!watched).then(|| listing(host)),
        }
    }

    /// Whether the calls' processes were watched (else names were listed).
    pub(super) fn watched(&self) -> bool {
        self.listed.is_none()
    }

    /// What the calls for `reqs` (each volume's made `outside`) left outside
    /// the run's dirs.
    pub(super) fn left_elsewhere(
        &self,
        host: &dyn Host,
        reqs: &[CreateRequest],
        outside: &[Vec<Change>],
    ) -> Elsewhere {
        let (elsewhere, told) = match &self.listed {
            None => (
                left_by_calls(host, outside, self.since),
                "made by the plugin's own processes for one volume",
            ),
            Some(listed) => {
                let tags: Vec<String> = reqs
                    .iter()
                    .flat_map(|r| [r.volume_id.clone(), r.volume_name.clone()])
                    .collect();
                (
                    left_by_name(host, listed, &tags, self.since),
                    "new since the check began and named after a volume: the plugin's processes \
                     could not be watched here, so a name was told the plugin's by its volume's \
                     id or name, not by the process that made it",
                )
            }
        };
        let elsewhere = elsewhere.iter().map(|p| p.display().to_string()).collect();
        (elsewhere, told)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::host::LocalHost;

    fn made(path: &Path) -> Change {
        Change {
            syscall: "openat",
            path: Some(path.to_path_buf()),
        }
    }

    #[test]
    fn a_name_made_for_one_volume_and_still_there_is_residue_a_shared_one_is_not() {
        let since = SystemTime::now();
        let dir = tempfile::Builder::new()
            .prefix("node-residue")
            .tempdir()
            .unwrap();
        let left = dir.path().join("plugin-mkfs.a.log");
        let shared = dir.path().join("plugin.lock");
        let gone = dir.path().join("plugin.tmp");
        std::fs::write(&left, "x").unwrap();
        std::fs::write(&shared, "x").unwrap();
        let per_volume = vec![
            vec![made(&left), made(&shared), made(&gone)],
            vec![made(&shared)],
        ];
        assert_eq!(
            left_by_calls(&LocalHost::new(), &per_volume, since),
            vec![left.clone()]
        );
    }

    #[test]
    fn a_name_older_than_the_check_is_not_its_residue() {
        let dir = tempfile::Builder::new()
            .prefix("node-residue")
            .tempdir()
            .unwrap();
        let old = dir.path().join("plugin.state");
        std::fs::write(&old, "x").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        assert!(left_by_calls(&LocalHost::new(), &[vec![made(&old)]], later).is_empty());
    }

    #[test]
    fn where_calls_are_not_watched_a_new_name_in_tmp_counts_only_with_a_volume_in_it() {
        let since = SystemTime::now();
        let before = listing(&LocalHost::new());
        let id = uuid::Uuid::new_v4().to_string();
        let named = PathBuf::from(format!("/tmp/plugin-log.{id}"));
        let other = PathBuf::from(format!("/tmp/plugin-log.{}", uuid::Uuid::new_v4()));
        std::fs::write(&named, "x").unwrap();
        std::fs::write(&other, "x").unwrap();
        let found = left_by_name(&LocalHost::new(), &before, &[id], since);
        let _ = std::fs::remove_file(&named);
        let _ = std::fs::remove_file(&other);
        assert_eq!(found, vec![named]);
    }

    #[test]
    fn the_harness_dirs_the_working_dir_and_device_nodes_are_not_judged_here() {
        assert!(ours(Path::new("/tmp/dhv-conform-x1/a")));
        assert!(ours(Path::new("/tmp/dhv-test-y")));
        assert!(!ours(Path::new("/tmp/plugin.log")));
        assert!(in_cwd(
            Path::new("/srv/cwd/.last-op"),
            Some(Path::new("/srv/cwd"))
        ));
        assert!(!in_cwd(
            Path::new("/tmp/.last-op"),
            Some(Path::new("/srv/cwd"))
        ));
        assert!(kernel_state(Path::new("/dev/loop7")));
        assert!(!kernel_state(Path::new("/dev/shm/plugin.sem")));
    }
}
