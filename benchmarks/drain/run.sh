#!/usr/bin/env bash
# Drain benchmark (issue 5): 3 workers drain a backlog of EVENTS (1,000,000) capture-format
# change events from the development broker into the mirror and changelog tables, while
# `kcat -C -e` reading the same topic to /dev/null in the same run is the baseline.
# Figures: events/s of both and the ratio, commit latency barrier -> visible snapshot
# (p50/p99, from the coordinator's per-checkpoint log lines, commit interval 1 s) and the
# peak RSS of the workers. Starts its own etcd and broker through tests/harness.
# Runnable directly after make: benchmarks/drain/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
EVENTS=${EVENTS:-1000000}
WORKERS=${WORKERS:-3}
bin=$BUILD_DIR/benchmarks/drain/bench_drain
for b in "$bin" "$BUILD_DIR/cdc-coordinator" "$BUILD_DIR/cdc-worker"; do
    [ -x "$b" ] || { echo "bench-drain: $b not found; run make first" >&2; exit 1; }
done
command -v kcat >/dev/null || { echo "bench-drain: kcat not installed" >&2; exit 1; }

export CDC_HARNESS_SERVICES="etcd kafka"
# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh
harness_up >/dev/null || { echo "bench-drain: harness did not start" >&2; exit 1; }
work=$CDC_TEST_TMP
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    harness_down
}
trap cleanup EXIT

prefix=bench$$
topic=$prefix.public.items
echo "producing $EVENTS events into $topic"
"$bin" produce "$CDC_TEST_KAFKA" "$prefix" "$EVENTS"

# baseline: kcat reads the whole topic once
t0=$(date +%s.%N)
kcat -C -b "$CDC_TEST_KAFKA" -t "$topic" -o beginning -e -q >/dev/null
t1=$(date +%s.%N)
kcat_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
echo "kcat: $EVENTS events in $kcat_s s"

wh=$work/warehouse
"$BUILD_DIR/cdc-coordinator" --id=bench --job="$prefix" --etcd="$CDC_TEST_ETCD" \
    --listen=tcp://127.0.0.1:0 --http=127.0.0.1:0 --warehouse="$wh" \
    --commit-interval=1s --rebalance-grace=1s --expected-workers="$WORKERS" --orphan-interval=0 \
    --log-level=debug \
    >"$work/coordinator.log" 2>&1 &
pids+=($!)
t0=$(date +%s.%N)
wpids=()
for i in $(seq 0 $((WORKERS - 1))); do
    "$BUILD_DIR/cdc-worker" --id="w$i" --job="$prefix" --etcd="$CDC_TEST_ETCD" \
        --kafka="$CDC_TEST_KAFKA" --tables=public.items --topic-prefix="$prefix" \
        --warehouse="$wh" --state-dir="$work/state-w$i" --http=127.0.0.1:0 \
        >"$work/worker-$i.log" 2>&1 &
    pids+=($!)
    wpids+=($!)
done
"$bin" wait-offsets "$wh" "$topic" "$EVENTS" 1800000
t1=$(date +%s.%N)
ours_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
echo "pipeline: $EVENTS events into mirror + changelog in $ours_s s (from worker start)"

rss_kb=0
cpu_ticks=0
for p in "${wpids[@]}"; do
    r=$(awk '/VmHWM/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0)
    [ "${r:-0}" -gt "$rss_kb" ] && rss_kb=$r
    # utime + stime of the worker (fields 14 and 15 after the "(comm)" field)
    t=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }' || echo 0)
    cpu_ticks=$((cpu_ticks + ${t:-0}))
done
cpu_s=$(awk -v t="$cpu_ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')

# commit latency: "checkpoint N committed in X ms" (debug lines of the coordinator)
lat=$(sed -n 's/.*checkpoint [0-9]* committed in \([0-9]*\) ms.*/\1/p' "$work/coordinator.log" | sort -n)
n=$(printf '%s\n' "$lat" | grep -c . || true)
p50=$(printf '%s\n' "$lat" | awk -v n="$n" 'NR == int((n + 1) * 0.5) || (NR == 1 && n < 2) { print; exit }')
p99=$(printf '%s\n' "$lat" | awk -v n="$n" 'NR >= int(n * 0.99 + 0.999) { print; exit }')
echo "commit latency over $n checkpoints: p50 ${p50:-?} ms, p99 ${p99:-?} ms"

awk -v n="$EVENTS" -v o="$ours_s" -v k="$kcat_s" 'BEGIN {
    ours = n / o; base = n / k
    printf "BENCH drain_events_per_s %.0f events/s baseline=%.0f ratio=%.3f\n", ours, base, ours / base
}'
echo "BENCH drain_commit_latency_p50_ms ${p50:-0} ms"
echo "BENCH drain_commit_latency_p99_ms ${p99:-0} ms"
echo "BENCH drain_worker_peak_rss_mb $((rss_kb / 1024)) MB"
awk -v c="$cpu_s" -v n="$EVENTS" 'BEGIN {
    printf "BENCH drain_worker_cpu_per_event_us %.1f us (worker utime+stime %.2f s)\n", c * 1e6 / n, c
}'
