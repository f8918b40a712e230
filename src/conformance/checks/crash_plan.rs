//! Where the crash checks kill a create or a delete ([`CrashPlan`]): before
//! each of its steps, not at fractions of one timing.
//!
//! A step is a change of state under the check's dir (a name made, renamed,
//! linked or removed; a file created), a mount, a loop-device ioctl, or the
//! start of a process (the state before a `mkfs` runs). A measuring call
//! records them; then one call is killed before each, before that step runs
//! (past [`MAX_POINTS`] steps: before every process start, and an even
//! spread of the other steps). Every state a crash can leave between steps
//! is met, in every run, whatever the host's load: a window of a few
//! milliseconds between a `truncate` and the `mkfs` after it is no longer
//! hit by luck.
//!
//! Where steps cannot be watched (no seccomp user notification, the
//! built-in), the calls are killed at 10%, 50% and 90% of the measured run
//! time, and the message says that it was by time, and which kills landed.

use std::time::Duration;

use crate::conformance::context::Finding;
use crate::conformance::context::{Ctx, Made, Race, Variant};
use crate::exec::{AtChanges, Change, KillMode, STARTS_A_PROCESS, ordinal};
use crate::plugin::PluginCall;

/// The most steps a crash check kills a call before, all of them, when the
/// call has no more; past it, every process start and an even spread of the
/// others, [`MAX_POINTS`] in all unless the starts alone are more.
pub(super) const MAX_POINTS: usize = 40;

/// Where in an operation's measured run time a call is killed when its steps
/// cannot be watched.
const FRACTIONS: [f64; 3] = [0.1, 0.5, 0.9];

/// Where the crash checks kill an operation.
pub(super) enum CrashPlan {
    /// Before each of these steps (the measuring call's), numbered from 1:
    /// all of them, or the ones [`chosen`] among many.
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
    pub async fn measure<T, F>(ctx: &Ctx, measure: F) -> (CrashPlan, Made<T>)
    where
        F: AsyncFnOnce(&Variant<'_>) -> Made<T>,
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
            CrashPlan::Steps(steps) => {
                let words: Vec<String> = steps.iter().map(step_words).collect();
                chosen(steps)
                    .into_iter()
                    .map(|n| {
                        let step = &words[n - 1];
                        // Which of the steps alike it is, not its number:
                        // how many steps come before it can vary from run
                        // to run (a mount that retries its loop device).
                        let alike = words[..n].iter().filter(|w| *w == step).count();
                        let which = match alike {
                            1 => String::new(),
                            k => format!(" (the {} such step)", ordinal(k)),
                        };
                        CrashPoint {
                            label: format!("{op} killed before {step}{which}"),
                            at: At::Step(n),
                        }
                    })
                    .collect()
            }
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

    /// Where the kills landed, in a message's words. By steps: how many
    /// steps were killed before, of how many the measured call made (which
    /// can vary from run to run: a retry loop forks once more), and which
    /// of the kills landed when some finished first. By time: the fractions
    /// that were killed, and how many finished first.
    pub fn describe(&self, op: &str, killed: &[bool]) -> String {
        match self {
            CrashPlan::Steps(steps) => {
                let tried = killed.len();
                let which = match (tried, steps.len() > MAX_POINTS) {
                    (t, false) if t == steps.len() => format!("before each of its {t} steps"),
                    (t, _) => format!(
                        "before {t} of its {} steps (every process start, the others spread evenly)",
                        steps.len()
                    ),
                };
                let finished_first = match killed.iter().filter(|k| !**k).count() {
                    0 => String::new(),
                    n => format!("; {n} finished before its kill"),
                };
                format!(
                    "{which} (each change of state in its dirs, mount, loop device and process \
                     start of a measured {op}){finished_first}"
                )
            }
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

/// Runs `kill` at each of `points`, in order, one at a time: whether each
/// kill landed, or the failure of the first point at which the plugin did
/// not recover. One at a time, as a plugin's volumes may share state (a
/// counter of slots, a ledger): crashes of several at once would meet the
/// plugin's races, which are the concurrency checks' findings (one cause,
/// one finding), and which point failed first would vary from run to run.
pub(super) async fn at_each<'p, F, Fut>(
    points: &'p [CrashPoint],
    kill: F,
) -> Result<Vec<bool>, Finding>
where
    F: Fn(&'p CrashPoint) -> Fut,
    Fut: std::future::Future<Output = Result<bool, Finding>>,
{
    let mut killed = Vec::with_capacity(points.len());
    for point in points {
        killed.push(kill(point).await?);
    }
    Ok(killed)
}

/// The steps (from 1) to kill before: every one of up to [`MAX_POINTS`];
/// of more, every process start and an even spread of the others (the
/// first and the last among them), up to [`MAX_POINTS`] in all unless the
/// starts alone are more.
fn chosen(steps: &[Change]) -> Vec<usize> {
    let n = steps.len();
    if n <= MAX_POINTS {
        return (1..=n).collect();
    }
    let (starts, others): (Vec<usize>, Vec<usize>) =
        (1..=n).partition(|&i| steps[i - 1].syscall == STARTS_A_PROCESS);
    let room = MAX_POINTS.saturating_sub(starts.len()).max(2);
    let mut points: Vec<usize> = spread(others.len(), room)
        .into_iter()
        .map(|i| others[i - 1])
        .chain(starts)
        .collect();
    points.sort_unstable();
    points.dedup();
    points
}

/// `most` of the numbers 1 to `n`, spread evenly, the first and the last
/// among them (all of them when `n` is no more).
fn spread(n: usize, most: usize) -> Vec<usize> {
    if n <= most {
        return (1..=n).collect();
    }
    let mut points: Vec<usize> = (0..most)
        .map(|i| 1 + i * (n - 1) / (most - 1).max(1))
        .collect();
    points.dedup();
    points
}

/// A step in a message's words: a process start by its program's name
/// (the same wherever the host keeps it), any other by its system call and
/// what it names.
fn step_words(step: &Change) -> String {
    match (step.syscall, &step.path) {
        (STARTS_A_PROCESS, Some(program)) => match program.file_name() {
            Some(name) => format!("{STARTS_A_PROCESS} {}", name.to_string_lossy()),
            None => step.describe(),
        },
        _ => step.describe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(syscall: &'static str, path: Option<&str>) -> Change {
        Change {
            syscall,
            path: path.map(Into::into),
        }
    }

    #[test]
    fn every_step_is_a_point_up_to_the_most_then_every_start_and_a_spread() {
        let made = |n: usize| -> Vec<Change> { (0..n).map(|_| step("mkdir", None)).collect() };
        assert_eq!(chosen(&[]), Vec::<usize>::new());
        assert_eq!(chosen(&made(3)), [1, 2, 3]);
        assert_eq!(
            chosen(&made(MAX_POINTS)),
            (1..=MAX_POINTS).collect::<Vec<_>>()
        );
        let many = chosen(&made(100));
        assert_eq!(many.len(), MAX_POINTS);
        assert_eq!((many[0], many[MAX_POINTS - 1]), (1, 100));
        assert!(many.windows(2).all(|w| w[0] < w[1]), "{many:?}");
        // Process starts are never left out, wherever they fall.
        let mut steps = made(100);
        for i in [6, 7, 50, 51, 52, 98] {
            steps[i] = step(STARTS_A_PROCESS, Some("/sbin/mkfs.ext4"));
        }
        let points = chosen(&steps);
        for i in [7, 8, 51, 52, 53, 99] {
            assert!(points.contains(&i), "start at {i}: {points:?}");
        }
        assert_eq!(points.len(), MAX_POINTS, "{points:?}");
    }

    #[test]
    fn the_words_say_where_each_kill_falls_and_how_many_were_tried() {
        let plan = CrashPlan::Steps(vec![
            step("execve", Some("/usr/bin/truncate")),
            step("mkdir", Some("/v/x")),
            step("execve", Some("/usr/sbin/mkfs.ext4")),
            step("execve", Some("/bin/truncate")),
        ]);
        let points = plan.points("create");
        assert_eq!(
            points.iter().map(|p| p.label.as_str()).collect::<Vec<_>>(),
            [
                "create killed before execve truncate",
                "create killed before mkdir /v/x",
                "create killed before execve mkfs.ext4",
                "create killed before execve truncate (the 2nd such step)",
            ]
        );
        assert_eq!(
            plan.describe("create", &[true, true, true, true]),
            "before each of its 4 steps (each change of state in its dirs, mount, loop device \
             and process start of a measured create)"
        );
        assert!(
            plan.describe("create", &[true, false, true, true])
                .ends_with("; 1 finished before its kill")
        );
        let many = CrashPlan::Steps((0..50).map(|_| step("mkdir", None)).collect());
        let tried = vec![true; many.points("delete").len()];
        assert!(
            many.describe("delete", &tried).starts_with(
                "before 40 of its 50 steps (every process start, the others spread evenly)"
            ),
            "{}",
            many.describe("delete", &tried)
        );
        let timed = CrashPlan::Timed(Duration::from_millis(100));
        assert_eq!(
            timed.describe("delete", &[true, true, false]),
            "at 10%, 50% of 100.0 ms (by time: its steps could not be watched here); 1 finished before its kill"
        );
    }
}
