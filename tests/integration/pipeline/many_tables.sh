#!/usr/bin/env bash
# Past the old fixed caps (64 topics a worker, 64 tables a set, 16 topics watched, 64 in
# the dashboard's history; issue 35): the short form of make bench-tables with 80 tables
# added in ONE ALTER PUBLICATION to a running pipeline whose workers follow the job's
# tables. Every table must become readable (its mirror with all its rows, as the leader's
# /status shows), a worker kill -9 under a load spread over all of them must recover, and
# chaos/verify must find every mirror equal to its source and every changelog equal to
# the audit record (0 lost, 0 duplicated, 0 mismatched). No table may stay unconsumed.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
    echo "many_tables: $*" >&2
    tail -n 30 "$out" >&2
    exit 1
}
TABLES=${MANY_TABLES:-80} TABLES_ROWS=50 TABLES_LOAD_RATE=200 TABLES_LOAD_SECONDS=15 \
    TABLES_TIMEOUT=180 benchmarks/tables/run.sh >"$out" 2>&1 ||
    fail "benchmarks/tables/run.sh failed"
grep -q "^${MANY_TABLES:-80} tables: VERIFY ok .* lost=0 duplicated=0 mismatched=0" "$out" ||
    fail "the verifier did not pass over every table"
for b in readable_s recovery_s checkpoint_record_bytes files_per_table; do
    grep -q "^BENCH tables_$b " "$out" || fail "no BENCH tables_$b line"
done
grep '^BENCH tables_\(readable_s\|recovery_s\|rss_max_mib\|checkpoint_record_bytes\) ' "$out"
echo "many_tables: ok (${MANY_TABLES:-80} tables)"
