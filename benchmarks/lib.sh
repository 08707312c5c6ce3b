#!/usr/bin/env bash
# Shared functions of the pipeline benchmarks (sourced by benchmarks/<name>/run.sh, not
# run). The pipeline itself is started and stopped by chaos/lib.sh (pipeline_servers_up,
# pipeline_procs_up, pipeline_down): this file only adds what measuring needs:
#   bench_line         one `BENCH <name> <value> <unit> [baseline=.. ratio=..]` line
#   bench_pgbench*     the mixed insert/upsert/update/delete pgbench workload on the demo
#                      table public.transactions, the PostgreSQL write ceiling
#   bench_audit_count  changes PostgreSQL committed (the demo schema's audit trigger)
#   bench_sampler_*    a 1 s sampler (benchmarks/sampler.mjs) of the leader's checkpoints,
#                      workers' consumer lag, CPU time and peak RSS of every process
#   bench_recvlogical  pg_recvlogical's decode time of a slot up to an LSN (baseline)
#   bench_changelog_records  total-records of a changelog table's current snapshot
# Everything runs on this machine, on loopback, with the servers of tests/harness.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_RESULTS=${BENCH_RESULTS:-$BENCH_ROOT/benchmarks/results}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
export CHAOS_BUILD=${CHAOS_BUILD:-${CDC_BUILD_DIR:-$BENCH_ROOT/build}}
# shellcheck source=chaos/lib.sh
. "$BENCH_ROOT/chaos/lib.sh"

bench_log() { printf '%s bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# bench_line <name> <value> <unit> [<baseline> <ratio> [<baseline name>]]
bench_line() {
    local extra=""
    [ -n "${4:-}" ] && extra=" baseline=$4 ratio=$5"
    [ -n "${6:-}" ] && extra="$extra baseline_name=$6"
    echo "BENCH $1 $2 $3$extra"
}

# Prints a/b with 3 decimals (0 when b is 0).
bench_div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print 0; else printf "%.3f\n", a / b }'; }

# The machine's 1-minute load average (other jobs on the 2 cores skew every figure).
bench_load1() { cut -d' ' -f1 /proc/loadavg; }

bench_psql() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }

# ---- workload --------------------------------------------------------------------------

# Writes the pgbench script of the mixed workload to $1: one change per transaction on
# public.transactions over BENCH_KEYS keys, 45% upsert (insert of a new key or update
# of an existing one), 35% update, 20% delete. updated_at = clock_timestamp(), a lower
# bound of the commit time used as a sanity check of the commit timestamps.
bench_pgbench_script() {
    cat >"$1" <<'EOF'
\set id random(1, :keys)
\set r random(1, 100)
\if :r <= 45
INSERT INTO public.transactions (entity_id, account, amount, status, note, updated_at)
VALUES (:id, 'acct-' || (:id % 997), (:id % 100000) / 100.0, 'new', 'pgbench ' || :r, clock_timestamp())
ON CONFLICT (entity_id) DO UPDATE SET amount = EXCLUDED.amount, status = 'upsert',
    updated_at = clock_timestamp();
\elif :r <= 80
UPDATE public.transactions SET amount = amount + 1, status = 'update', updated_at = clock_timestamp()
WHERE entity_id = :id;
\else
DELETE FROM public.transactions WHERE entity_id = :id;
\endif
EOF
}

# Changes PostgreSQL committed so far (rows of the audit table the demo schema's trigger
# fills in the same transaction as each change; tools/loadgen/schema.sql).
bench_audit_count() { bench_psql -c "SELECT count(*) FROM cdc_audit.changes"; }

# bench_pgbench <seconds> [extra pgbench args...]: runs the workload; pgbench's output
# goes to $BENCH_WORK/pgbench-<n>.log.
bench_pgbench() {
    local secs=$1
    shift
    local script=$BENCH_WORK/workload.sql
    [ -f "$script" ] || bench_pgbench_script "$script"
    BENCH_PGBENCH_RUNS=$((${BENCH_PGBENCH_RUNS:-0} + 1))
    "$PG_BIN/pgbench" -n -f "$script" -D keys="${BENCH_KEYS:-100000}" \
        -c "${BENCH_PGBENCH_CLIENTS:-4}" -j 2 -T "$secs" "$@" "$PIPELINE_PG_DSN" \
        >"$BENCH_WORK/pgbench-$BENCH_PGBENCH_RUNS.log" 2>&1
}

# Stops a bench_pgbench started in the background (`bench_pgbench ... & LOAD_PID=$!`): the
# subshell and its pgbench; nothing when LOAD_PID is empty.
bench_pgbench_stop() {
    local p
    [ -n "${LOAD_PID:-}" ] || return 0
    for p in $(pgrep -P "$LOAD_PID" 2>/dev/null); do kill "$p" 2>/dev/null; done
    kill "$LOAD_PID" 2>/dev/null
    wait "$LOAD_PID" 2>/dev/null
    LOAD_PID=""
}

# Measures the PostgreSQL write ceiling with the pipeline processes not running: the
# workload as fast as it goes for $1 seconds. Sets CEIL_TPS (transactions/s) and
# CEIL_CPS (changes/s, counted by the audit trigger), then empties the tables (before
# any slot exists, so nothing of this reaches the pipeline).
bench_pg_ceiling() {
    local secs=$1 before after t0 t1
    bench_psql -c "CHECKPOINT"
    before=$(bench_audit_count)
    t0=$(date +%s.%N)
    bench_pgbench "$secs" || {
        bench_log "pgbench failed: $(tail -5 "$BENCH_WORK/pgbench-$BENCH_PGBENCH_RUNS.log")"
        return 1
    }
    t1=$(date +%s.%N)
    after=$(bench_audit_count)
    CEIL_TPS=$(awk '/^tps = / { printf "%.0f\n", $3; exit }' "$BENCH_WORK/pgbench-$BENCH_PGBENCH_RUNS.log")
    CEIL_CPS=$(awk -v n=$((after - before)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", n / (b - a) }')
    bench_psql -c "TRUNCATE public.transactions, cdc_audit.changes" -c "CHECKPOINT"
    bench_log "PostgreSQL ceiling: $CEIL_TPS tps, $CEIL_CPS changes/s ($secs s, pipeline not running)"
}

# ---- sampling ---------------------------------------------------------------------------

# bench_sampler_start <dir>: benchmarks/sampler.mjs samples the running pipeline every
# second into <dir> (samples.tsv: consumer lag, last epoch, machine CPU; proc.tsv: CPU
# ticks and RSS per process; checkpoints.jsonl: the leader's checkpoints).
bench_sampler_start() {
    node "$BENCH_ROOT/benchmarks/sampler.mjs" "$1" "$CHAOS_DIR/procs" "$CDC_TEST_TMP" 1000 \
        >>"$1.log" 2>&1 &
    # shellcheck disable=SC2034 # read by name in bench_bg_stop
    BENCH_SAMPLER_PID=$!
}

bench_sampler_stop() { bench_bg_stop BENCH_SAMPLER_PID; }

# bench_pipeline_cleanup: the end of a pipeline benchmark's EXIT trap: the pipeline down
# and $BENCH_WORK deleted, or (BENCH_KEEP=1) the pipeline down and the work kept.
bench_pipeline_cleanup() {
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        pipeline_down >/dev/null 2>&1
        bench_log "kept $BENCH_WORK"
    else
        pipeline_down purge >/dev/null 2>&1
        rm -rf "$BENCH_WORK"
    fi
}

# Wall-clock milliseconds, and the seconds from ms $1 to ms $2 with $3 decimals (3).
bench_now_ms() { date +%s%3N; }
bench_secs() { awk -v a="$1" -v b="$2" -v d="${3:-3}" 'BEGIN { printf "%.*f\n", d, (b - a) / 1000 }'; }

# bench_bg_stop <variable>: stops the background job whose pid the variable holds (if
# any), waits for it and empties the variable.
bench_bg_stop() {
    local pid=${!1:-}
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    printf -v "$1" '%s' ""
}

# ---- Iceberg ------------------------------------------------------------------------------

# total-records of the current snapshot of table <ns>.<table> in the local warehouse (0
# while the table has no snapshot).
bench_changelog_records() {
    local dir=$CHAOS_DIR/warehouse/$1 v
    v=$(cat "$dir/metadata/version-hint.text" 2>/dev/null) || {
        echo 0
        return
    }
    jq -r '(.["current-snapshot-id"]) as $c | [.snapshots[]? | select(.["snapshot-id"] == $c)
           | .summary["total-records"] | tonumber] | (.[0] // 0)' \
        "$dir/metadata/v$v.metadata.json" 2>/dev/null || echo 0
}

# ---- baselines ----------------------------------------------------------------------------

# bench_recvlogical <slot> <publication> <end lsn>: decodes the slot with pgoutput up to
# the LSN, output discarded; prints the wall time in seconds.
bench_recvlogical() {
    local t0 t1
    t0=$(date +%s.%N)
    "$PG_BIN/pg_recvlogical" -d "$PIPELINE_PG_DSN" --slot "$1" --start --no-loop \
        -o proto_version=1 -o "publication_names=$2" --endpos "$3" -f /dev/null || return 1
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}
