//! What each check holds of the work filesystem while it runs ([`Storage`]):
//! how many volumes of the run's request it holds at once at most, and what
//! it writes itself. The engine plans the run by it (see
//! `conformance::space`): checks start only while what the checks in flight
//! hold fits the free space of the work filesystem.
//!
//! A check holds one volume at a time unless [`MANY`] says otherwise; a
//! check that makes no volume (`fingerprint.*`) holds none; the run-wide
//! checks hold what the timing phase they share makes.

use super::{
    CheckSpec, concurrency, create_update, delete, delete_auto, history, history_link,
    history_state, input_space, lifecycle, lifecycle_reboot, refused, volume,
};
use crate::conformance::context::RequestTemplate;

/// What a check holds of the work filesystem at once, at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Storage {
    /// Volumes of the run's request it holds at once (made and not yet
    /// deleted, or being made), at most.
    pub volumes: u32,
    /// Bytes it writes past its volumes, counted in volumes of the request
    /// (a fill that goes past a volume's size writes as much again).
    pub fills: u32,
}

impl Storage {
    /// Nothing: the check makes no volume.
    pub const NONE: Storage = Storage::volumes(0);

    /// One volume at a time: most checks.
    pub const ONE: Storage = Storage::volumes(1);

    /// `n` volumes at once, and nothing written past them.
    pub const fn volumes(n: u32) -> Storage {
        Storage {
            volumes: n,
            fills: 0,
        }
    }

    /// The bytes this holds for `template`'s request: each volume its
    /// capacity min (what a plugin that allocates what it is asked for
    /// makes; a plugin that makes plain directories still holds what is
    /// written into them), each fill as much again, and [`WRITES`] for the
    /// check's own files. Nothing for a check that makes no volume.
    pub fn bytes(self, template: &RequestTemplate) -> u64 {
        if self.volumes == 0 && self.fills == 0 {
            return 0;
        }
        let each = u64::try_from(template.capacity_min).unwrap_or(0);
        each.saturating_mul(u64::from(self.volumes + self.fills))
            .saturating_add(WRITES)
    }
}

/// What a check writes of its own beside its volumes (marks, canaries, the
/// files it plants, its log), at most: 1 MiB.
pub(crate) const WRITES: u64 = 1 << 20;

/// What the run's probes hold for the whole run (the first create, the one
/// made again, the two distinct volumes, and the delete probe's volume while
/// it lives): every check that makes a volume counts them.
pub(crate) const PROBES: Storage = Storage::volumes(5);

/// What the timing phase holds (its creates, kept until its deletes, and one
/// more for each delete): every run-wide check waits for it.
const TIMING: Storage = Storage::volumes(4);

/// The checks that hold more than one volume at once (measured: the most
/// volumes each had made or being made at one moment, over the samples).
const MANY: &[(&CheckSpec, Storage)] = &[
    (&concurrency::CREATE, Storage::volumes(8)),
    // 8 made, deleted while 4 others are made.
    (&concurrency::DELETE, Storage::volumes(12)),
    // One volume, but 6 creates of it at once: each may make its own image
    // before one wins.
    (&concurrency::SAME_VOLUME, Storage::volumes(6)),
    (&create_update::UPDATE, Storage::volumes(2)),
    (&delete_auto::AUTO_DELETE_SAFE, Storage::volumes(2)),
    (&delete::ISOLATED, Storage::volumes(3)),
    (&delete::NO_RESIDUE, Storage::volumes(2)),
    (&refused::CHMOD_REFUSED, Storage::volumes(2)),
    (&refused::MOUNT_REFUSED, Storage::volumes(2)),
    (&history::NEIGHBOURS, Storage::volumes(4)),
    (&history::UPDATE_KEEPS, Storage::volumes(2)),
    // A and B, then up to 4 new volumes beside A (the fresh node: A and 4).
    (&history_state::STATE_NOT_PATH, Storage::volumes(6)),
    (&history_link::THROUGH_LINK, Storage::volumes(2)),
    (&input_space::VOLUMES_DIR_SPACE, Storage::volumes(2)),
    (&lifecycle::CRASH_CREATE, Storage::volumes(2)),
    (&lifecycle::RESTORE, Storage::volumes(4)),
    (&lifecycle_reboot::REBOOT, Storage::volumes(6)),
    // Writes past its volume's size.
    (
        &volume::CAPACITY_ENFORCED,
        Storage {
            volumes: 1,
            fills: 1,
        },
    ),
];

impl CheckSpec {
    /// What it holds of the work filesystem at once (see [`Storage`]).
    pub(crate) fn storage(&self) -> Storage {
        if self.is_run_wide() {
            return TIMING;
        }
        if let Some((_, storage)) = MANY.iter().find(|(spec, _)| *spec == self) {
            return *storage;
        }
        match self.group() {
            "fingerprint" => Storage::NONE,
            _ => Storage::ONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each check of the table once, and each more than one volume (one is
    /// the default).
    #[test]
    fn the_table_names_each_check_once_and_only_many() {
        for (i, (spec, storage)) in MANY.iter().enumerate() {
            assert!(
                storage.volumes + storage.fills > 1,
                "{}: one volume is the default",
                spec.id
            );
            assert!(
                MANY[..i].iter().all(|(other, _)| other.id != spec.id),
                "{} twice",
                spec.id
            );
            assert!(!spec.is_run_wide() && spec.group() != "fingerprint");
        }
    }

    /// A check that makes no volume holds nothing; one volume holds its
    /// capacity min and the check's own writes.
    #[test]
    fn bytes_follow_the_request() {
        let template = RequestTemplate::default();
        assert_eq!(Storage::NONE.bytes(&template), 0);
        assert_eq!(Storage::ONE.bytes(&template), 50_000_000 + WRITES);
        assert_eq!(
            concurrency::DELETE.storage().bytes(&template),
            12 * 50_000_000 + WRITES
        );
        let none = RequestTemplate {
            capacity_min: 0,
            ..RequestTemplate::default()
        };
        assert_eq!(Storage::ONE.bytes(&none), WRITES);
    }
}
