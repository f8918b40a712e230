//! The runner's promises about a plugin's output: a flood is capped and drained
//! with memory flat, output below and at the cap is kept whole and in order,
//! one byte more is truncated, and silence is empty, not truncated.

use super::*;

#[test]
fn an_output_flood_is_capped_drained_and_memory_stays_flat() {
    let s = Scratch::new();
    let p = s.plugin(
        "p",
        "#!/bin/sh\nhead -c 300000000 /dev/zero\nhead -c 3000000 /dev/zero >&2\n",
    );
    let before = peak_rss_kib();
    let out = rt()
        .block_on(Call::new(&p).output_cap(1 << 20).run())
        .unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert_eq!(out.stdout.len(), 1 << 20);
    assert_eq!(out.stderr.len(), 1 << 20);
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "peak RSS grew by {grown} KiB");
}

/// A plugin that writes the numbers `1..=n`, one per line, to stdout and, in
/// reverse, to stderr, in many small writes: what was captured must be exactly
/// that, in order, however the reads were cut.
fn numbers_plugin(s: &Scratch, n: u32) -> std::path::PathBuf {
    s.plugin(
        "numbers",
        &format!(
            "#!/bin/sh
i=1
while [ $i -le {n} ]; do echo $i; echo $(({n} + 1 - i)) >&2; i=$((i + 1)); done
"
        ),
    )
}

fn numbers(range: impl Iterator<Item = u32>) -> Vec<u8> {
    range
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn output_below_the_cap_is_kept_whole_and_in_order() {
    let s = Scratch::new();
    // About 34 KiB on each stream: several reads, on both pipes at once.
    let p = numbers_plugin(&s, 6000);
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(0));
    assert_eq!(out.stdout, numbers(1..=6000));
    assert_eq!(out.stderr, numbers((1..=6000).rev()));
    assert!(!out.stdout_truncated && !out.stderr_truncated && !out.leaked);
}

#[test]
fn output_exactly_at_the_cap_is_whole_and_one_byte_more_is_truncated() {
    let s = Scratch::new();
    let p = numbers_plugin(&s, 3000);
    let whole = numbers(1..=3000);
    let at_cap = rt()
        .block_on(Call::new(&p).output_cap(whole.len()).run())
        .unwrap();
    assert_eq!(at_cap.stdout, whole);
    assert!(!at_cap.stdout_truncated && !at_cap.stderr_truncated);

    let below = rt()
        .block_on(Call::new(&p).output_cap(whole.len() - 1).run())
        .unwrap();
    assert_eq!(below.stdout, whole[..whole.len() - 1]);
    assert!(below.stdout_truncated && below.stderr_truncated);

    let none = rt().block_on(Call::new(&p).output_cap(0).run()).unwrap();
    assert!(none.stdout.is_empty() && none.stderr.is_empty());
    assert!(none.stdout_truncated && none.stderr_truncated);
    assert_eq!(none.exit, ExitReason::Code(0));
}

#[test]
fn a_silent_plugin_gives_empty_output_untruncated() {
    let s = Scratch::new();
    let p = s.plugin(
        "quiet",
        "#!/bin/sh
exit 3
",
    );
    let out = rt().block_on(Call::new(&p).run()).unwrap();
    assert_eq!(out.exit, ExitReason::Code(3));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    assert!(!out.stdout_truncated && !out.stderr_truncated && !out.leaked);
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
