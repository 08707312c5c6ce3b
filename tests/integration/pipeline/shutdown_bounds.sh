#!/usr/bin/env bash
# Bounded shutdown under a backlog (docs/operations.md, "Stopping"): the local pipeline
# (two captures, two coordinators, three workers) with a backlog built while the workers
# were stopped and a load at full speed running; SIGTERM goes to a worker, to the
# leading coordinator and to the capture that streams the slot, one after the other. Each
# must exit with status 0 within 10 s. Then etcd stops with epochs in flight and the
# leader gets SIGTERM: it too stops in time, and the standby takes over once etcd is back.
# Each is started again, and the verifier
# (icebird) must find the mirror equal to the source and every change in the changelog
# once: 0 lost, 0 duplicated. The capture writes uncompressed topics here.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/stop CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_INITIAL_ROWS=100
# uncompressed topics: the backlog that once stalled silently on the development broker
# (docs/worker.md, "Known issues") must drain here too
export CDC_KAFKA_COMPRESSION=${CDC_KAFKA_COMPRESSION:-none}
BOUND=${SHUTDOWN_BOUND:-10}
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT

fail() {
    echo "shutdown_bounds: $*" >&2
    exit 1
}

# term <target> <program>: SIGTERM to one process (not its group: it must stop on its
# own), waits for it to exit, prints the time it took; fails past the bound, or when its
# log does not end with its clean stop ("cdc-<program> stopped", logged on status 0).
term() {
    local t=$1 prog=$2 pid start ms
    pid=$(proc_pid "$t") || fail "no pid for $t"
    start=$(date +%s%N)
    kill -TERM "$pid" || fail "could not signal $t"
    for ((i = 0; i < BOUND * 20; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
        proc_signal "$t" KILL
        fail "$t did not exit within ${BOUND}s of SIGTERM"
    fi
    ms=$((($(date +%s%N) - start) / 1000000))
    grep -q "cdc-$prog stopped" "$CHAOS_DIR/procs/$t.log" ||
        fail "$t did not stop cleanly: $(tail -n 3 "$CHAOS_DIR/procs/$t.log")"
    echo "$t: exited cleanly ${ms} ms after SIGTERM"
}

pipeline_up || fail "the pipeline did not come up"
# a backlog: the workers stopped while the load runs
for w in $(chaos_targets worker); do proc_signal "$w" STOP; done
"$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false --rate 0 \
    --max-transactions 6000 --report-interval 0 >"$tmp/load.log" 2>&1 || fail "the load failed"
for w in $(chaos_targets worker); do proc_signal "$w" CONT; done
# the workers work through it (resumed past the heartbeat timeout: they rejoin)
chaos_wait 60 "the workers to commit again" pipeline_ready || fail "no recovery after the pause"
before=$(pipeline_committed)
# and changes streaming all along, at full speed
proc_start load "$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false \
    --rate 0 --duration 15s --report-interval 0

term worker-1 worker
leader=$(chaos_leader) || fail "no leader"
term "$leader" coordinator
capture=$(chaos_active_capture)
term "$capture" capture

proc_restart worker-1
proc_restart "$leader"
proc_restart "$capture"
chaos_wait 60 "the load to end" bash -c "! kill -0 $(proc_pid load) 2>/dev/null" ||
    fail "the load did not end"
pipeline_wait_recovered "$before" 90 || fail "the pipeline did not commit again"

# etcd down with epochs in flight (barriers go on until 8 are open): the leader's SIGTERM
# cannot resign its lease and must still stop in time; the standby leads once etcd is back
before=$(pipeline_committed)
leader=$(chaos_leader) || fail "no leader"
status_of() { curl -fsS "http://$(cat "$CHAOS_DIR/procs/$1.http")/status"; }
next=$(status_of "$leader" | jq '.epochs.next')
harness_etcd_stop
chaos_wait 10 "epochs begun with etcd down" bash -c \
    "curl -fsS http://\$(cat '$CHAOS_DIR/procs/$leader.http')/status | jq -e '.epochs.next >= $next + 2' >/dev/null" ||
    fail "no epoch begun with etcd down"
term "$leader" coordinator
harness_etcd_start || fail "etcd did not start again"
proc_restart "$leader"
pipeline_wait_recovered "$before" 90 || fail "the pipeline did not commit again"
pipeline_verify --wait 120 >"$tmp/verify.log" 2>&1 || {
    cat "$tmp/verify.log" >&2
    fail "the verifier failed"
}
tail -n 1 "$tmp/verify.log"
echo "shutdown_bounds: ok"
