#!/usr/bin/env bash
# The conformance gate for a plugin repository: the one script behind the GitHub
# action (action.yml) and the GitLab template (examples/gitlab-ci.yml), and what
# you run locally to see exactly what CI will do.
#
# Inputs (environment):
#   DHV_PLUGIN        the plugin executable to check (required)
#   DHV_SNAPSHOT      a committed snapshot to compare with (optional; missing or
#                     different is exit 3, never written under CI)
#   DHV_STRICT        "true": should-level failures fail the gate too
#   DHV_ARGS          more `dhv-conform check` arguments (e.g. "--fixture volume.hcl")
#   DHV_REPORTS       where the reports go [dhv-conform-reports]
#   DHV_CONFORM       the harness binary; when unset and `dhv-conform` is not on
#                     PATH, it is built from DHV_CONFORM_SOURCE (this repository)
#   DHV_CONFORM_SOURCE the harness source to build [the directory above this script]
#   GITHUB_STEP_SUMMARY  when set (GitHub Actions), the Markdown summary is appended
# Exit: dhv-conform's own code (0 conformant, 1 non-conformant, 2 usage,
# 3 snapshot missing or different, 4 harness failure).
set -euo pipefail

: "${DHV_PLUGIN:?set DHV_PLUGIN to the plugin executable to check}"
reports="${DHV_REPORTS:-dhv-conform-reports}"
source_dir="${DHV_CONFORM_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"

harness="${DHV_CONFORM:-}"
if [ -z "$harness" ]; then
  if command -v dhv-conform >/dev/null 2>&1; then
    harness=dhv-conform
  else
    echo "dhv-conform gate: building the harness from $source_dir" >&2
    root="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/dhv-conform-install"
    cargo install --quiet --locked --path "$source_dir" --root "$root"
    harness="$root/bin/dhv-conform"
  fi
fi

mkdir -p "$reports"
args=(check "$DHV_PLUGIN"
  --junit "$reports/junit.xml"
  --markdown "$reports/summary.md"
  --json "$reports/report.json"
  --html "$reports/report.html")
if [ -n "${DHV_SNAPSHOT:-}" ]; then
  args+=(--snapshot "$DHV_SNAPSHOT")
fi
if [ "${DHV_STRICT:-false}" = "true" ]; then
  args+=(--strict)
fi
if [ -n "${DHV_ARGS:-}" ]; then
  # Word splitting is the point: DHV_ARGS holds several arguments.
  # shellcheck disable=SC2206
  args+=(${DHV_ARGS})
fi

echo "dhv-conform gate: $harness ${args[*]}" >&2
status=0
"$harness" "${args[@]}" || status=$?

if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$reports/summary.md" ]; then
  cat "$reports/summary.md" >> "$GITHUB_STEP_SUMMARY"
fi
case "$status" in
  0) echo "dhv-conform gate: conformant" >&2 ;;
  1) echo "dhv-conform gate: non-conformant (see $reports/summary.md)" >&2 ;;
  3) echo "dhv-conform gate: the snapshot is missing or differs; review the diff above, then bless it locally with --bless and commit it" >&2 ;;
  *) echo "dhv-conform gate: dhv-conform exited $status" >&2 ;;
esac
exit "$status"
