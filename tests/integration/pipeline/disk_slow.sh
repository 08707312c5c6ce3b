#!/usr/bin/env bash
# Slow storage (issue 38, "Disk faults"; docs/operations.md, "Disk faults"), through the
# local pipeline under load: with the suite's fault shim (tests/faults/diskfault.c) every
# fsync, rename and link under the warehouse waits 300 ms, in the workers (staged files,
# state checkpoints) and the coordinator (manifests, metadata), so that a commit takes
# seconds. Freshness degrades, correctness holds:
#   - commits go on (at least 3 while the storage is slow), and they take seconds (the
#     slowest checkpoint in the leader's /status took 1 s or more: the delay bit);
#   - no barrier misses its ack deadline: the coordinator recovers the job not once;
#   - the epochs recorded while a commit ran share the next commit's snapshots (group
#     commits, docs/iceberg.md): /status counts epochs grouped;
# and chaos/verify finds every change once (0 lost, 0 duplicated).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/ds CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_WORKERS=2 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1 CHAOS_INITIAL_ROWS=50 LOAD_RATE=150
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# shellcheck source=tests/faults/lib.sh
. tests/faults/lib.sh
trap 'disk_fault_off; pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT
fail() { disk_fail disk_slow "$@"; }
committed_over() { [ "$(pipeline_committed)" -gt "$1" ]; }
recoveries() { grep -c 'recovering job' "$CHAOS_DIR/procs/coordinator-0.log"; }

pipeline_servers_up
disk_shim_on "$tmp/ctl" || fail "no fault shim (make all builds it)"
pipeline_procs_up
chaos_load_start 60 41
chaos_wait 30 "commits with the load" committed_over 2 || fail "no commits under load"

r0=$(recoveries)
c0=$(pipeline_committed)
disk_fault_on "DELAY 300 $CHAOS_DIR/warehouse/"
chaos_wait 90 "3 commits on slow storage" committed_over "$((c0 + 3))" ||
    fail "commits did not go on with slow storage (at $(pipeline_committed), from $c0)"
grep -q 'diskfault: DELAY' "$CHAOS_DIR/procs/coordinator-0.log" || fail "the shim delayed nothing"
slowest=$(chaos_status | jq "[.checkpoints[] | select(.epoch > $c0) | .duration_ms] | max // 0")
[ "$slowest" -ge 1000 ] || fail "the slowest commit took $slowest ms: the storage was not slow"
grouped() { chaos_status | jq '.epochs.grouped // 0'; }
grouped_over() { [ "$(grouped)" -gt "$1" ]; }
chaos_wait 90 "epochs sharing snapshots" grouped_over 0 || fail "no epochs were grouped while commits took seconds (.epochs in /status: $(chaos_status | jq -c .epochs), checkpoints: $(chaos_status | jq -c "[.checkpoints[] | [.epoch, .tables, .data_files, .duration_ms]]"))"
r1=$(recoveries)
[ "$r1" = "$r0" ] || fail "the job recovered $((r1 - r0)) times while the storage was slow: $(grep 'recovering job' "$CHAOS_DIR/procs/coordinator-0.log" | tail -n 3)"
echo "disk_slow: slow storage: committed $c0 -> $(pipeline_committed), slowest commit $slowest ms, $(grouped) epochs grouped, no recovery"
disk_fault_off

kill "$LOAD_PID" 2>/dev/null
wait "$LOAD_PID" 2>/dev/null
pipeline_verify --wait 90 >"$tmp/verify.log" 2>&1 || fail "the verifier failed" "$tmp/verify.log"
disk_verified "$tmp/verify.log" || fail "the verifier did not report 0 lost and 0 duplicated" "$tmp/verify.log"
echo "disk_slow: ok ($(tail -n 1 "$tmp/verify.log"))"
