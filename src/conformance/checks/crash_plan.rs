//! Where the crash checks kill a create or a delete ([`CrashPlan`]): before
//! each of its steps, not at fractions of one timing.
//!
//! A step is a change of state under the check's dir (a name made, renamed,
//! linked or removed; a file created), a mount, a loop-device ioctl, or the
//! start of a process (the state before a `mkfs` runs). A measuring call
//! records them; then one call is killed before each (at most
//! [`MAX_POINTS`], spread evenly), before that step runs. Every state a crash
//! can leave between steps is met, in every run, whatever the host's load:
//! a window of 30 ms in a create of a second is no longer hit by luck.
//!
//! Where steps cannot be watched (no seccomp user notification, the
//! built-in), the calls are killed at 10%, 50% and 90% of the measured run
//! time, and the message says that it was by time, and which kills landed.

use std::time::Duration;

use crate::conformance::context::{Ctx, Race, Variant};
use crate::exec::{AtChanges, Change, KillMode};
use crate::plugin::PluginCall;

/// The most steps a crash check kills a call before: more are spread evenly.
pub(super) const MAX_POINTS: usize = 12;

/// Where in an operation's measured run time a call is killed when its steps
/// cannot be watched.
const FRACTIONS: [f64; 3] = [0.1, 0.5, 0.9];

/// Where the crash checks kill an operation.
pub(super) enum CrashPlan {
    /// Before each of these steps (the measuring call's), numbered from 1.
    Steps(Vec<Change>),
    /// At fractions of the measuring call's run time.
    Timed(Duration),
}

/// One kill of a [`CrashPlan`].
pub(super) struct CrashPoint {
    /// How a step names it: `create killed before step 3 of 7 (mkdir)`.
    pub label: String,
    at: At,
}

enum At {
    Step(usize),
    After(Duration),
}

impl CrashPlan {
    /// Watches the steps of the call `measure` makes (through the variant it
    /// is given), or, where they cannot be watched, times it.
    pub async fn measure<T, F>(ctx: &Ctx, measure: F) -> (CrashPlan, PluginCall<T>)
    where
        F: AsyncFnOnce(&Variant<'_>) -> PluginCall<T>,
    {
        let watched = Race::holds(ctx.calls());
        let scope = ctx.dirs().dir().to_path_buf();
        let variant = ctx.variant(|o| {
            if watched {
                o.at_changes = Some(AtChanges::Record(scope));
            }
        });
        // Steps are the plugin's own whatever runs beside it; a timing is
        // taken alone (and the kills made alone too, see `crasher`).
        let variant = match watched {
            true => variant,
            false => variant.alone(),
        };
        let call = measure(&variant).await;
        let steps = call
            .run
            .as_ref()
            .and_then(|r| r.result.as_ref().ok())
            .map(|o| o.changes.clone())
            .unwrap_or_default();
        let plan = match watched && !steps.is_empty() {
            true => CrashPlan::Steps(steps),
            false => CrashPlan::Timed(call.duration),
        };
        (plan, call)
    }

    /// Its kills, in order, for an operation named `op` (`create`).
    pub fn points(&self, op: &str) -> Vec<CrashPoint> {
        match self {
            CrashPlan::Steps(steps) => spread(steps.len())
                .into_iter()
                .map(|n| CrashPoint {
                    label: format!(
                        "{op} killed before step {n} of {} ({})",
                        steps.len(),
                        steps[n - 1].syscall
                    ),
                    at: At::Step(n),
                })
                .collect(),
            CrashPlan::Timed(normal) => FRACTIONS
                .iter()
                .map(|f| {
                    let at = normal.mul_f64(*f);
                    CrashPoint {
                        label: format!(
                            "{op} killed at {:.0}% ({:.1} ms)",
                            f * 100.0,
                            at.as_secs_f64() * 1e3
                        ),
                        at: At::After(at),
                    }
                })
                .collect(),
        }
    }

    /// The plugin, killed (SIGKILL to all its processes) at `point`.
    pub fn crasher<'c>(&self, ctx: &'c Ctx, point: &CrashPoint) -> Variant<'c> {
        match point.at {
            At::Step(n) => {
                let scope = ctx.dirs().dir().to_path_buf();
                ctx.variant(|o| {
                    o.kill_mode = Some(KillMode::GroupKill);
                    o.at_changes = Some(AtChanges::KillAt(scope, n));
                })
            }
            At::After(after) => ctx.crasher(after).alone(),
        }
    }

    /// Whether `call`, made by [`crasher`](Self::crasher) at `point`, was
    /// killed there (rather than finishing first).
    pub fn killed<T>(&self, point: &CrashPoint, call: &PluginCall<T>) -> bool {
        let outcome = call.run.as_ref().and_then(|r| r.result.as_ref().ok());
        match point.at {
            At::Step(_) => outcome.is_some_and(|o| o.killed_at_change),
            At::After(_) => call.timed_out(),
        }
    }

    /// Where the kills landed, in a message's words. By steps: `at up to 12
    /// of its steps (...)`: how many steps a plugin makes can vary from run to
    /// run (a retry loop forks once more), so neither their number nor which
    /// kills landed is in the message (each call's label says), and it reads
    /// the same in every run. By time: the fractions that were killed, and how
    /// many finished first.
    pub fn describe(&self, op: &str, killed: &[bool]) -> String {
        match self {
            CrashPlan::Steps(_) => format!(
                "at up to {MAX_POINTS} of its steps (each change of state in its dirs, mount, loop \
                 device and process start of a measured {op}, spread evenly)"
            ),
            CrashPlan::Timed(normal) => {
                let at: Vec<String> = FRACTIONS
                    .iter()
                    .zip(killed)
                    .filter(|(_, k)| **k)
                    .map(|(f, _)| format!("{:.0}%", f * 100.0))
                    .collect();
                let at = match at.is_empty() {
                    true => "at no point".to_string(),
                    false => format!("at {}", at.join(", ")),
                };
                let finished_first = match killed.iter().filter(|k| !**k).count() {
                    0 => String::new(),
                    n => format!("; {n} finished before its kill"),
                };
                format!(
                    "{at} of {:.1} ms (by time: its steps could not be watched here){finished_first}",
                    normal.as_secs_f64() * 1e3
                )
            }
        }
    }
}

/// The steps (from 1) to kill before, of `n`: all of them, or
/// [`MAX_POINTS`] spread evenly, the first and the last among them.
fn spread(n: usize) -> Vec<usize> {
    if n <= MAX_POINTS {
        return (1..=n).collect();
    }
    let mut points: Vec<usize> = (0..MAX_POINTS)
        .map(|i| 1 + i * (n - 1) / (MAX_POINTS - 1))
        .collect();
    points.dedup();
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_a_point_up_to_the_most_then_they_spread() {
        assert_eq!(spread(0), Vec::<usize>::new());
        assert_eq!(spread(3), [1, 2, 3]);
        assert_eq!(spread(MAX_POINTS), (1..=MAX_POINTS).collect::<Vec<_>>());
        let many = spread(100);
        assert_eq!(many.len(), MAX_POINTS);
        assert_eq!((many[0], many[MAX_POINTS - 1]), (1, 100));
        assert!(many.windows(2).all(|w| w[0] < w[1]), "{many:?}");
    }

    #[test]
    fn the_words_say_which_kills_landed() {
        let step = |s| Change {
            syscall: s,
            path: None,
        };
        let plan = CrashPlan::Steps(vec![step("fork"), step("mkdir"), step("fork")]);
        let points = plan.points("create");
        assert_eq!(points[1].label, "create killed before step 2 of 3 (mkdir)");
        assert_eq!(
            plan.describe("create", &[true, false, true]),
            plan.describe("create", &[true, true, true]),
            "the same words whichever kills landed"
        );
        let timed = CrashPlan::Timed(Duration::from_millis(100));
        assert_eq!(
            timed.describe("delete", &[true, true, false]),
            "at 10%, 50% of 100.0 ms (by time: its steps could not be watched here); 1 finished before its kill"
        );
    }
}
