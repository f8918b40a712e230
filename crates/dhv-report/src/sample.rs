//! A small, fixed report shared by the renderers' tests, so every form is pinned against
//! the same facts: one result of each status, a must and a should failure, a message
//! with table-breaking characters, and failing invocations with output.

use super::model::{
    CheckResult, Invocation, Level, NodeInfo, PluginInfo, Report, RunConditions, RunOptions,
    SCHEMA, Status, Summary, TOOL_NAME, TimingProfile, ToolInfo, VersionInfo,
};

const PLUGIN: &str = "/opt/nomad/plugins/example";
const VOLUME_ID: &str = "0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69";

fn check(id: &str, level: Level, status: Status, message: &str) -> CheckResult {
    CheckResult {
        id: id.to_owned(),
        group: id.split('.').next().unwrap_or_default().to_owned(),
        level,
        status,
        message: message.to_owned(),
        duration_ms: 12,
        invocations: Vec::new(),
        unpinned: None,
        needs: None,
        phase: None,
    }
}

fn create_call(exit_code: i32, stdout: &str, stderr: &str) -> Invocation {
    let env = vec![
        "DHV_OPERATION=create".to_owned(),
        "DHV_VOLUMES_DIR=/tmp/.tmpAbC123/volumes".to_owned(),
        format!("DHV_VOLUME_ID={VOLUME_ID}"),
        "DHV_VOLUME_NAME=conformance-0b9c8f6e".to_owned(),
    ];
    Invocation {
        operation: "create".to_owned(),
        reproduce: format!("env -i {} {PLUGIN} create", env.join(" ")),
        env,
        exit_code: Some(exit_code),
        started_ms: Some(3.5),
        duration_ms: 7.25,
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        in_flight: Some(1),
        ..Invocation::default()
    }
}

/// A call that ended so, with `leftovers` processes left: the fields by which a
/// call's outcome and cleanliness are told.
pub(crate) fn ended(
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    leaked: bool,
    leftovers: usize,
) -> Invocation {
    Invocation {
        exit_code,
        signal,
        timed_out,
        leaked,
        leftovers: vec!["sleep 1000".to_owned(); leftovers],
        ..Invocation::default()
    }
}

/// One check of each status, out of id order on purpose: every renderer must sort.
fn checks() -> Vec<CheckResult> {
    let mut idempotent = check(
        "create.idempotent",
        Level::Must,
        Status::Fail,
        "the second create exited 1, expected 0\nthe volume at /tmp/.tmpAbC123/volumes/x was left in place",
    );
    idempotent.invocations = vec![
        create_call(
            0,
            r#"{"path": "/tmp/.tmpAbC123/volumes/x", "bytes": 0}"#,
            "",
        ),
        create_call(1, "", "mkdir: cannot create directory: File exists"),
    ];
    let mut succeeds = check("create.succeeds", Level::Must, Status::Pass, "");
    succeeds.invocations = vec![create_call(
        0,
        r#"{"path": "/tmp/.tmpAbC123/volumes/x"}"#,
        "",
    )];

    vec![
        check(
            "timing.profile",
            Level::Info,
            Status::Info,
            "create: 4 calls, p50 7ms, p95 9ms, max 9ms",
        ),
        check(
            "fingerprint.version-semver",
            Level::Should,
            Status::Warn,
            "version \"1.2\" is accepted by go-version but is not SemVer 2.0 | use \"1.2.0\"",
        ),
        idempotent,
        succeeds,
        check(
            "process.no-orphans",
            Level::Should,
            Status::Skip,
            "built-in plugin",
        ),
        check("fingerprint.runs", Level::Must, Status::Pass, ""),
    ]
}

/// The sample report; `strict` sets `--strict`, which turns the warning into a failure.
pub(crate) fn report(strict: bool) -> Report {
    let checks = checks();
    let summary = Summary::from_checks(&checks, strict);
    Report {
        schema: SCHEMA.to_owned(),
        // Fixed rather than ToolInfo::current(), so a version bump does not move snapshots.
        tool: ToolInfo {
            name: TOOL_NAME.to_owned(),
            version: "0.1.0".to_owned(),
        },
        spec: "nomad-1.10".to_owned(),
        node: Some(NodeInfo {
            name: "client-1".to_owned(),
        }),
        started_at: Some("2026-12-01T13:05:09Z".to_owned()),
        sandbox: None,
        config: None,
        requests: Vec::new(),
        interrupted: None,
        plugin_changed: None,
        space_limited: None,
        duration_ms: Some(2_345),
        conditions: Some(RunConditions {
            cores: 2,
            load_average_start: Some([0.5, 0.25, 0.125]),
            load_average_end: Some([1.5, 0.5, 0.25]),
        }),
        plugin: PluginInfo {
            path: PLUGIN.to_owned(),
            builtin: false,
            sha256: Some(
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned(),
            ),
            version: Some(VersionInfo {
                raw: "1.2".to_owned(),
                canonical: Some("1.2.0".to_owned()),
                semver: false,
            }),
        },
        options: RunOptions {
            strict,
            ..RunOptions::default()
        },
        checks,
        timing: vec![TimingProfile {
            operation: "create".to_owned(),
            count: 4,
            p50_ms: 7.25,
            p95_ms: 9.5,
            max_ms: 9.5,
            limit_ms: 60_000.0,
            alone_ms: vec![6.5, 7.25, 8.0],
        }],
        summary,
    }
}
