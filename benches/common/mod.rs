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

/// CPU seconds used so far by this process and by its reaped descendants.
#[allow(dead_code, reason = "only restore_scale and explore measure CPU")]
pub struct Usage {
    /// This process's.
    pub own: f64,
    /// Its reaped descendants'.
    pub children: f64,
}

#[allow(dead_code, reason = "only restore_scale and explore measure CPU")]
impl Usage {
    /// Now.
    pub fn now() -> Usage {
        fn cpu(who: libc::c_int) -> f64 {
            // SAFETY: getrusage fills the zeroed struct it is given.
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `u` is a valid, writable rusage that outlives the call.
            unsafe { libc::getrusage(who, &mut u) };
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            secs(u.ru_utime) + secs(u.ru_stime)
        }
        Usage {
            own: cpu(libc::RUSAGE_SELF),
            children: cpu(libc::RUSAGE_CHILDREN),
        }
    }

    /// What was used between `before` and `self`.
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            own: self.own - before.own,
            children: self.children - before.children,
        }
    }
}
