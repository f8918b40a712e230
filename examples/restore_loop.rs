//! Profiling aid: a restore of `N` volumes after a "reboot" (every volume dir
//! removed), `R` times, and nothing else, so that `perf record` or
//! `strace -f` see only the manager's restore (docs/performance.md,
//! section 3). The volumes are created once, in `WORK` (kept between runs).
//!
//! ```text
//! cargo build --profile profiling --example restore_loop
//! target/profiling/examples/restore_loop 1000 3 8 /tmp/restore-work
//! #                                         N   R  restore concurrency, WORK
//! ```
//!
//! `PLUGIN_DIR` and `PLUGIN` choose another plugin than
//! `sample-plugins/reference`.

use std::path::PathBuf;
use std::time::Instant;

use dhv_conform::manager::{HostVolumeManager, VolumeSpec};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |default: usize| {
        args.next()
            .and_then(|a| a.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let (n, rounds, concurrency) = (number(1000), number(3), number(8));
    let work = std::env::args().nth(4).map_or_else(
        || std::env::temp_dir().join("dhv-restore-loop"),
        PathBuf::from,
    );
    let plugin_dir = std::env::var_os("PLUGIN_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample-plugins"),
        PathBuf::from,
    );
    let plugin = std::env::var("PLUGIN").unwrap_or_else(|_| "reference".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (state, volumes) = (work.join("state"), work.join("volumes"));
    std::fs::create_dir_all(&volumes).expect("the volumes dir");
    let manager = || {
        HostVolumeManager::open(&state)
            .expect("the state dir")
            .with_plugin_dir(&plugin_dir)
            .with_volumes_dir(&volumes)
    };
    let saved = rt.block_on(manager().list()).expect("the state").len();
    for i in saved..n {
        rt.block_on(manager().create(VolumeSpec::new(plugin.as_str(), format!("v{i}"))))
            .expect("a create");
    }
    for _ in 0..rounds {
        for entry in std::fs::read_dir(&volumes).expect("the volumes dir") {
            std::fs::remove_dir_all(entry.expect("a volume").path()).expect("a reboot");
        }
        let manager = manager().with_restore_concurrency(concurrency);
        let started = Instant::now();
        let results = rt.block_on(manager.restore()).expect("the restore");
        assert!(results.iter().all(|r| r.is_ok()), "a volume failed");
        eprintln!("restore {:.3} s", started.elapsed().as_secs_f64());
    }
}
