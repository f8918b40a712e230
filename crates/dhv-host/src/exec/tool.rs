//! A developer's tool the harness runs for its user (the Go toolchain's
//! `go build` for `dhv-conform new`): trusted, run to its end in the user's
//! environment, its output read whole. Not a plugin call: none of a call's
//! confinement, caps or sweeps applies, and none is needed.

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `program` with `args` in `dir`, with `env` added to the user's
/// environment, and waits for it. An `io::ErrorKind::NotFound` error means
/// the program is not on PATH.
pub fn run_tool<S: AsRef<OsStr>>(
    program: &str,
    args: &[S],
    dir: &Path,
    env: &[(&str, &str)],
) -> io::Result<Output> {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
}
