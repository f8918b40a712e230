//! The result model: the one set of serde types behind every report form (a
//! call's [`Invocation`] and the scales, [`Status`] and the others, in files of
//! their own, named from here).
//!
//! The engine fills a [`Report`]; the renderers only read it. These types *are* the JSON
//! schema [`SCHEMA`], so a field rename here is a breaking change for every CI job that
//! reads `--json` output: add fields, never rename or retype them, and bump the schema
//! string when that rule has to be broken.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::invocation::{DEFAULT_EXCERPT_CAP, Invocation, Shown, excerpt};
pub use super::judgement::{Level, Needs, Phase, Status, Verdict};

/// The schema identifier written into every JSON report.
pub const SCHEMA: &str = "dhv-conform/report/v1";

/// The tool name written into [`ToolInfo::name`].
pub const TOOL_NAME: &str = "dhv-conform";

/// A whole conformance run: the root of the JSON schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The harness that produced the report.
    pub tool: ToolInfo,
    /// The contract version checked against, e.g. `nomad-1.10`.
    pub spec: String,
    /// The node the run was made on; `None` in reports written before the field existed.
    #[serde(default)]
    pub node: Option<NodeInfo>,
    /// When the run started, RFC 3339 in UTC (`2026-12-01T13:05:09Z`); `None` in reports
    /// written before the field existed.
    #[serde(default)]
    pub started_at: Option<String>,
    /// Wall time of the whole run; `None` in reports written before the field existed.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// The machine's conditions during the run (cores, load); `None` in reports
    /// written before the field existed.
    #[serde(default)]
    pub conditions: Option<RunConditions>,
    /// The plugin under test.
    pub plugin: PluginInfo,
    /// The options the run was made with.
    pub options: RunOptions,
    /// One result per check that was selected (and any the run adds at its
    /// end, see [`Report::put_check`]). Renderers sort these by id, so the engine
    /// may push them in completion order.
    pub checks: Vec<CheckResult>,
    /// Duration profile per plugin operation.
    pub timing: Vec<TimingProfile>,
    /// Counts and verdict, derived from `checks`.
    pub summary: Summary,
    /// What the end of the run did with its temp dir; `None` in reports written
    /// before the field existed (and then left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::SandboxOutcome>,
    /// The plugin's config file and the claims the run verified; `None`
    /// without either (and then left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigInfo>,
    /// With several requests (a config's `[[request]]`s), each one's statuses;
    /// empty for one request (and then left out of the JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestOutcome>,
    /// The signal that cut the run short (`SIGINT`, `SIGTERM`, `SIGHUP`): the checks it
    /// cut short are `skip` with the reason `interrupted`, and the verdict covers only the
    /// checks that finished. `None` (and left out of the JSON) for a run that ended by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// The plugin file changed while the run made its calls: the verdict is
    /// [`Verdict::Inconclusive`]. `None` (and left out of the JSON) when the
    /// file stayed as it was pinned at the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_changed: Option<PluginChanged>,
    /// The run was limited by the free space of its work filesystem: checks
    /// waited for others' volumes to be deleted, or were not run because what
    /// they hold at once does not fit (each `skip`, `inconclusive: needs N
    /// bytes at once, ...`). `None` (and left out of the JSON) when every check
    /// was let in as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_limited: Option<SpaceLimited>,
}

/// The run was limited by the free space of its work filesystem (see
/// [`Report::space_limited`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceLimited {
    /// The bytes free on the work filesystem (`--work-dir`) when the run started.
    pub free_bytes: u64,
    /// The checks not run, by id: what each holds at once alone is more than that.
    pub not_run: Vec<String>,
    /// How many checks waited for others to end before their volumes fitted.
    pub waited: usize,
}

impl SpaceLimited {
    /// One line for a reader: the run was limited by space, and how.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!(
            "the run was limited by space: the work filesystem had {} bytes free",
            self.free_bytes
        )];
        if self.waited > 0 {
            parts.push(format!(
                "{} check(s) waited for the volumes of others to go",
                self.waited
            ));
        }
        if !self.not_run.is_empty() {
            parts.push(format!(
                "{} check(s) not run, inconclusive, as they need more at once (skipped above)",
                self.not_run.len()
            ));
        }
        parts.join("; ")
    }
}

/// The plugin file changed mid-run (see [`Report::plugin_changed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginChanged {
    /// Plugin calls started before the change was seen: those ran the file
    /// the report's `plugin.sha256` names.
    pub calls_before: u64,
    /// The file's sha256 at the start of the run (as `plugin.sha256`).
    pub sha256_before: Option<String>,
    /// Its sha256 when the change was seen; `None` when it was gone, not a
    /// regular file, or too large to hash.
    pub sha256_after: Option<String>,
    /// What changed (inode, size, mtime, ctime), in words.
    pub detail: String,
}

impl PluginChanged {
    /// One line for a reader: what changed and after how many calls.
    pub fn describe(&self) -> String {
        let short = |s: &Option<String>| {
            s.as_deref()
                .map_or("unreadable".to_owned(), |h| h.chars().take(12).collect())
        };
        format!(
            "the plugin file changed mid-run ({}) after {} calls: sha256 {} at the start, {} after; the calls may have run different programs, so the verdict is inconclusive",
            self.detail,
            self.calls_before,
            short(&self.sha256_before),
            short(&self.sha256_after)
        )
    }
}

/// Which config a run used and what it claimed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigInfo {
    /// The config file; `None` for claims made without one (the built-in
    /// plugin's own).
    #[serde(default)]
    pub path: Option<String>,
    /// The claims, as the config states them (see `docs/config.md`).
    pub claims: serde_json::Value,
}

impl Report {
    /// Assembles a report stamped with [`SCHEMA`] and [`ToolInfo::current`], deriving the
    /// summary from the checks so that the two cannot disagree.
    pub fn new(
        spec: impl Into<String>,
        plugin: PluginInfo,
        options: RunOptions,
        checks: Vec<CheckResult>,
        timing: Vec<TimingProfile>,
    ) -> Report {
        let summary = Summary::from_checks(&checks, options.strict);
        Report {
            schema: SCHEMA.to_owned(),
            tool: ToolInfo::current(),
            spec: spec.into(),
            node: None,
            sandbox: None,
            config: None,
            requests: Vec::new(),
            interrupted: None,
            plugin_changed: None,
            space_limited: None,
            started_at: None,
            duration_ms: None,
            conditions: None,
            plugin,
            options,
            checks,
            timing,
            summary,
        }
    }

    /// The process exit code for the run: 0 conformant, 1 non-conformant, 4
    /// inconclusive (the plugin file changed mid-run).
    ///
    /// Follows the recorded [`Summary::verdict`], so the exit code always agrees with what
    /// the reports say.
    pub fn exit_code(&self) -> u8 {
        self.summary.verdict.exit_code()
    }

    /// Records that the plugin file changed mid-run: the verdict becomes
    /// [`Verdict::Inconclusive`] whatever the checks found.
    pub fn mark_plugin_changed(&mut self, change: PluginChanged) {
        self.plugin_changed = Some(change);
        self.summary.verdict = Verdict::Inconclusive;
    }

    /// Puts `result` in place of the check with its id, or adds it when the
    /// run had none (a filter left it out), and derives the summary again:
    /// for a finding the run can make only once it ended (what the plugin
    /// did during the run's teardown). A changed plugin file still makes the
    /// verdict [`Verdict::Inconclusive`].
    pub fn put_check(&mut self, result: CheckResult) {
        match self.checks.iter_mut().find(|c| c.id == result.id) {
            Some(held) => *held = result,
            None => self.checks.push(result),
        }
        self.summary = Summary::from_checks(&self.checks, self.options.strict);
        if self.plugin_changed.is_some() {
            self.summary.verdict = Verdict::Inconclusive;
        }
    }

    /// The checks ordered by id: the one order every report form uses, because checks run
    /// in parallel and finish in any order.
    pub fn checks_by_id(&self) -> Vec<&CheckResult> {
        let mut checks: Vec<&CheckResult> = self.checks.iter().collect();
        checks.sort_by(|a, b| a.id.cmp(&b.id));
        checks
    }
}

/// The harness that produced a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Always [`TOOL_NAME`].
    pub name: String,
    /// The harness version.
    pub version: String,
}

impl ToolInfo {
    /// This build of the harness.
    pub fn current() -> ToolInfo {
        ToolInfo {
            name: TOOL_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// The node a run was made on: what tells one node's report from another's when a
/// fleet's reports are merged (`dhv-conform report merge`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// `check --node-name`, by default the host name (a Nomad job passes
    /// `${node.unique.name}`).
    pub name: String,
}

/// What the machine was doing during a run: timing verdicts are judged on calls
/// made alone, and these say how loaded "alone" was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConditions {
    /// CPUs available to the run.
    pub cores: u32,
    /// The 1, 5 and 15 minute load averages when the run started (`None` where
    /// the system does not tell).
    pub load_average_start: Option<[f64; 3]>,
    /// The same when the run ended.
    pub load_average_end: Option<[f64; 3]>,
}

/// The plugin under test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    /// The path as given on the command line, or `mkdir` for the built-in.
    pub path: String,
    /// Whether this is the in-process built-in `mkdir` plugin.
    pub builtin: bool,
    /// Hex SHA-256 of the executable; `None` for the built-in or when unreadable.
    pub sha256: Option<String>,
    /// The version the plugin fingerprinted with; `None` when fingerprinting failed.
    pub version: Option<VersionInfo>,
}

pub use dhv_contract::version::VersionInfo;

/// The options a run was made with, recorded because they change what the results mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// `--strict`: should-level failures fail the run.
    pub strict: bool,
    /// `--timeout-scale`: the factor applied to every time limit.
    pub timeout_scale: f64,
    /// `--fixture`: the volume request file, when one replaced the defaults.
    pub fixture: Option<String>,
    /// Whether a libtest filter or `--skip` left checks out of the run.
    pub filtered: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        // A scale of 0 would make every limit zero; 1 is "limits as Nomad has them".
        RunOptions {
            strict: false,
            timeout_scale: 1.0,
            fixture: None,
            filtered: false,
        }
    }
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The stable check id, e.g. `create.idempotent`.
    pub id: String,
    /// The catalogue group, e.g. `create`.
    pub group: String,
    /// The check's level.
    pub level: Level,
    /// What happened.
    pub status: Status,
    /// Why: for a failure what was expected and what happened; for a skip the reason; for
    /// info the measurement. May span lines.
    pub message: String,
    /// Wall time of the check.
    pub duration_ms: u64,
    /// The plugin calls the check made, in order.
    pub invocations: Vec<Invocation>,
    /// Set when the verdict is reported but not pinned in a snapshot, with why: a
    /// measurement, or a timing verdict close to its bound, which the host's speed could
    /// tip either way. The snapshot shows the reason in place of the status and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpinned: Option<String>,
    /// What the check's question needed of the host (the run's plan); absent in
    /// reports written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<Needs>,
    /// When in the run it ran; absent in reports written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
}

impl CheckResult {
    /// The invocations that explain this result: the ones that did not end cleanly, or all
    /// of them when every call ended cleanly (a check may fail on what it finds on disk
    /// although every call exited 0).
    pub fn evidence(&self) -> Vec<&Invocation> {
        let unclean: Vec<&Invocation> = self.invocations.iter().filter(|i| !i.is_clean()).collect();
        if unclean.is_empty() {
            self.invocations.iter().collect()
        } else {
            unclean
        }
    }
}

/// The duration profile of one operation over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingProfile {
    /// The operation: `fingerprint`, `create`, `delete`.
    pub operation: String,
    /// How many calls were measured.
    pub count: usize,
    /// Median duration.
    pub p50_ms: f64,
    /// 95th percentile duration.
    pub p95_ms: f64,
    /// Longest duration.
    pub max_ms: f64,
    /// The operation's time limit (after `--timeout-scale`).
    pub limit_ms: f64,
    /// The durations of the operation's calls made alone (the run's timing phase),
    /// ascending: the calls `timing.margin` and the deadline checks judge. Empty when
    /// none was made (a run cut short) and in reports written before the field existed.
    #[serde(default)]
    pub alone_ms: Vec<f64>,
}

/// Counts per status and the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of checks.
    pub total: usize,
    /// Checks with [`Status::Pass`].
    pub passed: usize,
    /// Checks with [`Status::Fail`].
    pub failed: usize,
    /// Checks with [`Status::Warn`].
    pub warned: usize,
    /// Checks with [`Status::Skip`].
    pub skipped: usize,
    /// Checks with [`Status::Info`].
    pub info: usize,
    /// The verdict.
    pub verdict: Verdict,
}

impl Summary {
    /// Counts the checks; the verdict is non-conformant iff any check failed, or any warned
    /// under `strict`.
    pub fn from_checks(checks: &[CheckResult], strict: bool) -> Summary {
        let count = |status: Status| checks.iter().filter(|c| c.status == status).count();
        let failed = count(Status::Fail);
        let warned = count(Status::Warn);
        let verdict = if failed > 0 || (strict && warned > 0) {
            Verdict::NonConformant
        } else {
            Verdict::Conformant
        };
        Summary {
            total: checks.len(),
            passed: count(Status::Pass),
            failed,
            warned,
            skipped: count(Status::Skip),
            info: count(Status::Info),
            verdict,
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

/// One request's outcome in a report of several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestOutcome {
    /// The request's name (from the config).
    pub name: String,
    /// The fixture it was read from.
    #[serde(default)]
    pub fixture: Option<String>,
    /// Its own counts and verdict.
    pub summary: Summary,
    /// Each check's status for this request, by id.
    pub statuses: BTreeMap<String, Status>,
}
