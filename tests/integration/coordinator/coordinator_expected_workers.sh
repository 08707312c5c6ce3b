#!/usr/bin/env bash
# --expected-workers: a new leader of a job without history makes its first assignment as
# soon as that many workers registered, not after --rebalance-grace (here 10 minutes, so
# only the option can explain an assignment). With one of the two workers registered it
# must not assign yet. Real coordinator and worker processes against the harness's etcd
# and development broker. Needs the harness environment.
set -euo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
: "${CDC_TEST_ETCD:?}" "${CDC_TEST_KAFKA:?}" "${CDC_BUILD_DIR:?}"
cd "$(dirname "$0")/../../.."
# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh

dir=$(mktemp -d "$CDC_TEST_TMP/expected.XXXXXX")
job=expected$$
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() { harness_fail_logs "$dir" "$@"; }

wait_for() { harness_wait_for "$@"; }

admin=127.0.0.1:$(harness_free_port)
"$CDC_BUILD_DIR/cdc-coordinator" --id c1 --job "$job" --etcd "$CDC_TEST_ETCD" \
    --listen tcp://127.0.0.1:0 --http "$admin" --warehouse "$dir/warehouse" \
    --rebalance-grace 600s --expected-workers 2 >"$dir/coordinator.log" 2>&1 &
pids+=($!)

status() { curl -sf --max-time 2 "http://$admin/status"; }
alive() { [ "$(status | jq '[.workers[] | select(.alive)] | length')" -ge "$1" ]; }
assigned() { [ "$(status | jq '[.assignment[] | select(.owner != "")] | length')" -eq 12 ]; }

worker() {
    "$CDC_BUILD_DIR/cdc-worker" --id "$1" --job "$job" --etcd "$CDC_TEST_ETCD" \
        --kafka "$CDC_TEST_KAFKA" --tables public.expected --topic-prefix "$job" \
        --warehouse "$dir/warehouse" --state-dir "$dir/state-$1" --http 127.0.0.1:0 \
        >"$dir/worker-$1.log" 2>&1 &
    pids+=($!)
}

wait_for 30 status || fail "the coordinator's admin API did not come up"
worker w1
wait_for 30 alive 1 || fail "worker w1 did not register"
# one of two: the leader keeps waiting (the grace is 10 minutes)
sleep 1 # a negative check: give a wrong assignment the time to show
assigned && fail "assigned with 1 of the 2 expected workers"
worker w2
wait_for 30 assigned || fail "no assignment within 30 s of the second worker"
[ "$(status | jq '[.assignment[].owner] | unique | length')" -eq 2 ] ||
    fail "the 12 partitions are not spread over both workers: $(status | jq -c '[.assignment[].owner]')"
echo "coordinator_expected_workers: ok"
