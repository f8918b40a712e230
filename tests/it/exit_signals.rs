//! How a plugin that dies by a signal is reported: in Go's words, as Nomad 2.0.5
//! reports it (`os.ProcessState.String()`): real-time signals included
//! (`signal: signal 36`), and a core dump (` (core dumped)`).

use crate::util;

use crate::util::Scratch;
use assert_cmd::Command;
use dhv_host::exec::{Call, ExitReason};
use serde_json::Value;

const ID: &str = "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10";

#[test]
fn real_time_signals_are_reported_by_number() {
    let s = Scratch::new();
    for sig in [34, 36, 50, 64] {
        let p = s.plugin(&format!("rt{sig}"), &format!("#!/bin/sh\nkill -{sig} $$\n"));
        let out = util::runtime()
            .block_on(Call::new(&p).arg("create").run())
            .unwrap();
        assert_eq!(out.exit, ExitReason::Signal(sig), "signal {sig}");
        assert_eq!(out.exit.go_string(), format!("signal: signal {sig}"));
        assert!(!out.timed_out);
    }
}

#[test]
fn named_signals_read_as_go_names_them() {
    let s = Scratch::new();
    for (sig, name) in [
        (1, "hangup"),
        (9, "killed"),
        (10, "user defined signal 1"),
        (15, "terminated"),
        (31, "bad system call"),
    ] {
        // No core dumps: a core-dumping signal would add " (core dumped)".
        let p = s.plugin(
            &format!("s{sig}"),
            &format!("#!/bin/sh\nulimit -c 0\nkill -{sig} $$\n"),
        );
        let out = util::runtime()
            .block_on(Call::new(&p).arg("create").run())
            .unwrap();
        assert_eq!(
            out.exit.go_string(),
            format!("signal: {name}"),
            "signal {sig}"
        );
    }
}

/// Whether the kernel writes a core dump is up to the machine (its
/// `core_pattern`, a dump helper, the hard limit): the text must follow what
/// the kernel said. Where `core_pattern` writes a `core` file into the working
/// dir, the dump is seen there too.
#[test]
fn a_core_dump_is_named_when_the_kernel_made_one() {
    let s = Scratch::new();
    let cwd = s.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let p = s.plugin(
        "segv",
        "#!/bin/sh\nulimit -c unlimited 2>/dev/null\nkill -SEGV $$\n",
    );
    let out = util::runtime()
        .block_on(Call::new(&p).arg("create").current_dir(&cwd).run())
        .unwrap();
    assert_eq!(out.exit.signal(), Some(11));
    let dumped = out.exit.core_dumped();
    let text = out.exit.go_string();
    if dumped {
        assert_eq!(text, "signal: segmentation fault (core dumped)");
    } else {
        assert_eq!(text, "signal: segmentation fault");
    }
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    if pattern.trim() == "core" {
        let file = std::fs::read_dir(&cwd)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().starts_with("core"));
        assert_eq!(dumped, file, "{text}, core file written: {file}");
    }
}

#[test]
fn run_says_what_nomad_says_about_a_real_time_signal() {
    let s = Scratch::new();
    let p = s.plugin("rt", "#!/bin/sh\nkill -36 $$\n");
    let out = Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("run")
        .arg(&p)
        .args(["create", "--id", ID, "--json", "--volumes-dir"])
        .arg(s.path().join("volumes"))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["signal"], 36);
    assert_eq!(j["core_dumped"], false);
    assert!(j["exit_code"].is_null());
    assert_eq!(
        j["error"],
        format!(r#"error creating volume "{ID}" with plugin "rt": signal: signal 36"#)
    );
}
