//! Which checks `check` runs and on what: the filter, `--exact` and `--skip`
//! (none selected is exit 2), `--list`, and the plugin argument.

use std::path::Path;

use libtest_mimic::Arguments;

use super::check_args::CheckArgs;
use super::progress_lines::{LineFormat, Stream};
use super::{CliError, CliResult, EXIT_OK};
use crate::conformance::{self, CATALOGUE, Target};
use crate::report;

/// How many checks the filter, `--exact` and `--skip` leave; none is exit 2,
/// because a typo in a CI filter must not pass as "conformant".
pub(super) fn selection(args: &CheckArgs) -> Result<usize, CliError> {
    let selector = selector(args);
    let chosen = CATALOGUE
        .iter()
        .filter(|c| conformance::selected(&selector, c.id))
        .count();
    if chosen > 0 {
        return Ok(chosen);
    }
    let mut what = Vec::new();
    if let Some(f) = &args.filter {
        let exact = if args.exact { " (--exact)" } else { "" };
        what.push(format!("the filter {f:?}{exact}"));
    }
    if !args.skip.is_empty() {
        what.push(format!("--skip {}", args.skip.join(", ")));
    }
    let hint = match args.filter.as_deref().map(super::explain::close_ids) {
        Some(close) if !close.is_empty() => format!("; did you mean {}?", close.join(", ")),
        _ => "; `dhv-conform check --list` lists the ids".to_owned(),
    };
    Err(CliError::usage(format!(
        "no check matches {}{hint}",
        what.join(" with ")
    )))
}

/// A config whose `[skip]` leaves none of the `chosen` checks to run is
/// exit 2, as `--skip` leaving none is: "passed: 0 ... conformant" from a
/// plugin's own config would be the plugin vouching for itself.
pub(super) fn config_leaves_some(
    args: &CheckArgs,
    claims: &conformance::Claims,
    config: Option<&Path>,
) -> Result<(), CliError> {
    let Some(config) = config else { return Ok(()) };
    let selector = selector(args);
    let mut chosen = CATALOGUE
        .iter()
        .filter(|c| conformance::selected(&selector, c.id));
    if chosen.any(|c| claims.skip_reason(c.id).is_none()) {
        return Ok(());
    }
    let narrowed = if args.filter.is_some() || !args.skip.is_empty() {
        " of those the filter and --skip select"
    } else {
        ""
    };
    Err(CliError::usage(format!(
        "config {}: its [skip] leaves no check{narrowed} to run; a run that checks nothing proves nothing",
        config.display()
    )))
}

/// The filter options alone, as the engine's `selected` reads them.
fn selector(args: &CheckArgs) -> Arguments {
    Arguments {
        filter: args.filter.clone(),
        exact: args.exact,
        skip: args.skip.clone(),
        ..Arguments::default()
    }
}

/// `--list`: level, id and rule of each selected check, or JSON lines.
pub(super) fn list(args: &CheckArgs, format: LineFormat) -> CliResult {
    selection(args)?;
    let selector = selector(args);
    let chosen = CATALOGUE
        .iter()
        .filter(|c| conformance::selected(&selector, c.id));
    let width = CATALOGUE.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in chosen {
        if format == LineFormat::Json {
            let entry = report::CatalogueEntry {
                id: c.id.to_owned(),
                group: c.group().to_owned(),
                level: c.level,
                rule: c.rule.to_owned(),
                needs: Some(c.needs),
                phase: Some(c.phase()),
            };
            out.push_str(&serde_json::to_string(&entry).unwrap_or_default());
            out.push('\n');
        } else {
            out.push_str(&format!(
                "{:<6}  {:<width$}  {}\n",
                c.level.as_str(),
                c.id,
                c.rule
            ));
        }
    }
    Stream::Stdout.write(&out);
    Ok(EXIT_OK)
}

/// The plugin to check; a missing file or a directory is exit 2.
pub(crate) fn target(arg: &str) -> Result<Target, CliError> {
    let target = Target::parse(arg);
    let Some(path) = target.path() else {
        return Ok(target);
    };
    match std::fs::metadata(path) {
        Err(e) => {
            let looks_like_filter = CATALOGUE.iter().any(|c| c.id.contains(arg));
            let hint = if looks_like_filter {
                format!(
                    " (to run {arg:?} on the built-in plugin, name it first: `check mkdir {arg}`)"
                )
            } else {
                String::new()
            };
            Err(CliError::usage(format!(
                "plugin {}: {e}{hint}",
                path.display()
            )))
        }
        Ok(m) if m.is_dir() => Err(CliError::usage(format!(
            "plugin {} is a directory, not an executable",
            path.display()
        ))),
        Ok(m) if !m.is_file() => Err(CliError::usage(format!(
            "plugin {} is not a regular file (a FIFO, socket or device), not an executable",
            path.display()
        ))),
        Ok(_) => Ok(target),
    }
}

/// What is being checked, in words: `mkdir` is the built-in even when a file
/// of that name is in the working directory, and the line says so.
pub(super) fn describe(target: &Target, arg: &str) -> String {
    match target {
        Target::Builtin if Path::new(arg).exists() => format!(
            "the built-in mkdir plugin (not the file ./{arg}: name it ./{arg} to check that)"
        ),
        Target::Builtin => "the built-in mkdir plugin".to_owned(),
        Target::Executable(path)
        | Target::Found {
            executable: path, ..
        } => path.display().to_string(),
    }
}

/// `2026-12-01T13:05:09Z`: the run's start, for JUnit's `timestamp` and the report.
pub(super) fn rfc3339_utc(at: std::time::SystemTime) -> String {
    let secs = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), in 400-year eras.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_table() {
        use std::time::{Duration, UNIX_EPOCH};
        for (secs, want) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_798_722_309, "2026-12-31T13:05:09Z"),
            (4_107_542_399, "2100-02-28T23:59:59Z"),
        ] {
            assert_eq!(
                super::rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs)),
                want
            );
        }
    }
}
