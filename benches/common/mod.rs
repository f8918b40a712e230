//! Helpers shared by the benchmarks.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How a bench's last lines say whether a target was met.
pub fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

/// Builds the Go program `source` as `dir/name` with the local toolchain, or
/// says why it could not (no `go` on `PATH`, a failed build). The benchmarks
/// use it for their Nomad baselines: small Go programs that run plugins the
/// way Nomad's client does.
#[allow(
    dead_code,
    reason = "suite_efficiency and sample_wall have no Go baseline"
)]
pub fn build_go(dir: &Path, name: &str, source: &str) -> Result<PathBuf, String> {
    let src = dir.join(format!("{name}.go"));
    let bin = dir.join(name);
    std::fs::write(&src, source).map_err(|e| e.to_string())?;
    let out = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "")
        .output()
        .map_err(|e| format!("go: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "go build failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(bin)
}
