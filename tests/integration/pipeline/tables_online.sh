#!/usr/bin/env bash
# The job's table set, owned by the coordinator (docs/protocol.md, "The job's table set";
# docs/operations.md, "Changing the tables"), end to end on the local pipeline whose three
# workers run WITHOUT --tables:
#   a. the workers follow the job: they offer the tables registered on the schema topic and
#      the set is the capture's two tables;
#   b. a table created while the pipeline runs joins without a restart: `cdcctl tables add
#      --capture` adds it to the capture's publication (the capture, without --tables,
#      captures the publication) and to the job; the rows it had before are read by an
#      incremental snapshot, more are written under load on the old tables, the workers
#      offer its topic, the set widens and the running assignment takes it (Tables: no
#      recovery, the generation unchanged), every worker consuming it from the
#      beginning; chaos/verify: its mirror equals the source and its changelog the audit
#      record (snapshot rows as some state of their key; 0 lost, duplicated or
#      mismatched), the old tables kept committing and still verify;
#   c. cdcctl tables add of a table that has no topic: in the set at once (and in cdcctl
#      tables), every worker is given it, the job keeps committing (the development
#      broker creates the topic once a worker names it: a topic that stays missing, shown
#      as such in /status and logged by the leader, is not reproduced here);
#   d. a worker restarted with an explicit --tables that lacks a table of the set is
#      refused (missing_table, naming the table) while the others carry its slots; back
#      without --tables it owns slots again and a restarted follower gets the current set;
#      meanwhile a table added to the publication by SQL, which worker 0's --tables lacks,
#      cannot join the set: within --unconsumed-after the leader logs it as unconsumed
#      (an error naming the table and worker 0), counts it in
#      cdc_coordinator_tables_unconsumed and lists it in /status; once worker 0 follows
#      again it joins and the finding clears (docs/operations.md, "Unconsumed tables");
#   e. a coordinator failover keeps the set (etcd), and the new table's rows still verify.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/tables CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.transactions,public.accounts CHAOS_CAPTURES=1
export CHAOS_WORKER_TABLES= # the workers follow the job's tables
export CHAOS_CAPTURE_TABLES= # the capture captures the publication cdc_pub
export CHAOS_INITIAL_ROWS=20
export CHAOS_COORDINATOR_ARGS="--unconsumed-after 5s"
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# KEEP=1 keeps the processes' logs in $tmp.procs
trap '[ -z "${KEEP:-}" ] || cp -r "$CHAOS_DIR/procs" "$tmp.procs" 2>/dev/null
      pipeline_down purge >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

fail() {
    echo "tables_online: $*" >&2
    for f in "$CHAOS_DIR"/procs/coordinator-*.log "$CHAOS_DIR"/procs/worker-0.log; do
        echo "---- $f" >&2
        grep -E "offer|consuming|refus|carries|no partitions|level=error" "$f" | tail -n 15 >&2
    done
    exit 1
}
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }
status() { chaos_status; }
set_of() { status | jq -r '[.table_set[].topic] | join(",")'; }
ctl() {
    "$CHAOS_BUILD/cdcctl" --coordinator "$(cat "$CHAOS_DIR/procs/$(chaos_leader).http")" "$@"
}
verify() { # <name> <tables> [verifier options]
    local name=$1 tables=$2
    shift 2
    pipeline_verify --tables "$tables" --wait 120 "$@" >"$tmp/verify-$name.log" 2>&1 || {
        cat "$tmp/verify-$name.log" >&2
        fail "$name: the verifier failed"
    }
    tail -n 1 "$tmp/verify-$name.log" | sed "s/^/$name: /"
}
# waits until the leader's set is exactly $1
wait_set() {
    chaos_wait 60 "the job's tables to be $1" bash -c '. "$1"; [ "$(chaos_status | jq -r "[.table_set[].topic] | join(\",\")")" = "$2" ]' \
        _ "$PWD/chaos/lib.sh" "$1" || fail "the job's tables are $(set_of), expected $1"
}

pipeline_servers_up
pipeline_procs_up

# ---- a. followers ------------------------------------------------------------------------------
wait_set cdc.public.accounts,cdc.public.transactions
[ "$(status | jq '[.workers[] | select(.alive and .follows_tables)] | length')" = 3 ] ||
    fail "the workers do not follow the job's tables: $(status | jq -c '.workers')"
grep -q "the job's tables (no --tables)" "$CHAOS_DIR/procs/worker-0.log" ||
    fail "worker-0 does not say it follows the job's tables"
verify start transactions,accounts

# ---- b. a new table joins while the pipeline runs ----------------------------------------------
sql <<SQL || fail "could not create public.late"
CREATE TABLE public.late (id int PRIMARY KEY, note text, amount int);
CREATE TRIGGER late_audit AFTER INSERT OR UPDATE OR DELETE ON public.late
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('id');
SQL
sql -c "INSERT INTO public.late SELECT g, 'old' || g, g FROM generate_series(100001, 100300) g" ||
    fail "could not fill public.late"
before=$(pipeline_committed)
gen_before=$(status | jq '.generation')
# load on the old tables meanwhile
"$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --rate 50 --duration 25s --report-interval 0 \
    >"$tmp/load.log" 2>&1 &
load=$!
out=$(ctl tables add public.late --capture "$(cat "$CHAOS_DIR/procs/capture-0.http")") ||
    fail "cdcctl tables add --capture failed: $out"
echo "$out"
grep -q 'added to publication "cdc_pub"; the capture says: \(snapshotting\|streaming\)' <<<"$out" ||
    fail "cdcctl tables add --capture said: $out"
grep -q "public.late joined publication" "$CHAOS_DIR/procs/capture-0.log" ||
    fail "the capture did not log that public.late joined its publication"
for i in 1 2 3 4 5; do
    sql -c "INSERT INTO public.late SELECT g, 'n' || g, g FROM generate_series(($i - 1) * 100 + 1, $i * 100) g" ||
        fail "insert $i into public.late failed"
    sql -c "UPDATE public.late SET amount = amount + 1000 WHERE id % 7 = $i; DELETE FROM public.late WHERE id % 13 = $i" ||
        fail "update/delete $i of public.late failed"
    sleep 1
done
wait_set cdc.public.accounts,cdc.public.late,cdc.public.transactions
# every owner follows the job: the running assignment takes the wider set (Tables), no
# recovery, no new generation, no epoch abandoned
gen_after=$(status | jq '.generation')
[ "$gen_after" = "$gen_before" ] ||
    fail "the set widened with a new assignment (generation $gen_before -> $gen_after), not in the running one"
grep -q 'now carries \\"cdc.public.late\\"' "$CHAOS_DIR"/procs/coordinator-*.log ||
    fail "no coordinator logged the widening"
grep -q 'without a recovery (\(every live worker offers \|table \)\\"cdc.public.late\\"' "$CHAOS_DIR"/procs/coordinator-*.log ||
    fail "no coordinator logged that the owners took the wider set without a recovery"
for w in 0 1 2; do
    grep -q 'consuming topic .*cdc.public.late' "$CHAOS_DIR/procs/worker-$w.log" &&
        grep -q "job's table set widened" "$CHAOS_DIR/procs/worker-$w.log" ||
        fail "worker-$w did not log that it took the wider set and consumes the new topic"
done
widenings=$(curl -fsS "http://$(cat "$CHAOS_DIR/procs/$(chaos_leader).http")/metrics" |
    awk '$1 == "cdc_coordinator_table_set_widenings_total" { print $2 }')
[ "${widenings:-0}" -ge 1 ] 2>/dev/null || fail "cdc_coordinator_table_set_widenings_total is ${widenings:-absent}"
wait $load || fail "the load generator failed: $(tail -n 5 "$tmp/load.log")"
verify late late --snapshotted late
verify old transactions,accounts
after=$(pipeline_committed)
[ "$after" -gt "$before" ] || fail "no epoch committed while the table joined ($before -> $after)"
# the coordinator created the new table's mirror and changelog in an epoch commit
[ -d "$CHAOS_DIR/warehouse/public/late/metadata" ] || fail "no mirror table public.late"
[ -d "$CHAOS_DIR/warehouse/public/late_changelog/metadata" ] || fail "no changelog table public.late_changelog"
chaos_wait 60 "every slot to carry cdc.public.late" bash -c '. "$1"; [ "$(chaos_status | jq -r ".table_set[] | select(.topic == \"cdc.public.late\") | .state")" = streaming ]' \
    _ "$PWD/chaos/lib.sh" || fail "cdc.public.late is not streaming in every slot: $(status | jq -c '.table_set')"

# ---- c. cdcctl tables add ----------------------------------------------------------------------
out=$(ctl tables add public.ghost) || fail "cdcctl tables add failed: $out"
grep -q "added to the job's tables" <<<"$out" || fail "cdcctl tables add said: $out"
out=$(ctl tables add public.ghost) || fail "cdcctl tables add (again) failed: $out"
grep -q "already one of the job's tables" <<<"$out" || fail "cdcctl tables add (again) said: $out"
wait_set cdc.public.accounts,cdc.public.ghost,cdc.public.late,cdc.public.transactions
out=$(ctl tables) || fail "cdcctl tables failed"
# (the development broker creates a topic that a client names, so the workers' fetches
# create cdc.public.ghost soon: whether cdcctl still says "no such topic" is a race here)
grep -q "^cdc.public.ghost  *\(starting\|streaming\) " <<<"$out" || fail "cdcctl tables does not show the new table: $out"
grep -q "^cdc.public.late  *streaming" <<<"$out" || fail "cdcctl tables does not show public.late streaming: $out"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$(cdc_auth_header)" -X POST "http://$(cat "$CHAOS_DIR/procs/$(chaos_leader).http")/tables")
[ "$code" = 400 ] || fail "POST /tables without a topic answered $code"
chaos_wait 30 "the workers to take the wider set" bash -c \
    "grep -q 'consuming topic .*cdc.public.ghost' '$CHAOS_DIR/procs/worker-1.log'" ||
    fail "worker-1 was not given cdc.public.ghost"
c=$(pipeline_committed)
chaos_wait 60 "a commit after epoch $c" bash -c '. "$1"; [ "$(pipeline_committed)" -gt "$2" ]' \
    _ "$PWD/chaos/lib.sh" "$c" || fail "the job stopped committing after cdcctl tables add"

# ---- d. a worker with an explicit --tables lacking a table of the set --------------------------
sed -i 's/--job/--tables public.transactions,public.accounts,public.late --job/' "$CHAOS_DIR/procs/worker-0.cmd"
proc_restart worker-0
chaos_wait 60 "worker 0 to be refused" bash -c '. "$1"; [ "$(chaos_status | jq -r ".workers[] | select(.id == \"0\" and .alive) | .refused.reason")" = missing_table ]' \
    _ "$PWD/chaos/lib.sh" || fail "worker 0 was not refused: $(status | jq -c '.workers')"
grep -q '"cdc.public.ghost"' <<<"$(status | jq -r '.workers[] | select(.id == "0") | .refused.message')" ||
    fail "the refusal does not name cdc.public.ghost"
grep -q "gives this worker no partitions" "$CHAOS_DIR/procs/worker-0.log" || fail "worker 0 did not log its refusal"
c=$(pipeline_committed)
chaos_wait 60 "a commit without worker 0" bash -c '. "$1"; [ "$(pipeline_committed)" -gt "$2" ]' \
    _ "$PWD/chaos/lib.sh" "$c" || fail "the job stopped committing with worker 0 refused"
[ "$(status | jq '[.assignment[] | select(.owner == "0")] | length')" = 0 ] || fail "worker 0 still owns slots"
unconsumed_metric() {
    curl -fsS "http://$(cat "$CHAOS_DIR/procs/$(chaos_leader).http")/metrics" |
        awk '$1 == "cdc_coordinator_tables_unconsumed" { print $2 }'
}
unconsumed_metric_is() { [ "$(unconsumed_metric)" = "$1" ]; }
[ "$(unconsumed_metric)" = 0 ] || fail "cdc_coordinator_tables_unconsumed is $(unconsumed_metric) before any table is unconsumed"
sql <<SQL || fail "could not create public.extra"
CREATE TABLE public.extra (id int PRIMARY KEY, note text);
INSERT INTO public.extra VALUES (1, 'before'), (2, 'before');
ALTER PUBLICATION cdc_pub ADD TABLE public.extra;
SQL
chaos_wait 90 "cdc.public.extra to be reported unconsumed" bash -c '. "$1"; [ "$(chaos_status | jq -r ".tables_unconsumed[] | select(.topic == \"cdc.public.extra\") | .unconsumed")" = true ]' \
    _ "$PWD/chaos/lib.sh" || fail "cdc.public.extra is not reported unconsumed: $(status | jq -c '.tables_unconsumed')"
[ "$(status | jq -r '.tables_unconsumed[] | select(.topic == "cdc.public.extra") | .offered_by')" = 2 ] ||
    fail "tables_unconsumed does not count the two followers offering cdc.public.extra: $(status | jq -c '.tables_unconsumed')"
[ "$(unconsumed_metric)" = 1 ] || fail "cdc_coordinator_tables_unconsumed is $(unconsumed_metric), expected 1"
grep -h 'level=error.*table topic \\"cdc.public.extra\\" is not consumed' "$CHAOS_DIR"/procs/coordinator-*.log |
    grep -q 'do not offer it: \\"0\\"' || fail "no error names cdc.public.extra and worker 0: $(grep -h 'not consumed' "$CHAOS_DIR"/procs/coordinator-*.log)"
# back as a follower: it gets the current set and slots
sed -i 's/--tables [^ ]* //' "$CHAOS_DIR/procs/worker-0.cmd" # (proc_start rewrote it quoted)
proc_restart worker-0
chaos_wait 60 "worker 0 to own slots again" bash -c '. "$1"; [ "$(chaos_status | jq "[.assignment[] | select(.owner == \"0\")] | length")" -gt 0 ]' \
    _ "$PWD/chaos/lib.sh" || fail "worker 0 owns no slots as a follower"
wait_set cdc.public.accounts,cdc.public.extra,cdc.public.ghost,cdc.public.late,cdc.public.transactions
chaos_wait 30 "the unconsumed finding to clear" bash -c '. "$1"; [ "$(chaos_status | jq ".tables_unconsumed | length")" = 0 ]' \
    _ "$PWD/chaos/lib.sh" || fail "tables_unconsumed did not clear: $(status | jq -c '.tables_unconsumed')"
chaos_wait 30 "cdc_coordinator_tables_unconsumed to be 0" unconsumed_metric_is 0 ||
    fail "cdc_coordinator_tables_unconsumed is $(unconsumed_metric) after the table joined"
chaos_wait 30 "worker 0 to consume the set" bash -c \
    "[ \"\$(curl -fsS http://$(cat "$CHAOS_DIR/procs/worker-0.http")/status | jq -r '.tables | sort | join(\",\")')\" = cdc.public.accounts,cdc.public.extra,cdc.public.ghost,cdc.public.late,cdc.public.transactions ]" ||
    fail "worker 0 does not consume the job's set: $(curl -fsS "http://$(cat "$CHAOS_DIR/procs/worker-0.http")/status")"

# ---- e. failover keeps the set ------------------------------------------------------------------
leader=$(chaos_leader)
c=$(pipeline_committed)
proc_signal "$leader" KILL
chaos_wait 60 "another coordinator to lead" bash -c '. "$1"; l=$(chaos_leader) && [ "$l" != "$2" ]' \
    _ "$PWD/chaos/lib.sh" "$leader" || fail "no coordinator took over"
wait_set cdc.public.accounts,cdc.public.extra,cdc.public.ghost,cdc.public.late,cdc.public.transactions
sql -c "INSERT INTO public.late SELECT g, 'after', g FROM generate_series(1001, 1050) g" || fail "insert after failover failed"
verify failover late,transactions,accounts --snapshotted late
echo "tables_online: ok"
