#!/usr/bin/env bash
# The coordinator's dashboard in headless Chromium (docs/operations.md, "Dashboard"): the
# local pipeline (a capture, two coordinators, three workers) with a steady load and a
# poison record in the dead-letter topic, then tests/js/lib/dashboard_browser.mjs loads
# the leader's page and the standby's: no console error and no request off the page's
# origin; the lag plot rises for the partitions of a worker paused with SIGSTOP; once the
# load stopped and the pipeline caught up, every number on the page equals /status; the
# standby's page names the leader; the leader's /status and page list the standby
# (coordinators: role standby, from its record in etcd) after the leader. The screenshot goes to $DASHBOARD_SCREENSHOT (default:
# <build>/dashboard.png; DASHBOARD_SCREENSHOT=docs/images/dashboard.png renews the docs').
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/dash CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_CAPTURES=1 CHAOS_INITIAL_ROWS=200
# a pause long enough to see on the plot before the worker is declared lost
export CHAOS_HEARTBEAT_TIMEOUT=${CHAOS_HEARTBEAT_TIMEOUT:-8}
shot=${DASHBOARD_SCREENSHOT:-$CHAOS_BUILD/dashboard.png}
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT

fail() {
    echo "dashboard_browser: $*" >&2
    tail -n 20 "$CHAOS_DIR"/procs/coordinator-*.log >&2 2>/dev/null
    exit 1
}
command -v chromium >/dev/null || fail "chromium is not installed (tools/setup.sh installs it)"
[ -d tests/js/node_modules/puppeteer-core ] || fail "puppeteer-core is missing (tools/setup.sh)"

pipeline_up || fail "the pipeline did not come up"
leader=$(chaos_leader) || fail "no leader"
standby=coordinator-1
[ "$leader" = coordinator-1 ] && standby=coordinator-0
# every coordinator keeps a record in etcd: the leader's /status lists both, leader first
coords_ok() {
    curl -fsS "http://$(cat "$CHAOS_DIR/procs/$leader.http")/status" | jq -e --arg l "$leader" \
        --arg s "$standby" --arg sa "$(cat "$CHAOS_DIR/procs/$standby.http")" \
        '[.coordinators[] | [.id, .role, .alive]] == [[$l, "leader", true], [$s, "standby", true]]
         and .coordinators[0].term == .term and .coordinators[1].admin == $sa' >/dev/null
}
chaos_wait 30 "the leader's /status to list the standby" coords_ok ||
    fail "the leader's /status does not list the coordinators: $(chaos_status | jq -c .coordinators)"
# a steady load (it runs until the browser test stops it), and one poison record
proc_start load "$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false \
    --rate 150 --duration 600s --report-interval 0
printf 'not json at all\n' | kcat -P -b "$CDC_TEST_KAFKA" -t cdc.public.accounts -k poison -p 3 ||
    fail "could not produce the poison record"
chaos_wait 60 "the poison record in the dead-letter count" bash -c \
    "curl -fsS http://$(cat "$CHAOS_DIR/procs/$leader.http")/status | jq -e '.dlq.total >= 1' >/dev/null" ||
    fail "the poison record was not counted: $(chaos_status | jq -c .dlq)"

mkdir -p "$(dirname "$shot")"
# DASHBOARD_WARMUP=<seconds> lets the history grow first (for a screenshot with more to see)
sleep "${DASHBOARD_WARMUP:-0}"
node tests/js/lib/dashboard_browser.mjs --leader "$(cat "$CHAOS_DIR/procs/$leader.http")" \
    --standby "$(cat "$CHAOS_DIR/procs/$standby.http")" --procs "$CHAOS_DIR/procs" \
    --screenshot "$shot" --load-pid "$(proc_pid load)" || fail "the browser checks failed"
echo "dashboard_browser: ok"
