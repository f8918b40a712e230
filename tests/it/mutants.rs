//! The catalogue's power, guarded: the 30 mutants recorded in
//! `docs/mutants-killed.txt` (the first 30 the catalogue killed, in the order seed
//! 1 draws) must each still be killed. Ignored by default (it checks 30 plugins);
//! `.ci/run` runs it.

use std::process::Command;

#[test]
#[ignore = "runs 30 suites; .ci/run runs it, or: cargo test --test it mutants:: -- --ignored"]
fn no_mutant_the_catalogue_killed_survives() {
    let root = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_dhv-conform");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/mutants"))
        .arg("--guard")
        .env("DHV_CONFORM_BIN", bin)
        .output()
        .expect("python3 runs scripts/mutants");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("non-equivalent mutants killed"),
        "the guard ran no mutant: {stdout}\n{stderr}"
    );
}
