#!/usr/bin/env bash
# The conformance gate for a plugin repository: the one script behind the GitHub
# action (action.yml) and the GitLab template (examples/gitlab-ci.yml), and what
# you run locally to see exactly what CI will do.
#
# Usage: gate.sh            run the gate
#        gate.sh revision   print (and write to $GITHUB_OUTPUT) the cache keys:
#                           `lock=` (Cargo.lock's hash) and `revision=` (the harness's)
#
# Inputs (environment):
#   DHV_PLUGIN        the plugin executable to check (required)
#   DHV_SNAPSHOT      a committed snapshot to compare with (optional; missing or
#                     different is exit 3, never written under CI)
#   DHV_STRICT        "true": should-level failures fail the gate too
#   DHV_ARGS          more `dhv-conform check` arguments, ONE PER LINE, taken as
#                     they are: no word splitting, no globbing, no expansion
#   DHV_REPORTS       where the reports go [dhv-conform-reports]
#   DHV_SUDO          "true": run the check with `sudo -E` (mount and loop plugins
#                     need root); the reports are then handed back to this user
#   DHV_ARTIFACT_NAME the name to give the reports' artifact [unique per job and
#                     plugin: dhv-conform-JOB-PLUGIN-HASH]
#   DHV_CONFORM       the harness binary; when unset it is built from
#                     DHV_CONFORM_SOURCE, or taken from the cache when the cached
#                     binary was built from the same harness revision
#   DHV_CONFORM_SOURCE the harness source to build [the directory above this script]
#   DHV_CACHE         the build cache: bin/ and target/ [$RUNNER_TEMP/dhv-conform-cache]
#   GITHUB_OUTPUT     when set, the outputs are appended (verdict, exit-code,
#                     reports-dir, junit, json, markdown, artifact-name)
#   GITHUB_STEP_SUMMARY  when set, the gate's summary is appended
#   DHV_DOTENV        the dotenv file of the outputs (GitLab's artifacts:reports:dotenv)
#                     [$DHV_REPORTS/gate.env]
# Exit: dhv-conform's own code (0 conformant, 1 non-conformant, 2 usage,
# 3 snapshot missing or different, 4 harness failure); 4 too when the harness
# fails to build or the gate itself fails, and 2 when DHV_PLUGIN is not set.
# Whatever ends it, the gate leaves its outputs (verdict, exit-code) and its
# step summary: a failure before the check is verdict `error`.
set -euo pipefail

source_dir="${DHV_CONFORM_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"

# The harness revision: a hash of everything the binary is built from, so it is the
# same for a git checkout, a tarball (GitHub's download of an action) or a copy.
revision() {
  (cd "$source_dir" && find Cargo.toml Cargo.lock src -type f |
    LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
}
lock_hash() {
  sha256sum "$source_dir/Cargo.lock" | cut -c1-16
}

if [ "${1:-}" = revision ]; then
  # Never fails: a step that did would skip the gate's, and with it the
  # outputs and the summary; an unknown key only misses the cache.
  lock="$(lock_hash 2>/dev/null)" || lock=unknown
  rev="$(revision 2>/dev/null)" || rev=unknown
  keys="lock=$lock
revision=$rev"
  echo "$keys"
  if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$keys" >> "$GITHUB_OUTPUT"; fi
  exit 0
fi

reports="${DHV_REPORTS:-dhv-conform-reports}"
dotenv="${DHV_DOTENV:-$reports/gate.env}"
mkdir -p "$reports"

# Outputs are written as soon as they are known, so a later failure still leaves
# the artifact's name for the upload step.
output() {
  if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1=$2" >> "$GITHUB_OUTPUT"; fi
  local key
  key="DHV_$(echo "$1" | tr 'a-z-' 'A-Z_')"
  echo "$key=$2" >> "$dotenv"
}
: > "$dotenv"

# The step summary's headline, then what explains it. Written once, by
# `finish` (the check ran) or by `fail` (it could not).
summary() {
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    { echo "### dhv-conform gate: **$1** (exit $2)"; echo; cat; } >> "$GITHUB_STEP_SUMMARY"
  else
    cat > /dev/null
  fi
}
finished=false
# Ends the gate before or without a check: verdict `error`, exit code $1,
# the summary says why ($2) and shows the log's end ($3, when given).
fail() {
  finished=true
  output verdict error
  output exit-code "$1"
  {
    echo "$2"
    if [ -n "${3:-}" ] && [ -s "$3" ]; then
      echo
      echo '```'
      tail -n 30 "$3"
      echo '```'
    fi
  } | summary "error" "$1"
  echo "dhv-conform gate: $2" >&2
  exit "$1"
}
# A gate that stops on an error of its own (set -e) still leaves its outputs.
trap 'code=$?; if [ "$finished" != true ]; then fail 4 "the gate failed (exit $code) before the check could report"; fi' EXIT

if [ -z "${DHV_PLUGIN:-}" ]; then
  fail 2 "set DHV_PLUGIN to the plugin executable to check"
fi

# An artifact name no other job of the workflow uses: a matrix job differs from its
# siblings by plugin, arguments, snapshot or runner, so those are hashed into it.
artifact="${DHV_ARTIFACT_NAME:-}"
if [ -z "$artifact" ]; then
  base="$(basename "$DHV_PLUGIN")"
  tag="$(printf '%s\n' "$DHV_PLUGIN" "${DHV_ARGS:-}" "${DHV_SNAPSHOT:-}" \
    "${DHV_STRICT:-}" "${RUNNER_OS:-}" "${RUNNER_ARCH:-}" "${CI_JOB_NAME:-}" |
    sha256sum | cut -c1-8)"
  artifact="dhv-conform-${GITHUB_JOB:-${CI_JOB_NAME:-local}}-$base-$tag"
  artifact="$(printf '%s' "$artifact" | tr -c 'A-Za-z0-9._-' '-')"
fi
output artifact-name "$artifact"
output reports-dir "$reports"
output junit "$reports/junit.xml"
output json "$reports/report.json"
output markdown "$reports/summary.md"

harness="${DHV_CONFORM:-}"
if [ -z "$harness" ]; then
  cache="${DHV_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/dhv-conform-cache}"
  rev="$(revision)"
  harness="$cache/bin/dhv-conform"
  if [ -x "$harness" ] && [ "$(cat "$cache/bin/revision" 2>/dev/null)" = "$rev" ]; then
    echo "dhv-conform gate: using the cached harness (revision $rev): $harness" >&2
  else
    echo "dhv-conform gate: building the harness (revision $rev) from $source_dir; cold about 4 min on 2 cores, under 2 with the dependencies cached" >&2
    # Not --quiet: cargo's "Compiling ..." lines are the progress, shown as
    # they come and kept for the summary should the build fail.
    build_log="$reports/build.log"
    set +e
    cargo build --release --locked --manifest-path "$source_dir/Cargo.toml" \
      --target-dir "$cache/target" --bin dhv-conform 2>&1 | tee "$build_log" >&2
    built="${PIPESTATUS[0]}"
    set -e
    if [ "$built" != 0 ]; then
      fail 4 "the harness failed to build (cargo exited $built); its last lines:" "$build_log"
    fi
    rm -f "$build_log"
    mkdir -p "$cache/bin"
    cp "$cache/target/release/dhv-conform" "$harness.new"
    mv "$harness.new" "$harness"
    echo "$rev" > "$cache/bin/revision"
  fi
fi

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
# One argument per line, each taken as it is: a `*` or a space is data, never a
# glob or a separator.
if [ -n "${DHV_ARGS:-}" ]; then
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%$'\r'}"
    if [ -n "$line" ]; then args+=("$line"); fi
  done <<< "$DHV_ARGS"
fi

run=("$harness")
if [ "${DHV_SUDO:-false}" = "true" ] && [ "$(id -u)" != 0 ]; then
  run=(sudo -E "$harness")
fi

printf 'dhv-conform gate:' >&2
printf ' %q' "${run[@]}" "${args[@]}" >&2
printf '\n' >&2
log="$reports/gate.log"
# stderr is shown as it comes and kept, for the summary's snapshot section.
exec 3>&1
set +e
"${run[@]}" "${args[@]}" 2>&1 1>&3 3>&- | tee "$log" >&2
status="${PIPESTATUS[0]}"
set -e
exec 3>&-
if [ "${run[0]}" = sudo ]; then
  # The reports belong to the runner's user, not root.
  sudo chown -R "$(id -u):$(id -g)" "$reports" || true
fi

# The report's own verdict: a must that failed is non-conformant, whether or
# not the snapshot differs too (the exit code is then 3, as documented).
report_verdict="$(grep -o '"verdict": *"[a-z-]*"' "$reports/report.json" 2>/dev/null |
  tail -n 1 | sed 's/.*"\([a-z-]*\)"$/\1/' || true)"
case "$status" in
  0) verdict=conformant; headline="conformant" ;;
  1) verdict=non-conformant; headline="non-conformant" ;;
  3) if [ "$report_verdict" = non-conformant ]; then
       verdict=non-conformant; headline="non-conformant, and the snapshot is missing or differs"
     else
       verdict=snapshot-differs; headline="the snapshot is missing or differs"
     fi ;;
  *) verdict=error; headline="error: dhv-conform exited $status" ;;
esac
finished=true
output verdict "$verdict"
output exit-code "$status"

# The step summary: the gate's result first, the snapshot's diff next, then the report.
{
  if [ -n "${DHV_SNAPSHOT:-}" ]; then
    if [ "$status" = 3 ]; then
      echo "**Snapshot** \`$DHV_SNAPSHOT\`: the results differ (or it is missing). Review the diff; to accept it, bless locally with \`--bless\`, accept it with \`dhv-conform snapshot review $DHV_SNAPSHOT\` and commit the snapshot."
      grep -E '^dhv-conform: snapshot .* (was written by|does not exist|is in the older form)' "$log" | sed 's/^dhv-conform: /> /' || true
      echo
      echo '```diff'
      awk '/^--- /{on=1} on && /^(--- |\+\+\+ |@@ |[-+ \\])/{print; next} on && !/^$/{on=0}' "$log"
      echo '```'
    else
      echo "**Snapshot** \`$DHV_SNAPSHOT\`: matched."
    fi
    echo
  fi
  if [ -f "$reports/summary.md" ]; then cat "$reports/summary.md"; fi
} | summary "$headline" "$status"
case "$status" in
  0) echo "dhv-conform gate: conformant" >&2 ;;
  1) echo "dhv-conform gate: non-conformant (see $reports/summary.md)" >&2 ;;
  3) if [ "$verdict" = non-conformant ]; then
       echo "dhv-conform gate: non-conformant (see $reports/summary.md), and the snapshot is missing or differs" >&2
     fi
     echo "dhv-conform gate: the snapshot is missing or differs; review the diff above, then bless it locally with --bless, accept it with \`dhv-conform snapshot review $DHV_SNAPSHOT\` and commit it" >&2 ;;
  *) echo "dhv-conform gate: dhv-conform exited $status" >&2 ;;
esac
exit "$status"
