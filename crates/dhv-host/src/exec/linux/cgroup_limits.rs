//! The limits every call cgroup gets ([`CallLimits`], set for the whole
//! process by [`set_call_limits`]) and how reaching them is counted and said:
//! the counts of a call cgroup's `pids.events` and `memory.events` (or their
//! v1 files, see `cgroup_v1.rs`), and the words a call that reached one is
//! told. Plain data and text: nothing here touches a cgroup, so both the
//! cgroup2 call cgroups (`cgroup.rs`) and the v1 dirs use it.

use std::sync::Mutex;

use crate::sync::lock;

/// The limits every call cgroup gets: `pids.max` and `memory.max` (on a
/// hybrid host, in its v1 dirs: `pids.max` and `memory.limit_in_bytes`). A
/// call that reaches one is the plugin's doing (a fork bomb, a leak), and is
/// said as such; the host and the harness keep their pids and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// The most processes and threads a call's cgroup may hold at once.
    pub pids_max: u64,
    /// The most memory (bytes) a call's cgroup may use; past it the kernel
    /// reclaims, then its OOM killer kills a process of the call.
    pub memory_max: u64,
}

impl CallLimits {
    /// 4096 processes: no plugin step needs more than a few dozen, and far
    /// below any host's pid space even with every check's calls in flight.
    pub const DEFAULT_PIDS_MAX: u64 = 4096;
    /// 4 GiB: more than a `mkfs` or a copy of a volume needs.
    pub const DEFAULT_MEMORY_MAX: u64 = 4 << 30;
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            pids_max: CallLimits::DEFAULT_PIDS_MAX,
            memory_max: CallLimits::DEFAULT_MEMORY_MAX,
        }
    }
}

/// The limits calls started from now on get (see [`CallLimits`]); by
/// default [`CallLimits::default`].
pub fn set_call_limits(limits: CallLimits) {
    *lock(&LIMITS) = limits;
}

static LIMITS: Mutex<CallLimits> = Mutex::new(CallLimits {
    pids_max: CallLimits::DEFAULT_PIDS_MAX,
    memory_max: CallLimits::DEFAULT_MEMORY_MAX,
});

/// The limits in force for a call starting now (see [`set_call_limits`]),
/// with `pids_max` at most `pids_budget` (see [`pids_budget`]).
pub(super) fn call_limits(pids_budget: Option<u64>) -> CallLimits {
    let mut limits = *lock(&LIMITS);
    if let Some(budget) = pids_budget {
        limits.pids_max = limits.pids_max.min(budget);
    }
    limits
}

/// The tasks (processes and threads) the harness keeps for itself out of
/// what its cgroup ancestry has left, at most: its runtime's and its
/// checks' threads, the sweeps' and the tools it runs (`mount`, `mkfs`).
/// Half of what is left where that is less.
pub(super) const HARNESS_RESERVE: u64 = 256;

/// How many tasks the plugin calls may hold, all together, when the
/// harness's own cgroups (`ancestry`: its cgroup and every one above it, in
/// each hierarchy with the `pids` controller) leave `left` tasks (the least
/// `pids.max` less `pids.current` among them): `left` less the harness's
/// reserve ([`HARNESS_RESERVE`], or half of `left`). A fork bomb then meets
/// its call's limit, below this, before the harness has no task left to
/// start a thread with. `None` when no ancestor caps the tasks.
pub(super) fn pids_budget<'a>(
    ancestry: impl IntoIterator<Item = &'a std::path::Path>,
) -> Option<u64> {
    let left = ancestry
        .into_iter()
        .filter_map(|dir| {
            let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
            pids_left(&read("pids.max")?, &read("pids.current")?)
        })
        .min()?;
    Some((left - HARNESS_RESERVE.min(left / 2)).max(1))
}

/// What a cgroup's `pids.max` and `pids.current` texts leave: `None` for
/// `max` (no cap) or an unreadable text.
pub(super) fn pids_left(max: &str, current: &str) -> Option<u64> {
    let max = max.trim().parse::<u64>().ok()?;
    let current = current.trim().parse::<u64>().ok()?;
    Some(max.saturating_sub(current))
}

/// What a call cgroup's `pids.events` and `memory.events` count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LimitCounts {
    /// Forks refused at `pids.max`.
    pub pids: u64,
    /// Processes the OOM killer killed at `memory.max`.
    pub oom_kills: u64,
}

/// The sum of the counts of `keys` in an events file's text (`max 3\n`).
pub(crate) fn event_count(text: &[u8], keys: &[&str]) -> u64 {
    let Ok(text) = std::str::from_utf8(text) else {
        return 0;
    };
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| keys.contains(k))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

/// What a call that reached its limits is told, in words; `None` when it
/// reached none.
pub(super) fn limits_reached(
    limits: CallLimits,
    before: LimitCounts,
    now: LimitCounts,
    memory_v1: bool,
) -> Option<String> {
    let mut said = Vec::new();
    let forks = now.pids.saturating_sub(before.pids);
    if forks > 0 {
        said.push(format!(
            "the call reached its limit of {} processes (pids.max): {forks} fork{} refused (pids.events)",
            limits.pids_max,
            if forks == 1 { " was" } else { "s were" }
        ));
    }
    let kills = now.oom_kills.saturating_sub(before.oom_kills);
    if kills > 0 {
        // The files as they are named where the limit was set.
        let (limit, events) = match memory_v1 {
            false => ("memory.max", "memory.events"),
            true => ("memory.limit_in_bytes", "memory.oom_control"),
        };
        said.push(format!(
            "the call reached its memory limit of {} ({limit}): the kernel's OOM killer killed {kills} of its processes ({events})",
            bytes_text(limits.memory_max)
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// `4 GiB`, `512 MiB`, or bytes.
fn bytes_text(n: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_events_are_counted_and_said() {
        assert_eq!(event_count(b"max 3\n", &["max"]), 3);
        let memory = b"low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(event_count(memory, &["oom_kill"]), 1);
        let limits = CallLimits::default();
        let before = LimitCounts {
            pids: 5,
            oom_kills: 1,
        };
        assert_eq!(limits_reached(limits, before, before, false), None);
        let now = LimitCounts {
            pids: 7,
            oom_kills: 2,
        };
        let said = limits_reached(limits, before, now, false).unwrap();
        assert!(
            said.contains("4096 processes (pids.max): 2 forks were refused"),
            "{said}"
        );
        assert!(
            said.contains("memory limit of 4 GiB (memory.max)"),
            "{said}"
        );
        assert!(
            said.contains("killed 1 of its processes (memory.events)"),
            "{said}"
        );
        // Set through cgroup v1, the limit is named by v1's files.
        let said = limits_reached(limits, before, now, true).unwrap();
        assert!(
            said.contains("memory limit of 4 GiB (memory.limit_in_bytes)"),
            "{said}"
        );
        assert!(said.contains("(memory.oom_control)"), "{said}");
        assert!(said.contains("(pids.max)"), "{said}");
        assert_eq!(bytes_text(512 << 20), "512 MiB");
        assert_eq!(bytes_text(1000), "1000 bytes");
    }

    #[test]
    fn the_calls_pids_budget_leaves_the_harness_its_reserve() {
        assert_eq!(pids_left("max\n", "12\n"), None);
        assert_eq!(pids_left("1024\n", "12\n"), Some(1012));
        assert_eq!(pids_left("10\n", "12\n"), Some(0));
        assert_eq!(pids_left("1024\n", "many\n"), None);
        // The least left among the ancestors counts, less the reserve.
        let dir = tempfile::tempdir().unwrap();
        let (own, parent) = (dir.path().join("own"), dir.path());
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("pids.max"), "max\n").unwrap();
        std::fs::write(own.join("pids.current"), "30\n").unwrap();
        std::fs::write(parent.join("pids.max"), "1024\n").unwrap();
        std::fs::write(parent.join("pids.current"), "24\n").unwrap();
        assert_eq!(
            pids_budget([own.as_path(), parent]),
            Some(1000 - HARNESS_RESERVE)
        );
        assert_eq!(pids_budget([own.as_path()]), None);
        // Little left: the harness keeps half.
        std::fs::write(parent.join("pids.current"), "924\n").unwrap();
        assert_eq!(pids_budget([own.as_path(), parent]), Some(50));
        let limits = call_limits(Some(50));
        assert_eq!(limits.pids_max, 50);
    }
}
