#!/usr/bin/env bash
# The warehouse's file system full (issue 38, "Disk faults"; docs/operations.md, "Disk
# faults"), through the local pipeline under load, with the suite's fault shim
# (tests/faults/diskfault.c, LD_PRELOAD) in the workers and the coordinator:
#   1. during staging: every write under the warehouse fails with ENOSPC. The workers
#      report it (log "the warehouse disk is full", cdc_worker_disk_full{disk="warehouse"} 1,
#      /status disk.warehouse.full) and ack no epoch, so nothing is committed;
#   2. space returns: a commit follows by itself and the reports clear;
#   3. during a commit: only the tables' metadata writes fail (the staged files are
#      written). The coordinator reports it (log, cdc_coordinator_disk_full{disk="warehouse"}
#      1, /status disk.warehouse.full) and commits nothing;
#   4. space returns: commits resume by themselves;
# and chaos/verify finds every change once in mirror and changelog (0 lost, 0 duplicated):
# the changes waited in Kafka.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/dfw CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_WORKERS=2 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1 CHAOS_INITIAL_ROWS=50 LOAD_RATE=150
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# shellcheck source=tests/faults/lib.sh
. tests/faults/lib.sh
trap 'disk_fault_off; pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT
fail() { disk_fail disk_full_warehouse "$@"; }
committed_over() { [ "$(pipeline_committed)" -gt "$1" ]; }

pipeline_servers_up
disk_shim_on "$tmp/ctl" || fail "no fault shim (make all builds it)"
pipeline_procs_up
WH=$CHAOS_DIR/warehouse
chaos_load_start 60 38 # (stopped before the verifier)

# ---- 1. the warehouse full while the workers stage ------------------------------------------
chaos_wait 30 "commits with the load" committed_over 2 ||
    fail "no commits under load"
disk_fault_on "ENOSPC $WH/"
chaos_wait 60 "a worker that reports the warehouse full" workers_report warehouse true ||
    fail "no worker reported the full warehouse"
c1=$(pipeline_committed)
# a few more barriers pass while it is full: nothing is committed
chaos_wait 30 "more failed writes" disk_errors_at_least worker warehouse 3 ||
    fail "the workers did not keep trying"
c1b=$(pipeline_committed)
[ "$c1b" -le "$((c1 + 1))" ] || fail "epochs $c1..$c1b committed while the warehouse was full"
grep -q 'diskfault: ENOSPC' "$CHAOS_DIR"/procs/worker-*.log || fail "the shim injected nothing"
grep -q 'the warehouse disk is full' "$CHAOS_DIR"/procs/worker-*.log ||
    fail "no worker logged the full warehouse"
metric_is worker 'cdc_worker_disk_full{disk="warehouse"}' 1 ||
    fail "no worker's cdc_worker_disk_full{disk=\"warehouse\"} is 1"
echo "disk_full_warehouse: staging full: the workers report it, commits stay at $c1b"

# ---- 2. space returns ---------------------------------------------------------------------
disk_fault_off
pipeline_wait_recovered "$c1b" 90 || fail "no commit after space returned"
chaos_wait 30 "the workers' reports cleared" workers_report warehouse false ||
    fail "a worker still reports the warehouse full"
grep -q 'the warehouse disk has space again' "$CHAOS_DIR"/procs/worker-*.log ||
    fail "no worker logged that space returned"
echo "disk_full_warehouse: space returned: committed $(pipeline_committed)"

# ---- 3. the warehouse full while the coordinator commits ------------------------------------
c3=$(pipeline_committed)
disk_fault_on "ENOSPC /metadata/"
chaos_wait 60 "the coordinator reporting the warehouse full" coordinator_reports true ||
    fail "the coordinator did not report the full warehouse"
chaos_wait 30 "more failed commits" disk_errors_at_least coordinator warehouse 3 ||
    fail "the coordinator did not retry its commit"
c3b=$(pipeline_committed)
[ "$c3b" -le "$((c3 + 1))" ] || fail "epochs $c3..$c3b committed while the metadata could not be written"
grep -q 'the warehouse disk is full: Iceberg commits stop' "$CHAOS_DIR/procs/coordinator-0.log" ||
    fail "the coordinator did not log the full warehouse"
metric_is coordinator 'cdc_coordinator_disk_full{disk="warehouse"}' 1 ||
    fail "cdc_coordinator_disk_full{disk=\"warehouse\"} is not 1"
chaos_status | jq -e '.last_commit_error | test("No space left on device")' >/dev/null ||
    fail "last_commit_error: $(chaos_status | jq -c .last_commit_error)"
echo "disk_full_warehouse: commit full: the coordinator reports it, commits stay at $c3b"

# ---- 4. space returns ---------------------------------------------------------------------
disk_fault_off
pipeline_wait_recovered "$c3b" 90 || fail "no commit after space returned"
chaos_wait 30 "the coordinator's report cleared" coordinator_reports false ||
    fail "the coordinator still reports the warehouse full"
metric_is coordinator 'cdc_coordinator_disk_full{disk="warehouse"}' 0 ||
    fail "cdc_coordinator_disk_full{disk=\"warehouse\"} is not 0 again"

kill "$LOAD_PID" 2>/dev/null
wait "$LOAD_PID" 2>/dev/null
pipeline_verify --wait 90 >"$tmp/verify.log" 2>&1 || fail "the verifier failed" "$tmp/verify.log"
disk_verified "$tmp/verify.log" || fail "the verifier did not report 0 lost and 0 duplicated" "$tmp/verify.log"
echo "disk_full_warehouse: ok ($(tail -n 1 "$tmp/verify.log"))"
