#!/usr/bin/env bash
# Capture benchmark (make bench-capture): builds one backlog of changes in two pgoutput
# slots of the harness PostgreSQL (a 1,000,000-row INSERT transaction plus 200
# transactions of 1,000 UPDATEs), then drains one slot with cdc-capture into the
# development Kafka broker (until PostgreSQL shows the end of the backlog confirmed,
# i.e. every event acked by Kafka) and the other with pg_recvlogical (pgoutput,
# proto_version 1, the same publication) into /dev/null. Prints BENCH lines
# (docs/design.md, "Contracts"): changes/s of both and their ratio, and the capture's peak RSS.
# Knobs: BENCH_ROWS (default 1000000), BENCH_UPDATE_TX (default 200, 1000 rows each),
# BENCH_CAPTURE_ARGS (extra cdc-capture flags).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
rows=${BENCH_ROWS:-1000000}
utx=${BENCH_UPDATE_TX:-200}
changes=$((rows + utx * 1000))
bin=$BUILD_DIR/cdc-capture
if [ ! -x "$bin" ]; then
    echo "bench-capture: $bin not found; run make first" >&2
    exit 1
fi
if [ -z "${CDC_TEST_PG_DSN:-}" ] || [ -z "${CDC_TEST_KAFKA:-}" ]; then
    # shellcheck source=tests/harness/harness.sh
    . tests/harness/harness.sh
    CDC_HARNESS_SERVICES="pg kafka" harness_up >/dev/null ||
        { echo "bench-capture: harness did not start" >&2; exit 1; }
    trap 'harness_down' EXIT
fi
dsn=$CDC_TEST_PG_DSN
now_ms() { date +%s%3N; }
q() { psql "$dsn" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

q "DROP TABLE IF EXISTS bench_capture" >/dev/null
q "CREATE TABLE bench_capture (id bigint PRIMARY KEY, v int NOT NULL, amount numeric(12,2),
   note text, at timestamptz)"
q "DROP PUBLICATION IF EXISTS bench_pub; CREATE PUBLICATION bench_pub FOR TABLE bench_capture"
for s in bench_cdc bench_recv; do
    q "SELECT pg_drop_replication_slot('$s') FROM pg_replication_slots WHERE slot_name = '$s'" \
        >/dev/null
    q "SELECT pg_create_logical_replication_slot('$s', 'pgoutput')" >/dev/null
done

echo "bench-capture: writing the backlog ($changes changes)"
q "INSERT INTO bench_capture SELECT g, 0, (g % 100000) / 100.0, md5(g::text),
   '2024-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, $rows) g"
for ((t = 0; t < utx; t++)); do
    echo "UPDATE bench_capture SET v = v + 1 WHERE id > $((t * 1000)) AND id <= $((t * 1000 + 1000));"
done | psql "$dsn" -Xq -v ON_ERROR_STOP=1 >/dev/null
endpos=$(q "SELECT pg_logical_emit_message(true, 'bench.end', '')")
endnum=$(q "SELECT '$endpos'::pg_lsn - '0/0'::pg_lsn")

# --- cdc-capture -------------------------------------------------------------------
# The capture's clock stops when PostgreSQL shows the end of the backlog confirmed. That
# is polled every 50 ms over ONE psql session (a coprocess) and the peak RSS is read with
# shell builtins: starting psql (and a server backend) plus awk 20 times a second costs
# about 35 ms of CPU per poll, most of a core on this 2-core machine, charged to the
# measurement of the capture while pg_recvlogical's run (--endpos) needs no polling.
log=$(mktemp)
coproc POLL { psql "$dsn" -XAtq -v ON_ERROR_STOP=1 2>&1; }
poll_in=${POLL[1]}
poll_out=${POLL[0]}
hwm() { # VmHWM of pid $1 in kB (0 when gone)
    local k v _ r=0
    while read -r k v _; do [ "$k" = VmHWM: ] && r=$v; done 2>/dev/null <"/proc/$1/status"
    echo "$r"
}
cpu_ticks() { # utime + stime of pid $1 (all its threads), in clock ticks; empty when gone
    local l f
    read -r l 2>/dev/null <"/proc/$1/stat" || return 0
    read -ra f <<<"${l##*) }"
    echo $((f[11] + f[12]))
}
start=$(now_ms)
"$bin" --pg-dsn="$dsn" --kafka-bootstrap="$CDC_TEST_KAFKA" --slot=bench_cdc \
    --publication=bench_pub --tables=public.bench_capture --topic-prefix=bench \
    --snapshot-mode=never --heartbeat-interval=0 --http-addr= --log-level=warn \
    ${BENCH_CAPTURE_ARGS:-} >"$log" 2>&1 &
pid=$!
peak=0
wal_pid=0
wal_ticks=0
while :; do
    echo "SELECT confirmed_flush_lsn - '0/0'::pg_lsn >= $endnum, coalesce(active_pid, 0)
          FROM pg_replication_slots WHERE slot_name = 'bench_cdc';" >&"$poll_in"
    reply=
    read -r -t 60 reply <&"$poll_out" || { echo "bench-capture: polling psql failed" >&2; exit 1; }
    done_=${reply%%|*}
    [ "${reply#*|}" != 0 ] && wal_pid=${reply#*|}
    if [ "$wal_pid" != 0 ]; then # the walsender serving the capture (CPU until it exits)
        w=$(cpu_ticks "$wal_pid")
        [ -n "$w" ] && wal_ticks=$w
    fi
    r=$(hwm "$pid")
    [ "$r" -gt "$peak" ] && peak=$r
    [ "$done_" = t ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "bench-capture: cdc-capture exited early:" >&2
        cat "$log" >&2
        exit 1
    fi
    if (($(now_ms) - start > 900000)); then
        echo "bench-capture: cdc-capture did not drain the backlog in 15 minutes" >&2
        kill "$pid"
        exit 1
    fi
    sleep 0.05
done
cdc_ms=$(($(now_ms) - start))
r=$(hwm "$pid")
[ "$r" -gt "$peak" ] && peak=$r
cap_ticks=$(cpu_ticks "$pid")
kill -TERM "$pid"
wait "$pid" || true
echo '\q' >&"$poll_in"
wait "$POLL_PID" 2>/dev/null || true
rm -f "$log"

# --- pg_recvlogical ----------------------------------------------------------------
start=$(now_ms)
pg_recvlogical -d "$dsn" --slot=bench_recv --start --endpos="$endpos" --no-loop \
    -o proto_version=1 -o publication_names=bench_pub -f /dev/null
recv_ms=$(($(now_ms) - start))

q "SELECT pg_drop_replication_slot('bench_cdc'), pg_drop_replication_slot('bench_recv')" \
    >/dev/null
cdc_rate=$((changes * 1000 / (cdc_ms > 0 ? cdc_ms : 1)))
recv_rate=$((changes * 1000 / (recv_ms > 0 ? recv_ms : 1)))
ratio=$(awk -v a="$cdc_rate" -v b="$recv_rate" 'BEGIN { printf "%.2f", a / b }')
echo "bench-capture: $changes changes; cdc-capture ${cdc_ms} ms (to Kafka, acked and" \
    "confirmed), pg_recvlogical ${recv_ms} ms (to /dev/null)"
echo "BENCH capture_changes_per_s $cdc_rate changes/s baseline=$recv_rate ratio=$ratio"
echo "BENCH capture_peak_rss $((peak / 1024)) MiB"
# CPU time per change (load-independent, unlike the rates): the whole capture process
# (main thread + librdkafka threads) and the walsender that decoded its slot.
tck=$(getconf CLK_TCK)
per_change() { awk -v t="$1" -v h="$tck" -v n="$changes" 'BEGIN { printf "%.2f", t / h * 1e6 / n }'; }
echo "BENCH capture_cpu_per_change $(per_change "${cap_ticks:-0}") us"
echo "BENCH capture_walsender_cpu_per_change $(per_change "$wal_ticks") us"
echo "BENCH capture_backlog_changes $changes changes"
