//! How a plugin's process ended, in the words Go (and so Nomad) uses.

use std::fmt;

/// How a process ended, rendered as Go's os.ProcessState.String(): "exit status 1", "signal: killed".
///
/// Any signal number is held, the real-time ones (34 to 64) included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ExitReason {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal (Linux numbering).
    Signal(i32),
    /// It was killed by this signal, and the kernel wrote a core dump.
    CoreDumped(i32),
}

/// Exit status 0, the one success: what a call that ran cleanly ends with.
impl Default for ExitReason {
    fn default() -> Self {
        ExitReason::Code(0)
    }
}

impl ExitReason {
    /// Whether Nomad counts this as success: exit status 0 and nothing else.
    pub fn success(&self) -> bool {
        matches!(self, ExitReason::Code(0))
    }

    /// The exit status, when the process exited.
    pub fn code(&self) -> Option<i32> {
        match *self {
            ExitReason::Code(code) => Some(code),
            ExitReason::Signal(_) | ExitReason::CoreDumped(_) => None,
        }
    }

    /// The signal that ended the process, when one did (with or without a core dump).
    pub fn signal(&self) -> Option<i32> {
        match *self {
            ExitReason::Code(_) => None,
            ExitReason::Signal(sig) | ExitReason::CoreDumped(sig) => Some(sig),
        }
    }

    /// Whether the kernel wrote a core dump as the signal ended the process.
    pub fn core_dumped(&self) -> bool {
        matches!(self, ExitReason::CoreDumped(_))
    }

    /// Go's `os.ProcessState.String()`, which Nomad's error messages embed:
    /// `exit status N`; `signal: NAME` with Go's name for the signal, or
    /// `signal: signal N` for one without a name; ` (core dumped)` after a dump.
    pub fn go_string(&self) -> String {
        let signal = |sig: i32| match go_signal_name(sig) {
            Some(name) => format!("signal: {name}"),
            None => format!("signal: signal {sig}"),
        };
        match *self {
            ExitReason::Code(code) => format!("exit status {code}"),
            ExitReason::Signal(sig) => signal(sig),
            ExitReason::CoreDumped(sig) => format!("{} (core dumped)", signal(sig)),
        }
    }
}

impl fmt::Display for ExitReason {
    /// Same text as [`ExitReason::go_string`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.go_string())
    }
}

/// Go's `syscall.Signal.String()` on Linux (the `signals` table of its
/// `zerrors_linux_*.go`), which has a name for 1 to 31 only.
fn go_signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        16 => "stack fault",
        17 => "child exited",
        18 => "continued",
        19 => "stopped (signal)",
        20 => "stopped",
        21 => "stopped (tty input)",
        22 => "stopped (tty output)",
        23 => "urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "file size limit exceeded",
        26 => "virtual timer expired",
        27 => "profiling timer expired",
        28 => "window changed",
        29 => "I/O possible",
        30 => "power failure",
        31 => "bad system call",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reasons_read_like_go() {
        let cases = [
            (ExitReason::Code(0), "exit status 0", true),
            (ExitReason::Code(1), "exit status 1", false),
            (ExitReason::Code(255), "exit status 255", false),
            (ExitReason::Signal(1), "signal: hangup", false),
            (ExitReason::Signal(2), "signal: interrupt", false),
            (ExitReason::Signal(3), "signal: quit", false),
            (ExitReason::Signal(4), "signal: illegal instruction", false),
            (
                ExitReason::Signal(5),
                "signal: trace/breakpoint trap",
                false,
            ),
            (ExitReason::Signal(6), "signal: aborted", false),
            (ExitReason::Signal(7), "signal: bus error", false),
            (
                ExitReason::Signal(8),
                "signal: floating point exception",
                false,
            ),
            (ExitReason::Signal(9), "signal: killed", false),
            (
                ExitReason::Signal(10),
                "signal: user defined signal 1",
                false,
            ),
            (ExitReason::Signal(11), "signal: segmentation fault", false),
            (
                ExitReason::Signal(12),
                "signal: user defined signal 2",
                false,
            ),
            (ExitReason::Signal(13), "signal: broken pipe", false),
            (ExitReason::Signal(14), "signal: alarm clock", false),
            (ExitReason::Signal(15), "signal: terminated", false),
            (ExitReason::Signal(17), "signal: child exited", false),
            (ExitReason::Signal(31), "signal: bad system call", false),
            (ExitReason::Signal(16), "signal: stack fault", false),
            (ExitReason::Signal(19), "signal: stopped (signal)", false),
            (
                ExitReason::Signal(23),
                "signal: urgent I/O condition",
                false,
            ),
            (ExitReason::Signal(29), "signal: I/O possible", false),
            (ExitReason::Signal(32), "signal: signal 32", false),
            (ExitReason::Signal(34), "signal: signal 34", false),
            (ExitReason::Signal(36), "signal: signal 36", false),
            (ExitReason::Signal(64), "signal: signal 64", false),
            (ExitReason::Signal(0), "signal: signal 0", false),
            (
                ExitReason::CoreDumped(11),
                "signal: segmentation fault (core dumped)",
                false,
            ),
            (
                ExitReason::CoreDumped(6),
                "signal: aborted (core dumped)",
                false,
            ),
            (
                ExitReason::CoreDumped(3),
                "signal: quit (core dumped)",
                false,
            ),
            (
                ExitReason::CoreDumped(40),
                "signal: signal 40 (core dumped)",
                false,
            ),
        ];
        for (reason, text, success) in cases {
            assert_eq!(reason.go_string(), text);
            assert_eq!(reason.to_string(), text);
            assert_eq!(reason.success(), success, "{reason:?}");
        }
    }

    #[test]
    fn parts_of_an_exit_reason() {
        assert_eq!(
            (ExitReason::Code(3).code(), ExitReason::Code(3).signal()),
            (Some(3), None)
        );
        assert_eq!(
            (
                ExitReason::Signal(36).code(),
                ExitReason::Signal(36).signal()
            ),
            (None, Some(36))
        );
        assert!(!ExitReason::Signal(11).core_dumped());
        assert!(ExitReason::CoreDumped(11).core_dumped());
        assert_eq!(ExitReason::CoreDumped(11).signal(), Some(11));
    }
}
