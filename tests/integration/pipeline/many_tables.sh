#!/usr/bin/env bash
# Past the old fixed caps (64 topics a worker, 64 tables a set, 16 topics watched, 64 in
# the dashboard's history; issue 35): the short form of make bench-tables with 80 tables
# added in ONE ALTER PUBLICATION to a running pipeline whose workers follow the job's
# tables. Every table must become readable (its mirror with all its rows, as the leader's
# /status shows), a worker kill -9 under a load spread over all of them must recover, and
# chaos/verify must find every mirror equal to its source and every changelog equal to
# the audit record (0 lost, 0 duplicated, 0 mismatched). With the faults of
# TABLES_CHAOS=1 (make chaos-tables is the long form, 500 tables): 8 more tables join
# under the load, and the leader and the streaming capture are killed too; the leader
# writes its checkpoint records as deltas against an offsets base (a low
# --checkpoint-inline-offsets), so a failover reads them back from the base.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
    echo "many_tables: $*" >&2
    tail -n 30 "$out" >&2
    exit 1
}
n=${MANY_TABLES:-80}
TABLES=$n TABLES_CHAOS=1 TABLES_ROWS=50 TABLES_LOAD_RATE=200 TABLES_LOAD_SECONDS=24 \
    TABLES_TIMEOUT=180 CHAOS_COORDINATOR_ARGS="--checkpoint-inline-offsets=100 --inline-files-max=50" \
    benchmarks/tables/run.sh >"$out" 2>&1 ||
    fail "benchmarks/tables/run.sh failed"
grep -q "^$((n + n / 10)) tables: VERIFY ok .* lost=0 duplicated=0 mismatched=0" "$out" ||
    fail "the verifier did not pass over every table"
for b in readable_s recovery_s checkpoint_record_bytes files_per_table; do
    grep -q "^BENCH tables_$b " "$out" || fail "no BENCH tables_$b line"
done
grep -q "added $((n / 10)) more tables under the load" "$out" || fail "no tables were added under the load"
# the capture's /status sums the snapshots up: every table's done once all are readable
done_n=$(sed -n 's/.*the capture.s snapshots: .*"done":\([0-9]*\).*/\1/p' "$out")
[ "${done_n:-0}" -ge "$n" ] || fail "the capture's /status snapshots says ${done_n:-nothing} done, expected $n"
grep -q "kill -9 of the leader .* leads and commits" "$out" || fail "no leader failover"
record=$(awk '$2 == "tables_checkpoint_record_bytes" { print $3 }' "$out")
[ "${record:-999999}" -le 65536 ] || fail "the checkpoint record is $record bytes (> 64 KiB)"
grep '^BENCH tables_\(readable_s\|recovery_s\|rss_max_mib\|checkpoint_record_bytes\) ' "$out"
echo "many_tables: ok ($((n + n / 10)) tables)"
