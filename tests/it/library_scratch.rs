//! A scratch cargo project that depends on the crate by path, as an integrator's
//! program would: built offline (the dependencies are in the cargo registry), it runs
//! the suite from `#[tokio::main]`, checks that its counts agree and that its own
//! SIGINT handling still works, then panics in the middle of a second run. It must
//! print only its own lines, and leave nothing behind.
//!
//! The project lives in `target/scratch-program/`; it builds into the crate's own
//! target dir with the crate's dev profile, so the dependencies this test run's
//! build compiled are reused, as an integrator's workspace would share them (a
//! separate target dir built the whole dependency tree again: the suite's
//! longest test). Cargo holds no lock on the target dir while tests run.

use crate::util;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const MAIN: &str = r#"
use dhv_conform::suite::{Progress, ProgressEvent, SuiteConfig, run};
use std::sync::atomic::{AtomicUsize, Ordering};

fn sigcgt() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find(|l| l.starts_with("SigCgt:")).unwrap().to_owned()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (plugin, work) = (&args[1], &args[2]);
    let before = sigcgt();

    let mut config = SuiteConfig::new(plugin);
    config.work_dir = Some(work.into());
    config.filter = Some("create.".into());
    let done = run(config).await.expect("the suite ran");
    let s = &done.report.summary;
    println!(
        "counts {} {} {}",
        s.total,
        done.report.checks.len(),
        s.passed + s.failed + s.warned + s.skipped + s.info
    );
    println!("sigcgt {}", if sigcgt() == before { "unchanged" } else { "changed" });

    // The program's own SIGINT handling still gets the signal (its handler
    // is in place once `signal` returns: no race with the kill).
    let mut sigint =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).unwrap();
    std::process::Command::new("kill")
        .args(["-INT", &std::process::id().to_string()])
        .status()
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(30), sigint.recv())
        .await
        .expect("SIGINT reached the program's handler")
        .unwrap();
    println!("own sigint handler ran");

    let finished = AtomicUsize::new(0);
    let mut config = SuiteConfig::new(plugin);
    config.work_dir = Some(work.into());
    config.progress = Progress::new(move |e| {
        if let ProgressEvent::Finished(_) = e {
            if finished.fetch_add(1, Ordering::SeqCst) == 3 {
                panic!("the program panics mid-run on purpose");
            }
        }
    });
    let _ = run(config).await;
    println!("not reached");
}
"#;

#[test]
fn a_program_depending_on_the_crate_runs_the_suite_and_survives_a_panic() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let project = repo.join("target/scratch-program");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"scratch-program\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ndhv-conform = {{ path = {:?} }}\n\
             tokio = {{ version = \"1\", features = [\"macros\", \"rt-multi-thread\", \"signal\", \"time\"] }}\n\n\
             [workspace]\n\n{}",
            repo.display().to_string(),
            dev_profile(repo)
        ),
    )
    .unwrap();
    std::fs::write(project.join("src/main.rs"), MAIN).unwrap();
    if !project.join("Cargo.lock").exists() {
        // The crate's own lock: the same versions, all in the local registry.
        std::fs::copy(repo.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .args(["build", "--offline", "--quiet"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its errors in the failure itself: a child's stderr is not captured
    // with the test's output, and a CI log shows only a part of the run.
    let build = wait_output(build, "its build", Duration::from_secs(1200));
    assert!(
        build.status.success(),
        "the scratch program did not build ({}):\n{}",
        build.status,
        tail(&String::from_utf8_lossy(&build.stderr), 40)
    );

    let work = util::Scratch::new();
    let run = Command::new(target_dir().join("debug/scratch-program"))
        .arg(repo.join("sample-plugins/reference"))
        .arg(work.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(run, "its run", Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "only the program's own lines: {stdout}\n{stderr}"
    );
    let counts: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(counts[0], "counts");
    assert!(
        counts[1] == counts[2] && counts[2] == counts[3],
        "{}",
        lines[0]
    );
    assert_ne!(counts[1], "0");
    assert_eq!(lines[1], "sigcgt unchanged");
    assert_eq!(lines[2], "own sigint handler ran");
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(
        stderr.contains("the program panics mid-run on purpose"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(work.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "the program left {left:?}");
    let needle = work.path().display().to_string();
    let running = util::processes_with_env_containing(&needle);
    assert!(running.is_empty(), "the program left running: {running:?}");
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The target dir this test was built in (its `CARGO_TARGET_TMPDIR` is `tmp/` in it).
fn target_dir() -> std::path::PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .expect("CARGO_TARGET_TMPDIR is below the target dir")
        .to_path_buf()
}

/// The crate's own `[profile.dev]` (with its per-package parts), for the
/// scratch manifest: the same profile is what lets the build reuse the
/// dependencies compiled for this test run.
fn dev_profile(repo: &Path) -> String {
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().expect("Cargo.toml parses");
    let Some(dev) = manifest.get("profile").and_then(|p| p.get("dev")) else {
        return String::new();
    };
    let mut profile = toml::Table::new();
    profile.insert("dev".into(), dev.clone());
    let mut table = toml::Table::new();
    table.insert("profile".into(), toml::Value::Table(profile));
    table.to_string()
}

/// The child's output, killing it past `limit` (`what` names it then).
fn wait_output(child: std::process::Child, what: &str, limit: Duration) -> std::process::Output {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("the scratch program: {what} did not finish within {limit:?}");
        }
    }
}
