#!/usr/bin/env bash
# Table maintenance benchmark (make bench-maintenance; issue 17, docs/benchmarks.md
# "Table maintenance"), on the local pipeline of chaos/lib.sh:
#   1. PostgreSQL's write ceiling (the e2e workload, pipeline not running, with the
#      initial rows in the table);
#   2. twice, compaction on (the policy below) and off (--compact=false), each on fresh
#      servers: MAINT_INITIAL_ROWS pre-existing rows, snapshotted by the capture, then the
#      pgbench workload at MAINT_FRACTION of the ceiling with short epochs
#      (MAINT_INTERVAL) until MAINT_EPOCHS epochs are committed. Measured:
#        files     data + delete files of every table's current snapshot against the epoch
#                  (the leader's /status, sampled every second by benchmarks/sampler.mjs);
#        freshness p99 of every change of the load, commit in PostgreSQL -> the epoch
#                  snapshot of the changelog that made it visible
#                  (benchmarks/maintenance/freshness.mjs, over a log of the snapshots);
#        read time the mirror's current rows read by DuckDB over the snapshot's files with
#                  the deletes applied (the verifier's read) vs the same rows in one
#                  freshly written Parquet file (benchmarks/maintenance/readtime.mjs);
#        write amplification  bytes compaction wrote (the leader's
#                  cdc_coordinator_compaction_written_bytes_total) per byte the epochs
#                  committed (cdc_coordinator_table_committed_bytes_total of the mirror
#                  and the changelog).
#   3. BENCH lines and the plot benchmarks/results/maintenance-files.png.
#   With MAINT_QUIET=1 (default) the run with compaction then restarts the pipeline without
#   load until the idle rule (--compact-idle) has rewritten the mirror to one file per
#   partition and no deletes, and reads it again: maintenance_read_ratio_quiet.
# A read that fails (DuckDB out of its MAINT_READ_MEMORY, 4GB, applying thousands of
# equality-delete files) gives maintenance_read_failed{,_nocompact} = 1 instead of a ratio.
# The table: MAINT_INITIAL_ROWS (40,000) rows before the capture starts (its initial
# snapshot), then MAINT_STREAMED_ROWS (360,000) inserted in chunks of MAINT_STREAMED_CHUNK
# (40,000), each waited for; the load then runs over all 400,000 keys. A table of 40,000
# rows reads in ~16 ms, so a read's fixed costs (~0.3 ms per file in DuckDB) weigh more than
# its rows. Not more than 40,000 initial rows: the development broker (librdkafka's mock cluster)
# keeps at most 5 MiB / 100,000 messages per partition and drops the oldest even unread:
# with 300,000 rows the workers, still behind on the snapshot, found their next offset
# dropped and stalled; with 100,000 (~8 MB a partition: 5 % of the rows carry TOASTed
# notes) the first snapshot records were dropped before the workers started.
# Knobs: MAINT_EPOCHS (3600; e.g. 200 for a smoke run), MAINT_INTERVAL (100ms),
#   MAINT_INITIAL_ROWS (40000), MAINT_STREAMED_ROWS (360000), MAINT_STREAMED_CHUNK (40000),
#   MAINT_FRACTION (0.5), MAINT_CEILING_SECONDS (15),
#   MAINT_WORKERS (2), MAINT_READS (15), MAINT_MODES ("on off"), MAINT_COMPACT_ARGS (the
#   policy with compaction on), MAINT_COMMON_ARGS (coordinator options of both runs),
#   MAINT_RATE (transactions/s: skips the ceiling run), MAINT_CATCHUP_TIMEOUT (300),
#   MAINT_READ_TIMEOUT (300 s per read run), MAINT_EARLY_SECONDS (120: the freshness over
#   the load's first seconds too), MAINT_QUIET (1: the quiet read too), BENCH_KEEP=1 keeps
#   the work directory.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=benchmarks/lib.sh
. benchmarks/lib.sh

EPOCHS=${MAINT_EPOCHS:-3600}
INTERVAL=${MAINT_INTERVAL:-100ms}
ROWS=${MAINT_INITIAL_ROWS:-40000}
STREAMED=${MAINT_STREAMED_ROWS:-360000}
CHUNK=${MAINT_STREAMED_CHUNK:-40000}
FRACTION=${MAINT_FRACTION:-0.5}
CEIL_SECS=${MAINT_CEILING_SECONDS:-15}
READS=${MAINT_READS:-15}
MODES=${MAINT_MODES:-on off}
CATCHUP=${MAINT_CATCHUP_TIMEOUT:-300}
EARLY=${MAINT_EARLY_SECONDS:-120}
QUIET=${MAINT_QUIET:-1}
# The policy for 100 ms epochs: the checks come every second instead of every 30 s (the
# default is sized for 1 s epochs) and a partition is compacted past 4 files (default 24)
# or 20 % deleted rows, so that the mirror stays close to compacted for reads; more files
# between rewrites trade read time for fewer bytes rewritten.
# A partition idle for 12 s (the default 2 min, compressed) gets its major rewrite.
COMPACT_ARGS=${MAINT_COMPACT_ARGS:---compact-interval=1s --compact-min-files=4 --compact-idle=12s}
# Time is compressed 10x (100 ms epochs for the default 1 s), so the time-based table
# knobs of both runs are too: the default keeps 30 min of snapshots (1,800 at 1 s epochs);
# 3 min keeps as many at 100 ms. Left at 30 min, the metadata of 18,000 snapshots is
# rewritten on every commit and the commits slow down with the run, whatever compaction does.
COMMON_ARGS=${MAINT_COMMON_ARGS:---snapshot-retention=3m --orphan-interval=6s --orphan-age=1m}
export CHAOS_WORKERS=${MAINT_WORKERS:-2} CHAOS_TABLES=public.transactions CDC_JOB=bench
export CDC_COMMIT_INTERVAL=$INTERVAL BENCH_KEYS=$((ROWS + STREAMED))
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/cdc-bench-maint.XXXXXX")
export BENCH_WORK
mkdir -p "$BENCH_RESULTS"
NS=$CHAOS_NAMESPACE
status=0

cleanup() {
    bench_sampler_stop
    snaplog_stop
    bench_pgbench_stop
    pipeline_down >/dev/null 2>&1
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        bench_log "kept $BENCH_WORK"
    else
        rm -rf "$BENCH_WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The leader's /metrics (empty when no leader answers).
leader_metrics() {
    local id
    id=$(jq -r .id <<<"$(chaos_status)" 2>/dev/null) || return 0
    curl -fsS --max-time 5 "http://$(cat "$CHAOS_DIR/procs/$id.http")/metrics" 2>/dev/null
}

metric() { awk -v m="$1" '$1 == m { v += $2 } END { printf "%.0f\n", v }'; }

# The sum of every series of a metric with labels (name{...} value).
metric_sum() { awk -v m="$1{" 'index($1, m) == 1 { v += $2 } END { printf "%.0f\n", v }'; }

# The changelog's snapshot log for benchmarks/maintenance/freshness.mjs: every 5 s (well
# within the 3 min snapshot retention), the snapshots of its current metadata not logged
# yet, one JSON line each ({seq, ts, op, offsets}), to $1.
snaplog_start() {
    local md=$CHAOS_DIR/warehouse/$NS/transactions_changelog/metadata out=$1
    (
        last=0
        while :; do
            v=$(cat "$md/version-hint.text" 2>/dev/null) &&
                jq -c --argjson last "$last" '.snapshots[]? | select(.["sequence-number"] > $last) |
                    {seq: .["sequence-number"], ts: .["timestamp-ms"], op: .summary.operation,
                     offsets: .summary["cdc.offsets"]}' "$md/v$v.metadata.json" >>"$out" 2>/dev/null &&
                last=$(tail -1 "$out" | jq '.seq // 0' 2>/dev/null || echo "$last")
            sleep 5
        done
    ) &
    # shellcheck disable=SC2034 # read by name in bench_bg_stop
    SNAPLOG_PID=$!
}
snaplog_stop() { bench_bg_stop SNAPLOG_PID; }

snapshot_done() { [ "$(bench_changelog_records "$NS/transactions_changelog")" -ge "$ROWS" ]; }

changelog_at_least() { [ "$(bench_changelog_records "$NS/transactions_changelog")" -ge "$1" ]; }

# The rest of the table, streamed: STREAMED rows inserted after the initial snapshot in
# chunks of CHUNK, each waited for in the changelog, so that the development broker never
# holds more than a chunk unread (it drops the oldest messages past 5 MiB a partition).
stream_rows() {
    local from=$((ROWS + 1)) to
    while [ "$from" -le $((ROWS + STREAMED)) ]; do
        to=$((from + CHUNK - 1))
        [ "$to" -le $((ROWS + STREAMED)) ] || to=$((ROWS + STREAMED))
        bench_psql -c "INSERT INTO public.transactions (entity_id, account, amount, status, note, updated_at)
            SELECT g, 'acct-' || (g % 997), (g % 100000) / 100.0, 'new', 'bulk ' || g, clock_timestamp()
            FROM generate_series($from, $to) g" >/dev/null || return 1
        chaos_wait "$CATCHUP" "rows up to $to in the changelog" changelog_at_least "$to" || return 1
        from=$((to + 1))
    done
}

# run_mode <on|off> <coordinator options>: one run; its figures go to
# $BENCH_WORK/<mode>.json, its samples to $BENCH_WORK/<mode>-files.tsv.
run_mode() {
    local mode=$1 opts=$2 dir=$BENCH_WORK/$1 e0 e1 a0 a1 t_start t_end want deadline caught=1
    local m written read_b ingested written0 read0 ingested0
    export CHAOS_DIR=$dir CHAOS_INITIAL_ROWS=$ROWS CHAOS_COORDINATOR_ARGS="$COMMON_ARGS $opts"
    mkdir -p "$dir"
    bench_log "[$mode] $ROWS initial rows, $CHAOS_WORKERS workers, epochs of $INTERVAL," \
        "$RATE tps, $EPOCHS epochs; coordinator options: ${CHAOS_COORDINATOR_ARGS# }"
    pipeline_servers_up >"$dir/setup.log" 2>&1 || return 1
    pipeline_procs_up >>"$dir/setup.log" 2>&1 || {
        bench_log "[$mode] the pipeline did not start (logs in $dir/procs)"
        return 1
    }
    # the initial snapshot first: the epochs counted are those of the load
    chaos_wait "$CATCHUP" "the initial snapshot in the changelog" snapshot_done || return 1
    if [ "$STREAMED" -gt 0 ]; then
        bench_log "[$mode] streaming $STREAMED more rows in chunks of $CHUNK"
        stream_rows || return 1
    fi
    m=$(leader_metrics)
    written0=$(metric cdc_coordinator_compaction_written_bytes_total <<<"$m")
    read0=$(metric cdc_coordinator_compaction_read_bytes_total <<<"$m")
    ingested0=$(metric_sum cdc_coordinator_table_committed_bytes_total <<<"$m")
    bench_sampler_start "$dir/samples"
    snaplog_start "$dir/snapshots.jsonl"
    e0=$(pipeline_committed)
    a0=$(bench_audit_count)
    t_start=$(date +%s%3N)
    # long enough for the epochs even at a third of the nominal epoch rate; stopped when
    # the epochs are in
    bench_pgbench $((EPOCHS * $(interval_ms) * 3 / 1000 + 60)) -R "$RATE" &
    LOAD_PID=$!
    until [ "$(pipeline_committed)" -ge $((e0 + EPOCHS)) ]; do
        if ! kill -0 "$LOAD_PID" 2>/dev/null; then
            bench_log "[$mode] the load ended before $EPOCHS epochs (at epoch $(pipeline_committed), from $e0)"
            # without compaction the commits slow down as the files pile up, so that run
            # ends with fewer epochs (maintenance_epochs_nocompact): expected, not a failure
            [ "$mode" = off ] || status=1
            break
        fi
        sleep 1
    done
    bench_pgbench_stop
    t_end=$(date +%s%3N)
    e1=$(pipeline_committed)
    a1=$(bench_audit_count)
    want=$((ROWS + STREAMED + a1 - a0))
    deadline=$((SECONDS + CATCHUP))
    until [ "$(bench_changelog_records "$NS/transactions_changelog")" -ge "$want" ]; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            bench_log "[$mode] the changelog did not catch up within ${CATCHUP}s" \
                "($(bench_changelog_records "$NS/transactions_changelog") of $want records)"
            caught=0
            status=1
            break
        fi
        sleep 0.5
    done
    m=$(leader_metrics)
    # over the load only: the metrics' growth since it started
    written=$(($(metric cdc_coordinator_compaction_written_bytes_total <<<"$m") - ${written0:-0}))
    read_b=$(($(metric cdc_coordinator_compaction_read_bytes_total <<<"$m") - ${read0:-0}))
    ingested=$(($(metric_sum cdc_coordinator_table_committed_bytes_total <<<"$m") - ${ingested0:-0}))
    sleep 6 # one more sample of the caught-up tables, one more poll of the snapshots
    bench_sampler_stop
    snaplog_stop
    proc_stop_all >/dev/null 2>&1 # nothing commits while the warehouse is read
    bench_log "[$mode] epochs $e0..$e1 in $(((t_end - t_start) / 1000)) s, $((a1 - a0)) changes; reading"

    node benchmarks/maintenance/freshness.mjs "$dir/warehouse/$NS/transactions_changelog" \
        "$dir/snapshots.jsonl" "$dir/latency.json" --from "$t_start" --to "$t_end" >"$dir/latency.log" 2>&1 ||
        bench_log "[$mode] freshness.mjs failed: $(tail -3 "$dir/latency.log")"
    # the same over the load's first MAINT_EARLY_SECONDS only, while the uncompacted
    # tables are still small: what compaction's own work costs the commits
    node benchmarks/maintenance/freshness.mjs "$dir/warehouse/$NS/transactions_changelog" \
        "$dir/snapshots.jsonl" "$dir/latency-early.json" --from "$t_start" \
        --to "$((t_start + EARLY * 1000))" >>"$dir/latency.log" 2>&1 || true
    [ -s "$dir/latency-early.json" ] || echo '{}' >"$dir/latency-early.json"
    # an uncompacted mirror of tens of thousands of files reads for minutes: bounded
    timeout "${MAINT_READ_TIMEOUT:-300}" node benchmarks/maintenance/readtime.mjs \
        "$dir/warehouse/$NS/transactions" "$dir/read" \
        --reads "$READS" >"$dir/read.json" 2>"$dir/read.log" ||
        bench_log "[$mode] readtime.mjs failed or passed MAINT_READ_TIMEOUT (${MAINT_READ_TIMEOUT:-300} s): $(tail -3 "$dir/read.log")"
    # The quiet table: the pipeline again without load until the idle rule has left the
    # mirror one data file per partition and no deletes (--compact-idle), then read again.
    if [ "$mode" = on ] && [ "$QUIET" = 1 ]; then
        if pipeline_procs_up >>"$dir/setup.log" 2>&1 &&
            chaos_wait "$CATCHUP" "the idle rule's major rewrites of the mirror" mirror_quiet; then
            proc_stop_all >/dev/null 2>&1
            timeout "${MAINT_READ_TIMEOUT:-300}" node benchmarks/maintenance/readtime.mjs \
                "$dir/warehouse/$NS/transactions" "$dir/read-quiet" \
                --reads "$READS" >"$dir/read-quiet.json" 2>"$dir/read-quiet.log" ||
                bench_log "[$mode] readtime.mjs (quiet) failed: $(tail -3 "$dir/read-quiet.log")"
        else
            bench_log "[$mode] the mirror was not compacted by the idle rule within ${CATCHUP}s"
        fi
    fi
    [ -s "$dir/latency.json" ] || echo '{}' >"$dir/latency.json"
    [ -s "$dir/read.json" ] || echo '{}' >"$dir/read.json"
    [ -s "$dir/read-quiet.json" ] || echo '{}' >"$dir/read-quiet.json"
    # files per table against the epoch (one line per sample and table)
    # (epochs since the load started, table, files, data files, delete files) and one file
    # per table for the plot
    awk -F'\t' -v ns="$NS." -v e0="$e0" -v m="$mode" -v w="$BENCH_WORK" '$2 >= e0 {
        t = $3; sub("^" ns, "", t)
        line = $2 - e0 "\t" t "\t" $4 + $5 "\t" $4 "\t" $5
        print line; print line >(w "/" m "-" t ".tsv") }' \
        "$dir/samples/tables.tsv" >"$BENCH_WORK/$mode-files.tsv"
    jq -n --argjson e0 "$e0" --argjson e1 "$e1" --argjson changes "$((a1 - a0))" \
        --argjson secs "$(((t_end - t_start) / 1000))" --argjson caught "$caught" \
        --argjson ing "${ingested:-0}" --argjson written "${written:-0}" --argjson readb "${read_b:-0}" \
        --slurpfile lat "$dir/latency.json" --slurpfile early "$dir/latency-early.json" \
        --slurpfile rd "$dir/read.json" --slurpfile rq "$dir/read-quiet.json" \
        --rawfile files "$BENCH_WORK/$mode-files.tsv" '
        ($files | split("\n") | map(select(length > 0) | split("\t"))) as $f |
        {first_epoch: $e0, last_epoch: $e1, epochs: ($e1 - $e0), seconds: $secs, changes: $changes, caught: $caught,
         ingested_bytes: $ing, rewritten_bytes: $written, compaction_read_bytes: $readb, latency: $lat[0], latency_early: $early[0], read: $rd[0], read_quiet: $rq[0],
         files_max: ([$f[] | .[2] | tonumber] | max // 0),
         files_max_by_table: ($f | group_by(.[1]) | map({key: .[0][1], value: (map(.[2] | tonumber) | max)}) | from_entries),
         files_end_by_table: ($f | group_by(.[1]) | map({key: .[0][1], value: (.[-1][2] | tonumber)}) | from_entries)}' \
        >"$BENCH_WORK/$mode.json" || return 1
    bench_log "[$mode] $(jq -c '{epochs, seconds, files_max_by_table, files_end_by_table,
        p99_ms: .latency.p99_ms, read_ms: .read.current_ms, compacted_ms: .read.compacted_ms,
        ingested_bytes, rewritten_bytes}' "$BENCH_WORK/$mode.json")"
    if [ "${BENCH_KEEP:-0}" = 1 ]; then pipeline_down >/dev/null 2>&1; else pipeline_down purge >/dev/null 2>&1; fi
    return 0
}

# True when the leader's metrics show the mirror with at most one data file per partition
# and no delete file (a table no epoch commits to after a restart is in the metrics, from
# its compaction, but not in /status tables, which follow the epochs).
mirror_quiet() {
    local m t="{table=\"$NS.transactions\"}"
    m=$(leader_metrics)
    [ "$(metric "cdc_coordinator_table_delete_files$t" <<<"$m")" = 0 ] &&
        [ "$(metric "cdc_coordinator_table_data_files$t" <<<"$m")" -le 12 ] &&
        [ "$(metric "cdc_coordinator_table_data_files$t" <<<"$m")" -gt 0 ]
}

# The commit interval in ms (100ms, 1s, 2.5s).
interval_ms() {
    awk -v v="$INTERVAL" 'BEGIN { n = v + 0; if (v ~ /ms$/) print int(n); else print int(n * 1000) }'
}

plot() {
    local w=$BENCH_WORK
    command -v gnuplot >/dev/null 2>&1 || {
        bench_log "gnuplot not installed: no plot"
        return 0
    }
    [ -s "$w/on-transactions.tsv" ] && [ -s "$w/off-transactions.tsv" ] || return 0
    {
        printf '# mode\tepochs since the load started\ttable\tfiles\tdata files\tdelete files\n'
        sed 's/^/on\t/' "$w/on-files.tsv"
        sed 's/^/off\t/' "$w/off-files.tsv"
    } >"$BENCH_RESULTS/maintenance-files.tsv"
    gnuplot <<EOF
set terminal pngcairo size 1000,480 noenhanced
set output "$BENCH_RESULTS/maintenance-files.png"
set datafile separator "\t"
set grid
set key top left
set title "Iceberg files of the current snapshot (data + delete) per table: $INTERVAL epochs, $((ROWS + STREAMED)) rows, $RATE tx/s"
set xlabel "epochs since the load started"
set ylabel "files"
plot "$w/off-transactions.tsv" using 1:3 with lines lw 2 lc rgb "#d62728" title "mirror, compaction off", \\
     "$w/off-transactions_changelog.tsv" using 1:3 with lines lw 2 dt 2 lc rgb "#ff9896" title "changelog, compaction off", \\
     "$w/on-transactions.tsv" using 1:3 with lines lw 2 lc rgb "#1f77b4" title "mirror, compaction on", \\
     "$w/on-transactions_changelog.tsv" using 1:3 with lines lw 2 dt 2 lc rgb "#17becf" title "changelog, compaction on"
EOF
}

# ---- the ceiling ------------------------------------------------------------------------------

if [ -n "${MAINT_RATE:-}" ]; then
    RATE=$MAINT_RATE
else
    export CHAOS_DIR=$BENCH_WORK/ceiling CHAOS_INITIAL_ROWS=$((ROWS + STREAMED))
    bench_log "PostgreSQL ceiling with $((ROWS + STREAMED)) rows in the table (${CEIL_SECS}s)"
    pipeline_servers_up >"$BENCH_WORK/ceiling.log" 2>&1 && bench_pg_ceiling "$CEIL_SECS" || exit 1
    pipeline_down purge >/dev/null 2>&1
    RATE=$(awk -v c="$CEIL_TPS" -v f="$FRACTION" 'BEGIN { printf "%.0f\n", c * f }')
    bench_line maintenance_pg_ceiling_tps "$CEIL_TPS" tx/s
fi
bench_line maintenance_offered_tps "$RATE" tx/s

for mode in $MODES; do
    case "$mode" in
    on) run_mode on "$COMPACT_ARGS" || { status=1; pipeline_down >/dev/null 2>&1; } ;;
    off) run_mode off --compact=false || { status=1; pipeline_down >/dev/null 2>&1; } ;;
    *)
        echo "bench-maintenance: unknown mode \"$mode\" (on, off)" >&2
        status=2
        ;;
    esac
done

# ---- figures -----------------------------------------------------------------------------------

j() { jq -r "$2" "$BENCH_WORK/$1.json" 2>/dev/null; }
# read_lines <mode> <suffix> [<field>]: the read ratio of the read in field (read: at the
# end of the load; read_quiet: after the idle rule), or maintenance_read_failed<suffix> = 1
read_lines() {
    local r=".${3:-read}"
    if [ "$(j "$1" "$r.ratio != null")" = true ]; then
        bench_line "maintenance_read_ratio$2" "$(j "$1" "$r.ratio * 1000 | round / 1000")" x \
            "$(j "$1" "$r.compacted_ms | round")" "$(j "$1" "$r.ratio * 1000 | round / 1000")" compacted_copy_ms
        bench_line "maintenance_read_ratio_onefile$2" "$(j "$1" "$r.ratio_onefile * 1000 | round / 1000")" x \
            "$(j "$1" "$r.compacted_onefile_ms | round")" "$(j "$1" "$r.ratio_onefile * 1000 | round / 1000")" compacted_onefile_ms
        bench_line "maintenance_read_ms$2" "$(j "$1" "$r.current_ms | round")" ms
    else
        bench_log "[$1] the read of the current snapshot failed: $(j "$1" "$r.error // \"no result\"")"
        bench_line "maintenance_read_failed$2" 1 count
    fi
}
if [ -s "$BENCH_WORK/on.json" ]; then
    bench_line maintenance_epochs "$(j on .epochs)" epochs
    read_lines on ""
    [ "$QUIET" = 1 ] && read_lines on _quiet read_quiet
    bench_line maintenance_files_max "$(j on .files_max)" files
    bench_line maintenance_files_end "$(j on '[.files_end_by_table[]] | max')" files
    bench_line maintenance_freshness_p99_ms "$(j on '.latency.p99_ms | floor')" ms
    bench_line maintenance_write_amplification "$(bench_div "$(j on .rewritten_bytes)" "$(j on .ingested_bytes)")" x
    bench_line maintenance_compaction_written_bytes "$(j on .rewritten_bytes)" bytes
    bench_line maintenance_ingested_bytes "$(j on .ingested_bytes)" bytes
fi
if [ -s "$BENCH_WORK/off.json" ]; then
    bench_line maintenance_epochs_nocompact "$(j off .epochs)" epochs
    read_lines off _nocompact
    bench_line maintenance_files_max_nocompact "$(j off .files_max)" files
    bench_line maintenance_freshness_p99_ms_nocompact "$(j off '.latency.p99_ms | floor')" ms
fi
if [ -s "$BENCH_WORK/on.json" ] && [ -s "$BENCH_WORK/off.json" ]; then
    p_on=$(j on '.latency.p99_ms | floor')
    p_off=$(j off '.latency.p99_ms | floor')
    r=$(bench_div "$p_on" "$p_off")
    bench_line maintenance_freshness_p99_ratio "$r" x "$p_off" "$r" compaction_off_p99_ms
    e_on=$(j on '.latency_early.p99_ms // 0 | floor')
    e_off=$(j off '.latency_early.p99_ms // 0 | floor')
    re=$(bench_div "$e_on" "$e_off")
    bench_line maintenance_freshness_p99_ratio_early "$re" x "$e_off" "$re" compaction_off_early_p99_ms
    plot
    awk -v rr="$(j on '.read.ratio // 1e9')" -v fr="$r" 'BEGIN {
        printf "maintenance: read ratio <= 1.2: %s (%.2f); freshness ratio <= 1.2: %s (%.2f)\n",
            (rr <= 1.2 ? "met" : "NOT met"), rr, (fr <= 1.2 ? "met" : "NOT met"), fr }' >&2
fi
bench_line maintenance_machine_load1_at_end "$(bench_load1)" load
exit $status
