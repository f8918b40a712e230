//! One report from the runs of a suite with several requests (a config's
//! `[[request]]` entries): each check's status is its worst over the
//! requests, its message says which request gave it, and
//! [`Report::requests`] keeps every request's own status per check.

use std::collections::BTreeMap;

use super::model::{CheckResult, Report, RequestOutcome, Status, Summary};

/// How bad a status is, for the worst of several.
fn rank(s: Status) -> u8 {
    match s {
        Status::Fail => 4,
        Status::Warn => 3,
        Status::Pass => 2,
        Status::Info => 1,
        Status::Skip => 0,
    }
}

/// Merges the reports of one suite run per request (name, fixture, report)
/// into one. The first report gives everything but the checks; one run alone
/// is returned as it is.
pub fn merge_requests(mut runs: Vec<(String, Option<String>, Report)>) -> Option<Report> {
    if runs.len() <= 1 {
        return runs.pop().map(|(_, _, r)| r);
    }
    let outcomes: Vec<RequestOutcome> = runs
        .iter()
        .map(|(name, fixture, r)| RequestOutcome {
            name: name.clone(),
            fixture: fixture.clone(),
            summary: r.summary.clone(),
            statuses: r.checks.iter().map(|c| (c.id.clone(), c.status)).collect(),
        })
        .collect();
    let mut by_id: BTreeMap<String, Vec<(&str, &CheckResult)>> = BTreeMap::new();
    for (name, _, report) in &runs {
        for check in &report.checks {
            by_id
                .entry(check.id.clone())
                .or_default()
                .push((name, check));
        }
    }
    let checks: Vec<CheckResult> = by_id
        .into_values()
        .map(|results| merge_one(&results))
        .collect();
    // Limited by space in any request: the least free space, every check
    // one of them did not run, every wait.
    let space_limited = runs
        .iter()
        .filter_map(|(_, _, r)| r.space_limited.clone())
        .reduce(|mut a, b| {
            a.free_bytes = a.free_bytes.min(b.free_bytes);
            for id in b.not_run {
                if !a.not_run.contains(&id) {
                    a.not_run.push(id);
                }
            }
            a.waited += b.waited;
            a
        });
    let (_, _, first) = runs.swap_remove(0);
    let strict = first.options.strict;
    let mut merged = first;
    merged.summary = Summary::from_checks(&checks, strict);
    merged.checks = checks;
    merged.requests = outcomes;
    merged.space_limited = space_limited;
    Some(merged)
}

/// One check over every request: its worst status; the message of that
/// request first, then each other request's status and message.
fn merge_one(results: &[(&str, &CheckResult)]) -> CheckResult {
    let (worst_name, worst) = results
        .iter()
        .copied()
        .max_by_key(|(_, c)| rank(c.status))
        .expect("a check id comes from at least one run");
    let all_alike = results
        .iter()
        .all(|(_, c)| c.status == worst.status && c.message == worst.message);
    let mut merged = worst.clone();
    merged.message = if all_alike {
        format!("{} (every request)", worst.message)
    } else {
        let mut text = format!("request {worst_name}: {}", worst.message);
        for (name, c) in results.iter().filter(|(n, _)| *n != worst_name) {
            let first = c.message.lines().next().unwrap_or_default();
            text.push_str(&format!("\nrequest {name} {}: {first}", c.status.as_str()));
        }
        text
    };
    merged.invocations = results
        .iter()
        .flat_map(|(_, c)| c.invocations.iter().cloned())
        .collect();
    merged.duration_ms = results.iter().map(|(_, c)| c.duration_ms).sum();
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    #[test]
    fn the_worst_request_decides_and_every_request_is_named() {
        let good = sample::report(false);
        let mut bad = sample::report(false);
        let id = bad.checks[0].id.clone();
        bad.checks[0].status = Status::Fail;
        bad.checks[0].message = "broke".into();
        bad.summary = Summary::from_checks(&bad.checks, false);
        let merged = merge_requests(vec![
            ("small".into(), None, good.clone()),
            ("big".into(), Some("big.hcl".into()), bad),
        ])
        .unwrap();
        let check = merged.checks.iter().find(|c| c.id == id).unwrap();
        assert_eq!(check.status, Status::Fail);
        assert!(
            check.message.starts_with("request big: broke"),
            "{}",
            check.message
        );
        assert!(
            check.message.contains("\nrequest small "),
            "{}",
            check.message
        );
        assert_eq!(merged.requests.len(), 2);
        assert_eq!(merged.requests[1].statuses[&id], Status::Fail);
        assert_eq!(merged.summary.failed, good.summary.failed + 1);
        let alike = merged.checks.iter().find(|c| c.id != id).unwrap();
        assert!(
            alike.message.ends_with("(every request)"),
            "{}",
            alike.message
        );
        assert_eq!(merged.space_limited, None);
    }

    /// A request the space limited: the merged report says so, with every
    /// check a request did not run and the least free space.
    #[test]
    fn a_request_limited_by_space_limits_the_merged_report() {
        let limited = |free: u64, not_run: &[&str], waited| {
            let mut r = sample::report(false);
            r.space_limited = Some(crate::SpaceLimited {
                free_bytes: free,
                not_run: not_run.iter().map(|s| s.to_string()).collect(),
                waited,
            });
            r
        };
        let merged = merge_requests(vec![
            ("plain".into(), None, sample::report(false)),
            ("a".into(), None, limited(300, &["x.one"], 2)),
            ("b".into(), None, limited(200, &["x.one", "x.two"], 0)),
        ])
        .unwrap();
        let space = merged.space_limited.unwrap();
        assert_eq!(
            (space.free_bytes, space.not_run, space.waited),
            (200, vec!["x.one".to_owned(), "x.two".to_owned()], 2)
        );
    }
}
