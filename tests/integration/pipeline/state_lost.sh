#!/usr/bin/env bash
# A worker's RocksDB state deleted or corrupted while it is stopped (issue 38, "Disk
# faults"; docs/operations.md, "Disk faults"), through the local pipeline under load:
# worker-0 is killed, and before it restarts half of its partition stores are deleted and
# the others corrupted as a crash or a failing disk leaves them (CURRENT and MANIFEST
# overwritten in place with garbage, the live WAL cut in half, every table file replaced
# by garbage of the same size). The restarted worker:
#   - trusts nothing it left: it says so (log "discarding the state an earlier process
#     left", cdc_worker_state_discarded_total) and restores every store from the shared
#     checkpoint of its assignment (log "restored from shared checkpoint",
#     cdc_worker_state_restores_total{from="shared"});
#   - gives no wrong dedup answer: chaos/verify finds every change once (0 lost, 0
#     duplicated), with the changes after the checkpoint replayed from Kafka through the
#     restored positions.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/sl CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
# (one worker: it owns every partition before and after its restart)
export CHAOS_WORKERS=1 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1 CHAOS_INITIAL_ROWS=50 LOAD_RATE=150
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# shellcheck source=tests/faults/lib.sh
. tests/faults/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT
fail() { disk_fail state_lost "$@"; }
committed_over() { [ "$(pipeline_committed)" -gt "$1" ]; }
metric_at_least() { # <series> <n>: worker-0 exposes the series at n or more
    local v
    v=$(curl -fsS --max-time 2 "http://$(cat "$CHAOS_DIR/procs/worker-0.http")/metrics" |
        awk -v s="$1" '$1 == s {print $2}')
    [ -n "$v" ] && [ "${v%.*}" -ge "$2" ]
}

pipeline_servers_up
pipeline_procs_up
chaos_load_start 60 40
chaos_wait 30 "commits with the load" committed_over 3 || fail "no commits under load"
# the worker's stores have table files too (flushed at their first checkpoints or later)
proc_signal worker-0 KILL
chaos_wait 10 "worker-0 to exit" bash -c "! kill -0 $(proc_pid worker-0) 2>/dev/null" ||
    fail "worker-0 did not die"
state=$CHAOS_DIR/state/worker-0
mapfile -t parts < <(find "$state" -mindepth 1 -maxdepth 1 -type d -name 'p*' | sort)
[ "${#parts[@]}" -gt 1 ] || fail "worker-0 left no partition stores in $state"
deleted=0 corrupted=0
for ((k = 0; k < ${#parts[@]}; k++)); do
    p=${parts[k]}
    if ((k % 2 == 0)); then
        rm -rf "$p" && deleted=$((deleted + 1))
        continue
    fi
    # every store of the partition (live and checkpoint copies)
    while IFS= read -r f; do
        case "$f" in
        */CURRENT | */MANIFEST-*) head -c 200 /dev/urandom | dd of="$f" conv=notrunc status=none ;;
        *.log) truncate -s "$(($(stat -c %s "$f") / 2))" "$f" ;;
        *.sst) # a new file (a table file is a hard link the warehouse shares)
            sz=$(stat -c %s "$f") && rm -f "$f" && head -c "$sz" /dev/urandom >"$f" ;;
        esac
    done < <(find "$p" -type f)
    corrupted=$((corrupted + 1))
done
echo "state_lost: worker-0 stopped; $deleted partition stores deleted, $corrupted corrupted"

c=$(pipeline_committed)
proc_restart worker-0
pipeline_wait_recovered "$c" 90 || fail "no commit with worker-0 back"
grep -q 'discarding the state an earlier process left' "$CHAOS_DIR/procs/worker-0.log" ||
    fail "worker-0 did not say that it discarded the state it found"
grep -q 'state restored from shared checkpoint' "$CHAOS_DIR/procs/worker-0.log" ||
    fail "worker-0 did not restore from the shared checkpoints"
metric_at_least 'cdc_worker_state_discarded_total' "$corrupted" ||
    fail "cdc_worker_state_discarded_total is below $corrupted"
metric_at_least 'cdc_worker_state_restores_total{from="shared"}' 1 ||
    fail "no cdc_worker_state_restores_total{from=\"shared\"}"

kill "$LOAD_PID" 2>/dev/null
wait "$LOAD_PID" 2>/dev/null
pipeline_verify --wait 90 >"$tmp/verify.log" 2>&1 || fail "the verifier failed" "$tmp/verify.log"
disk_verified "$tmp/verify.log" || fail "the verifier did not report 0 lost and 0 duplicated" "$tmp/verify.log"
echo "state_lost: ok ($(tail -n 1 "$tmp/verify.log"))"
