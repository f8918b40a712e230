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

/// The prefix of a breadcrumb: a file in the temp dir naming the dir of a
/// run made elsewhere (`--work-dir`), so that a plain `clean` and every next
/// run find it too if the run is killed.
const ELSEWHERE_PREFIX: &str = "dhv-conform-elsewhere-";

/// The breadcrumbs this process left in the temp dir, by the run dir each names.
static CRUMBS: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

/// Makes the run's temp dir, new, and holds it: whatever is mounted over
/// its path later, the teardown removes this dir, through its descriptor. It is
/// made in `work_dir` when given (`--work-dir`), else in TMPDIR; its owner
/// file says which process it is of, so that if this one is killed outright
/// the next run cleans it (see the module).
pub(crate) fn make_root(work_dir: Option<&Path>) -> std::io::Result<crate::safe_fs::HeldDir> {
    let tmp = std::env::temp_dir();
    let root = crate::safe_fs::HeldDir::make_temp_in(work_dir.unwrap_or(&tmp), ROOT_PREFIX)?;
    if let Err(e) = own(root.path()) {
        let _ = crate::safe_fs::remove_held(&root);
        return Err(e);
    }
    Ok(root)
}

/// Records this process as the owner of `root` (a dir it just made) and
/// holds the lock that says it is alive, until [`disown`]. A `root` outside
/// the temp dir gets a breadcrumb in the temp dir too.
pub(crate) fn own(root: &Path) -> std::io::Result<()> {
    let me = std::process::id() as i32;
    let start = start_time(me).unwrap_or(0);
    // Absolute: a clean run from another working dir reads it.
    let root = std::path::absolute(root)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(root.join(OWNER_FILE))?;
    file.write_all(format!("pid={me}\nstart={start}\nroot={}\n", root.display()).as_bytes())?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    crate::lock(&HELD).push((root.clone(), lock));
    let tmp = std::env::temp_dir();
    if root.parent() != Some(tmp.as_path()) {
        // Best effort: without it, `clean --work-dir` still finds the run.
        if let Some(crumb) = leave_crumb(&tmp, &root, me, start) {
            crate::lock(&CRUMBS).push((root, crumb));
        }
    }
    Ok(())
}

/// Writes a breadcrumb naming `root` in `tmp`; its path, or `None` when it
/// could not be written.
fn leave_crumb(tmp: &Path, root: &Path, me: i32, start: u64) -> Option<PathBuf> {
    let name = root.file_name()?.to_string_lossy().into_owned();
    let crumb = tmp.join(format!("{ELSEWHERE_PREFIX}{me}-{start}-{name}"));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&crumb)
        .ok()?;
    if file
        .write_all(format!("root={}\n", root.display()).as_bytes())
        .is_err()
    {
        let _ = std::fs::remove_file(&crumb);
        return None;
    }
    Some(crumb)
}

/// Lets go of `root`: its lock is released, its breadcrumb removed. With
/// `keep` (the user asked for the dir), the owner file goes too, so no later
/// run takes it for a leftover.
pub(crate) fn disown(root: &Path, keep: bool) {
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    if keep {
        let _ = std::fs::remove_file(root.join(OWNER_FILE));
    }
    crate::lock(&CRUMBS).retain(|(r, crumb)| {
        if *r == root {
            let _ = std::fs::remove_file(crumb);
        }
        *r != root
    });
    crate::lock(&HELD).retain(|(r, _)| *r != root);
}

/// The run dirs the breadcrumbs in `tmp` name, each with its breadcrumb.
fn crumbs_in(tmp: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let me = nix::unistd::geteuid().as_raw();
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(ELSEWHERE_PREFIX)
        })
        .filter_map(|e| {
            let crumb = e.path();
            let meta = std::fs::symlink_metadata(&crumb).ok()?;
            if !meta.is_file() || meta.uid() != me {
                return None;
            }
            let text =
                crate::safe_fs::read_text_bounded(&crumb, 4096, crate::safe_fs::Links::Refuse)
                    .ok()?;
            let root = PathBuf::from(text.lines().next()?.strip_prefix("root=")?);
            let named_as_a_run = root
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(ROOT_PREFIX));
            (root.is_absolute() && named_as_a_run).then_some((root, crumb))
        })
        .collect()
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
    /// Processes the run left that held its owner file or its dir (a
    /// helper that took the run's lock when it died), killed first.
    pub holders: Vec<crate::exec::Holder>,
    /// What was unmounted, detached and removed, as the teardown tells it.
    pub teardown: Teardown,
}

impl Cleaned {
    /// One line for the terminal.
    pub fn summary(&self) -> String {
        let mut held = String::new();
        if !self.holders.is_empty() {
            let named: Vec<String> = self
                .holders
                .iter()
                .map(|h| {
                    let left = if h.gone { "" } else { ", still there" };
                    format!("{} ({}{left})", h.pid, h.command)
                })
                .collect();
            held = format!(
                "{} process(es) it left holding its lock, killed: {}; ",
                named.len(),
                named.join(", ")
            );
        }
        format!(
            "leftovers of run {} (its process is gone): {held}{}",
            self.pid,
            self.teardown.summary()
        )
    }
}

/// A run dir a clean looked at and left, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Left {
    /// Its run lives (its process, with the start time the owner file
    /// records): never touched.
    Alive {
        /// The run's dir.
        dir: PathBuf,
        /// Its process.
        pid: i32,
    },
    /// Another `dhv-conform` is cleaning it now.
    Busy {
        /// The run's dir.
        dir: PathBuf,
        /// What holds it.
        why: String,
    },
}

impl Left {
    /// One line for the terminal.
    pub fn summary(&self) -> String {
        match self {
            Left::Alive { dir, pid } => {
                format!("{} left alone: its run (pid {pid}) is alive", dir.display())
            }
            Left::Busy { dir, why } => format!("{} left: {why}", dir.display()),
        }
    }
}

/// What a clean found: the leftovers it cleaned, and the run dirs it left.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Found {
    /// The leftovers of dead runs, cleaned.
    pub cleaned: Vec<Cleaned>,
    /// The run dirs left, each with why.
    pub left: Vec<Left>,
}

/// Finds the temp dirs of runs whose process is gone in `tmp` (the temp dir
/// runs make theirs in) and cleans each; the live runs' are not touched.
pub fn clean_leftovers(tmp: &Path) -> Vec<Cleaned> {
    clean_leftovers_in(&[tmp]).cleaned
}

/// Finds the temp dirs of runs whose process is gone in each of `dirs` (the
/// temp dir, a `--work-dir`) and cleans each, saying what it left and why.
/// A run is alive by its process alone (the pid and start time its owner
/// file records), never by its lock: a process the run left may hold that.
pub fn clean_leftovers_in(dirs: &[&Path]) -> Found {
    let mut names: Vec<PathBuf> = Vec::new();
    let mut crumbs = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        names.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(ROOT_PREFIX))
                .map(|e| e.path()),
        );
        crumbs.extend(crumbs_in(dir));
    }
    names.extend(crumbs.iter().map(|(root, _)| root.clone()));
    // One dir reached twice (its work dir given as the temp dir too, or by
    // a breadcrumb) is cleaned once.
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| {
        let id = std::fs::symlink_metadata(n).map(|m| (m.dev(), m.ino()));
        id.map_or(true, |id| seen.insert(id))
    });
    names.sort();
    let mut found = Found::default();
    for dir in &names {
        match clean_one(dir) {
            Some(Ok(c)) => found.cleaned.push(c),
            Some(Err(l)) => found.left.push(l),
            None => {}
        }
    }
    // A breadcrumb goes once its run's dir is gone (cleaned, or removed by
    // its run's own teardown that could not remove the breadcrumb).
    for (root, crumb) in crumbs {
        if std::fs::symlink_metadata(root.join(OWNER_FILE)).is_err() {
            let _ = std::fs::remove_file(crumb);
        }
    }
    found
}

/// Cleans `dir` if it is the temp dir of a run of ours that is gone: `None`
/// when it is no run's dir of ours, `Err` when it is left (alive, or being
/// cleaned by another process).
fn clean_one(dir: &Path) -> Option<Result<Cleaned, Left>> {
    let (held, dir_id) = open_ours(dir)?;
    let lock = match Flock::lock(held, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Some(lock),
        Err(_) if crate::exec::holders(&[dir_id]).is_empty() => {
            // Only processes running this program hold it: one is cleaning.
            return Some(Err(Left::Busy {
                dir: dir.to_path_buf(),
                why: "another dhv-conform is cleaning it".into(),
            }));
        }
        // Held by a process that is no dhv-conform: a leftover of the run,
        // killed below if the run is dead.
        Err(_) => None,
    };
    let (owner, owner_id) = owner_of(dir, dir_id)?;
    if start_time(owner.pid).is_some_and(|s| s == owner.start) {
        // Its process lives (it may have let go of its lock): not ours to touch.
        return Some(Err(Left::Alive {
            dir: dir.to_path_buf(),
            pid: owner.pid,
        }));
    }
    // The run is dead: whatever still holds its owner file or its dir is
    // a process it left (its lock taken over, its dir held open), however
    // far it went from the run's cgroup and session.
    let holders = crate::exec::kill_holders(&[owner_id, dir_id]);
    let teardown = super::teardown::remove_unheld(dir);
    drop(lock);
    Some(Ok(Cleaned {
        pid: owner.pid,
        holders,
        teardown,
    }))
}

/// `dir` opened, with its device and inode, when it is a directory this user
/// owns (and still the one looked at when opened).
fn open_ours(dir: &Path) -> Option<(File, (u64, u64))> {
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return None;
    }
    // Cleaners take the dir's own lock, never the owner file's (the run's,
    // which a leftover may hold): a second cleaner at the same time leaves it.
    let held = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .ok()?;
    let dir_id = held.metadata().ok().map(|m| (m.dev(), m.ino()))?;
    if dir_id != (meta.dev(), meta.ino()) {
        return None;
    }
    Some((held, dir_id))
}

/// The run that owns `dir` (known as `dir_id`), from its owner file, with
/// that file's device and inode: `None` when the file is missing, unreadable
/// or names another dir.
fn owner_of(dir: &Path, dir_id: (u64, u64)) -> Option<(Owner, (u64, u64))> {
    let owner_path = dir.join(OWNER_FILE);
    let owner_meta = std::fs::symlink_metadata(&owner_path).ok()?;
    if !owner_meta.is_file() {
        return None;
    }
    let text =
        crate::safe_fs::read_text_bounded(&owner_path, 4096, crate::safe_fs::Links::Refuse).ok()?;
    let owner = parse_owner(&text)?;
    // The dir the owner file names is this very dir (however it is reached).
    let names_it =
        std::fs::symlink_metadata(&owner.root).is_ok_and(|m| (m.dev(), m.ino()) == dir_id);
    if !names_it {
        return None;
    }
    Some((owner, (owner_meta.dev(), owner_meta.ino())))
}

#[cfg(test)]
#[path = "leftovers_tests.rs"]
mod tests;
