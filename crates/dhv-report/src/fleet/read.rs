//! Reading node reports one at a time, keeping only what the fleet matrix needs.
//!
//! A node's report is mostly invocations (environments, output excerpts, reproduce
//! lines), and a fleet has thousands of them. The lean types here let serde skip all of
//! that while parsing: per check only the id, level, status, the message's first line
//! and one reproduce line survive, and strings are borrowed from the file's buffer until
//! one is kept. The file buffer is reused from report to report.

use std::borrow::Cow;
use std::fmt;
use std::fs;
#[cfg(feature = "files")]
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, IgnoredAny, SeqAccess, Visitor};

use super::FleetError;
use crate::model::{Level, SCHEMA, Status, Verdict};

/// What the merge keeps of one node's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// The node's name: the report's `node.name`, or the file name for older reports.
    pub name: String,
    /// The plugin's id: its file name, or `mkdir` for the built-in.
    pub plugin: String,
    /// The plugin's SHA-256.
    pub sha256: Option<String>,
    /// The version the plugin fingerprinted with, as printed.
    pub version: Option<String>,
    /// The harness version that wrote the report.
    pub tool_version: String,
    /// Whether the run was `--strict`.
    pub strict: bool,
    /// The report's verdict.
    pub verdict: Verdict,
    /// When the run started (RFC 3339), if the report says.
    pub started_at: Option<String>,
    /// The run's wall time in milliseconds, if the report says.
    pub duration_ms: Option<u64>,
    /// One entry per check, in the report's order.
    pub checks: Vec<CheckCell>,
}

/// One check of one node: a cell of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckCell {
    /// The check id.
    pub id: String,
    /// The check's level.
    pub level: Level,
    /// The check's status on this node.
    pub status: Status,
    /// For fail, warn and skip: the message's first line.
    pub message: Option<String>,
    /// For fail and warn: the reproduce line of the first call behind the result.
    pub reproduce: Option<String>,
}

/// The files to read: each file as given, and each directory's `*.json` files (not
/// recursing), sorted by name so the merge reads them in a stable order.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, FleetError> {
    let mut files = Vec::new();
    for input in inputs {
        let read_error = |source| FleetError::Read {
            path: input.clone(),
            source,
        };
        if !fs::metadata(input).map_err(read_error)?.is_dir() {
            files.push(input.clone());
            continue;
        }
        let mut found = Vec::new();
        for entry in fs::read_dir(input).map_err(read_error)? {
            let path = entry.map_err(read_error)?.path();
            if path.extension().is_some_and(|e| e == "json") && path.is_file() {
                found.push(path);
            }
        }
        if found.is_empty() {
            return Err(FleetError::EmptyDir { dir: input.clone() });
        }
        found.sort();
        files.append(&mut found);
    }
    Ok(files)
}

/// The most read from one node's report: a regular file (or a symlink to
/// one) only. A report with every output excerpt at its cap is a few MiB.
#[cfg(feature = "files")]
pub const MAX_REPORT_BYTES: u64 = 256 << 20;

#[cfg(feature = "files")]
/// Reads one node's report from `path`, using `buf` for the file's bytes.
pub fn read_report(path: &Path, buf: &mut Vec<u8>) -> Result<NodeReport, FleetError> {
    buf.clear();
    let read = dhv_host::safe_fs::open_regular(path, dhv_host::safe_fs::Links::Follow)
        .map_err(dhv_host::safe_fs::ReadError::into_io)
        .and_then(|f| f.take(MAX_REPORT_BYTES + 1).read_to_end(buf));
    match read {
        Ok(n) if n as u64 > MAX_REPORT_BYTES => {
            let e = dhv_host::safe_fs::ReadError::TooLarge {
                path: path.to_owned(),
                limit: MAX_REPORT_BYTES,
            };
            return Err(FleetError::Read {
                path: path.to_owned(),
                source: e.into_io(),
            });
        }
        Ok(_) => {}
        Err(source) => {
            return Err(FleetError::Read {
                path: path.to_owned(),
                source,
            });
        }
    }
    parse_report(path, buf)
}

/// One node's report from its bytes (`path` names it in errors): what
/// `read_report` (the `files` feature) does once the file is read, for a reader that has the
/// bytes already.
pub fn parse_report(path: &Path, buf: &[u8]) -> Result<NodeReport, FleetError> {
    let lean: Lean<'_> = match serde_json::from_slice(buf) {
        Ok(lean) => lean,
        Err(source) => return Err(why_unreadable(path, buf, source)),
    };
    if lean.schema != SCHEMA {
        return Err(FleetError::Schema {
            path: path.to_owned(),
            found: lean.schema.into_owned(),
        });
    }
    Ok(lean.into_node_report(path))
}

/// A report that does not parse: a wrong schema when it names another one, else corrupt.
fn why_unreadable(path: &Path, buf: &[u8], source: serde_json::Error) -> FleetError {
    #[derive(Deserialize)]
    struct SchemaOnly {
        schema: String,
    }
    match serde_json::from_slice::<SchemaOnly>(buf) {
        Ok(only) if only.schema != SCHEMA => FleetError::Schema {
            path: path.to_owned(),
            found: only.schema,
        },
        _ => FleetError::Parse {
            path: path.to_owned(),
            source,
        },
    }
}

/// The parts of [`crate::Report`] the merge reads; serde skips the rest.
#[derive(Deserialize)]
struct Lean<'a> {
    #[serde(borrow)]
    schema: Cow<'a, str>,
    tool: LeanTool,
    #[serde(default)]
    node: Option<LeanNode>,
    plugin: LeanPlugin,
    options: LeanOptions,
    #[serde(borrow)]
    checks: Vec<LeanCheck<'a>>,
    summary: LeanSummary,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    duration_ms: Option<u64>,
}

#[derive(Deserialize)]
struct LeanTool {
    version: String,
}

#[derive(Deserialize)]
struct LeanNode {
    name: String,
}

#[derive(Deserialize)]
struct LeanPlugin {
    path: String,
    builtin: bool,
    sha256: Option<String>,
    version: Option<LeanVersion>,
}

#[derive(Deserialize)]
struct LeanVersion {
    raw: String,
}

#[derive(Deserialize)]
struct LeanOptions {
    strict: bool,
}

#[derive(Deserialize)]
struct LeanSummary {
    verdict: Verdict,
}

#[derive(Deserialize)]
struct LeanCheck<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    level: Level,
    status: Status,
    #[serde(borrow)]
    message: Cow<'a, str>,
    #[serde(borrow)]
    invocations: FirstReproduce<'a>,
}

impl Lean<'_> {
    fn into_node_report(self, path: &Path) -> NodeReport {
        let name = match self.node {
            Some(node) => node.name,
            // Reports from before `--node-name` say nothing about the node; the file
            // name is the best name there is (the collection step usually puts it there).
            None => path.file_stem().map_or_else(
                || path.display().to_string(),
                |s| s.to_string_lossy().into(),
            ),
        };
        let plugin = if self.plugin.builtin {
            "mkdir".to_owned()
        } else {
            Path::new(&self.plugin.path)
                .file_name()
                .map_or(self.plugin.path.clone(), |n| n.to_string_lossy().into())
        };
        let checks = self.checks.into_iter().map(LeanCheck::into_cell).collect();
        NodeReport {
            name,
            plugin,
            sha256: self.plugin.sha256,
            version: self.plugin.version.map(|v| v.raw),
            tool_version: self.tool.version,
            strict: self.options.strict,
            verdict: self.summary.verdict,
            started_at: self.started_at,
            duration_ms: self.duration_ms,
            checks,
        }
    }
}

impl LeanCheck<'_> {
    fn into_cell(self) -> CheckCell {
        let noted = matches!(self.status, Status::Fail | Status::Warn | Status::Skip);
        let explained = matches!(self.status, Status::Fail | Status::Warn);
        CheckCell {
            id: self.id.into_owned(),
            level: self.level,
            status: self.status,
            message: noted.then(|| self.message.lines().next().unwrap_or("").to_owned()),
            reproduce: self
                .invocations
                .0
                .filter(|_| explained)
                .map(Cow::into_owned),
        }
    }
}

/// The reproduce line of a check's first evidence call, found while the invocations
/// stream past: the first call that did not end cleanly, else the first call (the rule
/// of [`crate::CheckResult::evidence`]).
struct FirstReproduce<'a>(Option<Cow<'a, str>>);

/// Of one invocation, what decides whether it is evidence, and its reproduce line.
#[derive(Deserialize)]
struct LeanCall<'a> {
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    leaked: bool,
    #[serde(rename = "orphans")]
    leftovers: Vec<IgnoredAny>,
    #[serde(borrow)]
    reproduce: Cow<'a, str>,
}

impl LeanCall<'_> {
    /// [`crate::Invocation::is_clean`] over the lean fields; a test keeps the two
    /// in agreement.
    fn is_clean(&self) -> bool {
        self.exit_code == Some(0)
            && self.signal.is_none()
            && !self.timed_out
            && !self.leaked
            && self.leftovers.is_empty()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for FirstReproduce<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(FirstReproduceVisitor(std::marker::PhantomData))
    }
}

struct FirstReproduceVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for FirstReproduceVisitor<'a> {
    type Value = FirstReproduce<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of invocations")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut first = None;
        let mut first_unclean = None;
        while let Some(call) = seq.next_element::<LeanCall<'de>>()? {
            if first_unclean.is_none() && !call.is_clean() {
                first_unclean = Some(call.reproduce);
            } else if first.is_none() {
                first = Some(call.reproduce);
            }
        }
        Ok(FirstReproduce(first_unclean.or(first)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sample, to_json};

    fn read_str(text: &str) -> Result<NodeReport, FleetError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node-a.json");
        fs::write(&path, text).unwrap();
        read_report(&path, &mut Vec::new())
    }

    #[test]
    fn keeps_what_the_matrix_needs() {
        let report = sample::report(false);
        let node = read_str(&to_json(&report)).unwrap();
        assert_eq!(node.name, "client-1");
        assert_eq!(node.plugin, "example");
        assert_eq!(node.version.as_deref(), Some("1.2"));
        assert_eq!(node.sha256, report.plugin.sha256);
        assert_eq!(node.verdict, report.summary.verdict);
        assert_eq!(node.checks.len(), report.checks.len());
        for check in report.checks {
            let cell = node.checks.iter().find(|c| c.id == check.id).unwrap();
            assert_eq!((cell.level, cell.status), (check.level, check.status));
            let first_line = check.message.lines().next().unwrap_or("").to_owned();
            let problem = matches!(check.status, Status::Fail | Status::Warn | Status::Skip);
            assert_eq!(cell.message, problem.then_some(first_line), "{}", check.id);
            let reproduce = check.evidence().first().map(|i| i.reproduce.clone());
            let explained = matches!(check.status, Status::Fail | Status::Warn);
            assert_eq!(
                cell.reproduce,
                reproduce.filter(|_| explained),
                "{}",
                check.id
            );
        }
    }

    #[test]
    fn a_report_without_a_node_is_named_after_its_file() {
        let mut report = sample::report(false);
        report.node = None;
        assert_eq!(read_str(&to_json(&report)).unwrap().name, "node-a");
    }

    #[test]
    fn corrupt_and_foreign_files_are_errors_naming_the_file() {
        let json = to_json(&sample::report(false));
        let cases = [
            (
                json[..json.len() / 2].to_owned(),
                "node-a.json: not a dhv-conform report",
            ),
            (
                "not json".to_owned(),
                "node-a.json: not a dhv-conform report",
            ),
            (
                json.replace(SCHEMA, "dhv-conform/report/v9"),
                "node-a.json: schema \"dhv-conform/report/v9\"",
            ),
            (
                r#"{"schema":"dhv-conform/fleet/v1","nodes":[]}"#.to_owned(),
                "node-a.json: schema \"dhv-conform/fleet/v1\"",
            ),
            (
                json.replace("\"verdict\": \"", "\"verdict\": \"x"),
                "node-a.json: not a dhv-conform report",
            ),
        ];
        for (text, want) in cases {
            let err = read_str(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn lean_cleanliness_agrees_with_the_model() {
        let calls = [
            (Some(0), None, false, false, 0),
            (Some(1), None, false, false, 0),
            (None, Some(9), true, false, 0),
            (Some(0), None, false, true, 0),
            (Some(0), None, false, false, 1),
            (None, None, false, false, 0),
        ];
        for (exit_code, signal, timed_out, leaked, leftovers) in calls {
            let full = sample::ended(exit_code, signal, timed_out, leaked, leftovers);
            let text = serde_json::to_string(&full).unwrap();
            let lean: LeanCall<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(lean.is_clean(), full.is_clean(), "{text}");
        }
    }

    #[test]
    fn directories_give_their_json_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.json", "a.json", "a.md", "c.junit.xml"] {
            fs::write(dir.path().join(name), "").unwrap();
        }
        fs::create_dir(dir.path().join("sub.json")).unwrap();
        let single = dir.path().join("a.md");
        let files = expand_inputs(&[single.clone(), dir.path().to_owned()]).unwrap();
        assert_eq!(
            files,
            [single, dir.path().join("a.json"), dir.path().join("b.json")]
        );
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let err = expand_inputs(std::slice::from_ref(&empty)).unwrap_err();
        assert!(matches!(err, FleetError::EmptyDir { .. }), "{err}");
        let missing = dir.path().join("missing");
        let err = expand_inputs(&[missing]).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
