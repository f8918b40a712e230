#!/bin/sh
# determinism.sh [IDLE_RUNS] [LOADED_RUNS] [SAMPLE...]: the longer sweep behind
# tests/determinism.rs. Runs `dhv-conform check` on each sample IDLE_RUNS times
# on an idle machine, then LOADED_RUNS times with twice as many busy loops as
# cores, comparing every run's normalised report with the first one's
# (`--snapshot`; exit 3 on any difference). Prints, per sample, how many runs
# gave the identical report.
set -u
idle=${1:-10}
loaded=${2:-5}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
samples=${*:-reference}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/target/release/dhv-conform
[ -x "$bin" ] || bin=$here/target/debug/dhv-conform
[ -x "$bin" ] || { echo "build dhv-conform first (cargo build)" >&2; exit 2; }
work=$(mktemp -d)
busy=
trap 'for p in $busy; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

sweep() { # sweep SAMPLE RUNS LABEL
	same=0
	i=0
	while [ "$i" -lt "$2" ]; do
		"$bin" check "$here/sample-plugins/$1" -q --snapshot "$work/$1.snap" >/dev/null 2>&1
		# 3: the report differs; 0 or 1 (conformant or not): identical.
		case $? in 0 | 1) same=$((same + 1)) ;; esac
		i=$((i + 1))
	done
	printf '%-24s %-7s %d of %d identical\n' "$1" "$3" "$same" "$2"
}

for s in $samples; do
	"$bin" check "$here/sample-plugins/$s" -q --snapshot "$work/$s.snap" --bless >/dev/null 2>&1
	sweep "$s" "$idle" idle
done
n=0
while [ "$n" -lt $((2 * cores)) ]; do
	sh -c 'while :; do :; done' &
	busy="$busy $!"
	n=$((n + 1))
done
for s in $samples; do
	sweep "$s" "$loaded" loaded
done
