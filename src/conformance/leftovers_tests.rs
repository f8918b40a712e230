//! The unit tests of `leftovers.rs`, in a file of their own.

use super::*;

#[test]
fn an_owner_file_reads_back() {
    let text = "pid=12\nstart=345\nroot=/tmp/dhv-conform-x\n";
    assert_eq!(
        parse_owner(text),
        Some(Owner {
            pid: 12,
            start: 345,
            root: "/tmp/dhv-conform-x".into()
        })
    );
    assert_eq!(parse_owner("pid=12\n"), None);
    assert_eq!(parse_owner("garbage"), None);
}

#[test]
fn a_live_run_and_a_dir_without_an_owner_are_not_touched_and_a_dead_one_is() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("dhv-conform-live");
    let bare = tmp.path().join("dhv-conform-bare");
    let dead = tmp.path().join("dhv-conform-dead");
    for d in [&live, &bare, &dead] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("file"), "x").unwrap();
    }
    own(&live).unwrap();
    // A pid that cannot be alive: beyond the kernel's pid_max.
    std::fs::write(
        dead.join(OWNER_FILE),
        format!("pid=2147483646\nstart=1\nroot={}\n", dead.display()),
    )
    .unwrap();
    let cleaned = clean_leftovers(tmp.path());
    assert_eq!(cleaned.len(), 1, "{cleaned:?}");
    assert_eq!(cleaned[0].teardown.temp_dir, dead);
    assert!(cleaned[0].teardown.removed);
    assert!(!dead.exists());
    assert!(live.join("file").exists() && bare.join("file").exists());
    assert!(
        clean_leftovers(tmp.path()).is_empty(),
        "a second clean finds nothing"
    );
    disown(&live, false);
}

/// A process holding `file` under an exclusive `flock`, as a plugin's
/// helper that took a run's lock when the run died; it says so on its
/// stdout once the lock is its.
fn lock_holder(file: &Path) -> std::process::Child {
    let mut child = std::process::Command::new("flock")
        .arg("-x")
        .arg(file)
        .args(["sh", "-c", "echo locked; exec sleep 300"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "locked\n");
    child
}

#[test]
fn a_dead_runs_lock_held_by_a_leftover_hides_nothing_and_the_holder_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dead = tmp.path().join("dhv-conform-dead");
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(
        dead.join(OWNER_FILE),
        format!("pid=2147483646\nstart=1\nroot={}\n", dead.display()),
    )
    .unwrap();
    let mut holder = lock_holder(&dead.join(OWNER_FILE));
    let found = clean_leftovers_in(&[tmp.path()]);
    let status = holder.wait().unwrap();
    assert_eq!(found.cleaned.len(), 1, "{found:?}");
    let cleaned = &found.cleaned[0];
    assert!(cleaned.teardown.removed && !dead.exists(), "{cleaned:?}");
    // flock(1) and the sleep it started both hold the file: both go.
    let pids: Vec<i32> = cleaned.holders.iter().map(|h| h.pid).collect();
    assert_eq!(pids.len(), 2, "{cleaned:?}");
    assert!(pids.contains(&(holder.id() as i32)), "{cleaned:?}");
    assert!(cleaned.holders.iter().all(|h| h.gone), "{cleaned:?}");
    assert!(
        cleaned.summary().contains("holding its lock, killed"),
        "{}",
        cleaned.summary()
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}

#[test]
fn a_live_run_is_alive_by_its_process_even_when_another_holds_nothing_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("dhv-conform-live");
    std::fs::create_dir(&live).unwrap();
    own(&live).unwrap();
    let found = clean_leftovers_in(&[tmp.path()]);
    disown(&live, false);
    assert!(found.cleaned.is_empty(), "{found:?}");
    assert_eq!(
        found.left,
        vec![Left::Alive {
            dir: live.clone(),
            pid: std::process::id() as i32
        }]
    );
    assert!(live.join(OWNER_FILE).exists());
}

#[test]
fn a_breadcrumb_leads_to_a_dead_run_made_elsewhere_and_goes_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dead = work.path().join("dhv-conform-dead");
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(
        dead.join(OWNER_FILE),
        format!("pid=2147483646\nstart=1\nroot={}\n", dead.display()),
    )
    .unwrap();
    let crumb = leave_crumb(tmp.path(), &dead, 2147483646, 1).unwrap();
    let found = clean_leftovers_in(&[tmp.path()]);
    assert_eq!(found.cleaned.len(), 1, "{found:?}");
    assert!(!dead.exists(), "the run dir elsewhere is left");
    assert!(!crumb.exists(), "the breadcrumb is left");
    // The work dir given as well: the dir is cleaned once, not twice.
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(
        dead.join(OWNER_FILE),
        format!("pid=2147483646\nstart=1\nroot={}\n", dead.display()),
    )
    .unwrap();
    leave_crumb(tmp.path(), &dead, 2147483646, 1).unwrap();
    let found = clean_leftovers_in(&[tmp.path(), work.path()]);
    assert_eq!(found.cleaned.len(), 1, "{found:?}");
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}
