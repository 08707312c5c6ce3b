#!/usr/bin/env bash
# Native Iceberg types, end to end (docs/capture.md, "Types"; docs/parquet.md, "Nested
# columns"): the local pipeline captures a table with int[], text[] with NULL elements,
# int[][] (declared 2-D: list<list<int>>), numeric(10,2)[], an unconstrained numeric[] and
# numeric (decimal(38,10), --numeric-default) and the types Iceberg has no type for
# (timetz, interval, inet, money: their PostgreSQL text), and a composite type with a
# nested composite, a date, a numeric(8,2), a text[] and a date[] (a struct with list
# fields), and arrays of date (with infinity), timestamp, timestamptz, bytea, jsonb and
# json (lists of their element types; the worker converts the elements' PostgreSQL text).
# Rows come from the snapshot
# (the catalog's column facts) and from the stream (a Relation message's), with NULL
# arrays, empty ones, NULL elements, updates of the arrays and deletes.
# tests/js/lib/native_types_check.mjs compares the source rows with the mirror read by
# icebird and with the changelog's files read by DuckDB, and checks the declared types
# and that every nested field has its own id. A value the type cannot hold (a 1-D array
# in the 2-D column; a numeric with more fraction digits than the scale) is a dead
# letter, counted, never a silent loss, and its row is kept with that column null. Compaction rewrites
# the table (our reader assembles the nested values) and the readers agree again.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/nt CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.transactions,public.native_types
export CHAOS_INITIAL_ROWS=5
# compaction every second: the table's nested columns are read back and rewritten
export CHAOS_COORDINATOR_ARGS="--compact-interval=1s --compact-min-files=2"
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

fail() {
    tail -n 20 "$CHAOS_DIR"/procs/capture-*.log "$CHAOS_DIR"/procs/worker-*.log >&2 2>/dev/null
    grep -h "compact" "$CHAOS_DIR"/procs/coordinator-*.log | tail -n 10 >&2
    echo "native_types: $*" >&2
    exit 1
}
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }

pipeline_servers_up
sql <<'SQL' || fail "could not create native_types"
CREATE TYPE public.nt_geo AS (lat float8, lon float8);
CREATE TYPE public.nt_place AS (street text, zip int, geo public.nt_geo, since date,
    price numeric(8,2), tags text[], visits date[]);
CREATE TABLE public.native_types (
    id int PRIMARY KEY, ints int[], texts text[], grid int[][], prices numeric(10,2)[],
    nums numeric[], amount numeric, tz timetz, iv interval, addr inet, cash money,
    place public.nt_place, days date[], stamps timestamp[], stampstz timestamptz[],
    blobs bytea[], docs jsonb[], jdocs json[]);
INSERT INTO public.native_types
SELECT g, ARRAY[g, g + 1, NULL], ARRAY['a' || g, NULL, 'quote "' || g || '"', ''],
       ARRAY[[g, -g], [NULL, 2 * g]], ARRAY[g + 0.25, NULL]::numeric(10,2)[],
       ARRAY[g / 4.0, 12345678901234567890.5]::numeric[], g * 1.5,
       '10:11:12+02', make_interval(days => g, hours => 3), ('10.0.0.' || g)::inet, (g * 2.5)::numeric::money,
       CASE WHEN g % 4 = 0 THEN NULL ELSE ROW('Main "St", ' || g, 8000 + g, ROW(47.5 + g, -8.25)::public.nt_geo,
           date '2024-02-29' + g, g + 0.5, ARRAY['x', NULL, 'y z'],
           ARRAY[date '2024-02-29' + g, NULL, 'infinity'])::public.nt_place END,
       ARRAY[date '2024-02-29' + g, NULL, 'infinity', '-infinity']::date[],
       ARRAY[timestamp '2024-02-29 10:00:00.25' + make_interval(hours => g), NULL]::timestamp[],
       ARRAY[timestamptz '2024-02-29 10:00:00+02' + make_interval(mins => g)]::timestamptz[],
       ARRAY[convert_to('b' || g || ' "q"', 'UTF8'), NULL, '\x'::bytea]::bytea[],
       ARRAY[jsonb_build_object('g', g, 's', 'x "y"'), NULL]::jsonb[],
       ARRAY['[1,  2]'::json]::json[]
FROM generate_series(1, 20) g;
INSERT INTO public.native_types (id, ints, texts, grid) VALUES (21, NULL, '{}', '{}');
SQL
pipeline_procs_up

# streamed changes: inserts, array updates (elements changed, emptied, nulled), deletes
sql <<'SQL' || fail "the changes failed"
INSERT INTO public.native_types
SELECT g, ARRAY[g], ARRAY[NULL, 'x' || g], ARRAY[[g], [g + 1], [NULL]]::int[][], '{}', ARRAY[NULL, g]::numeric[],
       -g / 8.0, '23:59:59.5-05', interval '1 year 2 mons 3 days 04:05:06.7', '::1', (-g)::numeric::money,
       CASE WHEN g % 3 = 0 THEN ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL)::public.nt_place
            ELSE ROW('(' || g || ')', -g, NULL, date '1999-12-31', -g, '{}', '{}')::public.nt_place END,
       ARRAY[date '1999-12-31' - g], '{}', ARRAY[NULL, timestamptz '2000-01-01 00:00:01+00']::timestamptz[],
       ARRAY['\x417a'::bytea], '{}', NULL
FROM generate_series(100, 130) g;
UPDATE public.native_types SET place.zip = 1, place.geo = ROW(0, 0) WHERE id % 2 = 0 AND place::text IS NOT NULL;
UPDATE public.native_types SET ints = ints || 99, texts = ARRAY['u', NULL] WHERE id % 3 = 0;
UPDATE public.native_types SET days = days || date '2000-01-01', blobs = NULL,
    docs = ARRAY['{"u": [1, null]}'::jsonb] WHERE id % 4 = 1;
UPDATE public.native_types SET grid = NULL, nums = '{}' WHERE id % 5 = 0;
DELETE FROM public.native_types WHERE id % 7 = 0;
SQL
# values the declared types cannot hold: dead letters, and the row kept with that column
# null (docs/worker.md, "Values no Iceberg type holds")
sql <<'SQL' || fail "the mismatching rows failed"
INSERT INTO public.native_types (id, grid) VALUES (900, '{1,2}');
INSERT INTO public.native_types (id, amount) VALUES (901, 0.123456789012345);
SQL

# the columns as the source has them, numerics as text, the mismatching values null
sql -At > "$tmp/source.jsonl" <<'SQL' || fail "could not read the source"
SELECT json_build_object('id', id, 'ints', ints, 'texts', texts,
    'grid', CASE WHEN id = 900 THEN NULL ELSE grid END,
    'prices', prices::text[], 'nums', nums::text[],
    'amount', CASE WHEN id = 901 THEN NULL ELSE amount::text END, 'tz', tz,
    'iv', iv, 'addr', addr, 'cash', cash, 'place', CASE WHEN place::text IS NOT NULL THEN json_build_object(
        'street', (place).street, 'zip', (place).zip, 'geo', to_json((place).geo),
        'since', (place).since::text, 'price', (place).price::text, 'tags', (place).tags,
        'visits', (place).visits) END,
    'days', days, 'stamps', stamps, 'stampstz', stampstz,
    'blobs', CASE WHEN blobs IS NOT NULL THEN coalesce((SELECT array_agg(encode(x, 'hex') ORDER BY o)
        FROM unnest(blobs) WITH ORDINALITY AS u(x, o)), '{}') END,
    'docs', docs::text[], 'jdocs', jdocs::text[])
FROM public.native_types ORDER BY id;
SQL
cat > "$tmp/types.json" <<'JSON'
{"ints": {"type": "list", "element": "int", "element-required": false},
 "texts": {"type": "list", "element": "string", "element-required": false},
 "grid": {"type": "list", "element": {"type": "list", "element": "int", "element-required": false},
          "element-required": false},
 "prices": {"type": "list", "element": "decimal(10,2)", "element-required": false},
 "nums": {"type": "list", "element": "decimal(38,10)", "element-required": false},
 "amount": "decimal(38,10)", "tz": "string", "iv": "string", "addr": "string", "cash": "string",
 "place": {"type": "struct", "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"},
     {"name": "geo", "type": {"type": "struct", "fields": [{"name": "lat", "type": "double"},
                                                           {"name": "lon", "type": "double"}]}},
     {"name": "since", "type": "date"}, {"name": "price", "type": "decimal(8,2)"},
     {"name": "tags", "type": {"type": "list", "element": "string", "element-required": false}},
     {"name": "visits", "type": {"type": "list", "element": "date", "element-required": false}}]},
 "days": {"type": "list", "element": "date", "element-required": false},
 "stamps": {"type": "list", "element": "timestamp", "element-required": false},
 "stampstz": {"type": "list", "element": "timestamptz", "element-required": false},
 "blobs": {"type": "list", "element": "binary", "element-required": false},
 "docs": {"type": "list", "element": "string", "element-required": false},
 "jdocs": {"type": "list", "element": "string", "element-required": false}}
JSON

# the dead letters arrive: two records, counted by the workers as type mismatches
dlq_count() {
    local n=0 m f
    for f in "$CHAOS_DIR"/procs/worker-*.http; do
        m=$(curl -fsS "http://$(cat "$f")/metrics" 2>/dev/null |
            awk '/^cdc_worker_dlq_records_total\{class="type_mismatch"/ {s += $NF} END {print s + 0}')
        n=$((n + ${m:-0}))
    done
    echo "$n"
}
two_dead_letters() { [ "$(dlq_count)" -ge 2 ]; }
chaos_wait 90 "the two dead letters" two_dead_letters ||
    fail "expected 2 dead letters, the workers count $(dlq_count)"
grep -q 'column \\"grid\\" expects list (\\"element\\" expects a list), got' "$CHAOS_DIR"/procs/worker-*.log ||
    fail "the dead letter of the 1-D value does not say why"

# the tables follow the source within an epoch or two: the check is repeated until then
check() {
    node tests/js/lib/native_types_check.mjs "$CHAOS_DIR/warehouse" public native_types \
        "$tmp/source.jsonl" "$tmp/types.json" >"$tmp/check.log" 2>&1
}
chaos_wait 90 "the tables to equal the source" check || fail "$(cat "$tmp/check.log")"
cat "$tmp/check.log"

# a coordinator metric summed over the coordinators (the leader runs maintenance)
coord_metric() {
    local f
    for f in "$CHAOS_DIR"/procs/coordinator-*.http; do
        curl -fsS "http://$(cat "$f")/metrics" 2>/dev/null
    done | awk -v m="$1" 'index($1, m) == 1 {s += $NF} END {print s + 0}'
}
# a compaction of the mirror committed (its nested columns read back and written again,
# its equality deletes applied), and the tables still equal the source; none failed
compacted() {
    [ "$(coord_metric 'cdc_coordinator_table_compactions_total{table="public.native_types"')" -ge 1 ]
}
chaos_wait 60 "compactions of native_types" compacted ||
    fail "native_types was not compacted: $(coord_metric cdc_coordinator_table_compactions_total)"
chaos_wait 60 "the tables to equal the source after compaction" check ||
    fail "after compaction: $(cat "$tmp/check.log")"
cat "$tmp/check.log"
[ "$(coord_metric cdc_coordinator_compaction_failures_total)" = 0 ] ||
    fail "compaction failed $(coord_metric cdc_coordinator_compaction_failures_total) times"
