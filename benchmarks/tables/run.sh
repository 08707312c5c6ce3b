#!/usr/bin/env bash
# Thousands of tables in one job (make bench-tables; issue 35, docs/benchmarks.md "Many
# tables"), on the local pipeline of chaos/lib.sh with the capture following the
# publication cdc_pub and the workers following the job's tables (no --tables):
#   1. servers, the demo schema and TABLES tables public.t00001 ... (id int primary key,
#      n int, note text; TABLES_ROWS rows each; the audit trigger of the demo schema), made
#      before the pipeline starts and not in the publication;
#   2. the pipeline (capture + standby, coordinator + standby, TABLES_WORKERS workers), then
#      ONE `ALTER PUBLICATION cdc_pub ADD TABLE` of every table: tables_readable_s = seconds
#      from the ALTER until the leader's /status shows every mirror with its TABLES_ROWS
#      rows (each read by an incremental snapshot under the capture's one global pace);
#   3. a load spread over all the tables (pgbench: TABLES_LOAD_RATE updates/s, each of a
#      random row of a random table) for TABLES_LOAD_SECONDS; in its middle, kill -9 of
#      worker-1: tables_recovery_s = seconds from the kill until the leader commits an
#      epoch of the new assignment;
#   4. at the end of the load: tables_fresh_p99_ms (the largest p99 freshness the leader
#      estimates over the tables, /status tables[].fresh_p99_ms; _median_ms the median
#      table's), tables_commit_latency_p99_ms (the leader's barrier-to-visible histogram,
#      bucket bound), tables_loop_stall_max_ms (its longest loop iteration),
#      tables_epochs_grouped (epochs that shared another's snapshots: group commits), RSS (MiB) and CPU
#      seconds of every process (tables_rss_max_mib: the largest), the size of the latest
#      checkpoint record in etcd (tables_checkpoint_record_bytes), data files and metadata
#      files per source table (mirror + changelog; tables_files_per_table,
#      tables_metadata_files_per_table);
#   5. the load stops and chaos/verify checks TABLES_VERIFY tables (all by default; a
#      number: that many, spread over the range) against PostgreSQL: VERIFY ok, 0 lost,
#      0 duplicated, 0 mismatched, or the run fails.
# TABLES_CHAOS=1 (make chaos-tables; the short form in make test: many_tables.sh) adds
# faults to step 3: TABLES_ADD more tables (TABLES/10; made with the others, loaded from
# the start, not in the publication) join in one more ALTER PUBLICATION under the load,
# then, after the worker kill, kill -9 of the leading coordinator (a standby takes over)
# and of the streaming capture (the standby takes the slot); the killed processes start
# again, and step 5 verifies every table, the late ones included (their snapshot rows as
# some state of their key). 0 lost, 0 duplicated, 0 mismatched, or the run fails.
# TABLES_SWEEP="10 100 1000 2000" runs the whole for each count (a fresh pipeline each),
# prints each count's BENCH lines with the count in the name (tables_<n>_readable_s, ...)
# and plots every figure against the count into benchmarks/results/tables-*.png.
# Knobs: TABLES (2000), TABLES_ROWS (100), TABLES_WORKERS (3), TABLES_LOAD_RATE (500),
#   TABLES_LOAD_SECONDS (60), TABLES_VERIFY (all), TABLES_TIMEOUT (600 s for each wait),
#   BENCH_KEEP=1 keeps the work directory.
set -uo pipefail
# shellcheck source=tools/launched.sh
. "$(dirname "$0")/../../tools/launched.sh"
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=benchmarks/lib.sh
. benchmarks/lib.sh

ROWS=${TABLES_ROWS:-100}
CHAOS=${TABLES_CHAOS:-0}
RATE=${TABLES_LOAD_RATE:-500}
LOAD_SECS=${TABLES_LOAD_SECONDS:-60}
TIMEOUT=${TABLES_TIMEOUT:-600}
export CHAOS_WORKERS=${TABLES_WORKERS:-3} CHAOS_TABLES=public.transactions CDC_JOB=bench
export CHAOS_CAPTURE_TABLES="" CHAOS_WORKER_TABLES=""
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/cdc-bench-tables.XXXXXX")
export BENCH_WORK
LOAD_PID=""

cleanup() {
    bench_pgbench_stop
    bench_pipeline_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { bench_now_ms; }
secs() { bench_secs "$1" "$2" 1; }
name_of() { printf 't%05d' "$1"; }

# Mirrors of public.t* the leader's /status shows with at least ROWS rows.
tables_full() {
    chaos_status 2>/dev/null | jq --argjson rows "$ROWS" \
        '[.tables[]? | select((.table | test("^public\\.t[0-9]+$")) and (.rows // 0) >= $rows)] | length' \
        2>/dev/null || echo 0
}

tables_full_at_least() { [ "$(tables_full)" -ge "$1" ]; }

# The value of an etcd key (the v3 JSON gateway; base64 in, bytes out).
etcd_value() {
    curl -fsS -X POST "$CDC_TEST_ETCD/v3/kv/range" \
        -d "{\"key\":\"$(printf '%s' "$1" | base64 -w0)\"}" 2>/dev/null |
        jq -r '.kvs[0].value // ""' | base64 -d 2>/dev/null
}

# One run at $1 tables; BENCH lines named tables_<suffix>..., a row of the sweep's TSV.
run_one() {
    local n=$1 sfx=$2 t0 t1 kill_ms gen c latest list i v add=0 all leader
    [ "$CHAOS" = 1 ] && add=${TABLES_ADD:-$((n / 10 > 0 ? n / 10 : 1))}
    all=$((n + add))
    export CHAOS_DIR=$BENCH_WORK/run-$n
    pipeline_servers_up
    bench_log "creating $all tables of $ROWS rows"
    bench_psql <<SQL || chaos_die "could not create the tables"
DO \$\$
BEGIN
  FOR i IN 1..$all LOOP
    EXECUTE format('CREATE TABLE public.t%s (id int PRIMARY KEY, n int NOT NULL, note text)', lpad(i::text, 5, '0'));
    EXECUTE format('CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON public.t%s FOR EACH ROW EXECUTE FUNCTION cdc_audit.record(''id'')', lpad(i::text, 5, '0'));
    EXECUTE format('INSERT INTO public.t%s SELECT g, 0, ''row '' || g FROM generate_series(1, $ROWS) g', lpad(i::text, 5, '0'));
  END LOOP;
END
\$\$;
CREATE OR REPLACE FUNCTION public.bench_touch(t int, k int) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  EXECUTE format('UPDATE public.t%s SET n = n + 1 WHERE id = \$1', lpad(t::text, 5, '0')) USING k;
END
\$\$;
SQL
    pipeline_procs_up
    list=$(for ((i = 1; i <= n; i++)); do echo "public.$(name_of "$i")"; done | paste -sd, | sed 's/,/, /g')
    t0=$(now_ms)
    bench_psql -c "ALTER PUBLICATION cdc_pub ADD TABLE $list" || chaos_die "ALTER PUBLICATION failed"
    bench_log "added $n tables in one ALTER PUBLICATION; waiting for every mirror"
    # the snapshots' progress over all tables, as an operator sees it while they run
    chaos_wait 30 "the capture to snapshot the new tables" bash -c '"$1" tables --coordinator "$2" \
        --capture "$3" 2>/dev/null | grep "^snapshots: " >"$4"' _ "$CHAOS_BUILD/cdcctl" \
        "$(cat "$CHAOS_DIR/procs/$(chaos_leader).http")" \
        "$(cat "$CHAOS_DIR/procs/$(chaos_active_capture).http")" "$BENCH_WORK/progress-$n.txt" &&
        bench_log "cdcctl tables: $(cat "$BENCH_WORK/progress-$n.txt")"
    chaos_wait "$TIMEOUT" "every table readable" tables_full_at_least "$n" ||
        chaos_die "only $(tables_full) of $n tables became readable in ${TIMEOUT}s"
    t1=$(now_ms)
    READABLE=$(secs "$t0" "$t1")
    bench_log "every table readable in $READABLE s; the capture's snapshots: $(curl -fsS \
        "http://$(cat "$CHAOS_DIR/procs/$(chaos_active_capture).http")/status" | jq -c .snapshots)"

    cat >"$BENCH_WORK/touch.sql" <<EOF
\set t random(1, $all)
\set k random(1, $ROWS)
SELECT public.bench_touch(:t, :k);
EOF
    "$PG_BIN/pgbench" -n -f "$BENCH_WORK/touch.sql" -c 2 -j 2 -R "$RATE" -T "$LOAD_SECS" \
        "$PIPELINE_PG_DSN" >"$BENCH_WORK/pgbench-$n.log" 2>&1 &
    LOAD_PID=$!
    if [ "$CHAOS" = 1 ]; then
        sleep $((LOAD_SECS / 6))
        list=$(for ((i = n + 1; i <= all; i++)); do echo "public.$(name_of "$i")"; done | paste -sd, | sed 's/,/, /g')
        bench_psql -c "ALTER PUBLICATION cdc_pub ADD TABLE $list" || chaos_die "the second ALTER PUBLICATION failed"
        bench_log "added $add more tables under the load"
    fi
    sleep $((LOAD_SECS / 6 + 1)) # (a load of a fixed length: the kill lands in its middle)
    gen=$(chaos_status | jq -r '.generation')
    c=$(pipeline_committed)
    kill_ms=$(now_ms)
    proc_signal worker-1 KILL
    chaos_wait "$TIMEOUT" "a commit of a new assignment" bash -c '. "$1"; s=$(chaos_status) &&
        [ "$(jq -r .generation <<<"$s")" != "$2" ] && [ "$(jq -r ".epochs.last_committed // 0" <<<"$s")" -gt "$3" ]' \
        _ "$BENCH_ROOT/chaos/lib.sh" "$gen" "$c" || chaos_die "no recovery after the worker kill"
    RECOVERY=$(secs "$kill_ms" "$(now_ms)")
    bench_log "kill -9 of worker-1: a commit of the new assignment after $RECOVERY s"
    pipeline_start_worker 1
    if [ "$CHAOS" = 1 ]; then
        leader=$(chaos_leader)
        c=$(pipeline_committed)
        proc_signal "$leader" KILL
        chaos_wait "$TIMEOUT" "another coordinator to lead and commit" bash -c '. "$1"; l=$(chaos_leader) &&
            [ "$l" != "$2" ] && [ "$(pipeline_committed)" -gt "$3" ]' \
            _ "$BENCH_ROOT/chaos/lib.sh" "$leader" "$c" || chaos_die "no coordinator took over from $leader"
        bench_log "kill -9 of the leader $leader: $(chaos_leader) leads and commits"
        proc_restart "$leader"
        i=$(chaos_active_capture)
        proc_signal "$i" KILL
        bench_log "kill -9 of the streaming capture $i"
        sleep 2
        proc_restart "$i"
    fi
    wait "$LOAD_PID"
    LOAD_PID=""
    # the leader's estimate, once its /status answers (a leader busy committing hundreds of
    # tables may miss chaos_status's 2 s): -1, and why, when it has none
    local st="" known=0 deadline=$((SECONDS + 60))
    FRESH=-1 FRESH_MED=-1 GROUPED=0
    while [ "$SECONDS" -lt "$deadline" ]; do
        st=$(chaos_status) || st=""
        if [ -n "$st" ]; then
            known=$(jq '[.tables[]? | select(.table | test("^public\\.t[0-9]+$")) | select(.fresh_p99_ms != null)] | length' <<<"$st")
            FRESH=$(jq '[.tables[]? | select(.table | test("^public\\.t[0-9]+$")) | .fresh_p99_ms | select(. != null)] | max // -1' <<<"$st")
            FRESH_MED=$(jq '[.tables[]? | select(.table | test("^public\\.t[0-9]+$")) | .fresh_p99_ms | select(. != null)] | sort | if length > 0 then .[length / 2 | floor] else -1 end' <<<"$st")
            GROUPED=$(jq '.epochs.grouped // 0' <<<"$st")
            [ "${known:-0}" -gt 0 ] && break
        fi
        sleep 1
    done
    if [ -z "$st" ]; then
        bench_log "tables_fresh_p99_ms: no leader's /status answered within 60 s"
    else
        bench_log "tables_fresh_p99_ms: the leader estimates $known of $all tables' freshness"
    fi
    # the leader's commit latency (barrier to snapshots visible, p99 of its histogram since
    # it became leader) and its longest loop iteration: what group commits change
    COMMIT_P99=-1 STALL_MAX=-1
    local m
    if m=$(chaos_curl -fsS --max-time 5 "$(cat "$CHAOS_DIR/procs/$(chaos_leader).http" 2>/dev/null)/metrics" 2>/dev/null); then
        COMMIT_P99=$(awk '/^cdc_coordinator_commit_latency_seconds_bucket/ { match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); n++; les[n] = le; cs[n] = $NF }
            /^cdc_coordinator_commit_latency_seconds_count/ { total = $NF }
            END { if (total == 0) { print -1; exit } for (i = 1; i <= n; i++) if (cs[i] >= 0.99 * total) { print (les[i] == "+Inf" ? -1 : les[i] * 1000); exit } print -1 }' <<<"$m")
        STALL_MAX=$(awk '/^cdc_coordinator_loop_stall_max_seconds / { print $2 * 1000 }' <<<"$m")
    fi
    RSS_MAX=0
    : >"$BENCH_WORK/procs-$n.txt"
    for f in "$CHAOS_DIR"/procs/*.pid "$CDC_TEST_TMP"/*.pid; do
        [ -f "$f" ] || continue
        i=$(cat "$f")
        v=$(ps -o rss=,times= -p "$i" 2>/dev/null) || continue
        read -r rss cpu <<<"$v"
        echo "$(basename "$f" .pid) $((rss / 1024)) $cpu" >>"$BENCH_WORK/procs-$n.txt"
        [ $((rss / 1024)) -gt "$RSS_MAX" ] && RSS_MAX=$((rss / 1024))
    done
    bench_log "RSS MiB and CPU s per process: $(tr '\n' ';' <"$BENCH_WORK/procs-$n.txt")"
    latest=$(curl -fsS -X POST "$CDC_TEST_ETCD/v3/kv/range" \
        -d "{\"key\":\"$(printf '/cdc/%s/latest' "$CDC_JOB" | base64 -w0)\"}" |
        jq -r '.kvs[0].value // ""' | base64 -d)
    etcd_value "$(printf '/cdc/%s/checkpoints/%020d' "$CDC_JOB" "$latest")" >"$BENCH_WORK/record-$n.json"
    RECORD=$(wc -c <"$BENCH_WORK/record-$n.json")
    bench_log "checkpoint record $latest: $RECORD bytes; by field: $(jq -c 'to_entries | map({(.key): (.value | tojson | length)}) | add' "$BENCH_WORK/record-$n.json" 2>/dev/null)"
    FILES=$(bench_div "$(find "$CHAOS_DIR/warehouse/public" -path '*/public/t[0-9]*/data/*' -type f | wc -l)" "$all")
    META=$(bench_div "$(find "$CHAOS_DIR/warehouse/public" -path '*/public/t[0-9]*/metadata/*.metadata.json' | wc -l)" "$all")

    local verify_list="" k=${TABLES_VERIFY:-$all} step
    [ "$k" -gt "$all" ] && k=$all
    step=$((all / k))
    for ((i = 1; i <= all; i += step)); do verify_list="$verify_list${verify_list:+,}$(name_of "$i")"; done
    pipeline_verify --tables "$verify_list" --snapshotted "$verify_list" --wait "$TIMEOUT" \
        >"$BENCH_WORK/verify-$n.log" 2>&1 || {
        tail -n 20 "$BENCH_WORK/verify-$n.log" >&2
        chaos_die "the verifier failed at $n tables"
    }
    tail -n 1 "$BENCH_WORK/verify-$n.log" | sed "s/^/$all tables: /" >&2

    bench_line "tables${sfx}_readable_s" "$READABLE" s
    bench_line "tables${sfx}_recovery_s" "$RECOVERY" s
    bench_line "tables${sfx}_fresh_p99_ms" "$FRESH" ms
    bench_line "tables${sfx}_fresh_p99_median_ms" "$FRESH_MED" ms
    bench_line "tables${sfx}_commit_latency_p99_ms" "$COMMIT_P99" ms
    bench_line "tables${sfx}_loop_stall_max_ms" "${STALL_MAX:--1}" ms
    bench_line "tables${sfx}_epochs_grouped" "$GROUPED" epochs
    bench_line "tables${sfx}_rss_max_mib" "$RSS_MAX" MiB
    while read -r proc rss cpu; do
        bench_line "tables${sfx}_rss_mib_$proc" "$rss" MiB
        bench_line "tables${sfx}_cpu_s_$proc" "$cpu" s
    done <"$BENCH_WORK/procs-$n.txt"
    bench_line "tables${sfx}_checkpoint_record_bytes" "$RECORD" bytes
    bench_line "tables${sfx}_files_per_table" "$FILES" files
    bench_line "tables${sfx}_metadata_files_per_table" "$META" files
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$READABLE" "$RECOVERY" "$FRESH" "$RSS_MAX" \
        "$RECORD" "$FILES" "$META" >>"$BENCH_WORK/sweep.tsv"
    pipeline_down purge >/dev/null 2>&1
}

if [ -n "${TABLES_SWEEP:-}" ]; then
    for n in $TABLES_SWEEP; do run_one "$n" "_$n"; done
    mkdir -p "$BENCH_RESULTS"
    cp "$BENCH_WORK/sweep.tsv" "$BENCH_RESULTS/tables.tsv"
    if command -v gnuplot >/dev/null; then
        gnuplot <<EOF
set terminal pngcairo size 900,420 noenhanced
set logscale x
set xlabel "tables in the job"
set grid
set output "$BENCH_RESULTS/tables-time.png"
set ylabel "seconds"
plot "$BENCH_RESULTS/tables.tsv" using 1:2 with linespoints title "every table readable after the ALTER", \
     "" using 1:3 with linespoints title "worker kill -9 to a commit"
set output "$BENCH_RESULTS/tables-cost.png"
set ylabel "value"
set logscale y
plot "$BENCH_RESULTS/tables.tsv" using 1:4 with linespoints title "p99 freshness (ms)", \
     "" using 1:5 with linespoints title "largest RSS (MiB)", \
     "" using 1:(\$6/1024) with linespoints title "checkpoint record (KiB)", \
     "" using 1:7 with linespoints title "data files per table", \
     "" using 1:8 with linespoints title "metadata files per table"
EOF
    fi
else
    run_one "${TABLES:-2000}" ""
fi
