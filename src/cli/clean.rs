//! `dhv-conform clean`: removes what runs killed outright (SIGKILL) left in
//! the temp dir: their mounts, loop devices and temp dirs, with the care of
//! the teardown, and the cgroups of dead runs. Runs whose process lives are
//! never touched.

use super::{CliResult, EXIT_FAIL, EXIT_OK, print_stdout};
use crate::report::printable_line;

/// Arguments of `clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {}

/// Runs `clean`: one line per leftover cleaned, or one saying there was none.
pub fn run(_args: CleanArgs) -> CliResult {
    let tmp = std::env::temp_dir();
    // A killed run's cgroup lies beside this process's own, not in TMPDIR.
    crate::exec::remove_dead_run_cgroups();
    let cleaned = crate::conformance::clean_leftovers(&tmp);
    if cleaned.is_empty() {
        print_stdout(&format!(
            "no leftovers of killed runs in {}\n",
            printable_line(&tmp.display().to_string())
        ));
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    for c in &cleaned {
        out.push_str(&format!("cleaned {}\n", printable_line(&c.summary())));
    }
    print_stdout(&out);
    let all_gone = cleaned.iter().all(|c| c.teardown.removed);
    Ok(if all_gone { EXIT_OK } else { EXIT_FAIL })
}

/// Before a run: cleans what killed runs left, saying so on stderr.
pub(crate) fn before_a_run() {
    for c in crate::conformance::clean_leftovers(&std::env::temp_dir()) {
        super::print_stderr(&format!(
            "dhv-conform: cleaned {}\n",
            printable_line(&c.summary())
        ));
    }
}
