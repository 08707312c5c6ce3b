#!/usr/bin/env bash
# Values no Iceberg type holds (issue 36; docs/worker.md, "Values no Iceberg type holds"),
# end to end through the local pipeline: a temporal table whose rows hold 'infinity' and
# '-infinity' in date, timestamp and timestamptz columns, NaN in a numeric(10,2) (PostgreSQL
# allows no infinity in a numeric with a typmod), NaN, Infinity and -Infinity in an
# unconstrained numeric (a string column: its text) and in float8 and real columns (IEEE
# values, as before), in snapshot rows and in inserts, updates (sentinel to value, value
# to sentinel) and deletes. Its mirror is partitioned by day(valid_to) and hour(tstz), so
# the transforms meet the infinities too (an hour past an int's range: the row is
# written unpartitioned).
#   - chaos/verify (icebird + DuckDB) finds every row in the mirror equal to the source
#     and every change in the changelog: the infinities read back in DuckDB as
#     infinity / -infinity, the numeric specials are null in their column and named in
#     `_cdc_special`;
#   - the mirror as DuckDB and as icebird read it: every row, the NaN row's amount null
#     and `_cdc_special` {"amount":"NaN"};
#   - nothing was dead-lettered (worker /status and the DLQ counters), and the special
#     values are counted (cdc_worker_special_values_total, /status "values");
#   - a value a column truly cannot hold (an event of sentinel_bad, written to its topic by
#     hand with amount "abc"): the row reaches the mirror with amount null and its other
#     columns, the original event is a dead letter (type_mismatch, naming the column),
#     counted and in /status (that its replay is a duplicate: test_worker_dedup).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/sent CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.sentinel_t,public.sentinel_bad CHAOS_WORKERS=2 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1
export CHAOS_COORDINATOR_ARGS="--partition-by=public.sentinel_t=day(valid_to),hour(tstz)"
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT

fail() {
    tail -n 30 "$CHAOS_DIR"/procs/coordinator-0.log "$CHAOS_DIR"/procs/worker-*.log >&2 2>/dev/null
    [ -n "${2:-}" ] && tail -n 40 "$2" >&2
    echo "sentinels: $1" >&2
    exit 1
}
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }

pipeline_servers_up
sql <<'SQL' || fail "could not create the table"
CREATE TABLE public.sentinel_t (id int PRIMARY KEY, valid_from date NOT NULL,
    valid_to date, ts timestamp, tstz timestamptz, amount numeric(10,2), raw numeric,
    f float8, r real, note text);
CREATE TABLE public.sentinel_bad (id int PRIMARY KEY, amount numeric(10,2), note text);
CREATE TRIGGER sentinel_t_audit AFTER INSERT OR UPDATE OR DELETE ON public.sentinel_t
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('id');
-- snapshot rows (op r)
INSERT INTO public.sentinel_t VALUES
    (1, '2020-01-01', 'infinity', 'infinity', 'infinity', 'NaN', 'Infinity', 'NaN', 'Infinity', 'open'),
    (2, '-infinity', '2021-06-30', '-infinity', '-infinity', 'NaN', '-Infinity', 'Infinity', '-Infinity', 'closed'),
    (3, '2022-02-02', 'infinity', '2022-02-02 10:00', '2022-02-02 10:00+00', 'NaN', 'NaN', '-Infinity', 'NaN', 'n'),
    (4, '2019-01-01', '2019-12-31', '2019-01-01 00:00', '2019-01-01 00:00+00', 12.50, 1.5, 0.25, 1.5, 'plain');
DELETE FROM cdc_audit.changes WHERE tbl = 'sentinel_t';
INSERT INTO cdc_audit.changes (tbl, op, pk, txid, row_image)
    SELECT 'sentinel_t', 'r', id, txid_current(), to_jsonb(t) FROM public.sentinel_t t ORDER BY id;
SQL
pipeline_procs_up
# the layout reaches the workers with the barriers after the table's first commit (its
# snapshot rows): the streamed changes below are staged partitioned
laid_out() {
    local i
    for ((i = 0; i < CHAOS_WORKERS; i++)); do
        grep -q 'sentinel_t\\": rows are staged under partition spec 1' "$CHAOS_DIR/procs/worker-$i.log" || return 1
    done
}
chaos_wait 60 "the partition layout at every worker" laid_out || fail "the workers did not get the layout"

# streamed changes: inserts, sentinel -> value and value -> sentinel updates, deletes
sql <<'SQL' || fail "the changes failed"
INSERT INTO public.sentinel_t
    SELECT g, '2023-01-01'::date + g, CASE WHEN g % 2 = 0 THEN 'infinity'::date ELSE '2024-01-01'::date + g END,
           CASE g % 3 WHEN 0 THEN 'infinity'::timestamp WHEN 1 THEN '-infinity' ELSE '2023-05-05 05:05:05.123456' END,
           CASE g % 3 WHEN 0 THEN '-infinity'::timestamptz WHEN 1 THEN 'infinity' ELSE '2023-05-05 05:05:05+02' END,
           CASE g % 2 WHEN 0 THEN 'NaN'::numeric ELSE g * 1.25 END,
           CASE g % 4 WHEN 0 THEN 'NaN'::numeric WHEN 1 THEN 'Infinity' WHEN 2 THEN '-Infinity' ELSE g * 1.25 END,
           CASE g % 4 WHEN 0 THEN 'NaN'::float8 WHEN 1 THEN 'Infinity' WHEN 2 THEN '-Infinity' ELSE g * 0.5 END,
           CASE g % 4 WHEN 1 THEN 'NaN'::real WHEN 2 THEN 'Infinity' WHEN 3 THEN '-Infinity' ELSE g * 0.5 END,
           'row ' || g
      FROM generate_series(10, 40) g;
UPDATE public.sentinel_t SET valid_to = '2024-12-31', amount = 99.99 WHERE id = 1;
UPDATE public.sentinel_t SET valid_to = 'infinity', ts = 'infinity', amount = 'NaN' WHERE id = 4;
UPDATE public.sentinel_t SET amount = 'NaN', raw = '-Infinity', tstz = '-infinity' WHERE id IN (10, 11, 12);
UPDATE public.sentinel_t SET note = 'touched' WHERE id BETWEEN 13 AND 20;
DELETE FROM public.sentinel_t WHERE id IN (2, 21, 22);
BEGIN;
INSERT INTO public.sentinel_t VALUES (50, '-infinity', 'infinity', 'infinity', 'infinity', 'NaN', 'NaN', 'NaN', 'NaN', 'tx');
UPDATE public.sentinel_t SET amount = 1.00 WHERE id = 50;
UPDATE public.sentinel_t SET amount = 'NaN', raw = 'Infinity' WHERE id = 50;
DELETE FROM public.sentinel_t WHERE id = 23;
COMMIT;
SQL

pipeline_verify --tables sentinel_t --wait 90 >"$tmp/verify.log" 2>&1 ||
    fail "the verifier failed" "$tmp/verify.log"
tail -n 1 "$tmp/verify.log"

src=$(sql -A -t -c "SELECT count(*) FROM public.sentinel_t") || fail "no source count"
# the mirror as the verifier reads it (DuckDB for the data)
"$CHAOS_ROOT/chaos/verify" --warehouse "$CHAOS_DIR/warehouse" --show sentinel_t --limit 1000 \
    >"$tmp/duck.jsonl" 2>"$tmp/duck.err" || fail "could not read the mirror with DuckDB" "$tmp/duck.err"
[ "$(wc -l <"$tmp/duck.jsonl")" = "$src" ] || fail "DuckDB reads $(wc -l <"$tmp/duck.jsonl") mirror rows, the source has $src"
row4=$(jq -c 'select(.id == "4")' "$tmp/duck.jsonl")
jq -e '.valid_to == "infinity" and .ts == "infinity" and .amount == "NaN"
       and ._cdc_special == "{\"amount\":\"NaN\"}"' <<<"$row4" >/dev/null ||
    fail "DuckDB: row 4 is $row4"
row3=$(jq -c 'select(.id == "3")' "$tmp/duck.jsonl")
jq -e '.valid_from == "2022-02-02" and .valid_to == "infinity" and .amount == "NaN" and .raw == "NaN"' <<<"$row3" >/dev/null ||
    fail "DuckDB: row 3 is $row3"
# (raw, an unconstrained numeric, is a decimal since the native types: its Infinity stays
# special, docs/capture.md "Types")
jq -e -s 'map(select(.id == "1"))[0] | .amount == "99.99" and .raw == "Infinity"
          and ._cdc_special == "{\"raw\":\"Infinity\"}"' "$tmp/duck.jsonl" >/dev/null ||
    fail "DuckDB: row 1 (its NaN updated to 99.99) is $(jq -c 'select(.id == "1")' "$tmp/duck.jsonl")"

# the mirror as icebird alone reads it: every row; the special values' column null
"$CHAOS_ROOT/chaos/verify" --warehouse "$CHAOS_DIR/warehouse" --show sentinel_t --limit 1000 \
    --reader icebird >"$tmp/icebird.jsonl" 2>"$tmp/icebird.err" ||
    fail "could not read the mirror with icebird" "$tmp/icebird.err"
[ "$(wc -l <"$tmp/icebird.jsonl")" = "$src" ] ||
    fail "icebird reads $(wc -l <"$tmp/icebird.jsonl") mirror rows, the source has $src"
jq -e -s 'map(select(.id == 4))[0] | .amount == null and ._cdc_special == "{\"amount\":\"NaN\"}"' \
    "$tmp/icebird.jsonl" >/dev/null || fail "icebird: row 4 is $(jq -c 'select(.id == 4)' "$tmp/icebird.jsonl")"
jq -e -s 'map(select(.id == 50))[0] | (._cdc_special | fromjson) == {"amount": "NaN", "raw": "Infinity"}
          and .raw == null' "$tmp/icebird.jsonl" >/dev/null ||
    fail "icebird: row 50 is $(jq -c 'select(.id == 50)' "$tmp/icebird.jsonl")"
echo "sentinels: icebird row 4: $(jq -c 'select(.id == 4)' "$tmp/icebird.jsonl")"

# nothing dead-lettered, the special values counted (before the hand-made event below)
specials=0 unpartitioned=0
for i in $(seq 0 $((CHAOS_WORKERS - 1))); do
    st=$(curl -sf "http://$(cat "$CHAOS_DIR/procs/worker-$i.http")/status") || fail "no /status of worker-$i"
    jq -e '[.dead_letters[]] | add == 0' <<<"$st" >/dev/null ||
        fail "worker-$i dead-lettered records: $(jq -c .dead_letters <<<"$st")"
    jq -e '.values.nulled_records == 0' <<<"$st" >/dev/null || fail "worker-$i nulled columns: $(jq -c .values <<<"$st")"
    specials=$((specials + $(jq '.values.special_values' <<<"$st")))
    n=$(curl -sf "http://$(cat "$CHAOS_DIR/procs/worker-$i.http")/metrics" |
        sed -n 's/^cdc_worker_unpartitioned_rows_total \([0-9]*\).*/\1/p')
    unpartitioned=$((unpartitioned + ${n:-0}))
    curl -sf "http://$(cat "$CHAOS_DIR/procs/worker-$i.http")/metrics" |
        grep -q '^cdc_worker_special_values_total{table="public.sentinel_t"}' ||
        [ "$(jq '.values.special_values' <<<"$st")" = 0 ] || fail "worker-$i: no cdc_worker_special_values_total"
done
[ "$specials" -gt 0 ] || fail "the workers counted no special values"
# hour(tstz) of a timestamp infinity has no partition value: those rows are unpartitioned
[ "$unpartitioned" -gt 0 ] || fail "no row counted in cdc_worker_unpartitioned_rows_total"
echo "sentinels: $src rows, $specials special values counted, $unpartitioned rows unpartitioned, none dead-lettered"

# ---- a value a column cannot hold ---------------------------------------------------------
K=$CDC_TEST_KAFKA
ctl() { "$CHAOS_BUILD/cdcctl" --kafka "$K" "$@"; }
sql -c "INSERT INTO public.sentinel_bad VALUES (1, 12.50, 'good')" || fail "insert into sentinel_bad failed"
# the capture's insert event of id 1, as a template for a new key 1001 with a bad amount
insert_event() {
    timeout 10 kcat -C -q -b "$K" -t cdc.public.sentinel_bad -o beginning -e -f '%s\n' 2>/dev/null |
        grep '"after":{"id":1,' | head -n 1
}
chaos_wait 30 "the insert event of sentinel_bad" bash -c "$(declare -f insert_event); K=$K insert_event | grep -q ." ||
    fail "no insert event of sentinel_bad"
ev=$(insert_event)
bad=${ev/'"after":{"id":1,'/'"after":{"id":1001,'}
bad=${bad/'"amount":"12.50"'/'"amount":"abc"'}
bad=${bad/'"note":"good"'/'"note":"kept"'}
if [ "$bad" = "$ev" ] || ! grep -q '"amount":"abc"' <<<"$bad"; then
    fail "could not make the bad event from $ev"
fi
printf '{"id":1001}\t%s\n' "$bad" | timeout 30 kcat -P -b "$K" -t cdc.public.sentinel_bad -p 0 -K $'\t' ||
    fail "could not produce the bad event"
bad_row() {
    "$CHAOS_ROOT/chaos/verify" --warehouse "$CHAOS_DIR/warehouse" --show sentinel_bad 2>/dev/null |
        jq -e -s 'map(select(.id == "1001"))[0] | .amount == null and .note == "kept"' >/dev/null
}
chaos_wait 60 "row 1001 in sentinel_bad's mirror, its amount null" bad_row ||
    fail "row 1001 is not in the mirror as expected: $("$CHAOS_ROOT/chaos/verify" --warehouse "$CHAOS_DIR/warehouse" --show sentinel_bad 2>&1)"
dead() { ctl dlq show --table public.sentinel_bad --json 2>/dev/null; }
chaos_wait 30 "the dead letter of row 1001" bash -c "$(declare -f dead ctl); CHAOS_BUILD=$CHAOS_BUILD K=$K dead | grep -q ." ||
    fail "no dead letter for sentinel_bad"
dead | jq -e -s 'length == 1 and (.[0] | .class == "type_mismatch" and .key == "{\"id\":1001}"
        and (.message | test("column \"amount\"")) and (.message | test("kept with 1 column null"))
        and (.payload | fromjson | .after.amount) == "abc")' >/dev/null ||
    fail "the dead letter is not the original event with the column named: $(dead)"
nulled=0
for i in $(seq 0 $((CHAOS_WORKERS - 1))); do
    st=$(curl -sf "http://$(cat "$CHAOS_DIR/procs/worker-$i.http")/status") || fail "no /status of worker-$i"
    nulled=$((nulled + $(jq '.values.nulled_records' <<<"$st")))
    if jq -e '.values.nulled_records > 0' <<<"$st" >/dev/null; then
        jq -e '.values.last_nulled | test("public.sentinel_bad: column \"amount\"")' <<<"$st" >/dev/null ||
            fail "worker-$i /status: $(jq -c .values <<<"$st")"
        curl -sf "http://$(cat "$CHAOS_DIR/procs/worker-$i.http")/metrics" |
            grep -q '^cdc_worker_nulled_values_total{table="public.sentinel_bad"} 1' ||
            fail "worker-$i: cdc_worker_nulled_values_total is not 1"
    fi
done
[ "$nulled" = 1 ] || fail "the workers' /status counts $nulled records kept with a column null, expected 1"
echo "sentinels: ok (a value its column cannot hold: the row kept with the column null, the event dead-lettered)"
