//! `dhv-conform clean`: removes what runs killed outright (SIGKILL) left in
//! the temp dir and in each `--work-dir` given (and in any work dir a run's
//! breadcrumb in the temp dir names): the processes the run left holding
//! its lock, its mounts, loop devices and temp dirs, with the care of the
//! teardown, and the cgroups of dead runs (cgroup2's, and the v1 dirs that
//! bounded their calls). Runs whose process lives are
//! never touched.
//!
//! It also owns what a run asks of a work dir before it starts there
//! ([`check_work_dir`], [`before_a_run`]), for `check` and the suite alike.

use std::path::{Path, PathBuf};

use super::{CliError, CliResult, EXIT_FAIL, EXIT_OK, print_stdout};
use crate::report::printable_line;

/// Arguments of `clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Also look in DIR, as runs given `check --work-dir DIR` make their
    /// temp dirs there (may be given more than once).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Vec<PathBuf>,
}

/// Runs `clean`: one line per leftover cleaned, one per run dir left for a
/// reason other than a live run, or one saying there was none.
pub fn run(args: CleanArgs) -> CliResult {
    for dir in &args.work_dir {
        check_work_dir(Some(dir))?;
    }
    let tmp = std::env::temp_dir();
    let mut dirs: Vec<&Path> = vec![&tmp];
    dirs.extend(args.work_dir.iter().map(PathBuf::as_path));
    // A killed run's cgroup lies beside this process's own, not in TMPDIR.
    crate::exec::remove_dead_run_cgroups();
    let found = crate::conformance::clean_leftovers_in(&dirs);
    let busy: Vec<_> = found
        .left
        .iter()
        .filter(|l| !matches!(l, crate::conformance::Left::Alive { .. }))
        .collect();
    if found.cleaned.is_empty() && busy.is_empty() {
        let places: Vec<String> = dirs
            .iter()
            .map(|d| printable_line(&d.display().to_string()).into_owned())
            .collect();
        let alive = match found.left.len() {
            0 => String::new(),
            n => format!(" ({n} live run(s) left alone)"),
        };
        print_stdout(&format!(
            "no leftovers of killed runs in {}{alive}\n",
            places.join(", ")
        ));
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    for c in &found.cleaned {
        out.push_str(&format!("cleaned {}\n", printable_line(&c.summary())));
    }
    for l in &busy {
        out.push_str(&format!("{}\n", printable_line(&l.summary())));
    }
    print_stdout(&out);
    let all_gone = found.cleaned.iter().all(|c| c.teardown.removed);
    Ok(if all_gone { EXIT_OK } else { EXIT_FAIL })
}

/// Before a run: cleans what killed runs left in the temp dir and in the
/// run's work dir, saying so on stderr.
pub(crate) fn before_a_run(work_dir: Option<&Path>) {
    let tmp = std::env::temp_dir();
    let mut dirs: Vec<&Path> = vec![&tmp];
    dirs.extend(work_dir);
    let found = crate::conformance::clean_leftovers_in(&dirs);
    for c in found.cleaned {
        super::print_stderr(&format!(
            "dhv-conform: cleaned {}\n",
            printable_line(&c.summary())
        ));
    }
}

/// `--work-dir` must be a directory that exists: the run makes its temp dir in it.
pub(crate) fn check_work_dir(dir: Option<&Path>) -> Result<(), CliError> {
    let Some(dir) = dir else { return Ok(()) };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(CliError::usage(format!(
            "--work-dir {}: not a directory",
            dir.display()
        ))),
        Err(e) => Err(CliError::usage(format!(
            "--work-dir {}: {e}",
            dir.display()
        ))),
    }
}
