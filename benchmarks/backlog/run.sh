#!/usr/bin/env bash
# Backlog drain end to end (make bench-backlog): BACKLOG_CHANGES (default 1,000,000)
# changes on public.transactions (50% inserts, 30% updates, 20% deletes, 1000 per
# transaction) are written while nothing consumes; two slots exist from before the first
# change: one for pg_recvlogical, one for cdc-capture. Then, in the same run:
#   1. pg_recvlogical decodes its slot (pgoutput, output discarded) up to the backlog's
#      end LSN: the baseline decode rate;
#   2. the local pipeline (chaos/lib.sh: capture, 2 coordinators, 3 workers) starts and
#      drains the backlog; the clock runs from before the processes start until the
#      changelog table's committed snapshot holds every change (startup included), and
#      the capture's rate until its cdc_capture_events_total reaches the backlog;
#   3. uncompressed topics: the captures stop, BACKLOG_NONE_CHANGES (default 100,000)
#      more changes are written, and the captures come back with
#      --kafka-compression=none (the workers keep running); the clock runs from the
#      captures' restart until the changelog holds those changes too. The development
#      broker keeps 5 MiB per partition (docs/worker.md, Known issues): an uncompressed
#      backlog above about 150,000 changes loses its oldest records there, hence the
#      smaller default.
# Figures: backlog_recvlogical_changes_per_s, backlog_capture_changes_per_s and
# backlog_e2e_changes_per_s (ratios vs pg_recvlogical), backlog_e2e_seconds,
# backlog_none_e2e_changes_per_s (ratio vs pg_recvlogical), backlog_none_e2e_seconds.
# Knobs: BACKLOG_CHANGES, BACKLOG_NONE_CHANGES (0 = skip phase 3), BACKLOG_TIMEOUT
# (seconds per drain, default 900), BACKLOG_WORKERS (3).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=benchmarks/lib.sh
. benchmarks/lib.sh

N=${BACKLOG_CHANGES:-1000000}
N2=${BACKLOG_NONE_CHANGES:-100000}
TIMEOUT=${BACKLOG_TIMEOUT:-900}
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/cdc-bench-backlog.XXXXXX")
export BENCH_WORK CHAOS_DIR=$BENCH_WORK/run CHAOS_WORKERS=${BACKLOG_WORKERS:-3} CDC_JOB=bench
# the slot exists before the backlog: the capture streams it (no initial snapshot)
export CDC_SNAPSHOT_MODE=never CHAOS_SNAPSHOT_MODE=never

cleanup() {
    pipeline_down >/dev/null 2>&1
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        bench_log "kept $BENCH_WORK"
    else
        rm -rf "$BENCH_WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s <= 0) print 0; else printf "%.0f\n", n / s }'; }

# Not drained: per partition of the transactions topic, the broker's log start and end
# (kcat) and the offset the leader's /status has checkpointed. A log start above 0 means
# the broker deleted records; kafka-dev (librdkafka's mock cluster) keeps only 5 MiB per
# partition (docs/worker.md, Known issues).
backlog_diagnose() {
    local t=cdc.public.transactions p lo last st
    command -v kcat >/dev/null || return 0
    st=$(chaos_status 2>/dev/null) || st='{}'
    for ((p = 0; p < ${CDC_TEST_KAFKA_PARTITIONS:-12}; p++)); do
        lo=$(timeout 20 kcat -C -q -b "$CDC_TEST_KAFKA" -t $t -p $p -o beginning -c 1 -e -f '%o\n' 2>/dev/null)
        last=$(timeout 20 kcat -C -q -b "$CDC_TEST_KAFKA" -t $t -p $p -o -1 -c 1 -e -f '%o\n' 2>/dev/null)
        bench_log "partition $p: broker log ${lo:-?}..$((${last:--1} + 1)), checkpointed" \
            "$(jq -r --arg t $t --argjson p $p \
                '[.assignment[]? | select(.partition == $p) | .offsets[$t]] | .[0] // "?"' \
                <<<"$st")"
    done
}

pipeline_servers_up >"$BENCH_WORK/setup.log" 2>&1 || exit 1
# write_backlog <changes> <first key - 1>: half inserts, 30% updates, 20% deletes of
# keys base+1.., 1000 per transaction.
write_backlog() {
    local n=$1 base=$2 ins upd del
    ins=$((n / 2))
    upd=$((n * 3 / 10))
    del=$((n - ins - upd))
    bench_log "building a backlog of $n changes ($ins inserts, $upd updates, $del deletes)"
    bench_psql <<EOF
DO \$\$
DECLARE
    b int := 1000;
BEGIN
    FOR i IN 0 .. ($ins - 1) / b LOOP
        INSERT INTO public.transactions (entity_id, account, amount, status, note, updated_at)
        SELECT $base + g, 'acct-' || (g % 997), (g % 100000) / 100.0, 'new', 'backlog row ' || g, clock_timestamp()
        FROM generate_series(i * b + 1, least((i + 1) * b, $ins)) g;
        COMMIT;
    END LOOP;
    FOR i IN 0 .. ($upd - 1) / b LOOP
        UPDATE public.transactions SET amount = amount + 1, status = 'update', updated_at = clock_timestamp()
        WHERE entity_id BETWEEN $base + i * b + 1 AND $base + least((i + 1) * b, $upd);
        COMMIT;
    END LOOP;
    FOR i IN 0 .. ($del - 1) / b LOOP
        DELETE FROM public.transactions
        WHERE entity_id BETWEEN $base + $ins - $del + i * b + 1 AND $base + least($ins - $del + (i + 1) * b, $ins);
        COMMIT;
    END LOOP;
END
\$\$;
EOF
}

bench_psql >/dev/null <<EOF || exit 1
ALTER TABLE public.transactions DISABLE TRIGGER transactions_audit;
CREATE PUBLICATION cdc_pub FOR TABLE public.transactions, public.accounts;
CREATE PUBLICATION bench_pub FOR TABLE public.transactions, public.accounts;
SELECT 'slot' FROM pg_create_logical_replication_slot('cdc_slot', 'pgoutput');
SELECT 'slot' FROM pg_create_logical_replication_slot('bench_recv', 'pgoutput');
EOF
t0=$(now)
write_backlog "$N" 0 || exit 1
end_lsn=$(bench_psql -c "SELECT pg_current_wal_lsn()")
bench_log "backlog written in $(elapsed "$t0" "$(now)") s; end LSN $end_lsn"

# 1. the baseline
load_recv=$(bench_load1)
recv_s=$(bench_recvlogical bench_recv bench_pub "$end_lsn") || {
    bench_log "pg_recvlogical failed"
    exit 1
}
recv_cps=$(rate "$N" "$recv_s")
bench_log "pg_recvlogical: $N changes in $recv_s s ($recv_cps/s)"
bench_psql -c "SELECT pg_drop_replication_slot('bench_recv')" >/dev/null

# 2. the pipeline
load_drain=$(bench_load1)
t0=$(now)
pipeline_procs_up >>"$BENCH_WORK/setup.log" 2>&1 || {
    bench_log "the pipeline did not start (logs in $CHAOS_DIR/procs)"
    exit 1
}
t_up=$(now)
# the capture that streams the slot (the other is a standby)
cap_http=$(cat "$CHAOS_DIR/procs/$(chaos_active_capture).http")
cap_s=""
deadline=$((SECONDS + TIMEOUT))
while :; do
    if [ -z "$cap_s" ]; then
        ev=$(curl -fsS --max-time 1 "http://$cap_http/metrics" 2>/dev/null |
            awk '/^cdc_capture_events_total/ { s += $NF } END { printf "%.0f\n", s + 0 }')
        [ "${ev:-0}" -ge "$N" ] && cap_s=$(elapsed "$t0" "$(now)")
    fi
    got=$(bench_changelog_records "$CHAOS_NAMESPACE/transactions_changelog")
    [ "$got" -ge "$N" ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
        bench_log "not drained after ${TIMEOUT}s: $got of $N changes in the changelog"
        backlog_diagnose
        exit 1
    fi
    sleep 0.25
done
e2e_s=$(elapsed "$t0" "$(now)")
e2e_cps=$(rate "$N" "$e2e_s")
bench_log "pipeline: started in $(elapsed "$t0" "$t_up") s; capture done after ${cap_s:-?} s;" \
    "all $N changes committed to Iceberg after $e2e_s s ($e2e_cps/s)"

# 3. uncompressed topics
if [ "$N2" -gt 0 ]; then
    for c in $(chaos_targets capture); do proc_signal "$c" TERM; done
    for c in $(chaos_targets capture); do
        chaos_wait 15 "$c to stop" bash -c "! kill -0 $(proc_pid "$c") 2>/dev/null"
    done
    write_backlog "$N2" 100000000 >/dev/null || exit 1
    t2=$(now)
    export CDC_KAFKA_COMPRESSION=none
    for c in $(chaos_targets capture); do proc_restart "$c"; done
    unset CDC_KAFKA_COMPRESSION
    deadline=$((SECONDS + TIMEOUT))
    while :; do
        got=$(bench_changelog_records "$CHAOS_NAMESPACE/transactions_changelog")
        [ "$got" -ge $((N + N2)) ] && break
        if [ "$SECONDS" -ge "$deadline" ]; then
            bench_log "uncompressed: not drained after ${TIMEOUT}s: $((got - N)) of $N2 changes" \
                "in the changelog"
            backlog_diagnose
            exit 1
        fi
        sleep 0.25
    done
    none_s=$(elapsed "$t2" "$(now)")
    none_cps=$(rate "$N2" "$none_s")
    bench_log "uncompressed: all $N2 changes committed $none_s s after the captures restarted" \
        "($none_cps/s)"
fi

bench_line backlog_changes "$N" changes
bench_line backlog_recvlogical_changes_per_s "$recv_cps" changes/s
if [ -n "$cap_s" ]; then
    cap_cps=$(rate "$N" "$cap_s")
    bench_line backlog_capture_changes_per_s "$cap_cps" changes/s "$recv_cps" \
        "$(bench_div "$cap_cps" "$recv_cps")" pg_recvlogical
fi
bench_line backlog_e2e_changes_per_s "$e2e_cps" changes/s "$recv_cps" \
    "$(bench_div "$e2e_cps" "$recv_cps")" pg_recvlogical
bench_line backlog_e2e_seconds "$e2e_s" s
if [ "$N2" -gt 0 ]; then
    bench_line backlog_none_changes "$N2" changes
    bench_line backlog_none_e2e_changes_per_s "$none_cps" changes/s "$recv_cps" \
        "$(bench_div "$none_cps" "$recv_cps")" pg_recvlogical
    bench_line backlog_none_e2e_seconds "$none_s" s
fi
# other jobs on the machine skew both sides: the 1-minute load average when each began
bench_line backlog_machine_load1_recvlogical "$load_recv" load
bench_line backlog_machine_load1_drain "$load_drain" load
awk -v r="$(bench_div "$e2e_cps" "$recv_cps")" 'BEGIN {
    printf "backlog: target end to end >= 0.5 x pg_recvlogical: %s (%.2f)\n", (r >= 0.5 ? "met" : "NOT met"), r }' >&2
