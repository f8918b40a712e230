//! Unit tests of the clone spawn: the signals the child resets, and the
//! reading of when it executed.
use super::*;

/// The ignored signals read from `stat` (and `status`) are those a query
/// finds ignored; a caught one is not among them (the clone clears it).
#[test]
fn the_ignored_signals_read_are_those_a_query_finds() {
    extern "C" fn caught(_: libc::c_int) {}
    // Signals nothing else in the test binary uses.
    let (ignored, handled) = (libc::SIGURG, libc::SIGWINCH);
    let ign = KernelSigaction {
        handler: libc::SIG_IGN,
        ..KernelSigaction::default()
    };
    // The handler never runs: no restorer is needed.
    let handler = KernelSigaction {
        handler: caught as *const () as usize,
        ..KernelSigaction::default()
    };
    let (mut old_ign, mut old_handler) = (KernelSigaction::default(), KernelSigaction::default());
    assert!(raw_sigaction(ignored, Some(&ign), Some(&mut old_ign)));
    assert!(raw_sigaction(
        handled,
        Some(&handler),
        Some(&mut old_handler)
    ));
    let read = super::super::process_wide::ignored_signals().map(|_| signals_to_reset());
    let queried = queried_ignored_signals();
    raw_sigaction(ignored, Some(&old_ign), None);
    raw_sigaction(handled, Some(&old_handler), None);
    assert!(queried.contains(&ignored), "{queried:?}");
    assert!(!queried.contains(&handled), "{queried:?}");
    assert_eq!(read, Some(queried));
}

/// A `CLOCK_MONOTONIC` reading, as the child makes it before its exec, is
/// the `Instant` of that moment (between two taken around it); a reading
/// never made, or one in the future, is none.
#[test]
fn the_exec_reading_is_the_instant_it_was_made() {
    let mut at = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    assert_eq!(instant_of(at), None, "no reading made");
    let before = std::time::Instant::now();
    // SAFETY: clock_gettime writes one timespec into the one we pass.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut at) };
    assert_eq!(read, 0);
    let after = std::time::Instant::now();
    // Read back later (the conversion reads the clock again): still the
    // moment it was made.
    let read = instant_of(at).expect("a reading made");
    assert!(
        before <= read && read <= after,
        "{before:?} <= {read:?} <= {after:?}"
    );
    at.tv_sec += 3600;
    assert_eq!(instant_of(at), None, "a reading in the future");
}
