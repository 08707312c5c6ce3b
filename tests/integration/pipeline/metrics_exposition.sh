#!/usr/bin/env bash
# Prometheus tools accept what every process exports (docs/operations.md, "Prometheus and
# Grafana"): the local pipeline with a standby of each kind (two captures, two
# coordinators) and two workers, some load and a poison record, then
#   - `promtool check metrics` (Debian's prometheus package) on the /metrics of every
#     process: no error and no lint finding;
#   - the Grafana dashboard k8s/monitoring/grafana-dashboard.json: valid JSON, and every
#     metric its queries name is one a process exported here
#     (tests/js/lib/grafana_check.mjs).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/metrics CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_WORKERS=2 CHAOS_INITIAL_ROWS=50
dashboard=k8s/monitoring/grafana-dashboard.json
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT

fail() {
    echo "metrics_exposition: $*" >&2
    exit 1
}
command -v promtool >/dev/null || fail "promtool is not installed (tools/setup.sh installs prometheus)"

pipeline_up || fail "the pipeline did not come up"
"$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false --rate 200 \
    --max-transactions 400 --report-interval 0 >"$tmp/load.log" 2>&1 || fail "the load failed"
printf 'not json\n' | kcat -P -b "$CDC_TEST_KAFKA" -t cdc.public.transactions -k poison -p 5 ||
    fail "could not produce the poison record"
chaos_wait 60 "the load and the poison record committed" bash -c \
    "curl -fsS http://\$(cat '$CHAOS_DIR/procs/$(chaos_leader).http')/status |
     jq -e '.dlq.total >= 1 and ([.assignment[].lag] | all(. == 0))' >/dev/null" ||
    fail "the pipeline did not catch up: $(chaos_status | jq -c '[.dlq, [.assignment[].lag]]')"

failed=0
scraped=()
for t in $(chaos_targets capture) $(chaos_targets coordinator) $(chaos_targets worker); do
    out=$tmp/$t.metrics
    curl -fsS "http://$(cat "$CHAOS_DIR/procs/$t.http")/metrics" >"$out" || fail "$t: no /metrics"
    scraped+=("$out")
    if report=$(promtool check metrics <"$out" 2>&1); then
        echo "$t: promtool check metrics: ok ($(grep -c '^# TYPE' "$out") families, $(grep -vc '^#' "$out") samples)"
    else
        echo "$t: promtool check metrics failed:" >&2
        sed 's/^/    /' <<<"$report" >&2
        failed=1
    fi
done
[ "$failed" = 0 ] || fail "promtool found problems"

node tests/js/lib/grafana_check.mjs "$dashboard" "${scraped[@]}" || fail "$dashboard does not check"
echo "metrics_exposition: ok"
