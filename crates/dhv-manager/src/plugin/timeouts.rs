//! Nomad's time limits for a plugin's calls, one per operation: named
//! (`timeouts.create`) for callers that set one, and keyed by [`Operation`]
//! (`timeouts[op]`) for code that goes over every operation, so that no
//! caller spells the three out again.

use std::ops::{Index, IndexMut};
use std::time::Duration;

use crate::contract::Operation;

/// Time limits per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Fingerprint limit (Nomad's effective limit is 1 s).
    pub fingerprint: Duration,
    /// Create limit (60 s).
    pub create: Duration,
    /// Delete limit (60 s).
    pub delete: Duration,
}

impl Default for Timeouts {
    /// Nomad's own limits ([`Operation::timeout`]).
    fn default() -> Self {
        Timeouts::from_fn(Operation::timeout)
    }
}

impl Timeouts {
    /// Each operation's limit, as `limit` gives it.
    pub fn from_fn(mut limit: impl FnMut(Operation) -> Duration) -> Timeouts {
        Timeouts {
            fingerprint: limit(Operation::Fingerprint),
            create: limit(Operation::Create),
            delete: limit(Operation::Delete),
        }
    }

    /// One limit for every operation.
    pub fn uniform(limit: Duration) -> Timeouts {
        Timeouts::from_fn(|_| limit)
    }

    /// Every limit multiplied by `factor` (for slow test machines; reported).
    pub fn scaled(self, factor: f64) -> Timeouts {
        Timeouts::from_fn(|op| self[op].mul_f64(factor.max(0.0)))
    }

    /// The limit for `op`.
    pub fn limit(&self, op: Operation) -> Duration {
        self[op]
    }

    /// The limit for the operation word `op`; words Nomad does not send get
    /// the create limit.
    pub fn for_operation(&self, op: &str) -> Duration {
        op.parse::<Operation>()
            .map_or(self.create, |op| self.limit(op))
    }
}

impl Index<Operation> for Timeouts {
    type Output = Duration;

    fn index(&self, op: Operation) -> &Duration {
        match op {
            Operation::Fingerprint => &self.fingerprint,
            Operation::Create => &self.create,
            Operation::Delete => &self.delete,
        }
    }
}

impl IndexMut<Operation> for Timeouts {
    fn index_mut(&mut self, op: Operation) -> &mut Duration {
        match op {
            Operation::Fingerprint => &mut self.fingerprint,
            Operation::Create => &mut self.create,
            Operation::Delete => &mut self.delete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_named_and_keyed_by_operation_alike() {
        let mut t = Timeouts::default();
        assert_eq!(
            (t.fingerprint, t.create, t.delete),
            (
                Duration::from_secs(1),
                Duration::from_secs(60),
                Duration::from_secs(60)
            )
        );
        for op in Operation::ALL {
            assert_eq!(t[op], op.timeout());
            assert_eq!(t.limit(op), t[op]);
            assert_eq!(t.for_operation(op.as_str()), t[op]);
        }
        t[Operation::Delete] = Duration::from_secs(7);
        assert_eq!(t.delete, Duration::from_secs(7));
        assert_eq!(t.for_operation("resize"), t.create);
        let half = t.scaled(0.5);
        assert_eq!(
            (half.fingerprint, half.create, half.delete),
            (
                Duration::from_millis(500),
                Duration::from_secs(30),
                Duration::from_millis(3500)
            )
        );
        assert_eq!(
            Timeouts::uniform(Duration::from_secs(2)),
            Timeouts::from_fn(|_| Duration::from_secs(2))
        );
    }
}
