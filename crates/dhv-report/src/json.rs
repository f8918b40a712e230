//! The JSON report (`--json`): the full [`Report`], for machines.
//!
//! The shape is the serde derive of the model, nothing more: keeping the serialiser free
//! of hand-written fields is what lets [`super::model`] be the single definition of the
//! schema.

use super::model::Report;

/// Renders the report as pretty JSON with a trailing newline, checks sorted by id.
pub fn to_json(report: &Report) -> String {
    let mut sorted = report.clone();
    sorted.checks.sort_by(|a, b| a.id.cmp(&b.id));
    // The model holds only strings, numbers, bools and sequences, with no maps keyed by
    // anything but field names, so serde_json has no way to fail on it.
    let mut text =
        serde_json::to_string_pretty(&sorted).expect("the report model always serialises");
    text.push('\n');
    text
}

/// Reads a JSON report back, e.g. one written by an earlier run.
///
/// The schema string is not checked: a reader that cares compares
/// [`Report::schema`] with [`super::model::SCHEMA`] itself.
pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    #[test]
    fn round_trips() {
        let report = sample::report(false);
        let back = from_json(&to_json(&report)).unwrap();
        let mut sorted = report.clone();
        sorted.checks.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(back, sorted);
    }

    #[test]
    fn ends_with_one_newline_and_sorts_checks() {
        let text = to_json(&sample::report(false));
        assert!(text.ends_with("}\n"));
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ids: Vec<_> = value["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }

    #[test]
    fn shape() {
        // Every field of the schema, with as little repetition as will show them all.
        let mut report = sample::report(false);
        report
            .checks
            .retain(|c| c.id == "create.idempotent" || c.id == "process.no-orphans");
        report.checks[0].invocations.truncate(1);
        report.summary = crate::Summary::from_checks(&report.checks, false);
        insta::assert_snapshot!(to_json(&report), @r#"
            {
              "schema": "dhv-conform/report/v1",
              "tool": {
                "name": "dhv-conform",
                "version": "0.1.0"
              },
              "spec": "nomad-1.10",
              "node": {
                "name": "client-1"
              },
              "started_at": "2026-12-01T13:05:09Z",
              "duration_ms": 2345,
              "conditions": {
                "cores": 2,
                "load_average_start": [
                  0.5,
                  0.25,
                  0.125
                ],
                "load_average_end": [
                  1.5,
                  0.5,
                  0.25
                ]
              },
              "plugin": {
                "path": "/opt/nomad/plugins/example",
                "builtin": false,
                "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "version": {
                  "raw": "1.2",
                  "canonical": "1.2.0",
                  "semver": false
                }
              },
              "options": {
                "strict": false,
                "timeout_scale": 1.0,
                "fixture": null,
                "filtered": false
              },
              "checks": [
                {
                  "id": "create.idempotent",
                  "group": "create",
                  "level": "must",
                  "status": "fail",
                  "message": "the second create exited 1, expected 0\nthe volume at /tmp/.tmpAbC123/volumes/x was left in place",
                  "duration_ms": 12,
                  "invocations": [
                    {
                      "operation": "create",
                      "env": [
                        "DHV_OPERATION=create",
                        "DHV_VOLUMES_DIR=/tmp/.tmpAbC123/volumes",
                        "DHV_VOLUME_ID=0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69",
                        "DHV_VOLUME_NAME=conformance-0b9c8f6e"
                      ],
                      "exit_code": 0,
                      "signal": null,
                      "core_dumped": false,
                      "started_ms": 3.5,
                      "duration_ms": 7.25,
                      "timed_out": false,
                      "leaked": false,
                      "orphans": [],
                      "stdout_truncated": false,
                      "stderr_truncated": false,
                      "stdout": "{\"path\": \"/tmp/.tmpAbC123/volumes/x\", \"bytes\": 0}",
                      "stderr": "",
                      "reproduce": "env -i DHV_OPERATION=create DHV_VOLUMES_DIR=/tmp/.tmpAbC123/volumes DHV_VOLUME_ID=0b9c8f6e-3f1d-4c4e-9a53-1f2d3c4b5a69 DHV_VOLUME_NAME=conformance-0b9c8f6e /opt/nomad/plugins/example create",
                      "in_flight": 1
                    }
                  ]
                },
                {
                  "id": "process.no-orphans",
                  "group": "process",
                  "level": "should",
                  "status": "skip",
                  "message": "built-in plugin",
                  "duration_ms": 12,
                  "invocations": []
                }
              ],
              "timing": [
                {
                  "operation": "create",
                  "count": 4,
                  "p50_ms": 7.25,
                  "p95_ms": 9.5,
                  "max_ms": 9.5,
                  "limit_ms": 60000.0,
                  "alone_ms": [
                    6.5,
                    7.25,
                    8.0
                  ]
                }
              ],
              "summary": {
                "total": 2,
                "passed": 0,
                "failed": 1,
                "warned": 0,
                "skipped": 1,
                "info": 0,
                "verdict": "non-conformant"
              }
            }
        "#);
    }
}
