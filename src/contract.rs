//! stub until the real contract lands
use serde::{Deserialize, Serialize};
/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitReason {
    /// exit code
    Code(i32),
    /// signal
    Signal(i32),
}
impl ExitReason {
    /// success
    pub fn success(&self) -> bool {
        matches!(self, ExitReason::Code(0))
    }
    /// go string
    pub fn go_string(&self) -> String {
        match self {
            ExitReason::Code(c) => format!("exit status {c}"),
            ExitReason::Signal(s) => format!("signal: {s}"),
        }
    }
}
