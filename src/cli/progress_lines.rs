//! The progress lines of `check`: one line per check as it ends (`ok`, `warn`,
//! `FAILED`, `ignored`, `info`), a `SLOW` line for a check still running after
//! the threshold, and a summary whose counts are the summary table's.
//!
//! libtest-mimic runs the trials but its own printer is sent to /dev/null: it has
//! no word for a warning and counts what the engine filtered as run.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::conformance::{InFlight, ProgressEvent};
use crate::report::{CheckResult, Event, Status, SuiteCounts, SuiteEvent, TestEvent, Verdict};

/// How progress is shown (`--format`, `-q`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// One line per check.
    Pretty,
    /// One character per check.
    Terse,
    /// libtest-style JSON lines.
    Json,
}

/// Where printed text goes; a closed pipe silences it instead of panicking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// Writes `text`; a write error (a reader that went away) is ignored, so
    /// `dhv-conform check | head -1` keeps running its teardown and exits quietly.
    pub fn write(self, text: &str) {
        let _ = match self {
            Stream::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|_| out.flush())
            }
            Stream::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
        };
    }
}

/// How a run ended, for the last progress line.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    /// The verdict of the checks that finished.
    pub verdict: Verdict,
    /// The signal that cut the run short, if one did.
    pub interrupted: Option<&'a str>,
}

/// The printer shared by the checks' threads and the `SLOW` ticker.
pub struct Printer {
    format: LineFormat,
    color: bool,
    strict: bool,
    stream: Stream,
    slow_after: Duration,
    filtered_out: usize,
    start: Instant,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Checks running: when they started and how many SLOW lines each had.
    running: BTreeMap<&'static str, (Instant, u32)>,
    /// What each check has in flight, once the run started.
    in_flight: Option<InFlight>,
    counts: SuiteCounts,
    done: bool,
}

impl Printer {
    /// A printer for a run of `count` checks, `filtered_out` left out by the filter.
    pub fn new(
        format: LineFormat,
        color: bool,
        strict: bool,
        stream: Stream,
        slow_after: Duration,
        filtered_out: usize,
    ) -> Arc<Printer> {
        Arc::new(Printer {
            format,
            color,
            strict,
            stream,
            slow_after,
            filtered_out,
            start: Instant::now(),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        crate::lock(&self.state)
    }

    /// The first lines: what is checked and how many checks will run.
    pub fn begin(&self, what: &str, count: usize) {
        match self.format {
            LineFormat::Json => self.json(&Event::Suite(SuiteEvent {
                event: "started".into(),
                test_count: Some(count),
                counts: None,
            })),
            _ => {
                let s = if count == 1 { "" } else { "s" };
                // The plugin's file name is the user's, or a plugin dir's: escaped.
                let what = crate::report::printable_line(what);
                self.stream
                    .write(&format!("\nchecking {what}\nrunning {count} check{s}\n"));
            }
        }
    }

    /// A line of its own between checks' lines (not in JSON format).
    pub fn note(&self, text: &str) {
        if self.format != LineFormat::Json {
            let text = crate::report::printable_line(text);
            self.stream.write(&format!("{text}\n"));
        }
    }

    /// Handles one event from the engine.
    pub fn on_event(&self, event: ProgressEvent<'_>) {
        match event {
            ProgressEvent::Run(in_flight) => self.state().in_flight = Some(in_flight),
            ProgressEvent::Started(id) => {
                self.state().running.insert(id, (Instant::now(), 0));
                if self.format == LineFormat::Json {
                    self.json(&Event::Test(TestEvent {
                        event: "started".into(),
                        name: id.into(),
                        level: None,
                        status: None,
                        message: None,
                        exec_time: None,
                    }));
                }
            }
            ProgressEvent::Finished(result) => self.finished(result),
        }
    }

    fn finished(&self, r: &CheckResult) {
        {
            let mut st = self.state();
            st.running.retain(|id, _| *id != r.id);
            let c = &mut st.counts;
            match r.status {
                Status::Pass => c.passed += 1,
                Status::Fail => c.failed += 1,
                Status::Warn => c.warned += 1,
                Status::Skip => c.ignored += 1,
                Status::Info => c.info += 1,
            }
        }
        let secs = r.duration_ms as f64 / 1000.0;
        match self.format {
            LineFormat::Json => self.json(&Event::Test(TestEvent {
                event: libtest_event(r.status, self.strict).into(),
                name: r.id.clone(),
                level: Some(r.level),
                status: Some(r.status),
                message: Some(r.message.clone()),
                exec_time: Some(secs),
            })),
            LineFormat::Terse => self
                .stream
                .write(&self.paint(r.status, terse_char(r.status))),
            LineFormat::Pretty => {
                let word = match r.status {
                    Status::Pass => "ok".to_owned(),
                    Status::Fail => "FAILED".to_owned(),
                    Status::Warn => "warn".to_owned(),
                    Status::Info => "info".to_owned(),
                    Status::Skip => {
                        format!("ignored, {}", first_line(&r.message))
                    }
                };
                let word = self.paint(r.status, &word);
                self.stream.write(&format!("test {} ... {word}\n", r.id));
            }
        }
    }

    /// The last progress line: the counts of the summary table. `None` (the
    /// run broke off) only stops the `SLOW` ticker.
    pub fn end(&self, ending: Option<Ending<'_>>) {
        let mut st = self.state();
        st.done = true;
        self.wake.notify_all();
        let mut counts = st.counts.clone();
        drop(st);
        let Some(ending) = ending else { return };
        counts.filtered_out = self.filtered_out;
        counts.exec_time = self.start.elapsed().as_secs_f64();
        let ok = ending.verdict == Verdict::Conformant;
        if self.format == LineFormat::Json {
            let event = match ending.interrupted {
                Some(_) => "interrupted",
                None if ending.verdict == Verdict::Inconclusive => "inconclusive",
                None if ok => "ok",
                None => "failed",
            };
            self.json(&Event::Suite(SuiteEvent {
                event: event.into(),
                test_count: None,
                counts: Some(counts),
            }));
            return;
        }
        let result = match ending.interrupted {
            // Cut short: neither ok nor failed, what was skipped was never judged.
            Some(signal) => self.paint(Status::Skip, &format!("interrupted by {signal}")),
            // The plugin file changed mid-run: no verdict either way.
            None if ending.verdict == Verdict::Inconclusive => self.paint(
                Status::Skip,
                "inconclusive (the plugin file changed mid-run)",
            ),
            None if ok => self.paint(Status::Pass, "ok"),
            None => self.paint(Status::Fail, "FAILED"),
        };
        let lead = if self.format == LineFormat::Terse {
            "\n"
        } else {
            ""
        };
        let c = &counts;
        let warnings = if c.warned == 1 { "warning" } else { "warnings" };
        self.stream.write(&format!(
            "{lead}\ntest result: {result}. {} passed; {} failed; {} {warnings}; {} skipped; {} info; {} filtered out; finished in {:.2}s\n",
            c.passed, c.failed, c.warned, c.ignored, c.info, c.filtered_out, c.exec_time
        ));
    }

    /// Prints a `SLOW` line for every check running longer than the threshold,
    /// and again each time another threshold passes, until [`end`](Self::end),
    /// naming the plugin operations the check has in flight.
    pub fn watch_slow(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        std::thread::spawn(move || {
            let mut st = me.state();
            while !st.done {
                let now = Instant::now();
                let mut next = now + me.slow_after;
                let mut slow = Vec::new();
                let in_flight = st.in_flight.clone();
                for (id, (started, shown)) in st.running.iter_mut() {
                    let due = *started + me.slow_after * (*shown + 1);
                    if due <= now {
                        *shown += 1;
                        slow.push((*id, now - *started));
                    } else {
                        next = next.min(due);
                    }
                }
                drop(st);
                for (id, elapsed) in slow {
                    let what = in_flight.as_ref().and_then(|f| f.describe(id));
                    me.slow_line(id, elapsed, what);
                }
                st = me.state();
                if st.done {
                    break;
                }
                let wait = next.saturating_duration_since(Instant::now());
                st = me
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        })
    }

    fn slow_line(&self, id: &str, elapsed: Duration, op: Option<String>) {
        let secs = elapsed.as_secs_f64();
        let what = match op {
            Some(op) => format!("{op} in flight"),
            None => "no plugin call in flight".to_owned(),
        };
        match self.format {
            LineFormat::Json => self.json(&Event::Test(TestEvent {
                event: "slow".into(),
                name: id.into(),
                level: None,
                status: None,
                message: Some(what),
                exec_time: Some(secs),
            })),
            _ => {
                let tag = self.paint(Status::Warn, "SLOW");
                self.stream
                    .write(&format!("    {tag} [> {secs:.0}s] {id}: {what}\n"));
            }
        }
    }

    fn json(&self, event: &Event) {
        if let Ok(line) = serde_json::to_string(event) {
            self.stream.write(&format!("{line}\n"));
        }
    }

    fn paint(&self, status: Status, text: &str) -> String {
        let colour = match status {
            Status::Pass => "\x1b[32m",
            Status::Fail => "\x1b[31m",
            Status::Warn | Status::Skip => "\x1b[33m",
            Status::Info => "",
        };
        if self.color && !colour.is_empty() {
            format!("{colour}{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// libtest's word for a status: a warning passes unless `--strict`.
fn libtest_event(status: Status, strict: bool) -> &'static str {
    match status {
        Status::Pass | Status::Info => "ok",
        Status::Warn if !strict => "ok",
        Status::Warn | Status::Fail => "failed",
        Status::Skip => "ignored",
    }
}

fn terse_char(status: Status) -> &'static str {
    match status {
        Status::Pass | Status::Info => ".",
        Status::Fail => "F",
        Status::Warn => "W",
        Status::Skip => "i",
    }
}

fn first_line(text: &str) -> String {
    crate::report::printable_line(text.lines().next().unwrap_or_default()).into_owned()
}
