#!/usr/bin/env bash
# Backfill benchmark (make bench-backfill; issue 18, docs/benchmarks.md "Backfill of an
# added table"), on the local pipeline of chaos/lib.sh with the capture and the workers
# in table-following mode (no --tables: the capture set is the publication cdc_pub, the
# workers follow the job's tables):
#   1. servers and demo schema; PostgreSQL's write ceiling (the e2e workload on
#      public.transactions, pipeline not running); then public.backfill_big with
#      BACKFILL_ROWS narrow rows (id bigint primary key, n int, a 12-character text),
#      created and filled before the pipeline starts and not in the publication;
#   2. the pipeline (capture + standby, coordinator + standby, BACKFILL_WORKERS workers,
#      coordinator defaults: 1 s epochs, compaction on) and the pgbench workload at
#      BACKFILL_FRACTION of the ceiling on public.transactions; benchmarks/sampler.mjs
#      samples consumer lag and CPU per process (logged per window);
#   3. baseline window: BACKFILL_BASE_SECONDS of load without a backfill (after
#      BACKFILL_WARMUP_SECONDS); then `ALTER PUBLICATION cdc_pub ADD TABLE
#      public.backfill_big` and the capture's /status polled every 0.25 s until the table's
#      incremental snapshot is done: backfill_rows_per_s = the snapshot's rows / (ALTER ->
#      done), the capture's discovery of the table (schema probe, every 5 s) included.
#      Then, the load still running, `COPY (SELECT * FROM public.backfill_big) TO STDOUT`
#      through psql into /dev/null, BACKFILL_COPY_RUNS times (median): the baseline.
#      Goal: backfill rate >= 0.5 x COPY;
#   4. the load stops, the pipeline catches up (the changelogs of both tables hold every
#      change and every backfilled row), and benchmarks/e2e/latency.mjs --added-files
#      gives the p99 of PostgreSQL commit -> Iceberg snapshot of the transactions changes
#      committed in each window; the backfill window runs from the ALTER until the
#      backfilled rows are all in the changelog public.backfill_big_changelog (the
#      backfill as a user sees it end to end). backfill_other_p99_ratio = p99 during the
#      backfill / p99 of the baseline window. Goal <= 1.5.
# The development broker (librdkafka's mock cluster) keeps at most 5 MiB per partition and
# drops the oldest records even unread (tools/kafka-dev/README.md): rows the workers have
# not read when the capture is that far ahead are lost at the broker. The run checks that
# the changelog of the backfilled table ends with every row (backfill_rows_lost, 0 when
# it does) and fails otherwise; backfill_topic_partitions_trimmed counts the partitions of
# its topic the broker trimmed (kcat), backfill_consumer_lag_max the workers' lag. With lz4
# (the capture's default) 1,000,000 rows fit: no partition trimmed, lag ~29,000 events a
# partition at most (docs/benchmarks.md).
# Knobs: BACKFILL_ROWS (1000000; smoke: 100000), BACKFILL_BASE_SECONDS (30; smoke: 10),
#   BACKFILL_WARMUP_SECONDS (5), BACKFILL_FRACTION (0.5), BACKFILL_CEILING_SECONDS (15),
#   BACKFILL_RATE (transactions/s: skips the ceiling run), BACKFILL_WORKERS (2),
#   BACKFILL_COPY_RUNS (3), BACKFILL_TIMEOUT (600 s for the snapshot, then for the catch-up),
#   CDC_SNAPSHOT_CHUNK (the capture's chunk, 10000 by default), CDC_SNAPSHOT_MAX_RATE (the
#   capture's pace of the snapshot, rows/s; unset: its default, 25000; 0: as fast as it can), BENCH_KEEP=1 keeps
#   the work directory.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=benchmarks/lib.sh
. benchmarks/lib.sh

ROWS=${BACKFILL_ROWS:-1000000}
BASE=${BACKFILL_BASE_SECONDS:-30}
WARMUP=${BACKFILL_WARMUP_SECONDS:-5}
FRACTION=${BACKFILL_FRACTION:-0.5}
CEIL_SECS=${BACKFILL_CEILING_SECONDS:-15}
COPY_RUNS=${BACKFILL_COPY_RUNS:-3}
TIMEOUT=${BACKFILL_TIMEOUT:-600}
TABLE=public.backfill_big
# the capture set is the publication cdc_pub (made for CHAOS_TABLES by pipeline_servers_up),
# the workers follow the job's tables
export CHAOS_WORKERS=${BACKFILL_WORKERS:-2} CHAOS_TABLES=public.transactions CDC_JOB=bench
export CHAOS_CAPTURE_TABLES="" CHAOS_WORKER_TABLES=""
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/cdc-bench-backfill.XXXXXX")
export BENCH_WORK CHAOS_DIR=$BENCH_WORK/run
NS=$CHAOS_NAMESPACE
LOAD_PID=""

cleanup() {
    bench_pgbench_stop
    bench_sampler_stop
    bench_pipeline_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { bench_now_ms; }
secs() { bench_secs "$1" "$2" 3; }

# The snapshot entry of the backfilled table in the streaming capture's /status ({} while
# the table is not captured yet; its state and snapshot {id, done, rows, estimate,
# percent} once it is).
table_status() {
    local cap
    cap=$(cat "$CHAOS_DIR/procs/$(chaos_active_capture).http")
    curl -fsS --max-time 2 "http://$cap/status" 2>/dev/null |
        jq -c --arg t "$TABLE" '[.tables[]? | select(.table == $t)] | .[0] // {}' 2>/dev/null
}

# Partitions of the backfilled table's topic whose oldest record the broker has deleted
# (first offset above 0: the development broker keeps 5 MiB per partition); -1 without kcat.
topic_trimmed() {
    local p first n=0
    command -v kcat >/dev/null || {
        echo -1
        return
    }
    for ((p = 0; p < ${CDC_TEST_KAFKA_PARTITIONS:-12}; p++)); do
        first=$(timeout 20 kcat -C -q -b "$CDC_TEST_KAFKA" -t cdc.$TABLE -p $p -o beginning -c 1 -e \
            -f '%o\n' 2>/dev/null)
        [ "${first:-0}" -gt 0 ] && n=$((n + 1))
    done
    echo "$n"
}

# cpu_share <from ms> <to ms>: CPU of each process over the window, % of one core, from
# the sampler's proc.tsv (busiest first).
cpu_share() {
    awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" '$1 >= a && $1 <= b {
        if (!($2 in t0)) { t0[$2] = $3; s0[$2] = $1 } t1[$2] = $3; s1[$2] = $1 }
        END { for (n in t0) if (s1[n] > s0[n])
            printf "%s %.0f\n", n, (t1[n] - t0[n]) / hz * 100000 / (s1[n] - s0[n]) }' \
        "$BENCH_WORK/samples/proc.tsv" | sort -k2,2nr | awk '{ printf "%s%s %s%%", (NR > 1 ? ", " : ""), $1, $2 }'
}

changelog_has() { [ "$(bench_changelog_records "$NS/$1_changelog")" -ge "$2" ]; }

# ---- 1. servers, ceiling, the table to backfill --------------------------------------------

pipeline_servers_up >"$BENCH_WORK/setup.log" 2>&1 || exit 1
if [ -n "${BACKFILL_RATE:-}" ]; then
    RATE=$BACKFILL_RATE
else
    bench_pg_ceiling "$CEIL_SECS" || exit 1
    RATE=$(awk -v c="$CEIL_TPS" -v f="$FRACTION" 'BEGIN { printf "%.0f\n", c * f }')
    bench_line backfill_pg_ceiling_tps "$CEIL_TPS" tx/s
fi
bench_line backfill_offered_tps "$RATE" tx/s
bench_log "filling $TABLE with $ROWS rows"
t0=$(now_ms)
bench_psql >/dev/null <<EOF || exit 1
CREATE TABLE $TABLE (id bigint PRIMARY KEY, n int NOT NULL, s text NOT NULL);
INSERT INTO $TABLE SELECT g, ((g * 7919) % 1000003)::int, 'row-' || lpad((g % 100000000)::text, 8, '0')
FROM generate_series(1::bigint, $ROWS) g;
VACUUM ANALYZE $TABLE;
CHECKPOINT;
EOF
bench_log "$TABLE filled in $(secs "$t0" "$(now_ms)") s ($(bench_psql -c "SELECT pg_size_pretty(pg_table_size('$TABLE'))"))"

# ---- 2. the pipeline and the load ------------------------------------------------------------

pipeline_procs_up >>"$BENCH_WORK/setup.log" 2>&1 || {
    bench_log "the pipeline did not start (logs in $CHAOS_DIR/procs)"
    exit 1
}
bench_log "pipeline up ($CHAOS_WORKERS workers, table-following); load at $RATE tx/s"
# consumer lag, CPU per process, every second (benchmarks/sampler.mjs)
bench_sampler_start "$BENCH_WORK/samples"
# long enough for any run; stopped after the COPY
bench_pgbench $((WARMUP + BASE + 2 * TIMEOUT + 600)) -R "$RATE" &
# shellcheck disable=SC2034 # read by bench_pgbench_stop
LOAD_PID=$!
sleep "$WARMUP"

# ---- 3. baseline window, backfill, COPY ---------------------------------------------------------

t_base=$(now_ms)
load_base=$(bench_load1)
sleep "$BASE"
load_fill=$(bench_load1)
t_alter=$(now_ms)
bench_psql -c "ALTER PUBLICATION cdc_pub ADD TABLE $TABLE" || exit 1
bench_log "baseline window over; $TABLE added to the publication"
t_seen="" t_done="" st='{}'
deadline=$((SECONDS + TIMEOUT))
while :; do
    st=$(table_status)
    [ -z "$t_seen" ] && [ "$(jq -r '.snapshot.id // empty' <<<"$st")" != "" ] && t_seen=$(now_ms)
    if [ "$(jq -r '.snapshot.done // false' <<<"$st")" = true ]; then
        t_done=$(now_ms)
        break
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        bench_log "the snapshot of $TABLE was not done after ${TIMEOUT}s: $st"
        exit 1
    fi
    sleep 0.25
done
snap_rows=$(jq -r '.snapshot.rows' <<<"$st")
fill_s=$(secs "$t_alter" "$t_done")
fill_rps=$(awk -v n="$snap_rows" -v s="$fill_s" 'BEGIN { printf "%.0f\n", n / s }')
bench_log "snapshot of $TABLE done: $snap_rows rows in $fill_s s after the ALTER" \
    "(captured after $(secs "$t_alter" "${t_seen:-$t_done}") s), $fill_rps rows/s"

# the baseline, same table, load still running (the median of COPY_RUNS)
for ((i = 0; i < COPY_RUNS; i++)); do
    c0=$(now_ms)
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" \
        -c "COPY (SELECT * FROM $TABLE) TO STDOUT" >/dev/null || exit 1
    secs "$c0" "$(now_ms)"
done >"$BENCH_WORK/copy.txt"
copy_s=$(sort -n "$BENCH_WORK/copy.txt" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
copy_rps=$(awk -v n="$ROWS" -v s="$copy_s" 'BEGIN { printf "%.0f\n", n / s }')
bench_log "COPY of $TABLE: $(tr '\n' ' ' <"$BENCH_WORK/copy.txt")s, median $copy_s s ($copy_rps rows/s)"

# ---- 4. catch-up, freshness ---------------------------------------------------------------------

# the backfill seen end to end: every row in the table's changelog
chaos_wait "$TIMEOUT" "the $ROWS backfilled rows in ${TABLE}_changelog" \
    changelog_has backfill_big "$ROWS"
t_e2e=$(now_ms)
bench_pgbench_stop
changes=$(bench_audit_count)
chaos_wait "$TIMEOUT" "the $changes changes in transactions_changelog" \
    changelog_has transactions "$changes" || bench_log "not caught up: freshness undercounted"
bench_sampler_stop
trimmed=$(topic_trimmed)
cap_bytes=$(curl -fsS --max-time 5 "http://$(cat "$CHAOS_DIR/procs/$(chaos_active_capture).http")/metrics" |
    awk -v t="$TABLE" '/^cdc_capture_bytes_total\{/ && index($0, "\"" t "\"") { v += $NF } END { printf "%.0f\n", v }')
lag_max=$(awk -v a="$t_alter" -v b="$t_e2e" '$1 >= a && $1 <= b && $2 > m { m = $2 } END { print m + 0 }' \
    "$BENCH_WORK/samples/samples.tsv")
bench_log "topic cdc.$TABLE: $cap_bytes bytes produced (keys + values, before compression)," \
    "$trimmed partitions trimmed by the broker; consumer lag at most $lag_max records"
bench_log "CPU, baseline window: $(cpu_share "$t_base" "$t_alter")"
bench_log "CPU, backfill window: $(cpu_share "$t_alter" "$t_e2e")"
got=$(bench_changelog_records "$NS/backfill_big_changelog")
lost=$((ROWS - got))
[ "$lost" -ge 0 ] || lost=0
bench_log "load stopped: $changes changes in total; backfilled rows in the changelog:" \
    "$got of $ROWS, all after $(secs "$t_alter" "$t_e2e") s"
proc_stop_all >/dev/null 2>&1 # nothing commits while the warehouse is read

p99() { jq -r '.p99_ms | floor' "$BENCH_WORK/$1.json" 2>/dev/null || echo 0; }
for w in "base $t_base $t_alter" "fill $t_alter $t_e2e"; do
    read -r name from to <<<"$w"
    node benchmarks/e2e/latency.mjs "$CHAOS_DIR/warehouse/$NS/transactions_changelog" \
        "$BENCH_WORK/$name" --from "$from" --to "$to" --added-files >>"$BENCH_WORK/latency.log" 2>&1 ||
        bench_log "latency.mjs ($name) failed: $(tail -3 "$BENCH_WORK/latency.log")"
    bench_log "[$name] transactions changes $(jq -c '{changes, p50_ms, p99_ms, max_ms, unmapped}' \
        "$BENCH_WORK/$name.json" 2>/dev/null)"
done
p_base=$(p99 base)
p_fill=$(p99 fill)

# ---- figures ----------------------------------------------------------------------------------

ratio=$(bench_div "$fill_rps" "$copy_rps")
pratio=$(bench_div "$p_fill" "$p_base")
bench_line backfill_rows "$snap_rows" rows
bench_line backfill_rows_per_s "$fill_rps" rows/s "$copy_rps" "$ratio" copy_rows_per_s
bench_line backfill_seconds "$fill_s" s
bench_line backfill_discovery_seconds "$(secs "$t_alter" "${t_seen:-$t_done}")" s
bench_line backfill_e2e_seconds "$(secs "$t_alter" "$t_e2e")" s
bench_line backfill_copy_seconds "$copy_s" s
bench_line backfill_rows_lost "$lost" rows
bench_line backfill_topic_partitions_trimmed "$trimmed" partitions
bench_line backfill_consumer_lag_max "$lag_max" records
bench_line backfill_other_p99_ms_base "$p_base" ms
bench_line backfill_other_p99_ms_during "$p_fill" ms
bench_line backfill_other_p99_ratio "$pratio" x "$p_base" "$pratio" no_backfill_p99_ms
# other jobs on the machine skew both sides: the 1-minute load average when each began
bench_line backfill_machine_load1_base "$load_base" load
bench_line backfill_machine_load1_backfill "$load_fill" load
awk -v r="$ratio" -v p="$pratio" 'BEGIN {
    printf "backfill: rate >= 0.5 x COPY: %s (%.2f); other table p99 <= 1.5 x: %s (%.2f)\n",
        (r >= 0.5 ? "met" : "NOT met"), r, (p <= 1.5 ? "met" : "NOT met"), p }' >&2
if [ "$lost" -gt 0 ]; then
    bench_log "$lost backfilled rows missing from the changelog (the development broker's" \
        "5 MiB per partition?): lower BACKFILL_ROWS"
    exit 1
fi
exit 0
