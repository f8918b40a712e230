//! Unit tests of the clone spawn: the signals the child resets.
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
