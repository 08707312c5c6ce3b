#!/usr/bin/env bash
# A worker's state directory full (issue 38, "Disk faults"; docs/operations.md, "Disk
# faults"), through the local pipeline under load, with the suite's fault shim
# (tests/faults/diskfault.c) in the workers: every write under worker-0's --state-dir
# fails with ENOSPC (RocksDB cannot write its WAL, tables or checkpoints).
#   - worker-0 reports it: log "the state disk is full", cdc_worker_disk_full{disk="state"}
#     1, /status disk.state.full;
#   - it acks no epoch (nothing it could not make durable is acked), so nothing is
#     committed while the disk is full;
#   - once space returns the job recovers by itself: the worker's stores are restored
#     from their checkpoints, commits go on, the report clears;
# and chaos/verify finds every change once (0 lost, 0 duplicated).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/dfs CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_WORKERS=2 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1 CHAOS_INITIAL_ROWS=50 LOAD_RATE=150
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# shellcheck source=tests/faults/lib.sh
. tests/faults/lib.sh
trap 'disk_fault_off; pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT
fail() { disk_fail disk_full_state "$@"; }
committed_over() { [ "$(pipeline_committed)" -gt "$1" ]; }
worker0_state_full() {
    curl -fsS --max-time 2 "http://$(cat "$CHAOS_DIR/procs/worker-0.http")/status" |
        jq -e ".disk.state.full == $1" >/dev/null
}

pipeline_servers_up
disk_shim_on "$tmp/ctl" || fail "no fault shim (make all builds it)"
pipeline_procs_up
chaos_load_start 60 39

chaos_wait 30 "commits with the load" committed_over 2 || fail "no commits under load"
disk_fault_on "ENOSPC $CHAOS_DIR/state/worker-0/"
chaos_wait 60 "worker-0 reporting its state disk full" worker0_state_full true ||
    fail "worker-0 did not report its full state directory"
c1=$(pipeline_committed)
chaos_wait 30 "more failed state writes" disk_errors_at_least worker state 3 ||
    fail "worker-0 did not keep trying"
c1b=$(pipeline_committed)
[ "$c1b" -le "$((c1 + 1))" ] || fail "epochs $c1..$c1b committed while worker-0 could not write its state"
grep -q 'diskfault: ENOSPC' "$CHAOS_DIR/procs/worker-0.log" || fail "the shim injected nothing"
grep -q 'the state disk is full' "$CHAOS_DIR/procs/worker-0.log" ||
    fail "worker-0 did not log its full state directory"
metric_is worker 'cdc_worker_disk_full{disk="state"}' 1 ||
    fail "worker-0's cdc_worker_disk_full{disk=\"state\"} is not 1"
echo "disk_full_state: worker-0 reports its state directory full, commits stay at $c1b"

disk_fault_off
pipeline_wait_recovered "$c1b" 90 || fail "no commit after space returned"
chaos_wait 30 "worker-0's report cleared" worker0_state_full false ||
    fail "worker-0 still reports its state directory full"
grep -q 'the state disk has space again' "$CHAOS_DIR/procs/worker-0.log" ||
    fail "worker-0 did not log that space returned"
echo "disk_full_state: space returned: committed $(pipeline_committed)"

kill "$LOAD_PID" 2>/dev/null
wait "$LOAD_PID" 2>/dev/null
pipeline_verify --wait 90 >"$tmp/verify.log" 2>&1 || fail "the verifier failed" "$tmp/verify.log"
disk_verified "$tmp/verify.log" || fail "the verifier did not report 0 lost and 0 duplicated" "$tmp/verify.log"
echo "disk_full_state: ok ($(tail -n 1 "$tmp/verify.log"))"
