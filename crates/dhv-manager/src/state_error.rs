//! Why the state could not be used ([`StateError`]): its dir, its file or
//! its lock, each error naming the file. Shown to users as
//! `manager::state::StateError`, beside the state it is about.

use std::path::PathBuf;

/// Why the state could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The state dir does not exist and cannot be made.
    #[error("cannot create state dir {}: {source}", .dir.display())]
    CreateDir {
        /// The state dir.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state file exists but cannot be read.
    #[error("cannot read state file {}: {source}", .path.display())]
    Read {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not valid JSON of the expected shape.
    #[error("state file {} is corrupt: {source}", .path.display())]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// The parser's complaint, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The state file parses but is not a state this version understands.
    #[error("state file {} is not usable: {reason}", .path.display())]
    Invalid {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The lock file cannot be opened or locked.
    #[error("cannot lock state file {}: {source}", .path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Something other than a regular file stands at the lock or state file's
    /// name (a FIFO, a device, a socket, a symlink): planted, never opened.
    #[error("state dir file {} is {kind}, not a regular file (not made by dhv-conform): refusing to use it; remove it if it should not be there", .path.display())]
    Planted {
        /// The file.
        path: PathBuf,
        /// What it is ("a FIFO").
        kind: &'static str,
    },
    /// The new state cannot be written.
    #[error("cannot write state file {}: {source}", .path.display())]
    Write {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl StateError {
    /// Whether the state itself is unusable (missing dir, unreadable or corrupt
    /// file), as opposed to a failure while writing it.
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            StateError::CreateDir { .. }
                | StateError::Planted { .. }
                | StateError::Read { .. }
                | StateError::Corrupt { .. }
                | StateError::Invalid { .. }
        )
    }
}
