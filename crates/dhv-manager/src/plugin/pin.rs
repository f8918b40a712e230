//! The plugin file pinned for a run: the plugin that ran is the plugin
//! reported.
//!
//! A plugin can rewrite or replace its own file mid-run (or anything else
//! can): calls before the change ran one program, calls after it another,
//! and a report stamped with the sha256 read at the end would name a plugin
//! most calls never ran. The file's identity (device, inode, size, mtime,
//! ctime) and sha256 are recorded before the first call; every call first
//! looks at the identity again (one `stat`, links followed as `exec`
//! follows them), and only a changed identity is hashed again. Any change
//! of identity is recorded: the content may be back as it was, but calls in
//! between may have run another. ctime cannot be set back by anyone, so a
//! write that restores the size and mtime still shows.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::PluginSource;

/// The most of a plugin file hashed: past it, there is no sha256.
const MAX_PLUGIN_HASHED: u64 = 4 << 30;

/// What `stat` says of the file, as far as a change of program goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The file's stamp; `None` when it is gone or is not a regular file.
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// What differs between `self` and `now`, in words.
    fn differences(&self, now: Option<&Stamp>) -> String {
        let Some(now) = now else {
            return "the file is gone or no longer a regular file".into();
        };
        let mut what = Vec::new();
        if (self.dev, self.ino) != (now.dev, now.ino) {
            what.push("replaced by another file (inode)");
        }
        if self.size != now.size {
            what.push("size");
        }
        if self.mtime != now.mtime {
            what.push("mtime");
        }
        if self.ctime != now.ctime {
            what.push("ctime");
        }
        format!("changed: {}", what.join(", "))
    }
}

/// The plugin file changed while the run made its calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginChange {
    /// Calls started before the change was seen.
    pub calls_before: u64,
    /// The file's sha256 at the start of the run.
    pub sha256_before: Option<String>,
    /// Its sha256 when the change was seen (`None`: gone, not a regular
    /// file, or too large to hash).
    pub sha256_after: Option<String>,
    /// What changed, in words.
    pub detail: String,
}

/// A plugin file pinned for a run (see the module docs). Shared by every
/// call of the run, whatever check or manager makes it.
#[derive(Debug)]
pub struct PluginPin {
    path: PathBuf,
    start: Option<Stamp>,
    sha256: Option<String>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The stamp last seen, so that a changed file is hashed once, not at
    /// every call.
    last: Option<Stamp>,
    calls: u64,
    change: Option<PluginChange>,
}

impl PluginPin {
    /// Pins the file at `path` as it is now.
    pub fn new(path: &Path) -> PluginPin {
        let start = Stamp::of(path);
        PluginPin {
            path: path.to_path_buf(),
            start,
            sha256: start.and_then(|_| sha256_of(path)),
            state: Mutex::new(State {
                last: start,
                calls: 0,
                change: None,
            }),
        }
    }

    /// The pin for `source`'s file (the one that runs); none for the built-in.
    pub fn for_source(source: &PluginSource) -> Option<Arc<PluginPin>> {
        let path = match source {
            PluginSource::Builtin => return None,
            PluginSource::Executable(path) => path,
            PluginSource::Found { checked, .. } => checked,
        };
        Some(Arc::new(PluginPin::new(path)))
    }

    /// The file's sha256 at the start: the plugin the run means to check.
    pub fn sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }

    /// Looks at the file before a call (one `stat`; a hash only when its
    /// identity changed), and counts the call.
    pub fn before_call(&self) {
        self.look(true);
    }

    /// Looks at the file once more (at the end of a run: a change made by
    /// the last call shows too), and tells the first change seen, if any.
    pub fn change(&self) -> Option<PluginChange> {
        self.look(false)
    }

    fn look(&self, counting: bool) -> Option<PluginChange> {
        let now = Stamp::of(&self.path);
        let mut state = dhv_host::sync::lock(&self.state);
        if now != state.last {
            state.last = now;
            if state.change.is_none() {
                state.change = Some(PluginChange {
                    calls_before: state.calls,
                    sha256_before: self.sha256.clone(),
                    sha256_after: now.and_then(|_| sha256_of(&self.path)),
                    detail: match &self.start {
                        Some(start) => start.differences(now.as_ref()),
                        None => "the file appeared after the run started".into(),
                    },
                });
            }
        }
        if counting {
            state.calls += 1;
        }
        state.change.clone()
    }
}

/// The sha256 of the file at `path`, streamed; none for anything but a
/// regular file (a FIFO swapped in is never waited on) or one past 4 GiB.
pub fn sha256_of(path: &Path) -> Option<String> {
    let file = dhv_host::safe_fs::open_regular(path, dhv_host::safe_fs::Links::Follow).ok()?;
    let mut hasher = Sha256::new();
    let copied = std::io::copy(&mut file.take(MAX_PLUGIN_HASHED + 1), &mut hasher).ok()?;
    (copied <= MAX_PLUGIN_HASHED).then(|| {
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_file_is_no_change_and_a_rewrite_is_seen_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("plugin");
        std::fs::write(&path, "#!/bin/sh\necho A\n").unwrap();
        let pin = PluginPin::new(&path);
        let before = pin.sha256().unwrap().to_owned();
        pin.before_call();
        pin.before_call();
        assert_eq!(pin.change(), None);
        std::fs::write(&path, "#!/bin/sh\necho B\n").unwrap();
        pin.before_call();
        let change = pin.change().expect("the rewrite is seen");
        assert_eq!(change.calls_before, 2);
        assert_eq!(change.sha256_before.as_deref(), Some(before.as_str()));
        assert_ne!(change.sha256_after, change.sha256_before);
        assert!(change.detail.contains("ctime"), "{}", change.detail);
        // The first change is the one told, whatever follows.
        std::fs::remove_file(&path).unwrap();
        pin.before_call();
        assert_eq!(pin.change(), Some(change));
    }

    #[test]
    fn a_file_replaced_by_one_of_the_same_content_is_still_a_change() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("plugin");
        std::fs::write(&path, "A").unwrap();
        let pin = PluginPin::new(&path);
        let other = tmp.path().join("other");
        std::fs::write(&other, "A").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let change = pin.change().expect("seen");
        assert_eq!(change.sha256_after, change.sha256_before);
        assert!(change.detail.contains("inode"), "{}", change.detail);
    }
}
