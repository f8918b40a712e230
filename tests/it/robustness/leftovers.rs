//! What a run may have left behind, looked for everywhere: the tree of the area
//! it ran in, and the processes tied to it.

use super::*;

/// Every entry below `dir` (symlinks not followed) with size and mtime.
pub(super) fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(e.path());
            }
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            // A dir's own mtime changes when its entries do; those show up
            // as entries, so only files carry their mtime.
            let key = if meta.is_dir() {
                (0, SystemTime::UNIX_EPOCH)
            } else {
                (meta.len(), mtime)
            };
            out.insert(e.path(), key);
        }
    }
    out
}

/// Live processes tied to `area`: its path in their environment (plugins get
/// `DHV_*` paths below TMPDIR), as their working directory (fingerprint calls
/// get no path in their environment but run in the binary's cwd), or on their
/// command line.
pub(super) fn processes_tied_to(area: &Path) -> Vec<String> {
    let needle = area.to_string_lossy().into_owned();
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid_num) = pid.parse::<i32>() else {
            continue;
        };
        if pid == me || !util::alive_with(pid_num, "") {
            continue;
        }
        let env = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cwd = fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        if String::from_utf8_lossy(&env).contains(&needle)
            || String::from_utf8_lossy(&cmdline).contains(&needle)
            || cwd.starts_with(area)
        {
            found.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    found
}

/// Waits for `probe` to hold, polling; false when `limit` passed first.
/// No process tied to the area outlives `settle`, and its temp dir is empty.
pub(super) fn assert_left_nothing(area: &Area, what: &str, settle: Duration) {
    let settled = wait_for(settle, || processes_tied_to(area.path()).is_empty());
    assert!(
        settled,
        "{what}: processes left behind: {:?}",
        processes_tied_to(area.path())
    );
    let left: Vec<_> = fs::read_dir(area.tmp())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{what}: temp files left behind: {left:?}");
}
