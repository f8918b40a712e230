//! Unit tests of a call's end: the CPU wait counted, and which pipe
//! holders keep a call's pipes.
use super::*;

fn holder(pid: i32, waiting: bool, cpu_ms: u64) -> (i32, os::Activity) {
    let cpu = Duration::from_millis(cpu_ms);
    (
        pid,
        os::Activity {
            waiting,
            stuck: false,
            cpu,
            ended: false,
        },
    )
}

#[test]
fn only_the_same_threads_wait_is_counted() {
    let ms = Duration::from_millis;
    assert_eq!(ours_waited(Some((7, ms(10))), Some((7, ms(35)))), ms(25));
    // Another thread's total says nothing about this call.
    assert_eq!(ours_waited(Some((7, ms(10))), Some((8, ms(900)))), ms(0));
    assert_eq!(ours_waited(None, Some((7, ms(35)))), ms(0));
    // The figure read is this very thread's, and it never goes down.
    let first = os::thread_cpu_wait().expect("schedstat");
    let second = os::thread_cpu_wait().expect("schedstat");
    assert_eq!(first.0, nix::unistd::gettid().as_raw());
    assert_eq!(first.0, second.0);
    assert!(second.1 >= first.1);
    let elsewhere = std::thread::spawn(os::thread_cpu_wait).join().unwrap();
    assert_ne!(elsewhere.map(|(t, _)| t), Some(first.0));
}

#[test]
fn a_holder_waiting_for_a_cpu_does_not_keep_the_pipe_however_long_it_waits() {
    let delay = Duration::from_millis(100);
    let mut asleep = Vec::new();
    // Runnable, barely run: on its way to letting go, look after look.
    for _ in 0..100 {
        let was = std::mem::take(&mut asleep);
        assert!(!keeps(&[holder(7, false, 2)], &was, delay, &mut asleep));
    }
    assert!(asleep.is_empty());
}

#[test]
fn a_holder_asleep_twice_in_a_row_or_that_ran_past_the_delay_keeps_the_pipe() {
    let delay = Duration::from_millis(100);
    let mut asleep = Vec::new();
    // Asleep once (a page fault, a short wait) is not yet keeping.
    assert!(!keeps(&[holder(7, true, 0)], &[], delay, &mut asleep));
    assert_eq!(asleep, [7]);
    let was = std::mem::take(&mut asleep);
    assert!(keeps(&[holder(7, true, 0)], &was, delay, &mut asleep));
    // A different holder asleep is not the same one asleep twice.
    assert!(!keeps(&[holder(8, true, 0)], &[7], delay, &mut Vec::new()));
    // Running, but longer than the wait-delay: a busy holder keeps it.
    assert!(keeps(&[holder(9, false, 150)], &[], delay, &mut Vec::new()));
}

#[test]
fn the_bound_keeps_a_pipe_only_for_a_holder_seen_holding_it() {
    let bound = HOLDER_BOUND;
    let runnable = [holder(7, false, 2)];
    let mut stuck = holder(8, false, 2);
    stuck.1.stuck = true;
    // Before the bound, every look goes on.
    assert_eq!(at_the_bound(&[stuck], bound / 2), None);
    // At it, a last look that saw nobody is the sweep's to decide, never a
    // leak by the clock alone (the looks are slow on a loaded host).
    assert_eq!(at_the_bound(&[], bound), Some(Holding::Unseen));
    // A holder in an uninterruptible wait keeps it.
    assert_eq!(at_the_bound(&[stuck], bound), Some(Holding::Kept));
    // One only waiting for a CPU is given until the far bound.
    assert_eq!(at_the_bound(&runnable, bound), None);
    assert_eq!(at_the_bound(&runnable, RUNNABLE_BOUND), Some(Holding::Kept));
}
