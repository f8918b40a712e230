//! The three operations Nomad asks a plugin for, and how long each may run.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What Nomad asks a plugin to do; also the plugin's single argument.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// Report the plugin's version; run at agent start and on SIGHUP.
    Fingerprint,
    /// Create (or re-create, on restore) a volume; must be idempotent.
    Create,
    /// Delete a volume.
    Delete,
}

impl Operation {
    /// Every operation, in the order a volume meets them.
    pub const ALL: [Operation; 3] = [Operation::Fingerprint, Operation::Create, Operation::Delete];

    /// The word Nomad passes as argv\[1\] and `DHV_OPERATION`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Fingerprint => "fingerprint",
            Operation::Create => "create",
            Operation::Delete => "delete",
        }
    }

    /// How long Nomad lets the operation run (see [`FINGERPRINT_TIMEOUT`]).
    pub fn timeout(self) -> Duration {
        match self {
            Operation::Fingerprint => FINGERPRINT_TIMEOUT,
            Operation::Create => CREATE_TIMEOUT,
            Operation::Delete => DELETE_TIMEOUT,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not one of the three operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation {input:?}: expected fingerprint, create or delete")]
pub struct ParseOperationError {
    /// The rejected word.
    pub input: String,
}

impl FromStr for Operation {
    type Err = ParseOperationError;

    /// Exact, lower-case match only, as a plugin's `case "$1"` would see it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| ParseOperationError {
                input: s.to_owned(),
            })
    }
}

/// Fingerprint's effective limit. Nomad sets 5 s on the plugin call, but node
/// fingerprinting wraps it in a 1 s context, and the shorter one wins.
pub const FINGERPRINT_TIMEOUT: Duration = Duration::from_secs(1);
/// Create's limit: the whole client RPC has 60 s.
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Delete's limit: the whole client RPC has 60 s.
pub const DELETE_TIMEOUT: Duration = Duration::from_secs(60);
/// The limit on re-running create for every volume when the agent restarts.
pub const RESTORE_TIMEOUT: Duration = Duration::from_secs(50);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SPEC_VERSION;

    #[test]
    fn operations_have_nomads_words_and_limits() {
        for (op, word, limit) in [
            (Operation::Fingerprint, "fingerprint", 1),
            (Operation::Create, "create", 60),
            (Operation::Delete, "delete", 60),
        ] {
            assert_eq!(op.as_str(), word);
            assert_eq!(op.to_string(), word);
            assert_eq!(word.parse::<Operation>(), Ok(op));
            assert_eq!(op.timeout(), Duration::from_secs(limit));
            assert_eq!(serde_json::to_string(&op).unwrap(), format!("\"{word}\""));
        }
        for bad in ["Create", "version", "", " create"] {
            assert_eq!(
                bad.parse::<Operation>(),
                Err(ParseOperationError { input: bad.into() })
            );
        }
        assert_eq!(RESTORE_TIMEOUT, Duration::from_secs(50));
        assert_eq!(SPEC_VERSION, "nomad-1.10");
    }
}
