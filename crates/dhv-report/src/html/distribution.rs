//! Per operation, the durations of the calls made alone, against the operation's limit
//! and the half-limit line that `timing.margin` judges p95 by.
//!
//! The axis is logarithmic: a healthy plugin's calls take milliseconds against limits of
//! seconds or a minute, and only a log axis shows both the spread of the calls and how
//! far they are from the lines.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::escape::text;
use super::ms;
use crate::model::{Invocation, Report, TimingProfile};

const LEFT: f64 = 40.0;
const PLOT: f64 = 1000.0;
const BINS: usize = 60;
const HIST: f64 = 70.0;
const STRIP: f64 = 30.0;

/// The durations section: one chart per operation of the report's timing profile.
pub fn section(report: &Report) -> String {
    let mut out = String::from(
        "<section id=\"durations\"><h2>Durations of the calls made alone</h2>\n\
         <p class=\"note\">Each operation's calls made alone (the run's timing phase, with nothing \
         else in flight), on a logarithmic axis: a histogram and one dot per call. The solid red line is \
         the operation's time limit; the dashed orange line is half of it, which <code>timing.margin</code> \
         wants the p95 of these calls under; the blue line is that p95.</p>\n",
    );
    if report.timing.is_empty() {
        out.push_str("<p class=\"note\">The report has no timing profile.</p>");
    }
    for profile in &report.timing {
        let calls = if profile.alone_ms.is_empty() {
            // An older report: the calls its checks list as made alone.
            alone(report, &profile.operation)
        } else {
            profile.alone_ms.clone()
        };
        chart(&mut out, profile, &calls);
    }
    out.push_str("</section>\n");
    out
}

/// The durations of the calls of `operation` the checks list as made alone
/// (`in_flight` 1), each call once (a run-wide check lists again calls that other
/// checks made).
fn alone(report: &Report, operation: &str) -> Vec<f64> {
    let mut seen = HashSet::new();
    report
        .checks
        .iter()
        .flat_map(|c| c.invocations.iter())
        .filter(|c| c.operation == operation && c.in_flight == Some(1))
        .filter(|c| seen.insert(identity(c)))
        .map(|c| c.duration_ms)
        .filter(|d| d.is_finite() && *d >= 0.0)
        .collect()
}

fn identity(call: &Invocation) -> (u64, u64, &str) {
    (
        call.started_ms.unwrap_or(f64::NAN).to_bits(),
        call.duration_ms.to_bits(),
        &call.reproduce,
    )
}

/// The log axis: `lo` and `hi` are powers of ten around the calls and the limit.
struct Axis {
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(durations: &[f64], limit: f64) -> Axis {
        let smallest = durations.iter().copied().fold(f64::INFINITY, f64::min);
        let largest = durations.iter().copied().fold(limit, f64::max);
        let lo = 10f64.powf(smallest.clamp(1e-3, 0.1).log10().floor());
        let hi = 10f64.powf((largest.max(1.0) * 1.05).log10().ceil());
        Axis { lo, hi }
    }

    fn x(&self, ms: f64) -> f64 {
        let v = ms.clamp(self.lo, self.hi);
        LEFT + (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()) * PLOT
    }

    fn bin(&self, ms: f64) -> usize {
        let at = (self.x(ms) - LEFT) / PLOT * BINS as f64;
        (at as usize).min(BINS - 1)
    }
}

/// One operation's chart: the heading note with the numbers, then the plot: the
/// decades, the histogram, a dot per call, and the limit, half-limit and p95 lines.
fn chart(out: &mut String, profile: &TimingProfile, durations: &[f64]) {
    let limit = profile.limit_ms;
    let mut sorted = durations.to_vec();
    sorted.sort_by(f64::total_cmp);
    let p95 = percentile(&sorted, 0.95);
    heading(out, profile, sorted.len(), p95);
    let axis = Axis::new(&sorted, limit.max(1e-3));
    let height = 42.0 + HIST + STRIP + 26.0;
    let base = 42.0 + HIST;
    let _ = writeln!(
        out,
        "<svg class=\"distribution\" viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\" role=\"img\" \
         aria-label=\"durations of {op} calls made alone\">",
        w = LEFT + PLOT + 40.0,
        op = text(&profile.operation),
    );
    decades(out, &axis, base);
    histogram(out, &axis, &sorted, base);
    dots(out, &axis, &sorted, base);
    out.push('\n');
    limit_lines(out, &axis, limit, p95, base);
    out.push_str("</svg>\n");
}

/// The operation's heading and the note with its calls' p95 against the limit.
fn heading(out: &mut String, profile: &TimingProfile, calls: usize, p95: Option<f64>) {
    let limit = profile.limit_ms;
    let _ = writeln!(
        out,
        "<h3 class=\"op\" data-operation=\"{op}\">{op}</h3><p class=\"note\">{n} call(s) made alone; \
         p95 of those {p95}, {share} of the limit {lim} (half: {half}); the run's profile: {count} calls, \
         p50 {p50}, p95 {pp95}, max {max}.</p>",
        op = text(&profile.operation),
        n = calls,
        p95 = p95.map_or_else(|| "none".to_owned(), ms),
        share = p95.map_or_else(
            || "—".to_owned(),
            |p| {
                let share = if limit > 0.0 { p / limit * 100.0 } else { 0.0 };
                if share < 1.0 {
                    format!("{share:.2}%")
                } else {
                    format!("{share:.0}%")
                }
            }
        ),
        lim = ms(limit),
        half = ms(limit / 2.0),
        count = profile.count,
        p50 = ms(profile.p50_ms),
        pp95 = ms(profile.p95_ms),
        max = ms(profile.max_ms),
    );
}

/// A grid line and a label at each power of ten of the axis.
fn decades(out: &mut String, axis: &Axis, base: f64) {
    let mut d = axis.lo;
    while d <= axis.hi * 1.0001 {
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"42\" y2=\"{1}\"/>\
             <text class=\"axis\" x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            axis.x(d),
            base + STRIP,
            base + STRIP + 16.0,
            ms(d)
        );
        d *= 10.0;
    }
}

/// The histogram above `base`: a bar per non-empty bin, scaled to the fullest one.
fn histogram(out: &mut String, axis: &Axis, sorted: &[f64], base: f64) {
    let mut bins = [0usize; BINS];
    for &v in sorted {
        bins[axis.bin(v)] += 1;
    }
    let top = bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let bw = PLOT / BINS as f64;
    for (i, &count) in bins.iter().enumerate().filter(|(_, c)| **c > 0) {
        let h = (count as f64 / top * HIST).max(2.0);
        let _ = writeln!(
            out,
            "<rect class=\"bin\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"><title>{count} calls</title></rect>",
            LEFT + i as f64 * bw + 0.5,
            base - h,
            bw - 1.0
        );
    }
}

/// One dot per call in the strip below the histogram.
fn dots(out: &mut String, axis: &Axis, sorted: &[f64], base: f64) {
    for (i, &v) in sorted.iter().enumerate() {
        // A fixed spread over the strip, so dots of equal durations stay apart.
        let jitter = (i * 7919 % 23) as f64 / 23.0;
        let _ = write!(
            out,
            "<circle class=\"dot\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\"/>",
            axis.x(v),
            base + 4.0 + jitter * (STRIP - 8.0)
        );
    }
}

/// The limit, half-limit and p95 lines with their labels.
fn limit_lines(out: &mut String, axis: &Axis, limit: f64, p95: Option<f64>, base: f64) {
    let half = limit / 2.0;
    // Labels above the plot, each on the side of its line that keeps it inside
    // the plot, on the first row where it overlaps no label placed before it:
    // half the limit is a fraction of a decade from the limit on a log axis.
    let mut lines = vec![
        ("limit", limit, format!("limit {}", ms(limit)), "start"),
        ("half", half, format!("half the limit {}", ms(half)), "end"),
    ];
    if let Some(p) = p95 {
        lines.push(("pct", p, format!("p95 {}", ms(p)), "start"));
    }
    let placed: Vec<(f64, &str, f64)> = lines
        .iter()
        .map(|(_, at, _, side)| {
            let x = axis.x(*at);
            let anchor = match *side {
                "start" if x > LEFT + PLOT * 0.8 => "end",
                "end" if x < LEFT + PLOT * 0.2 => "start",
                other => other,
            };
            let tx = if anchor == "end" { x - 3.0 } else { x + 3.0 };
            (x, anchor, tx)
        })
        .collect();
    let spans: Vec<(f64, f64)> = placed
        .iter()
        .zip(&lines)
        .map(|((_, anchor, tx), (_, _, label, _))| {
            let width = label.chars().count() as f64 * LABEL_CHAR_WIDTH;
            match *anchor {
                "end" => (tx - width, *tx),
                _ => (*tx, tx + width),
            }
        })
        .collect();
    let rows = label_rows(&spans);
    for (((class, _, label, _), (x, anchor, tx)), ty) in lines.iter().zip(&placed).zip(rows) {
        let _ = writeln!(
            out,
            "<line class=\"{class}\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"4\" y2=\"{:.1}\"/>\
             <text class=\"axis\" x=\"{tx:.1}\" y=\"{ty}\" text-anchor=\"{anchor}\">{}</text>",
            base + STRIP,
            text(label)
        );
    }
}

/// The width a label's character takes at most, on average, in the chart's
/// 11 px sans-serif font (digits and lower case are about 6 px).
const LABEL_CHAR_WIDTH: f64 = 6.5;
/// The baselines of the label rows above the histogram, top first.
const LABEL_ROWS: [f64; 3] = [12.0, 24.0, 36.0];

/// The baseline of each label, given its horizontal extent, in order: the first
/// row where it overlaps (with a gap) no label placed before it; the last row
/// when none is free.
fn label_rows(spans: &[(f64, f64)]) -> Vec<f64> {
    const GAP: f64 = 6.0;
    let mut taken: Vec<(f64, (f64, f64))> = Vec::new();
    spans
        .iter()
        .map(|&(from, to)| {
            let row = LABEL_ROWS
                .iter()
                .copied()
                .find(|&row| {
                    !taken
                        .iter()
                        .any(|&(r, (a, b))| r == row && from < b + GAP && a < to + GAP)
                })
                .unwrap_or(LABEL_ROWS[LABEL_ROWS.len() - 1]);
            taken.push((row, (from, to)));
            row
        })
        .collect()
}

/// The nearest-rank percentile of sorted values; `None` for none.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_spans_the_calls_and_the_limit() {
        let axis = Axis::new(&[0.5, 3.0, 40.0], 60_000.0);
        assert!((axis.lo - 0.1).abs() < 1e-12 && (axis.hi - 1e5).abs() < 1e-6);
        assert!(axis.x(3.0) < axis.x(30_000.0));
        assert_eq!(axis.bin(1e9), BINS - 1);
    }

    /// The limit and half of it, a fraction of a decade apart, with their
    /// labels on the side that keeps them in the plot: never on one row.
    #[test]
    fn the_limit_and_half_labels_never_share_a_row_where_they_would_overlap() {
        assert_eq!(
            label_rows(&[(900.0, 1000.0), (800.0, 950.0), (100.0, 150.0)]),
            [12.0, 24.0, 12.0]
        );
        assert_eq!(label_rows(&[(0.0, 10.0), (100.0, 110.0)]), [12.0, 12.0]);
        assert_eq!(
            label_rows(&[(0.0, 10.0), (0.0, 10.0), (0.0, 10.0), (0.0, 10.0)]),
            [12.0, 24.0, 36.0, 36.0]
        );
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.95), Some(19.0));
        assert_eq!(percentile(&[], 0.95), None);
    }
}
