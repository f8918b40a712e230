//! The user's terminal, kept as the harness found it.
//!
//! Plugins run in a session of their own with no controlling terminal and
//! no terminal on their stdio, as under Nomad; but a plugin run as root can
//! still open the harness's terminal by name (`/dev/pts/N`, or
//! `/proc/<pid>/fd/1`) and change its modes (`stty -echo raw`, `tostop`),
//! or push input into it (`TIOCSTI`, which root may do to any terminal).
//! So for the length of a command:
//! - SIGTTOU and SIGTTIN are ignored: a harness in the background of its
//!   shell is never stopped by a plugin's `tostop`, nor by restoring the
//!   modes below (a background `tcsetattr` raises SIGTTOU). Plugins do not
//!   inherit this: every signal the harness ignores is reset for them;
//! - the terminal's modes (`termios`) are saved at the start and, if they
//!   changed, restored at the end, whatever the ending (its verdict, an
//!   error, SIGINT, SIGTERM or SIGHUP: each returns through here), and said;
//! - input that waits in the terminal at the end of a command the harness
//!   ran in the foreground was pushed during the run, by a plugin or typed
//!   ahead: it is discarded, and said, so that no line a plugin pushed is run
//!   by the user's shell.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

/// The terminal the harness was started on, and its state then.
pub(crate) struct Terminal {
    fd: OwnedFd,
    modes: libc::termios,
}

impl Terminal {
    /// Ignores SIGTTOU and SIGTTIN and saves the modes of the first of
    /// stdin, stdout and stderr that is a terminal (`None` when none is).
    pub(crate) fn keep() -> Option<Terminal> {
        for sig in [libc::SIGTTOU, libc::SIGTTIN] {
            // SAFETY: installs SIG_IGN, which runs no code of ours.
            unsafe { libc::signal(sig, libc::SIG_IGN) };
        }
        [0, 1, 2].into_iter().find_map(|fd| {
            // SAFETY: isatty takes any descriptor number.
            if unsafe { libc::isatty(fd) } != 1 {
                return None;
            }
            // SAFETY: duplicates a descriptor we were given; the copy is ours.
            let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if copy < 0 {
                return None;
            }
            // SAFETY: `copy` is a fresh descriptor no one else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(copy) };
            let modes = modes_of(&fd)?;
            Some(Terminal { fd, modes })
        })
    }

    /// Puts the terminal back as it was: its modes, and no input a plugin
    /// may have pushed. What it did, in lines for stderr.
    pub(crate) fn restore(&self) -> Vec<String> {
        let mut said = Vec::new();
        if modes_of(&self.fd).is_some_and(|now| !same_modes(&now, &self.modes)) {
            // SAFETY: tcsetattr reads the termios we saved from this terminal.
            let set = unsafe { libc::tcsetattr(self.fd.as_raw_fd(), libc::TCSANOW, &self.modes) };
            said.push(if set == 0 {
                "the terminal's modes changed during the run (a plugin reached it): restored"
                    .to_owned()
            } else {
                format!(
                    "the terminal's modes changed during the run (a plugin reached it) \
                     and could not be restored: {}; run `stty sane`",
                    std::io::Error::last_os_error()
                )
            });
        }
        let fd = self.fd.as_raw_fd();
        // SAFETY: tcgetpgrp and getpgrp take no pointers.
        let foreground = unsafe { libc::tcgetpgrp(fd) == libc::getpgrp() };
        let mut waiting: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int.
        let queued = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) } == 0;
        if foreground && queued && waiting > 0 {
            // SAFETY: tcflush takes a descriptor and a constant.
            if unsafe { libc::tcflush(fd, libc::TCIFLUSH) } == 0 {
                said.push(format!(
                    "discarded {waiting} byte(s) of terminal input that came during the run \
                     (a plugin can push input into a terminal; type again what you typed)"
                ));
            }
        }
        said
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        for line in self.restore() {
            super::print_stderr(&format!("dhv-conform: {line}\n"));
        }
    }
}

fn modes_of(fd: &OwnedFd) -> Option<libc::termios> {
    // SAFETY: termios is plain data; tcgetattr fills it.
    let mut modes: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes one termios.
    (unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut modes) } == 0).then_some(modes)
}

/// The fields `tcsetattr` sets (the line discipline's number aside).
fn same_modes(a: &libc::termios, b: &libc::termios) -> bool {
    a.c_iflag == b.c_iflag
        && a.c_oflag == b.c_oflag
        && a.c_cflag == b.c_cflag
        && a.c_lflag == b.c_lflag
        && a.c_cc == b.c_cc
        && a.c_ispeed == b.c_ispeed
        && a.c_ospeed == b.c_ospeed
}
