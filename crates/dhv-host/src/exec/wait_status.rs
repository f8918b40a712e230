//! A raw wait status, as `waitpid` fills it in, read as an [`ExitReason`].
//!
//! Read here bit for bit rather than through nix's `WaitStatus`, whose signal
//! is its `Signal` enum: that has no real-time signals (34 to 64), so a plugin
//! killed by one could not be reported at all, and nix drops the core-dump bit
//! on the floor for the callers that ignore it. Go (and so Nomad) keeps both.

use dhv_contract::ExitReason;

/// How a process ended, from its raw wait status; `None` for a status that is
/// no ending (stopped, continued).
pub(crate) fn exit_reason(status: libc::c_int) -> Option<ExitReason> {
    if libc::WIFEXITED(status) {
        Some(ExitReason::Code(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        Some(if libc::WCOREDUMP(status) {
            ExitReason::CoreDumped(sig)
        } else {
            ExitReason::Signal(sig)
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait statuses as Linux encodes them: exit code in bits 8-15; signal in
    /// bits 0-6, bit 7 for a core dump; `0x7f` in the low byte for a stop.
    #[test]
    fn wait_statuses_read_as_go_renders_them() {
        let cases = [
            (0x0000, Some("exit status 0")),
            (0x0100, Some("exit status 1")),
            (0xff00, Some("exit status 255")),
            (9, Some("signal: killed")),
            (15, Some("signal: terminated")),
            (36, Some("signal: signal 36")),
            (34, Some("signal: signal 34")),
            (64, Some("signal: signal 64")),
            (11 | 0x80, Some("signal: segmentation fault (core dumped)")),
            (6 | 0x80, Some("signal: aborted (core dumped)")),
            (36 | 0x80, Some("signal: signal 36 (core dumped)")),
            // Stopped by SIGSTOP (19), and continued: no ending.
            ((19 << 8) | 0x7f, None),
            (0xffff, None),
        ];
        for (status, want) in cases {
            let got = exit_reason(status).map(|r| r.go_string());
            assert_eq!(got.as_deref(), want, "status {status:#x}");
        }
        assert_eq!(exit_reason(36), Some(ExitReason::Signal(36)));
        assert_eq!(exit_reason(11 | 0x80), Some(ExitReason::CoreDumped(11)));
        assert_eq!(exit_reason(0x0200), Some(ExitReason::Code(2)));
    }
}
