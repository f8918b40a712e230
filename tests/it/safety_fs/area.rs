//! The area a safety test runs in: a TMPDIR for the run, a tree of sentinel
//! files outside the sandbox, the plugin's own notes, and the check run there.

use super::*;

/// `tmp` is the run's TMPDIR, `outside` a tree of sentinel files outside
/// the sandbox, `log` the plugin's own notes.
pub(super) struct Area {
    pub(super) scratch: tempfile::TempDir,
}

impl Area {
    pub(super) fn new() -> Area {
        Area::in_dir(&std::env::temp_dir())
    }

    pub(super) fn in_dir(dir: &Path) -> Area {
        let scratch = tempfile::Builder::new()
            .prefix("dhv-test-")
            .tempdir_in(dir)
            .unwrap();
        for d in ["tmp", "outside", "log"] {
            fs::create_dir(scratch.path().join(d)).unwrap();
        }
        util::plant_sentinels(&scratch.path().join("outside"));
        Area { scratch }
    }

    pub(super) fn tmp(&self) -> PathBuf {
        self.scratch.path().join("tmp")
    }
    pub(super) fn outside(&self) -> PathBuf {
        self.scratch.path().join("outside")
    }
    pub(super) fn log(&self) -> PathBuf {
        self.scratch.path().join("log")
    }

    /// A plugin whose create runs `create` (with `$p` the volume's path, made
    /// already unless `create` makes it) and whose delete runs `delete`.
    pub(super) fn plugin(&self, create: &str, delete: &str) -> PathBuf {
        let body = format!(
            r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
outside={outside}
log={log}
case $1 in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
    p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
{create}
    printf '{{"path": "%s"}}\n' "$p" ;;
delete)
    p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
{delete} ;;
*) exit 1 ;;
esac
"#,
            outside = self.outside().display(),
            log = self.log().display(),
        );
        let path = self.scratch.path().join("plugin");
        fs::write(&path, body).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `check PLUGIN -q --json -` in this area, bounded: the report and
    /// stderr.
    pub(super) fn check(&self, plugin: &Path) -> (serde_json::Value, String) {
        self.check_with(plugin, &[])
    }

    /// [`check`](Self::check) with more arguments (a filter, `--skip`).
    pub(super) fn check_with(&self, plugin: &Path, more: &[&str]) -> (serde_json::Value, String) {
        let (report, stderr, _) = self.check_told(plugin, &[&["-q"], more].concat());
        (report, stderr)
    }

    /// [`check_with`](Self::check_with), the report read from a file: what
    /// the terminal was told (stdout) comes third.
    pub(super) fn check_told(
        &self,
        plugin: &Path,
        more: &[&str],
    ) -> (serde_json::Value, String, String) {
        let json = self.scratch.path().join("report.json");
        let out = assert_cmd::Command::cargo_bin("dhv-conform")
            .unwrap()
            .args(["check", plugin.to_str().unwrap(), "--json"])
            .arg(&json)
            .args(more)
            .env("TMPDIR", self.tmp())
            .env_remove("CI")
            .timeout(util::check::RUN_LIMIT)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let text = fs::read(&json).unwrap_or_default();
        let _ = fs::remove_file(&json);
        let report = serde_json::from_slice(&text)
            .unwrap_or_else(|e| panic!("no report ({e}); stderr: {stderr}"));
        (
            report,
            stderr,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Nothing left: no mount below TMPDIR, no process, an empty TMPDIR.
    pub(super) fn assert_clean(&self, what: &str) {
        let mounts = util::mounts_below(&self.tmp());
        assert!(mounts.is_empty(), "{what}: mounts left: {mounts:?}");
        let gone = util::wait_for(std::time::Duration::from_secs(5), || {
            util::processes_with_env_containing(&self.tmp().to_string_lossy()).is_empty()
        });
        assert!(gone, "{what}: processes left");
        let left: Vec<_> = fs::read_dir(self.tmp())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "{what}: temp dir left: {left:?}");
    }
}
