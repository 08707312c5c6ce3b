#!/usr/bin/env bash
# Recovery benchmark (issue 5): with a coordinator and 3 workers draining a steady stream
# (RATE events/s), kill -9 one worker and measure the time until the next epoch is
# committed to the changelog table (target <= 5 s). ROUNDS rounds; the killed worker is
# restarted between rounds. Defaults: commit interval 1 s, heartbeat timeout 3 s,
# rebalance grace 2 s (the coordinator's defaults). Prints BENCH lines (docs/design.md, "Contracts").
# Runnable directly after make: benchmarks/recovery/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-5000}
bin=$BUILD_DIR/benchmarks/drain/bench_drain
for b in "$bin" "$BUILD_DIR/cdc-coordinator" "$BUILD_DIR/cdc-worker"; do
    [ -x "$b" ] || { echo "bench-recovery: $b not found; run make first" >&2; exit 1; }
done

export CDC_HARNESS_SERVICES="etcd kafka"
# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh
harness_up >/dev/null || { echo "bench-recovery: harness did not start" >&2; exit 1; }
work=$CDC_TEST_TMP
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    harness_down
}
trap cleanup EXIT

prefix=recov$$
wh=$work/warehouse
events=$((RATE * (ROUNDS * 20 + 30)))
"$bin" produce "$CDC_TEST_KAFKA" "$prefix" "$events" "$RATE" >"$work/producer.log" 2>&1 &
pids+=($!)
"$BUILD_DIR/cdc-coordinator" --id=bench --job="$prefix" --etcd="$CDC_TEST_ETCD" \
    --listen=tcp://127.0.0.1:0 --http=127.0.0.1:0 --warehouse="$wh" --orphan-interval=0 \
    --log-level=debug >"$work/coordinator.log" 2>&1 &
pids+=($!)
declare -A wpid
start_worker() {
    "$BUILD_DIR/cdc-worker" --id="w$1" --job="$prefix" --etcd="$CDC_TEST_ETCD" \
        --kafka="$CDC_TEST_KAFKA" --tables=public.items --topic-prefix="$prefix" \
        --warehouse="$wh" --state-dir="$work/state-w$1" --http=127.0.0.1:0 \
        >>"$work/worker-$1.log" 2>&1 &
    wpid[$1]=$!
    pids+=($!)
}
for i in 0 1 2; do start_worker "$i"; done

"$bin" wait-snapshots "$wh" 15 60000 >/dev/null
# steady-state commit latency (before any failure): "checkpoint N committed in X ms"
lat=$(sed -n 's/.*checkpoint [0-9]* committed in \([0-9]*\) ms.*/\1/p' "$work/coordinator.log" |
    tail -n +3 | sort -n)
n=$(printf '%s\n' "$lat" | grep -c . || true)
p50=$(printf '%s\n' "$lat" | awk -v n="$n" 'NR == int((n + 1) / 2) { print; exit }')
p99=$(printf '%s\n' "$lat" | awk -v n="$n" 'NR >= int(n * 0.99 + 0.999) { print; exit }')
echo "steady commit latency at $RATE events/s over $n checkpoints: p50 $p50 ms, p99 $p99 ms"
times=()
for r in $(seq 1 "$ROUNDS"); do
    victim=$(((r - 1) % 3))
    "$bin" wait-snapshots "$wh" 2 30000 >/dev/null
    sleep 0.3 # mid-epoch
    kill -KILL "${wpid[$victim]}"
    wait "${wpid[$victim]}" 2>/dev/null || true
    ms=$("$bin" wait-snapshots "$wh" 1 60000 | sed -n 's/elapsed_ms=//p')
    echo "round $r: kill -9 of w$victim -> next committed epoch in $ms ms"
    times+=("$ms")
    start_worker "$victim"
    "$bin" wait-snapshots "$wh" 3 60000 >/dev/null
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(printf '%s\n' "$sorted" | awk -v n="${#times[@]}" 'NR == int((n + 1) / 2) { print }')
max=$(printf '%s\n' "$sorted" | tail -1)
echo "BENCH steady_commit_latency_p50_ms ${p50:-0} ms"
echo "BENCH steady_commit_latency_p99_ms ${p99:-0} ms"
echo "BENCH recovery_worker_kill_to_commit_median_ms $median ms"
echo "BENCH recovery_worker_kill_to_commit_max_ms $max ms"
