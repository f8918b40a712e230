//! The report formats, in one table that `check` and `report merge` share: a
//! format's name, its flag, and how a run's report and a fleet's report are
//! written in it. A new format is one entry here (and its flag's field in
//! the CLI's `ReportFiles`).

use super::Report;
use super::fleet::{self, FleetReport};

/// One report format.
#[derive(Debug, Clone, Copy)]
pub struct Format {
    /// Its name (`json`, `junit`, …).
    pub name: &'static str,
    /// The flag that names its file (`--json`, …).
    pub flag: &'static str,
    /// A run's report in it (`check`).
    pub run: fn(&Report) -> String,
    /// A fleet's report in it (`report merge`).
    pub fleet: fn(&FleetReport) -> String,
}

/// Every report format, in the order they are written.
pub const FORMATS: [Format; 4] = [
    Format {
        name: "json",
        flag: "--json",
        run: super::to_json,
        fleet: fleet::to_fleet_json,
    },
    Format {
        name: "junit",
        flag: "--junit",
        run: super::to_junit,
        fleet: fleet::to_fleet_junit,
    },
    Format {
        name: "markdown",
        flag: "--markdown",
        run: super::to_markdown,
        fleet: fleet::to_fleet_markdown,
    },
    Format {
        name: "html",
        flag: "--html",
        run: super::to_html,
        fleet: super::to_fleet_html,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each format's flag is its name's, and no name is given twice.
    #[test]
    fn every_format_has_its_own_name_and_flag() {
        let mut names: Vec<_> = FORMATS.iter().map(|f| f.name).collect();
        for f in FORMATS {
            assert_eq!(f.flag, format!("--{}", f.name));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FORMATS.len());
    }
}
