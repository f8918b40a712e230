//! Who owns a run's temp dir, and the leftovers of runs whose owner is gone.
//!
//! A run killed outright (SIGKILL, the OOM killer, a power cut of the
//! container) has no teardown: its mounts, loop devices and temp dir stay.
//! So each run records its ownership in its temp dir, in [`OWNER_FILE`]: its
//! pid, its process's start time (field 22 of `/proc/PID/stat`) and the dir
//! itself, and holds an exclusive `flock` on that file for as long as it runs.
//! The next run, and `dhv-conform clean`, look at every `dhv-conform-*` dir of
//! the temp dir that is a real dir (not a link), owned by the caller, with an
//! owner file naming that very dir, and clean it only when its run is gone:
//! the lock can be taken (the kernel drops a dead process's locks), and the
//! pid is dead or now another process (another start time). A dir without an
//! owner file, or whose owner lives, is never touched. Cleaning is the
//! teardown's own second half: unmount what is below it, detach the loop
//! devices backed by its files, remove it without crossing a mount.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::fcntl::{Flock, FlockArg};

use super::teardown::Teardown;

/// The owner file's name in a run's temp dir.
pub const OWNER_FILE: &str = ".dhv-conform-owner";

/// The prefix of a run's temp dir in the temp dir.
pub(crate) const ROOT_PREFIX: &str = "dhv-conform-";

/// The owner files of this process's live runs, locked until their teardown.
static HELD: Mutex<Vec<(PathBuf, Flock<File>)>> = Mutex::new(Vec::new());

/// Records this process as the owner of `root` (a dir it just made) and
/// holds the lock that says it is alive, until [`disown`].
pub(crate) fn own(root: &Path) -> std::io::Result<()> {
    let me = std::process::id() as i32;
    let start = start_time(me).unwrap_or(0);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(root.join(OWNER_FILE))?;
    file.write_all(format!("pid={me}\nstart={start}\nroot={}\n", root.display()).as_bytes())?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    crate::lock(&HELD).push((root.to_path_buf(), lock));
    Ok(())
}

/// Lets go of `root`: its lock is released. With `keep` (the user asked for
/// the dir), the owner file goes too, so no later run takes it for a leftover.
pub(crate) fn disown(root: &Path, keep: bool) {
    if keep {
        let _ = std::fs::remove_file(root.join(OWNER_FILE));
    }
    crate::lock(&HELD).retain(|(r, _)| r != root);
}

/// A run's ownership as its owner file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: i32,
    start: u64,
    root: PathBuf,
}

fn parse_owner(text: &str) -> Option<Owner> {
    let mut pid = None;
    let mut start = None;
    let mut root = None;
    for line in text.lines() {
        match line.split_once('=')? {
            ("pid", v) => pid = v.parse().ok(),
            ("start", v) => start = v.parse().ok(),
            ("root", v) => root = Some(PathBuf::from(v)),
            _ => {}
        }
    }
    Some(Owner {
        pid: pid?,
        start: start?,
        root: root?,
    })
}

/// The start time of `pid` (clock ticks since boot), if it lives.
fn start_time(pid: i32) -> Option<u64> {
    crate::exec::process_start_time(pid)
}

/// What cleaning one leftover did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Cleaned {
    /// The pid of the run that left it.
    pub pid: i32,
    /// What was unmounted, detached and removed, as the teardown tells it.
    pub teardown: Teardown,
}

impl Cleaned {
    /// One line for the terminal.
    pub fn summary(&self) -> String {
        format!(
            "leftovers of run {} (its process is gone): {}",
            self.pid,
            self.teardown.summary()
        )
    }
}

/// Finds the temp dirs of runs whose process is gone in `tmp` (the temp dir
/// runs make theirs in) and cleans each; the live runs' are not touched.
pub fn clean_leftovers(tmp: &Path) -> Vec<Cleaned> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(ROOT_PREFIX))
        .map(|e| e.path())
        .collect();
    names.sort();
    names.iter().filter_map(|dir| clean_one(dir)).collect()
}

/// Cleans `dir` if it is the temp dir of a run of ours that is gone.
fn clean_one(dir: &Path) -> Option<Cleaned> {
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return None;
    }
    let owner_path = dir.join(OWNER_FILE);
    let file = crate::safe_fs::open_regular(&owner_path, crate::safe_fs::Links::Refuse).ok()?;
    // Held while cleaning: a second cleaner at the same time skips it.
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
    let text =
        crate::safe_fs::read_text_bounded(&owner_path, 4096, crate::safe_fs::Links::Refuse).ok()?;
    let owner = parse_owner(&text)?;
    if owner.root != dir {
        return None;
    }
    if start_time(owner.pid).is_some_and(|s| s == owner.start) {
        // Its process lives (it may have let go of its lock): not ours to touch.
        return None;
    }
    let teardown = super::teardown::remove_unheld(dir);
    drop(lock);
    Some(Cleaned {
        pid: owner.pid,
        teardown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_file_reads_back() {
        let text = "pid=12\nstart=345\nroot=/tmp/dhv-conform-x\n";
        assert_eq!(
            parse_owner(text),
            Some(Owner {
                pid: 12,
                start: 345,
                root: "/tmp/dhv-conform-x".into()
            })
        );
        assert_eq!(parse_owner("pid=12\n"), None);
        assert_eq!(parse_owner("garbage"), None);
    }

    #[test]
    fn a_live_run_and_a_dir_without_an_owner_are_not_touched_and_a_dead_one_is() {
        let tmp = tempfile::tempdir().unwrap();
        let live = tmp.path().join("dhv-conform-live");
        let bare = tmp.path().join("dhv-conform-bare");
        let dead = tmp.path().join("dhv-conform-dead");
        for d in [&live, &bare, &dead] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("file"), "x").unwrap();
        }
        own(&live).unwrap();
        // A pid that cannot be alive: beyond the kernel's pid_max.
        std::fs::write(
            dead.join(OWNER_FILE),
            format!("pid=2147483646\nstart=1\nroot={}\n", dead.display()),
        )
        .unwrap();
        let cleaned = clean_leftovers(tmp.path());
        assert_eq!(cleaned.len(), 1, "{cleaned:?}");
        assert_eq!(cleaned[0].teardown.temp_dir, dead);
        assert!(cleaned[0].teardown.removed);
        assert!(!dead.exists());
        assert!(live.join("file").exists() && bare.join("file").exists());
        assert!(
            clean_leftovers(tmp.path()).is_empty(),
            "a second clean finds nothing"
        );
        disown(&live, false);
    }
}
