//! The report files a command writes, one flag per report format of the
//! table both `check` and `report merge` write from
//! ([`FORMATS`](crate::report::FORMATS)).

use std::path::{Path, PathBuf};

use crate::report::{FORMATS, Format};

/// Where to write each report format (`-` for stdout); `report merge`
/// words the help of these flags for a fleet.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct ReportFiles {
    /// Write the full JSON report to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write a self-contained HTML page to FILE: the checks, a timeline of the calls
    /// and the duration of each operation against its limit.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl ReportFiles {
    /// The file named for `format`, if any.
    pub fn of(&self, format: &Format) -> Option<&Path> {
        match format.name {
            "json" => self.json.as_deref(),
            "junit" => self.junit.as_deref(),
            "markdown" => self.markdown.as_deref(),
            "html" => self.html.as_deref(),
            _ => None,
        }
    }

    /// Every format a file is named for, with its file, in the table's order.
    pub fn requested(&self) -> impl Iterator<Item = (&'static Format, &Path)> {
        FORMATS.iter().filter_map(|f| Some((f, self.of(f)?)))
    }

    /// Whether the JSON report goes to stdout.
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some(Path::new("-"))
    }
}

/// Writes `text` to `dest` (`-`: stdout), as every report file is written.
pub(super) fn write_to(dest: &Path, text: &str) -> Result<(), super::CliError> {
    super::write_output(&dest.to_string_lossy(), text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        files: ReportFiles,
    }

    /// Every format of the table has its flag here: a format added to the
    /// table without one fails this, not silently.
    #[test]
    fn every_format_has_its_flag() {
        let mut argv = vec!["x".to_string()];
        for f in FORMATS {
            argv.extend([f.flag.to_string(), format!("{}.out", f.name)]);
        }
        let cli = Cli::try_parse_from(argv).unwrap();
        let named: Vec<_> = cli
            .files
            .requested()
            .map(|(f, p)| (f.name, p.to_owned()))
            .collect();
        assert_eq!(named.len(), FORMATS.len());
        for (name, path) in named {
            assert_eq!(path, Path::new(&format!("{name}.out")));
        }
    }
}
