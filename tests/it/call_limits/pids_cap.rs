//! The test's own pids cap: a cgroup the harness is started in.

use crate::util::wait_for;
use std::fs;
use std::path::{Path, PathBuf};

/// A pids cgroup of the test's with room for `max` tasks, made in `base`
/// (the test's own cgroup in the hierarchy that offers the controller):
/// the harness is started in it, so that a fork bomb of its plugin can hurt
/// nothing outside. Removed on drop, once whatever is left inside is killed.
pub(super) struct PidsCap(pub(super) PathBuf);

impl PidsCap {
    pub(super) fn make(base: &Path, v1: bool, max: u64) -> PidsCap {
        let dir = base.join(format!("dhv-test-cap-{}", std::process::id()));
        fs::create_dir(&dir).unwrap();
        let cap = PidsCap(dir);
        fs::write(cap.0.join("pids.max"), max.to_string()).unwrap();
        if !v1 {
            // The harness's run cgroup, made below the cap, gets the
            // controller from it (threaded: allowed with processes inside).
            fs::write(cap.0.join("cgroup.subtree_control"), "+pids").unwrap();
        }
        cap
    }

    /// The pids of the processes still in it (the harness's dirs below it
    /// included).
    pub(super) fn procs(&self) -> Vec<String> {
        let mut dirs = vec![self.0.clone()];
        let mut found = Vec::new();
        while let Some(dir) = dirs.pop() {
            let text = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            found.extend(text.lines().map(str::to_owned));
            for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(entry.path());
                }
            }
        }
        found
    }

    /// The dirs below it.
    pub(super) fn children(&self) -> Vec<String> {
        fs::read_dir(&self.0)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for PidsCap {
    fn drop(&mut self) {
        for pid in self.procs() {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: a plain kill of a process in the test's cap.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = wait_for(std::time::Duration::from_secs(10), || {
            fs::remove_dir(&self.0).is_ok() || !self.0.exists()
        });
    }
}
