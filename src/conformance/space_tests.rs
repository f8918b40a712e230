//! The plan of the work filesystem's space: checks let in, in order, while
//! their demand fits; one that cannot fit alone skipped; what is held given
//! back.

use super::*;
use crate::conformance::checks::concurrency;
use crate::conformance::checks::storage::{PROBES, WRITES};

/// The catalogue's checks whose storage is one volume, and the 12-volume
/// `concurrency.delete`, in that order.
fn plan(free: Option<u64>) -> (SpacePlan, Vec<&'static CheckSpec>) {
    let one: Vec<&'static CheckSpec> = crate::conformance::CATALOGUE
        .iter()
        .filter(|c| c.storage().volumes == 1 && c.storage().fills == 0)
        .take(2)
        .collect();
    let ordered = vec![one[0], &concurrency::DELETE, one[1]];
    (
        SpacePlan::new(&ordered, &RequestTemplate::default(), free),
        ordered,
    )
}

const VOLUME: u64 = 50_000_000;

/// On a large filesystem every check is let in at once, as it comes (the
/// last planned first), and the run is not limited.
#[test]
fn a_large_filesystem_lets_every_check_in() {
    let (plan, ordered) = plan(Some(1 << 40));
    let held: Vec<_> = ordered
        .iter()
        .rev()
        .map(|c| plan.admit(c).unwrap())
        .collect();
    assert_eq!(held.len(), 3);
    drop(held);
    assert_eq!(plan.limited(), None);
}

/// Unknown free space plans nothing.
#[test]
fn unknown_free_space_plans_nothing() {
    let (plan, ordered) = plan(None);
    assert!(ordered.iter().all(|c| plan.admit(c).is_ok()));
    assert_eq!(plan.limited(), None);
}

/// A check whose demand beside the probes' does not fit is not run, and says
/// how much it needs and how much there is; the checks after it still are.
#[test]
fn a_check_that_cannot_fit_alone_is_skipped() {
    let probes = PROBES.bytes(&RequestTemplate::default()) - WRITES;
    let free = probes + 3 * VOLUME;
    let (plan, ordered) = plan(Some(free));
    let first = plan.admit(ordered[0]).unwrap();
    let skip = plan.admit(ordered[1]).err().unwrap();
    let needs = probes + 12 * VOLUME + WRITES;
    assert_eq!(
        skip,
        format!(
            "inconclusive: needs {needs} bytes at once, the work filesystem has {free} free \
             (use --work-dir on a larger filesystem, or a smaller capacity in the fixture)"
        )
    );
    let last = plan.admit(ordered[2]).unwrap();
    drop((first, last));
    let limited = plan.limited().unwrap();
    assert_eq!(limited.not_run, ["concurrency.delete"]);
    assert_eq!((limited.free_bytes, limited.waited), (free, 0));
}

/// A check that fits alone but not beside the checks in flight waits until
/// they end, then is let in; the wait is counted.
#[test]
fn a_check_waits_for_room_then_runs() {
    let probes = PROBES.bytes(&RequestTemplate::default()) - WRITES;
    // Room for one check of one volume at a time.
    let free = probes + VOLUME + WRITES + VOLUME / 2;
    let (plan, ordered) = plan(Some(free));
    let plan = std::sync::Arc::new(plan);
    let first = plan.admit(ordered[0]).unwrap();
    assert!(plan.admit(ordered[1]).is_err());
    let (tx, rx) = std::sync::mpsc::channel();
    let waiting = {
        let plan = plan.clone();
        let spec = ordered[2];
        std::thread::spawn(move || {
            let admitted = plan.admit(spec).is_ok();
            tx.send(admitted).unwrap();
        })
    };
    // Not let in while the first holds its volume (bounded wait, no event).
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(200))
            .is_err()
    );
    drop(first);
    assert_eq!(
        rx.recv_timeout(std::time::Duration::from_secs(10)),
        Ok(true)
    );
    waiting.join().unwrap();
    assert_eq!(plan.limited().unwrap().waited, 1);
}
