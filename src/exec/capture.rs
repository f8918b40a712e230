//! One output stream of a call, read in the call's own loop: kept up to a cap,
//! the rest drained and dropped, so a flood neither blocks the plugin nor
//! grows our memory.

use std::time::Duration;

use tokio::net::unix::pipe;

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
}

/// Output up to the cap is read in pieces of this size.
const READ_CHUNK: usize = 8192;
/// The buffer that output past the cap is drained through.
const DISCARD_BUF: usize = 64 * 1024;
/// Reads per readiness event, so that a flood on one pipe cannot starve the
/// other pipe, the exit or the timers.
const READS_PER_WAKE: usize = 16;

impl Capture {
    pub fn new(pipe: std::os::fd::OwnedFd, cap: usize) -> std::io::Result<Capture> {
        Ok(Capture {
            pipe: pipe::Receiver::from_owned_fd(pipe)?,
            kept: Vec::new(),
            cap,
            truncated: false,
            total: 0,
            eof: false,
            discard: Vec::new(),
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
        let mut chunk = [0u8; READ_CHUNK];
        for _ in 0..READS_PER_WAKE {
            let room = self.cap.saturating_sub(self.kept.len());
            let read = if room == 0 {
                if self.discard.is_empty() {
                    self.discard = vec![0; DISCARD_BUF];
                }
                let read = self.pipe.try_read(&mut self.discard);
                self.truncated |= matches!(read, Ok(n) if n > 0);
                read
            } else {
                // Through the stack: most plugins print a line or nothing, and
                // then an empty stream allocates nothing and a line allocates
                // just its own length.
                let read = self.pipe.try_read(&mut chunk[..room.min(READ_CHUNK)]);
                if let Ok(n) = read {
                    self.kept.extend_from_slice(&chunk[..n]);
                }
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
