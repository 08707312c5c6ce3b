#!/usr/bin/env bash
# The chaos suite: `make chaos DURATION=<seconds>` (default 300; CI runs a short one).
# Starts the local pipeline (chaos/lib.sh; CHAOS_BACKEND=compose|k8s runs against
# containers or pods that are already up instead: docker/compose.sh run-chaos and
# make compose-test for compose), then for each scenario: runs the load generator,
# injects the scenario's faults, stops the load, waits for the tables to catch up and runs
# the verifier (every backend). Prints a table (faults injected,
# recoveries, records lost / duplicated / mismatched per scenario) and exits non-zero when
# any scenario lost, duplicated or mismatched a record or did not recover.
#   SEED=<n>            replay a run (the seed is printed first)
#   SCENARIOS="a b"     run only these (names in chaos/scenarios.sh)
#   LOAD_RATE=<n>       changes per second during the scenarios (default 300)
#   CHAOS_KEEP=1        keep .run/chaos after the run
#   CDC_COMPACT_*       the coordinators' compaction policy (default: compact every 2 s)
# SOAK=1 (make soak DURATION=1800) runs the scenarios in turn until DURATION is spent
# instead (SOAK_SCENARIO_SECONDS each, default 35), each followed by a double fault under
# the same load, and a schema change after every third, while benchmarks/sampler.mjs records every process's
# RSS, descriptors and threads; chaos/soak-report.mjs then writes the report (SOAK_OUT,
# default benchmarks/results/soak): verdicts, recovery times, fitted trends and a plot.
set -uo pipefail
# shellcheck source=tools/launched.sh
. "$(dirname "$0")/../tools/launched.sh"
cd "$(dirname "$0")/.." || exit 1
export CHAOS_DIR=${CHAOS_DIR:-$PWD/.run/chaos}
# The capture set is the publication and the workers follow the job's tables (no
# --tables on either), so that add-table can add one while the pipeline runs; its
# incremental snapshot reads chunks of 500 rows, so that the faults land inside it.
export CHAOS_CAPTURE_TABLES=${CHAOS_CAPTURE_TABLES-} CHAOS_WORKER_TABLES=${CHAOS_WORKER_TABLES-}
export CDC_SNAPSHOT_CHUNK=${CDC_SNAPSHOT_CHUNK:-500}
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# shellcheck source=chaos/scenarios.sh
. chaos/scenarios.sh

DURATION=${DURATION:-300}
# Small epochs' memory, so that a backlog pauses fetching (backlog-uncompressed).
export CHAOS_WORKER_ARGS=${CHAOS_WORKER_ARGS---max-staged-bytes=2MiB}
# Compaction forced to run often (docs/iceberg.md, "Table maintenance"): every 2 s, any
# Kafka partition of a table with more than 4 files, small target files, and orphan
# cleanup of what a killed leader's rewrite left. Every coordinator takes these from the
# environment (docs/configuration.md).
export CDC_COMPACT_INTERVAL=${CDC_COMPACT_INTERVAL:-2s} CDC_COMPACT_MIN_FILES=${CDC_COMPACT_MIN_FILES:-4}
export CDC_COMPACT_TARGET_SIZE=${CDC_COMPACT_TARGET_SIZE:-1MiB}
export CDC_ORPHAN_INTERVAL=${CDC_ORPHAN_INTERVAL:-20s} CDC_ORPHAN_AGE=${CDC_ORPHAN_AGE:-60s}
LOAD_RATE=${LOAD_RATE:-300}
CATCHUP=${CATCHUP:-90}
read -r -a scenarios <<<"${SCENARIOS:-${CHAOS_SCENARIOS[*]}}"
chaos_seed "${SEED:-}"

budget=$((DURATION / ${#scenarios[@]}))
[ "$budget" -lt 10 ] && budget=10
SOAK=${SOAK:-0}
if [ "$SOAK" = 1 ]; then
    budget=${SOAK_SCENARIO_SECONDS:-35}
    # a steady state: as many rows deleted as inserted, so that what a process holds
    # for the data (PostgreSQL's buffers, the workers' state) stops growing and a trend
    # is a leak
    export CHAOS_LOAD_MIX=${CHAOS_LOAD_MIX:-insert=15,reinsert=5,delete=20,update=30,multi=10,second=20}
    # The development broker keeps at most 5 MiB a partition and deletes the oldest
    # records, read or not (docs/benchmarks.md). After half an hour of schema changes a
    # row is about 30 columns wider, and 40,000 uncompressed rows (about 3,300 a
    # partition) outgrow it before the workers read them. 15,000 rows still exceed the
    # workers' staged bytes, so fetching still pauses.
    export CHAOS_BACKLOG_ROWS=${CHAOS_BACKLOG_ROWS:-15000}
    # What the data makes the processes hold reaches its steady state within the warm-up
    # (the first fifth), so that the judge's trends are leaks: the tables keep 3 minutes of
    # snapshots (--snapshot-retention; at the default 30 minutes the leader's table
    # metadata grows for the whole soak, one snapshot a table an epoch), and schema-change
    # keeps at most 4 columns of its own a table, dropping the oldest before it adds one.
    export CHAOS_COORDINATOR_ARGS="--snapshot-retention=${SOAK_SNAPSHOT_RETENTION:-3m} ${CHAOS_COORDINATOR_ARGS:-}"
    export SCHEMA_CHANGE_MAX_COLUMNS=${SCHEMA_CHANGE_MAX_COLUMNS:-4}
    # The same for the tables' sizes: the backlog's rows are deleted after it, and a table
    # added mid-run has 5,000 rows (a schema change's backfill reads the whole table; a
    # worker's RSS keeps the high-water mark of the largest burst it drained).
    export CHAOS_BACKLOG_DELETE=1 CHAOS_ADD_ROWS=${CHAOS_ADD_ROWS:-5000}
    # One worker is never picked by a fault: a witness that lives the whole run.
    export CHAOS_SPARE=${CHAOS_SPARE-worker-0}
fi

results=()
failed=0

cleanup() {
    local t
    # a failed run: each process's last warnings, before its logs go
    if [ "$failed" -ne 0 ] && [ -d "$CHAOS_DIR/procs" ]; then
        for f in "$CHAOS_DIR"/procs/*.log; do
            grep -E 'level=(warn|error)' "$f" 2>/dev/null | grep -v 'kafka FAIL' | tail -n 15 |
                sed "s|^|chaos: $(basename "$f" .log): |"
        done
    elif [ "$failed" -ne 0 ] && [ "$CHAOS_BACKEND" = compose ]; then
        for t in $(chaos_targets capture) $(chaos_targets coordinator) $(chaos_targets worker); do
            chaos_logs "$t" | grep -E '"level":"(warn|error)"' | tail -n 15 | sed "s|^|chaos: $t: |"
        done
    fi
    if [ -n "${SAMPLER_PID:-}" ]; then
        kill -TERM "$SAMPLER_PID" 2>/dev/null
        wait "$SAMPLER_PID" 2>/dev/null
    fi
    if [ "$CHAOS_BACKEND" = local ]; then
        if [ "${CHAOS_KEEP:-0}" = 1 ]; then pipeline_down; else pipeline_down purge; fi
    fi
}

case "$CHAOS_BACKEND" in
local)
    for b in cdc-capture cdc-coordinator cdc-worker loadgen; do
        [ -x "$CHAOS_BUILD/$b" ] || chaos_die "$CHAOS_BUILD/$b is not built (make bins)"
    done
    rm -rf "$CHAOS_DIR"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    CHAOS_PROXY=1 pipeline_up
    export CHAOS_PROXY=1
    ;;
compose)
    mkdir -p "$CHAOS_DIR"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    chaos_log "backend compose: faults against the containers of project $CHAOS_COMPOSE_PROJECT" \
        "($CHAOS_ENGINE), load from its loadgen service, verified against $(chaos_pg_dsn | cut -d' ' -f1-2)"
    chaos_wait 120 "a leader with ${CHAOS_WORKERS} live workers" pipeline_ready ||
        chaos_die "the stack is not up (a leader with ${CHAOS_WORKERS} live workers and a commit)"
    ;;
k8s)
    # against k8s/overlays/dev: load, faults and a verifier run after every scenario
    # (chaos/k8s.sh); a container killed again and again restarts with a backoff
    k8s_check
    mkdir -p "$CHAOS_DIR"
    export CHAOS_RECOVERY_TIMEOUT=${CHAOS_RECOVERY_TIMEOUT:-180}
    trap 'k8s_load_stop' EXIT
    trap 'exit 130' INT TERM
    chaos_wait 180 "a leader with ${CHAOS_WORKERS} live workers" pipeline_ready ||
        chaos_die "the pipeline in namespace $CHAOS_K8S_NAMESPACE is not running"
    ;;
esac

# A worker the leader does not count as alive after a scenario (say, a paused worker that
# never rejoined) is restarted, so the next scenario starts from a whole pipeline; the
# scenario that left it behind has already been marked as not recovered.
repair_workers() {
    local st w n
    st=$(chaos_status 2>/dev/null) || return 0
    for ((n = 0; n < CHAOS_WORKERS; n++)); do
        w=$(jq -r --arg id "$n" '[.workers[] | select(.id == $id and .alive)] | length' <<<"$st")
        if [ "$w" = 0 ]; then
            chaos_log "repair: worker-$n is not alive for the leader; restarting it"
            chaos_restart "worker-$n"
        fi
    done
}

for s in "${scenarios[@]}"; do
    declare -F "scenario_$s" >/dev/null || chaos_die "unknown scenario \"$s\""
done

i=0
# run_scenario <name> [<budget> [<then>]]: the scenario under load (and the scenario
# <then>, 10 s more, under the same load), then the verifier; one row of results
run_scenario() {
    local s=$1 b=${2:-$budget} then=${3-} f0 r0 out last counts verdict faults recovered
    i=$((i + 1))
    f0=$FAULTS
    r0=$RECOVERIES
    chaos_log "== scenario $s${then:++$then} (${b}s${then:+ + 10s}, load ${LOAD_RATE}/s)"
    local extra=0
    [ -n "$then" ] && extra=10
    chaos_load_start "$((b + extra))" $((SEED + i))
    "scenario_$s" "$b"
    if [ -n "$then" ]; then
        "scenario_$then" 10
        s=$s+$then
    fi
    [ "$CHAOS_BACKEND" != k8s ] && repair_workers
    [ -n "${LOAD_PID:-}" ] && wait "$LOAD_PID"
    LOAD_PID=
    [ "$CHAOS_BACKEND" = k8s ] && k8s_load_stop
    out=$(chaos_verify "$CATCHUP" 2>&1)
    last=$(tail -n1 <<<"$out")
    echo "$out" | sed 's/^/    /' >&2
    counts=$(grep -o 'lost=[0-9]* duplicated=[0-9]* mismatched=[0-9]*' <<<"$last" ||
        echo "lost=? duplicated=? mismatched=?")
    case "$last" in
    "VERIFY ok"*) verdict=ok ;;
    *)
        verdict=FAILED
        failed=1
        ;;
    esac
    faults=$((FAULTS - f0))
    recovered=$((RECOVERIES - r0))
    [ "$recovered" -lt "$faults" ] && failed=1
    results+=("$s $faults $recovered $counts $verdict")
}

if [ "$SOAK" = 1 ]; then
    [ "$CHAOS_BACKEND" = local ] || chaos_die "SOAK=1 runs against the local backend only"
    mkdir -p "$CHAOS_DIR/soak"
    node benchmarks/sampler.mjs "$CHAOS_DIR/soak" "$CHAOS_DIR/procs" "$CDC_TEST_TMP" 5000 \
        >>"$CHAOS_DIR/soak/sampler.log" 2>&1 &
    SAMPLER_PID=$!
    soak_start=$(date +%s%3N)
    soak_end=$((SECONDS + DURATION))
    rotation=()
    for s in "${scenarios[@]}"; do
        case "$s" in double-fault | schema-change) ;; *) rotation+=("$s") ;; esac
    done
    [ "${#rotation[@]}" -gt 0 ] || rotation=(kill-workers)
    k=0
    while [ "$SECONDS" -lt "$soak_end" ]; do
        run_scenario "${rotation[k % ${#rotation[@]}]}" "$budget" double-fault
        k=$((k + 1))
        if [ $((k % 3)) = 0 ] && [ "$SECONDS" -lt "$soak_end" ]; then
            run_scenario schema-change "$budget" double-fault
        fi
    done
    kill -TERM "$SAMPLER_PID" 2>/dev/null
    wait "$SAMPLER_PID" 2>/dev/null
    SAMPLER_PID=
    printf '%s\n' "${results[@]}" >"$CHAOS_DIR/soak/results.txt"
    node chaos/soak-report.mjs "$CHAOS_DIR/soak" "$CHAOS_DIR/recoveries.tsv" "${SOAK_OUT:-benchmarks/results/soak}" \
        "$soak_start" "$(date +%s%3N)" "$SEED" || failed=1
else
    for s in "${scenarios[@]}"; do
        run_scenario "$s"
    done
fi

printf '\nchaos: seed=%s duration=%ss backend=%s\n' "$SEED" "$DURATION" "$CHAOS_BACKEND"
printf '%-18s %7s %11s %6s %11s %11s  %s\n' scenario faults recoveries lost duplicated mismatched verify
tl=0
td=0
tm=0
for r in "${results[@]}"; do
    read -r name faults rec lost dup mis verdict <<<"$r"
    lost=${lost#lost=}
    dup=${dup#duplicated=}
    mis=${mis#mismatched=}
    printf '%-18s %7s %11s %6s %11s %11s  %s\n' "$name" "$faults" "$rec" "$lost" "$dup" "$mis" "$verdict"
    [[ "$lost" =~ ^[0-9]+$ ]] && tl=$((tl + lost))
    [[ "$dup" =~ ^[0-9]+$ ]] && td=$((td + dup))
    [[ "$mis" =~ ^[0-9]+$ ]] && tm=$((tm + mis))
done
printf '%-18s %7s %11s %6s %11s %11s\n' TOTAL "$FAULTS" "$RECOVERIES" "$tl" "$td" "$tm"
# Compaction ran under the faults (local backend: the coordinators' logs are here).
if [ "$CHAOS_BACKEND" = local ]; then
    compactions=$(cat "$CHAOS_DIR"/procs/coordinator-*.log 2>/dev/null |
        grep -o 'msg="compacted [^:]*: [0-9]* partitions' | awk '{ n += $(NF - 1) } END { print n + 0 }')
    echo "chaos: compactions=$compactions (partition rewrites committed during the run)"
    if [ "${CDC_COMPACT:-true}" != false ] && [ "$compactions" -eq 0 ]; then
        echo "chaos: no compaction ran although the policy asks for one every 2 s" >&2
        failed=1
    fi
fi
if [ "$failed" -ne 0 ]; then
    echo "chaos: FAILED (replay with SEED=$SEED)"
    exit 1
fi
echo "chaos: ok"
