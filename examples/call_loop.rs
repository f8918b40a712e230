//! Profiling aid: `N` runner calls of one program, one after another, and
//! nothing else, so that `strace -f -c` or `perf record` see only the
//! runner's own work per call (docs/performance.md, section 1).
//!
//! ```text
//! cargo build --release --example call_loop
//! strace -ff -o /tmp/t/t target/release/examples/call_loop 100 /bin/true
//! ```

use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let program = args.next().unwrap_or_else(|| "/bin/true".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let env = vec![("DHV_OPERATION".to_string(), "fingerprint".to_string())];
    for _ in 0..n {
        let out = rt
            .block_on(
                dhv_host::exec::Call::new(&program)
                    .arg("fingerprint")
                    .env(env.clone())
                    .timeout(Duration::from_secs(10))
                    .run(),
            )
            .expect("runner call");
        assert!(out.exit.success(), "{out:?}");
    }
}
