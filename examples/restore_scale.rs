//! Times the manager at scale: N creates, then a restore of all N volumes after a
//! "reboot" (every volume dir removed), with the built-in `mkdir` plugin and with
//! `sample-plugins/reference` (POSIX sh), at the default restore concurrency and
//! at 2 (to compare with `xargs -P 2`).
//!
//! ```text
//! cargo run --release --example restore_scale [N]      # N defaults to 1000
//! ```
//!
//! The shell baseline for the same N creates of the reference plugin, to put the
//! numbers next to:
//!
//! ```text
//! seq 1000 | xargs -P 2 -I{} env -i DHV_OPERATION=create DHV_VOLUMES_DIR=/tmp/v \
//!     DHV_VOLUME_ID=00000000-0000-4000-8000-00000000{} ... sample-plugins/reference create
//! ```

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dhv_conform::manager::{HostVolumeManager, VolumeSpec};

fn main() -> Result<(), Box<dyn Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 1000,
    };
    let plugin_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample-plugins");
    let cores = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1);
    let rt = tokio::runtime::Runtime::new()?;
    println!(
        "{n} volumes, {cores} cores, default restore concurrency {}",
        4 * cores
    );
    for plugin in ["mkdir", "reference"] {
        let state = tempfile::tempdir()?;
        let volumes = tempfile::tempdir()?;
        let open = |concurrency: usize| -> Result<HostVolumeManager, Box<dyn Error>> {
            Ok(HostVolumeManager::open(state.path())?
                .with_plugin_dir(&plugin_dir)
                .with_volumes_dir(volumes.path())
                .with_restore_concurrency(concurrency))
        };
        let manager = open(4 * cores)?;
        let started = Instant::now();
        for i in 0..n {
            rt.block_on(manager.create(VolumeSpec::new(plugin, format!("v{i}"))))?;
        }
        report(plugin, "create, one after another", n, started.elapsed());

        for concurrency in [4 * cores, 2] {
            reboot(volumes.path())?;
            let manager = open(concurrency)?;
            let started = Instant::now();
            let results = rt.block_on(manager.restore())?;
            let took = started.elapsed();
            let failed = results.iter().filter(|r| !r.is_ok()).count();
            let missing = results
                .iter()
                .filter(|r| !Path::new(&r.volume.host_path).is_dir())
                .count();
            if failed + missing > 0 {
                return Err(
                    format!("{plugin}: {failed} restores failed, {missing} dirs missing").into(),
                );
            }
            report(
                plugin,
                &format!("restore, concurrency {concurrency}"),
                n,
                took,
            );
        }
    }
    Ok(())
}

/// What a reboot with volumes on a tmpfs does: every volume dir is gone.
fn reboot(volumes: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(volumes)? {
        std::fs::remove_dir_all(entry?.path())?;
    }
    Ok(())
}

fn report(plugin: &str, what: &str, n: usize, took: Duration) {
    println!(
        "{plugin:>9}  {what:<28} {:>8.1} ms total  {:>7.3} ms/volume",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3 / n as f64
    );
}
