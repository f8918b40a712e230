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
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied());
    // Its fork copies no descriptor inside a volume (see `fence`); the
    // spawn returns once the child has run its program.
    let child = {
        let _fence = crate::fence::cloning();
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?
    };
    child.wait_with_output()
}
