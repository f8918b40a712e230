//! One output stream of a call, read in the call's own loop: kept up to a cap,
//! the rest drained and dropped, so a flood neither blocks the plugin nor
//! grows our memory.

use std::time::Duration;

use tokio::net::unix::pipe;

use super::supervisor::OutputBudget;

/// One output stream of a call: its pipe, the bytes kept, up to the cap, and
/// whether more came after it.
pub(crate) struct Capture {
    pub pipe: pipe::Receiver,
    pub kept: Vec<u8>,
    cap: usize,
    pub truncated: bool,
    /// Every byte the stream carried, kept or not.
    pub total: u64,
    /// The stream is at EOF (or failed, which ends it too).
    pub eof: bool,
    /// Where output past the cap is read and dropped; only a flood allocates it.
    discard: Vec<u8>,
    /// The run's budget, which bytes past `free` are taken from.
    budget: OutputBudget,
    /// The first bytes kept without the budget.
    free: usize,
}

/// Output up to the cap is read in pieces of this size.
const READ_CHUNK: usize = 8192;
/// The buffer that output past the cap is drained through.
const DISCARD_BUF: usize = 64 * 1024;
/// Reads per readiness event, so that a flood on one pipe cannot starve the
/// other pipe, the exit or the timers.
const READS_PER_WAKE: usize = 16;

impl Capture {
    /// `pipe` is the read end of a pipe from `pipe2` (blocking, no other
    /// status flag): it is made non-blocking here with one `fcntl`, instead
    /// of the checks and two `fcntl`s of [`pipe::Receiver::from_owned_fd`].
    pub fn new(
        pipe: std::os::fd::OwnedFd,
        cap: usize,
        budget: OutputBudget,
        free: usize,
    ) -> std::io::Result<Capture> {
        use std::os::fd::AsRawFd;
        // SAFETY: F_SETFL on a descriptor we own; the read end of a fresh
        // pipe has no status flag but its access mode, which F_SETFL keeps.
        if unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Capture {
            pipe: pipe::Receiver::from_owned_fd_unchecked(pipe)?,
            kept: Vec::new(),
            cap,
            truncated: false,
            total: 0,
            eof: false,
            discard: Vec::new(),
            budget,
            free,
        })
    }

    /// Reads what the pipe has ready now, without waiting; `ready` is the
    /// readiness the caller waited for. Synchronous, so a `select!` that drops
    /// the readiness future can never lose bytes.
    pub fn read_ready(&mut self, ready: std::io::Result<()>) {
        if ready.is_err() {
            self.eof = true;
            return;
        }
        self.read_with(|pipe, buf| pipe.try_read(buf));
    }

    /// Reads what the pipe holds now, without waiting and without asking the
    /// event loop whether it is readable (a `read` that finds nothing costs
    /// less than a wake-up): for when the plugin is likely done, so that one
    /// wake-up takes in the end of both pipes and the exit.
    pub fn read_now(&mut self) {
        if self.eof {
            return;
        }
        self.read_with(|pipe, buf| {
            use std::os::fd::AsRawFd;
            // SAFETY: a read into a buffer we own, of its length, from a
            // descriptor the pipe keeps open.
            let n = unsafe { libc::read(pipe.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
    }

    fn read_with(
        &mut self,
        mut read: impl FnMut(&pipe::Receiver, &mut [u8]) -> std::io::Result<usize>,
    ) {
        let mut chunk = [0u8; READ_CHUNK];
        for _ in 0..READS_PER_WAKE {
            let capped = self.cap.saturating_sub(self.kept.len()).min(READ_CHUNK);
            // Past its free bytes a stream keeps only what the run's budget
            // grants; what it does not use goes back after the read.
            let free = self.free.saturating_sub(self.kept.len()).min(capped);
            let granted = self.budget.take(capped - free);
            let room = free + granted;
            let read = if room == 0 {
                if self.discard.is_empty() {
                    self.discard = vec![0; DISCARD_BUF];
                }
                let read = read(&self.pipe, &mut self.discard);
                if matches!(read, Ok(n) if n > 0) {
                    self.truncated = true;
                    if capped > 0 {
                        // Dropped for the run's budget, not the call's cap.
                        self.budget.dropped();
                    }
                }
                read
            } else {
                // Through the stack: most plugins print a line or nothing, and
                // then an empty stream allocates nothing and a line allocates
                // just its own length.
                let read = read(&self.pipe, &mut chunk[..room]);
                let n = *read.as_ref().unwrap_or(&0);
                self.kept.extend_from_slice(&chunk[..n]);
                self.budget
                    .give_back(granted.saturating_sub(n.saturating_sub(free)));
                read
            };
            if let Ok(n) = read {
                self.total += n as u64;
            }
            match read {
                Ok(0) => {
                    self.eof = true;
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.eof = true;
                    return;
                }
            }
        }
    }
}

/// Reads both pipes until both are at EOF or `limit` has passed.
pub(crate) async fn drain_until(out: &mut Capture, err: &mut Capture, limit: Duration) {
    if out.eof && err.eof {
        return;
    }
    let limit = tokio::time::sleep(limit);
    tokio::pin!(limit);
    while !(out.eof && err.eof) {
        tokio::select! {
            ready = out.pipe.readable(), if !out.eof => out.read_ready(ready),
            ready = err.pipe.readable(), if !err.eof => err.read_ready(ready),
            _ = &mut limit => return,
        }
    }
}
