//! A file held open where no process the harness starts can inherit it
//! ([`HeldApart`]).
//!
//! Every descriptor of ours is close-on-exec, and the clone that starts a
//! plugin closes them first thing; but between the clone and that close the
//! child holds a reference to each, and on a loaded host a child can wait that
//! long for a CPU. A check that holds a file in a volume (or a loop device) and
//! then lets go expects it closed at once: a copy in a neighbour's child keeps
//! the volume's mount busy for as long. So such a file is opened by a thread
//! of ours with a descriptor table of its own (`unshare(CLONE_FILES)`), which
//! no clone copies, and closed there.

use std::fs::File;
use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// A file held open by a thread of its own, closed (and waited for) on drop.
#[derive(Debug)]
pub struct HeldApart {
    /// Dropped to tell the thread to close the file.
    let_go: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HeldApart {
    /// Opens a file with `open`, on a thread whose descriptor table is its
    /// own, and keeps it open until the `HeldApart` is dropped.
    pub fn open(open: impl FnOnce() -> io::Result<File> + Send + 'static) -> io::Result<HeldApart> {
        let (opened_tx, opened) = mpsc::channel::<io::Result<()>>();
        let (let_go, closing) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("dhv-held-apart".into())
            .spawn(move || {
                let file = apart().and_then(|()| open());
                let file = match file {
                    Ok(file) => file,
                    Err(e) => {
                        let _ = opened_tx.send(Err(e));
                        return;
                    }
                };
                let _ = opened_tx.send(Ok(()));
                // Until told, or until the holder is gone.
                let _ = closing.recv();
                drop(file);
            })?;
        let outcome = opened
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the thread that holds the file ended")));
        let held = HeldApart {
            let_go: Some(let_go),
            thread: Some(thread),
        };
        outcome.map(|()| held)
    }
}

impl Drop for HeldApart {
    fn drop(&mut self) {
        drop(self.let_go.take());
        // Closed once the thread has ended.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Gives this thread a descriptor table of its own, with none of ours in it
/// but 0, 1 and 2 (the copy `unshare` makes holds every one of them).
fn apart() -> io::Result<()> {
    // SAFETY: unshare and close_range take plain flags and numbers; they act
    // on this thread's own table only once it is unshared.
    unsafe {
        if libc::unshare(libc::CLONE_FILES) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_close_range, 3u32, libc::c_uint::MAX, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Whether any descriptor of this process (in the table every thread but
    /// a held-apart one shares) refers to the file with this inode.
    fn in_our_table(ino: u64) -> bool {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .any(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.ino() == ino))
    }

    /// Whether the held-apart thread's table holds it.
    fn in_a_thread_table(ino: u64) -> bool {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .any(|t| {
                std::fs::read_dir(t.path().join("fd")).is_ok_and(|fds| {
                    fds.flatten()
                        .any(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.ino() == ino))
                })
            })
    }

    #[test]
    fn the_file_is_open_only_in_the_holders_table_and_closed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held");
        std::fs::write(&path, "x").unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        let opened = path.clone();
        let held = HeldApart::open(move || File::open(opened)).unwrap();
        assert!(in_a_thread_table(ino), "the file is held open");
        assert!(!in_our_table(ino), "a clone of ours would copy it");
        drop(held);
        assert!(!in_a_thread_table(ino), "closed on drop");
    }

    #[test]
    fn a_failed_open_is_its_error() {
        let err = HeldApart::open(|| File::open("/nonexistent/held")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
