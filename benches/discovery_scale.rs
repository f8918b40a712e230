//! Fingerprinting a plugin dir of 200 plugins costs about the slowest plugin,
//! not the sum: every plugin is fingerprinted at once, as a Nomad client does.
//!
//! Each plugin sleeps `DELAY` before answering. Prints the wall time, the
//! slowest single plugin's time, and the sum of all, with the ratio
//! wall / slowest (1.0 is ideal; the sum would be 200×).
//!
//! Run: `cargo bench --bench discovery_scale`

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use dhv_conform::manager::Fingerprinter;

const PLUGINS: usize = 200;
const DELAY: &str = "0.2";

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    for i in 0..PLUGINS {
        let path = dir.path().join(format!("plugin-{i:03}"));
        std::fs::write(
            &path,
            format!("#!/bin/sh\nsleep {DELAY}\necho '{{\"version\": \"1.0.{i}\"}}'\n"),
        )
        .expect("write plugin");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let delay = Duration::from_secs_f64(DELAY.parse().expect("delay"));

    let mut walls = Vec::new();
    for round in 0..3 {
        let mut fingerprinter = Fingerprinter::new(Some(dir.path().to_path_buf()));
        let start = Instant::now();
        let fp = rt.block_on(fingerprinter.fingerprint()).expect("scan");
        let wall = start.elapsed();
        let found = fp.attributes.len();
        assert_eq!(
            found,
            PLUGINS + 1,
            "round {round}: every plugin (and mkdir) answers within 1 s: {:?}",
            fp.discovery.left_out
        );
        walls.push(wall);
    }
    walls.sort();
    let median = walls[1];
    println!(
        "discovery of {PLUGINS} plugins (each takes {:.0} ms): wall {:.0} ms (median of 3), slowest plugin {:.0} ms, sum {:.1} s; wall / slowest = {:.2}",
        delay.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        delay.as_secs_f64() * 1e3,
        delay.as_secs_f64() * PLUGINS as f64,
        median.as_secs_f64() / delay.as_secs_f64()
    );
}
