//! How these tests run a plugin through `dhv-conform run` (its JSON, or in a
//! working dir of their choice) and write the plugins they run.

use super::*;

/// `run ARGS --json`: exit code, the JSON, and stderr.
pub(super) fn run_json<I, S>(args: I) -> (Option<i32>, Value, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("run")
        .args(args)
        .args(["--id", ID, "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `run PLUGIN OP --plugin-dir DIR --volumes-dir VOLUMES [more]`.
pub(super) fn run_in(
    dir: &Path,
    volumes: &Path,
    plugin: &OsStr,
    op: &str,
    more: &[&str],
) -> (Option<i32>, Value, String) {
    let mut args: Vec<&OsStr> = vec![
        plugin,
        OsStr::new(op),
        OsStr::new("--plugin-dir"),
        dir.as_os_str(),
    ];
    args.extend([OsStr::new("--volumes-dir"), volumes.as_os_str()]);
    args.extend(more.iter().map(OsStr::new));
    run_json(args)
}

pub(super) fn plugin_dir(s: &Scratch) -> PathBuf {
    let dir = s.path().join("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn write_plugin(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
