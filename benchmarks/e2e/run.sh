#!/usr/bin/env bash
# End-to-end benchmark (make bench-e2e), on this machine with the local pipeline of
# chaos/lib.sh (harness PostgreSQL, etcd, development broker; capture, 2 coordinators,
# N workers; warehouse in a local directory). Parts, chosen by E2E_PARTS:
#   main     PostgreSQL's write ceiling with the pipeline not running (pgbench, mixed
#            workload, as fast as it goes), then the pipeline with 3 workers at a 1 s
#            commit interval under E2E_FRACTION of that rate: latency p50/p95/p99 from
#            commit to visible Iceberg snapshot, sustained changes/s vs the ceiling,
#            checkpoint duration and size, consumer lag, CPU and RSS per process, plots
#   sweep    commit interval 100 ms, 1 s, 5 s, 30 s at the same offered rate: latency
#            percentiles, files per hour, small files
#   scaling  1, 2, 3, 6 workers with pgbench unthrottled: throughput and latency (a
#            configuration that does not catch up within E2E_SCALE_CATCHUP s reports
#            what it made visible and how far behind it is, no latency)
# Method and caveats: docs/benchmarks.md. Knobs (seconds unless noted):
#   E2E_PARTS ("main sweep scaling"), E2E_CEILING_SECONDS (20), E2E_SECONDS (60),
#   E2E_FRACTION (0.55), E2E_SWEEP_SECONDS (30; the 30 s interval runs 3x, at least 90), E2E_SWEEP
#   ("100ms 1s 5s 30s"), E2E_SCALE_SECONDS (30), E2E_SCALE ("1 2 3 6"),
#   E2E_CATCHUP_TIMEOUT (180), E2E_SCALE_CATCHUP (30), BENCH_KEYS (100000), BENCH_PGBENCH_CLIENTS (4),
#   E2E_RATE (transactions/s; skips the ceiling run's rate derivation when set).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=benchmarks/lib.sh
. benchmarks/lib.sh

PARTS=${E2E_PARTS:-main sweep scaling}
CEIL_SECS=${E2E_CEILING_SECONDS:-20}
MAIN_SECS=${E2E_SECONDS:-60}
FRACTION=${E2E_FRACTION:-0.55}
SWEEP_SECS=${E2E_SWEEP_SECONDS:-30}
SCALE_SECS=${E2E_SCALE_SECONDS:-30}
CATCHUP=${E2E_CATCHUP_TIMEOUT:-180}
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/cdc-bench-e2e.XXXXXX")
export BENCH_WORK
mkdir -p "$BENCH_RESULTS"
CLK_TCK=$(getconf CLK_TCK)
status=0

cleanup() {
    bench_sampler_stop
    pipeline_down >/dev/null 2>&1
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        bench_log "kept $BENCH_WORK"
    else
        rm -rf "$BENCH_WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- one measured run -----------------------------------------------------------------------

# run_once <label> <workers> <commit interval> <rate tps, 0 = unthrottled> <seconds>
#          [ceiling seconds]
# Leaves its figures in $BENCH_WORK/<label>/result.json (latency.mjs) and the variables
# R_* (see below). With a ceiling duration, measures the ceiling first (CEIL_*).
run_once() {
    local label=$1 workers=$2 interval=$3 rate=$4 secs=$5 ceil=${6:-}
    local dir=$BENCH_WORK/$label t_start t_end a0 a1 deadline rargs=()
    export CHAOS_DIR=$dir CHAOS_WORKERS=$workers CDC_COMMIT_INTERVAL=$interval
    export CDC_JOB=bench
    mkdir -p "$dir"
    bench_log "[$label] $workers workers, commit interval $interval, rate ${rate:-max} tps, ${secs}s"
    pipeline_servers_up >"$dir/setup.log" 2>&1 || return 1
    if [ -n "$ceil" ]; then
        bench_pg_ceiling "$ceil" || return 1
        if [ -n "${E2E_RATE:-}" ]; then
            rate=$E2E_RATE
        else
            rate=$(awk -v c="$CEIL_TPS" -v f="$FRACTION" 'BEGIN { printf "%.0f\n", c * f }')
        fi
        OFFERED_TPS=$rate
    fi
    pipeline_procs_up >>"$dir/setup.log" 2>&1 || {
        bench_log "[$label] the pipeline did not start (logs in $dir/procs)"
        return 1
    }
    [ "$rate" -gt 0 ] && rargs=(-R "$rate")
    bench_sampler_start "$dir/samples"
    R_LOAD1=$(bench_load1)
    a0=$(bench_audit_count)
    t_start=$(date +%s%3N)
    bench_pgbench "$secs" "${rargs[@]}" || bench_log "[$label] pgbench: $(tail -3 "$BENCH_WORK/pgbench-$BENCH_PGBENCH_RUNS.log")"
    t_end=$(date +%s%3N)
    a1=$(bench_audit_count)
    R_CHANGES=$((a1 - a0))
    R_PG_CPS=$(awk -v n="$R_CHANGES" -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.0f\n", n * 1000 / (b - a) }')
    deadline=$((SECONDS + ${RUN_CATCHUP:-$CATCHUP}))
    R_CAUGHT=1
    until [ "$(bench_changelog_records "$CHAOS_NAMESPACE/transactions_changelog")" -ge "$R_CHANGES" ]; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            bench_log "[$label] the changelog did not catch up within ${RUN_CATCHUP:-$CATCHUP}s" \
                "($(bench_changelog_records "$CHAOS_NAMESPACE/transactions_changelog") of $R_CHANGES)"
            R_CAUGHT=0
            break
        fi
        sleep 0.2
    done
    bench_sampler_stop
    pipeline_down >/dev/null 2>&1 # nothing commits while the warehouse is read
    node benchmarks/e2e/latency.mjs "$dir/warehouse/$CHAOS_NAMESPACE/transactions_changelog" \
        "$dir/result" --from "$t_start" --to "$t_end" >/dev/null || return 1
    R_START=$t_start
    R_END=$t_end
    R_LAST_VISIBLE=$(jq -r '.last_visible_ms' "$dir/result.json")
    # sustained = changes committed in PostgreSQL during the load / time from the load's
    # start until the last of them was visible in Iceberg
    R_CPS=$(awk -v n="$(jq -r .changes "$dir/result.json")" -v a="$t_start" -v b="$R_LAST_VISIBLE" \
        'BEGIN { if (b <= a) print 0; else printf "%.0f\n", n * 1000 / (b - a) }')
    R_DIR=$dir
    bench_log "[$label] $R_CHANGES changes ($R_PG_CPS/s into PostgreSQL), $R_CPS/s sustained end to end;" \
        "latency p50/p95/p99 $(jq -r '"\(.p50_ms|floor)/\(.p95_ms|floor)/\(.p99_ms|floor)"' "$dir/result.json") ms"
    return 0
}

# Figures of a run from result.json: <prefix>_latency_{p50,p95,p99}_ms.
latency_lines() {
    local p
    for p in p50 p95 p99; do
        bench_line "$1_latency_${p}_ms" "$(jq -r ".${p}_ms | floor" "$R_DIR/result.json")" ms
    done
}

# CPU (% of one core over the load window) and peak RSS (MB) per process.
proc_lines() {
    awk -v a="$R_START" -v b="$R_END" -v hz="$CLK_TCK" -v pre="$1" '
        $1 >= a - 1500 && $1 <= b {
            n = $2; gsub(/-/, "_", n)
            if (!(n in t0)) { t0[n] = $3; s0[n] = $1 }
            t1[n] = $3; s1[n] = $1
            if ($5 > peak[n]) peak[n] = $5
        }
        END {
            for (n in t0) {
                if (s1[n] > s0[n])
                    printf "BENCH %s_cpu_%s %.1f %%\n", pre, n, (t1[n] - t0[n]) / hz * 100000 / (s1[n] - s0[n])
                printf "BENCH %s_rss_peak_%s %.1f MB\n", pre, n, peak[n] / 1024
            }
        }' "$R_DIR/samples/proc.tsv" | sort
}

# Checkpoints (epochs with records) seen by the sampler during the run: duration and size.
checkpoint_lines() {
    jq -s -r --argjson a "$R_START" --argjson b "$R_END" --arg p "$1" '
        [.[] | select(.records > 0 and .completed_at_ms >= $a and .completed_at_ms <= $b + 5000)]
        | unique_by(.epoch) as $c
        | if ($c | length) == 0 then empty else
          ($c | map(.duration_ms) | sort) as $d | ($c | map(.bytes) | sort) as $s |
          "BENCH \($p)_checkpoint_duration_p50_ms \($d[(($d|length) * 0.5 | floor)]) ms",
          "BENCH \($p)_checkpoint_duration_p99_ms \($d[((($d|length) * 0.99 | ceil) - 1)]) ms",
          "BENCH \($p)_checkpoint_bytes_mean \(($s | add / length) | floor) bytes",
          "BENCH \($p)_checkpoints_measured \($c | length) count" end' \
        "$R_DIR/samples/checkpoints.jsonl"
}

lag_lines() {
    awk -v a="$R_START" -v b="$R_END" -v pre="$1" '
        $1 >= a && $1 <= b { n++; s += $2; if ($2 > m) m = $2; c += $4 }
        END { printf "BENCH %s_consumer_lag_max %d records\nBENCH %s_consumer_lag_mean %.0f records\n",
              pre, m, pre, (n ? s / n : 0)
              printf "BENCH %s_machine_cpu_busy %.0f %%\n", pre, (n ? c / n : 0) }' "$R_DIR/samples/samples.tsv"
}

plots() {
    local tsv=$1 name=$2
    command -v gnuplot >/dev/null 2>&1 || {
        bench_log "gnuplot not installed: no plots"
        return 0
    }
    cp "$tsv" "$BENCH_RESULTS/$name.tsv"
    gnuplot <<EOF
set terminal pngcairo size 900,420 noenhanced
set datafile separator "\t"
set datafile missing ""
set grid
set key top left
set xlabel "seconds since the load started"
set output "$BENCH_RESULTS/$name-throughput.png"
set title "end to end throughput ($name): changes per second"
set ylabel "changes/s"
plot "$tsv" using 1:2 with lines lw 2 title "committed in PostgreSQL", \
     "$tsv" using 1:5 with impulses lw 1 lc rgb "#a0a0a0" title "visible in Iceberg (per second)", \
     "$tsv" using 1:6 with lines lw 2 title "visible in Iceberg (5 s average)"
set output "$BENCH_RESULTS/$name-latency.png"
set title "end to end latency ($name): PostgreSQL commit -> Iceberg snapshot visible"
set ylabel "ms"
plot "$tsv" using 1:3 with lines lw 2 title "p50 per second", \
     "$tsv" using 1:4 with lines lw 2 title "p99 per second"
EOF
}

# ---- parts ----------------------------------------------------------------------------------

part_main() {
    run_once main 3 1s 0 "$MAIN_SECS" "$CEIL_SECS" || return 1
    [ "$R_CAUGHT" = 1 ] || status=1
    local cps_ratio
    MAIN_RATE=$OFFERED_TPS
    cps_ratio=$(bench_div "$R_CPS" "$CEIL_CPS")
    bench_line e2e_pg_ceiling_changes_per_s "$CEIL_CPS" changes/s
    bench_line e2e_pg_ceiling_tps "$CEIL_TPS" tx/s
    bench_line e2e_offered_tps "$OFFERED_TPS" tx/s
    bench_line e2e_sustained_changes_per_s "$R_CPS" changes/s "$CEIL_CPS" "$cps_ratio" pg_ceiling
    latency_lines e2e
    bench_line e2e_changes_measured "$(jq -r .changes "$R_DIR/result.json")" changes
    bench_line e2e_commit_time_violations "$(jq -r .clock_check.updated_at_after_commit "$R_DIR/result.json")" rows
    checkpoint_lines e2e
    lag_lines e2e
    bench_line e2e_machine_load1_at_start "$R_LOAD1" load
    proc_lines e2e
    plots "$R_DIR/result.tsv" e2e
    awk -v r="$cps_ratio" -v p="$(jq -r .p99_ms "$R_DIR/result.json")" 'BEGIN {
        printf "e2e: target p99 <= 2000 ms: %s (%.0f ms); sustained >= 0.5 x ceiling: %s (%.2f)\n",
            (p <= 2000 ? "met" : "NOT met"), p, (r >= 0.5 ? "met" : "NOT met"), r }' >&2
}

part_sweep() {
    local rate=${E2E_RATE:-${MAIN_RATE:-}} iv secs name hours
    if [ -z "$rate" ]; then
        # no main part in this run: measure the ceiling on a pipeline-less PostgreSQL first
        export CHAOS_DIR=$BENCH_WORK/ceiling
        pipeline_servers_up >/dev/null 2>&1 && bench_pg_ceiling "$CEIL_SECS" || return 1
        pipeline_down >/dev/null 2>&1
        rate=$(awk -v c="$CEIL_TPS" -v f="$FRACTION" 'BEGIN { printf "%.0f\n", c * f }')
        MAIN_RATE=$rate
    fi
    for iv in ${E2E_SWEEP:-100ms 1s 5s 30s}; do
        secs=$SWEEP_SECS
        # the 30 s interval needs a few commits: at least 90 s
        [ "$iv" = 30s ] && secs=$((SWEEP_SECS * 3 > 90 ? SWEEP_SECS * 3 : 90))
        name=sweep_${iv}
        run_once "$name" 3 "$iv" "$rate" "$secs" || {
            status=1
            continue
        }
        [ "$R_CAUGHT" = 1 ] || status=1
        latency_lines "$name"
        hours=$(awk -v a="$R_START" -v b="$R_END" 'BEGIN { print (b - a) / 3600000 }')
        bench_line "${name}_files_per_hour" "$(jq -r --argjson h "$hours" \
            '(.data_files + .delete_files) / $h | floor' "$R_DIR/result.json")" files/h
        bench_line "${name}_small_files" "$(jq -r .small_files "$R_DIR/result.json")" files
        bench_line "${name}_files" "$(jq -r '.data_files + .delete_files' "$R_DIR/result.json")" files
        bench_line "${name}_sustained_changes_per_s" "$R_CPS" changes/s
        if [ "$iv" = 1s ]; then plots "$R_DIR/result.tsv" sweep-1s; fi
    done
    return 0
}

# Unthrottled load; a configuration that falls behind gets E2E_SCALE_CATCHUP seconds after
# the load to catch up. Its throughput is then what became visible by that deadline, and
# its latency is not reported (the changes still missing would be its slowest ones):
# scale_<n>w_behind counts them instead.
part_scaling() {
    local n behind
    for n in ${E2E_SCALE:-1 2 3 6}; do
        RUN_CATCHUP=${E2E_SCALE_CATCHUP:-30} run_once "scale_${n}w" "$n" 1s 0 "$SCALE_SECS" || {
            status=1
            continue
        }
        bench_line "scale_${n}w_changes_per_s" "$R_CPS" changes/s
        bench_line "scale_${n}w_pg_changes_per_s" "$R_PG_CPS" changes/s
        behind=$((R_CHANGES - $(jq -r .changes "$R_DIR/result.json")))
        bench_line "scale_${n}w_behind" "$((behind < 0 ? 0 : behind))" changes
        if [ "$R_CAUGHT" = 1 ]; then latency_lines "scale_${n}w"; fi
    done
    return 0
}

for part in $PARTS; do
    case "$part" in
    main | sweep | scaling) "part_$part" || status=1 ;;
    *)
        echo "bench-e2e: unknown part \"$part\" (main, sweep, scaling)" >&2
        status=2
        ;;
    esac
done
exit $status
