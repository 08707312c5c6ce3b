#!/usr/bin/env bash
# Runs benchmarks and records their figures.
#   benchmarks/run.sh all       every benchmarks/<name>/run.sh, in name order
#   benchmarks/run.sh <name>    one benchmark (make bench-<name>)
# Each benchmark prints `BENCH <name> <value> <unit> [baseline=<v> ratio=<r>]` lines
# (docs/design.md, "Contracts"); they are merged into benchmarks/results/latest.json and the
# table benchmarks/results/latest.md is regenerated from it.
set -uo pipefail
# shellcheck source=tools/launched.sh
. "$(dirname "$0")/../tools/launched.sh"
cd "$(dirname "$0")/.." || exit 1
what=${1:-all}
export CDC_BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
results=benchmarks/results
mkdir -p "$results"

if [ "$what" = all ]; then
    names=()
    for d in benchmarks/*/run.sh; do
        n=$(basename "$(dirname "$d")")
        [ "$n" = results ] || names+=("$n")
    done
else
    names=("$what")
fi

status=0
for n in "${names[@]}"; do
    script=benchmarks/$n/run.sh
    if [ ! -x "$script" ]; then
        echo "bench: no benchmark named \"$n\" (expected $script)" >&2
        status=2
        continue
    fi
    echo "== bench $n"
    out=$(mktemp)
    if ! "$script" 2>&1 | tee "$out"; then
        echo "bench: $n failed" >&2
        status=1
    fi
    grep '^BENCH ' "$out" | node benchmarks/merge-results.mjs "$n" "$results/latest.json" \
        "$results/latest.md" || status=1
    rm -f "$out"
done
exit $status
