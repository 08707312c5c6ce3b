#!/usr/bin/env bash
# /healthz and /readyz of the three programs as Kubernetes' probes see them
# (docs/deployment.md, "Health and readiness"), with real processes against the
# harness's etcd, development Kafka broker and PostgreSQL:
#   - coordinators: the leader (RUNNING) and the standby are both ready, and the standby
#     answers /status with the leader's document (?local=1: its own); a wedged leader
#     loop (test-only fault CDC_FAULT=wedge-loop:<file>) turns /healthz to 503 naming
#     --liveness-timeout, and back to 200 once the loop turns again;
#   - a worker: the same wedge, the same 503 and recovery;
#   - a leader whose restart strategy gave up (FAILED): /healthz and /readyz 503;
#   - captures: a wedged streaming capture fails /healthz, while the standby capture,
#     waiting for the slot far longer than its liveness timeout, stays healthy.
set -euo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
: "${CDC_TEST_ETCD:?}" "${CDC_TEST_KAFKA:?}" "${CDC_TEST_PG_DSN:?}" "${CDC_BUILD_DIR:?}"
cd "$(dirname "$0")/../../.."
# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh

dir=$(mktemp -d "$CDC_TEST_TMP/health.XXXXXX")
job=health$$
slot=health_$$
pids=()
cleanup() {
    local p
    rm -f "$dir"/wedge-*
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    psql -X -q -d "$CDC_TEST_PG_DSN" -c "SELECT pg_drop_replication_slot('$slot')
        FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { harness_fail_logs "$dir" "$@"; }

# code <addr> <path>: the HTTP status of a GET (000 when nothing answered)
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://$1$2" || true; }
body() { curl -s --max-time 3 "http://$1$2" || true; }
is() { [ "$(code "$1" "$2")" = "$3" ]; }

coordinator() { # <id> <admin> [extra options...]
    local id=$1 admin=$2
    shift 2
    "$CDC_BUILD_DIR/cdc-coordinator" --id "$id" --job "${JOB:-$job}" --etcd "$CDC_TEST_ETCD" \
        --listen tcp://127.0.0.1:0 --http "$admin" --warehouse "$dir/warehouse" \
        --heartbeat-timeout 2s --rebalance-grace 200ms --restart-delay 100ms \
        --expected-workers 1 --orphan-interval 0 --liveness-timeout 1s "$@" \
        >"$dir/coordinator-$id.log" 2>&1 &
    pids+=($!)
}
worker() { # <id> <admin>
    "$CDC_BUILD_DIR/cdc-worker" --id "$1" --job "${JOB:-$job}" --etcd "$CDC_TEST_ETCD" \
        --kafka "$CDC_TEST_KAFKA" --tables public.health --topic-prefix "$job" \
        --warehouse "$dir/warehouse" --state-dir "$dir/state-$1" --http "$2" \
        --heartbeat-interval 200ms --liveness-timeout 1s >"$dir/worker-$1.log" 2>&1 &
    pids+=($!)
}
state() { body "$1" "/status?local=1" | jq -r .state; }
running() { [ "$(state "$1")" = RUNNING ]; }

# -- coordinators: leader and standby --------------------------------------------------
c1=127.0.0.1:$(harness_free_port)
c2=127.0.0.1:$(harness_free_port)
w1=127.0.0.1:$(harness_free_port)
CDC_FAULT=wedge-loop:$dir/wedge-c1 coordinator c1 "$c1"
harness_wait_for 30 is "$c1" /healthz 200 || fail "c1's admin API did not come up"
coordinator c2 "$c2"
CDC_FAULT=wedge-loop:$dir/wedge-w1 worker w1 "$w1"
harness_wait_for 30 running "$c1" || fail "c1 did not lead a RUNNING job: $(state "$c1")"
harness_wait_for 30 is "$c2" /healthz 200 || fail "c2's admin API did not come up"
[ "$(state "$c2")" = STANDBY ] || fail "c2 is not the standby: $(state "$c2")"
is "$c1" /readyz 200 || fail "the RUNNING leader is not ready: $(body "$c1" /readyz)"
is "$c2" /readyz 200 || fail "the standby is not ready: $(body "$c2" /readyz)"
# the standby answers /status with the leader's document
leader_doc() { [ "$(body "$c2" /status | jq -r '.id + " " + (.is_leader | tostring)')" = "c1 true" ]; }
harness_wait_for 10 leader_doc || fail "the standby's /status is not the leader's: $(body "$c2" /status | head -c 300)"
[ "$(body "$c1" /status | jq -r .id)" = c1 ] || fail "the leader's own /status"
harness_wait_for 30 is "$w1" /readyz 200 || fail "w1 is not ready: $(body "$w1" /readyz)"

# -- a wedged loop fails /healthz, and recovers ------------------------------------------
wedge() { # <name> <addr>: wedge, see 503 with the reason, unwedge, see 200
    local name=$1 addr=$2 b
    touch "$dir/wedge-$name"
    harness_wait_for 10 is "$addr" /healthz 503 || fail "$name: /healthz did not fail while wedged"
    b=$(body "$addr" /healthz)
    case "$b" in
    "unhealthy: main loop has not turned for "*"(--liveness-timeout 1000 ms)"*) ;;
    *) fail "$name: /healthz said \"$b\"" ;;
    esac
    rm -f "$dir/wedge-$name"
    harness_wait_for 10 is "$addr" /healthz 200 || fail "$name: /healthz did not recover"
}
wedge w1 "$w1"
is "$c1" /healthz 200 || fail "c1 unhealthy while only w1 was wedged"
wedge c1 "$c1"
is "$c2" /healthz 200 || fail "the standby unhealthy while the leader was wedged"
harness_wait_for 30 running "$c1" || fail "c1 did not go on RUNNING after the wedge"

# -- a FAILED leader is unhealthy and not ready --------------------------------------------
# one failure tolerated per 5 minutes: a worker killed twice fails the job
c3=127.0.0.1:$(harness_free_port)
w2=127.0.0.1:$(harness_free_port)
JOB=${job}f coordinator c3 "$c3" --restart-max-failures 1 --restart-interval 5m
for round in 1 2; do
    JOB=${job}f worker w2 "$w2"
    wpid=${pids[-1]}
    harness_wait_for 30 running "$c3" || fail "c3 not RUNNING before kill $round: $(state "$c3")"
    kill -KILL "$wpid"
    wait "$wpid" 2>/dev/null || true
    if [ "$round" = 1 ]; then
        harness_wait_for 10 bash -c "[ \"\$(curl -s 'http://$c3/status?local=1' | jq -r .state)\" = RECOVERING ]" ||
            fail "c3 did not recover after the first kill"
    fi
done
harness_wait_for 15 is "$c3" /healthz 503 || fail "the FAILED leader's /healthz: $(body "$c3" /healthz)"
failed() { [ "$(state "$c3")" = FAILED ]; }
harness_wait_for 5 failed || fail "c3 is $(state "$c3"), not FAILED" # /status: every 200 ms
case "$(body "$c3" /healthz)" in "unhealthy: job FAILED"*) ;; *) fail "c3 /healthz: $(body "$c3" /healthz)" ;; esac
is "$c3" /readyz 503 || fail "the FAILED leader is ready"

# -- captures: wedged streaming capture, healthy standby -----------------------------------
psql -X -q -v ON_ERROR_STOP=1 -d "$CDC_TEST_PG_DSN" \
    -c "CREATE TABLE IF NOT EXISTS public.health (id int PRIMARY KEY, v text)" >/dev/null
capture() { # <name> <admin>
    CDC_FAULT=wedge-loop:$dir/wedge-$1 "$CDC_BUILD_DIR/cdc-capture" --pg-dsn "$CDC_TEST_PG_DSN" \
        --kafka "$CDC_TEST_KAFKA" --slot "$slot" --publication "$slot" --topic-prefix "$job" \
        --tables public.health --create-publication --http "$2" --liveness-timeout 1s \
        >"$dir/capture-$1.log" 2>&1 &
    pids+=($!)
}
k1=127.0.0.1:$(harness_free_port)
k2=127.0.0.1:$(harness_free_port)
capture k1 "$k1"
harness_wait_for 30 is "$k1" /readyz 200 || fail "capture k1 is not streaming: $(body "$k1" /readyz)"
capture k2 "$k2"
harness_wait_for 30 bash -c "curl -s 'http://$k2/status' | jq -e '.state == \"standby\"'" ||
    fail "capture k2 is not the standby: $(body "$k2" /status | head -c 200)"
wedge k1 "$k1"
sleep 2 # a negative check: the standby waits twice its liveness timeout
is "$k2" /healthz 200 || fail "the standby capture is unhealthy: $(body "$k2" /healthz)"
is "$k2" /readyz 503 || fail "the standby capture is ready"
echo "health_probes: ok"
