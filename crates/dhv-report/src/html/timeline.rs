//! The timeline: every plugin call of the run, one row per check, a bar per call from
//! its start to its end, coloured by outcome, the crash checks' kills marked.
//!
//! Calls of one check that overlap are stacked in lanes of their row, and all rows
//! share one time axis (each call's `started_ms` counts from the run's start), so
//! overlap, within a check and between checks, is what the picture shows.

use std::fmt::Write as _;

use super::escape::{attr, text};
use super::ms;
use super::style::outcome_class;
use crate::model::{CheckResult, Invocation, Report};

/// Width of the check-id column.
const LABEL: f64 = 230.0;
/// Width of the time axis.
const PLOT: f64 = 900.0;
/// Height of one lane of bars.
const LANE: f64 = 9.0;
/// The most lanes a row stacks; further overlapping calls share the last one.
const MAX_LANES: usize = 12;
/// Room above the rows for the axis.
const TOP: f64 = 22.0;

/// One check's row: its calls with a start, each with its lane.
struct Row<'a> {
    check: &'a CheckResult,
    calls: Vec<(&'a Invocation, usize)>,
    lanes: usize,
}

/// The timeline section: the SVG, its legend, and a note when no call has a start.
pub fn section(report: &Report) -> String {
    let rows = rows(report);
    let mut out = String::from("<section id=\"timeline\"><h2>Timeline of the plugin calls</h2>\n");
    if rows.is_empty() {
        out.push_str(
            "<p class=\"note\">No call of this report has a start offset (<code>started_ms</code>): \
             it was written before they were recorded, or no check called the plugin.</p></section>\n",
        );
        return out;
    }
    out.push_str(
        "<p class=\"note\">One row per check, ordered by its first call; a bar per call, from its start to \
         its end (run time). Calls of a check that overlap are stacked. A run-wide check's row shows the \
         calls it cites; a check lists at most 20 of its calls, the failing ones first.</p>\n",
    );
    out.push_str(&legend());
    out.push_str(&svg(&rows));
    out.push_str("</section>\n");
    out
}

fn legend() -> String {
    let items = [
        ("o-clean", "exit 0, clean"),
        ("o-exit", "non-zero exit"),
        ("o-unclean", "left stdio or processes behind"),
        ("o-timeout", "timed out"),
        ("o-signal", "ended by a signal"),
        ("o-killed", "killed by a crash check (✕)"),
        ("o-nostart", "did not start"),
    ];
    let mut out = String::from("<p class=\"legend\">");
    for (class, what) in items {
        let _ = write!(out, "<span class=\"swatch {class}\"></span>{what}");
    }
    out.push_str("</p>\n");
    out
}

fn rows(report: &Report) -> Vec<Row<'_>> {
    let mut rows: Vec<Row<'_>> = report
        .checks_by_id()
        .into_iter()
        .filter_map(|check| {
            let mut calls: Vec<&Invocation> = check
                .invocations
                .iter()
                .filter(|c| c.started_ms.is_some_and(f64::is_finite))
                .collect();
            if calls.is_empty() {
                return None;
            }
            calls.sort_by(|a, b| start(a).total_cmp(&start(b)));
            let (calls, lanes) = stack(calls);
            Some(Row {
                check,
                calls,
                lanes,
            })
        })
        .collect();
    rows.sort_by(|a, b| start(a.calls[0].0).total_cmp(&start(b.calls[0].0)));
    rows
}

fn start(call: &Invocation) -> f64 {
    call.started_ms.unwrap_or(0.0).max(0.0)
}

fn end(call: &Invocation) -> f64 {
    start(call) + call.duration_ms.max(0.0)
}

/// Gives each call (sorted by start) the first lane free at its start.
fn stack(calls: Vec<&Invocation>) -> (Vec<(&Invocation, usize)>, usize) {
    let mut lane_ends: Vec<f64> = Vec::new();
    let placed = calls
        .into_iter()
        .map(|call| {
            let lane = match lane_ends.iter().position(|&e| e <= start(call)) {
                Some(free) => free,
                None if lane_ends.len() < MAX_LANES => {
                    lane_ends.push(0.0);
                    lane_ends.len() - 1
                }
                None => MAX_LANES - 1,
            };
            lane_ends[lane] = lane_ends[lane].max(end(call));
            (call, lane)
        })
        .collect();
    (placed, lane_ends.len().max(1))
}

/// A round step for about eight ticks over `span` milliseconds.
pub(super) fn tick_step(span: f64) -> f64 {
    let raw = (span / 8.0).max(1e-3);
    let base = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * base)
}

/// The time axis shared by all rows: `span` milliseconds over the plot's width.
struct TimeAxis {
    span: f64,
}

impl TimeAxis {
    fn x(&self, t: f64) -> f64 {
        LABEL + t / self.span * PLOT
    }
}

fn svg(rows: &[Row<'_>]) -> String {
    let span = rows
        .iter()
        .flat_map(|r| r.calls.iter().map(|(c, _)| end(c)))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let axis = TimeAxis { span };
    let height: f64 = TOP
        + rows
            .iter()
            .map(|r| r.lanes as f64 * LANE + 4.0)
            .sum::<f64>()
        + 4.0;
    let width = LABEL + PLOT + 40.0;
    let mut out = String::with_capacity(rows.len() * 2000);
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" viewBox=\"0 0 {width} {height:.0}\" width=\"{width}\" height=\"{height:.0}\" role=\"img\" aria-label=\"timeline of the plugin calls\">"
    );
    ticks(&mut out, &axis, height);
    let mut y = TOP;
    for (i, row) in rows.iter().enumerate() {
        let h = row.lanes as f64 * LANE + 4.0;
        if i % 2 == 0 {
            let _ = write!(
                out,
                "<rect class=\"row\" x=\"0\" y=\"{y:.1}\" width=\"{width}\" height=\"{h:.1}\"/>"
            );
        }
        row_calls(&mut out, row, &axis, y);
        y += h;
    }
    out.push_str("</svg>\n");
    out
}

/// A grid line and a label at each round step of the time axis.
fn ticks(out: &mut String, axis: &TimeAxis, height: f64) {
    let step = tick_step(axis.span);
    let mut t = 0.0;
    while t <= axis.span + 1e-9 {
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{height:.0}\"/>\
             <text class=\"axis\" x=\"{0:.1}\" y=\"14\" text-anchor=\"middle\">{2}</text>",
            axis.x(t),
            TOP - 4.0,
            ms(t)
        );
        t += step;
    }
}

/// A row's check id, linked to the check, and a bar per call in its lane.
fn row_calls(out: &mut String, row: &Row<'_>, axis: &TimeAxis, y: f64) {
    let _ = writeln!(
        out,
        "<a href=\"#check-{}\"><text class=\"lbl f-{}\" x=\"4\" y=\"{:.1}\" data-check=\"{}\">{}</text></a>",
        attr(&row.check.id),
        row.check.status,
        y + 10.0,
        attr(&row.check.id),
        text(&row.check.id)
    );
    for (call, lane) in &row.calls {
        bar(
            out,
            call,
            axis.x(start(call)),
            axis.x(end(call)),
            y + 2.0 + *lane as f64 * LANE,
        );
    }
}

fn bar(out: &mut String, call: &Invocation, x0: f64, x1: f64, y: f64) {
    let w = (x1 - x0).max(1.5);
    let _ = write!(
        out,
        "<rect class=\"call {}\" x=\"{x0:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\">\
         <title>{}: {}, from {} to {} ({})</title></rect>",
        outcome_class(call),
        LANE - 2.0,
        attr(&call.operation),
        attr(&call.outcome()),
        ms(start(call)),
        ms(end(call)),
        ms(call.duration_ms),
    );
    if call.killed_by_check_ms.is_some() {
        // A cross at the moment of the kill.
        let (cx, cy, r) = (x0 + w, y + (LANE - 2.0) / 2.0, 4.0);
        let _ = write!(
            out,
            "<path class=\"kill\" d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\"/>",
            cx - r,
            cy - r,
            cx + r,
            cy + r,
            cx - r,
            cy + r,
            cx + r,
            cy - r
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: f64, duration: f64) -> Invocation {
        Invocation {
            started_ms: Some(start),
            duration_ms: duration,
            exit_code: Some(0),
            ..Invocation::default()
        }
    }

    #[test]
    fn overlapping_calls_get_lanes_of_their_own() {
        let calls = [
            call(0.0, 10.0),
            call(5.0, 10.0),
            call(12.0, 1.0),
            call(16.0, 1.0),
        ];
        let (placed, lanes) = stack(calls.iter().collect());
        let got: Vec<usize> = placed.iter().map(|(_, l)| *l).collect();
        assert_eq!(got, [0, 1, 0, 0]);
        assert_eq!(lanes, 2);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0), 20.0);
        assert_eq!(tick_step(3600.0), 500.0);
        assert_eq!(tick_step(7.0), 1.0);
    }
}
