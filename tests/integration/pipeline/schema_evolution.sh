#!/usr/bin/env bash
# Schema evolution, end to end: the whole local pipeline (capture, two coordinators,
# three workers) on real PostgreSQL, two tables taken through the same DDL, each change
# followed by inserts, updates and deletes:
#   evo_sep  every change in its own epoch: the verifier must pass after each step before
#            the next one starts (so each step is committed on its own);
#   evo_one  every change and the rows around it in one transaction, so rows under the
#            old and the new types fall into one epoch.
# The DDL: ADD COLUMN, RENAME COLUMN, int -> bigint and real -> double precision
# (Iceberg promotions), numeric(10,2) -> numeric(14,4) (no promotion: a new field under the
# source name n, the old one renamed n__v1, docs/worker.md "Schema changes"; `SELECT n`
# through DuckDB and icebird must give every row's current value, the changelog's history
# stays readable under n__v1), numeric(14,4) -> numeric(16,4) (precision widening),
# DROP COLUMN, ADD COLUMN ... [NOT NULL] DEFAULT (existing rows take the default), text ->
# int USING an expression and int -> bigint USING one that changes every value (the table
# is rewritten without WAL changes: the capture backfills it, docs/capture.md).
# chaos/verify (icebird + DuckDB, resolving columns by field id) compares mirror ==
# source on the current columns and every changelog row with the audit record,
# column by column. Also checks the Iceberg schemas themselves: field ids follow the
# source columns (a rename keeps its id, the changelog uses the mirror's ids) and the
# types the table declares are those of the source.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/evo CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.transactions,public.accounts,public.evo_sep,public.evo_one
export CHAOS_INITIAL_ROWS=10
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT

# fail <message> [verifier log]: the processes' logs, then the verifier's and the message
# last (what a CI excerpt of the end shows).
fail() {
    tail -n 30 "$CHAOS_DIR"/procs/coordinator-0.log "$CHAOS_DIR"/procs/capture-*.log >&2 2>/dev/null
    [ -n "${2:-}" ] && tail -n 40 "$2" >&2
    echo "schema_evolution: $1" >&2
    exit 1
}
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }

pipeline_servers_up
for t in evo_sep evo_one; do
    sql <<SQL || fail "could not create $t"
CREATE TABLE public.$t (id int PRIMARY KEY, v text, a int, n numeric(10,2), d text, f real);
CREATE TRIGGER ${t}_audit AFTER INSERT OR UPDATE OR DELETE ON public.$t
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('id');
INSERT INTO public.$t SELECT g, 'v' || g, g, g * 1.25, 'd' || g, g * 0.5 FROM generate_series(1, 40) g;
DELETE FROM cdc_audit.changes WHERE tbl = '$t';
INSERT INTO cdc_audit.changes (tbl, op, pk, txid, row_image)
    SELECT '$t', 'r', id, txid_current(), to_jsonb(t) FROM public.$t t ORDER BY id;
SQL
done
pipeline_procs_up

# dml <table> <step>: inserts 4 rows, updates 4 rows of which 2 untouched since the start,
# deletes 1; `step` makes keys and values distinct per step.
dml() {
    local t=$1 s=$2
    cat <<SQL
INSERT INTO public.$t (id) SELECT 1000 + $s * 10 + g FROM generate_series(1, 4) g;
UPDATE public.$t SET id = id WHERE id IN (1000 + $s * 10 + 1);
UPDATE public.$t SET id = id WHERE id IN ($s, 20 + $s, 1000 + $s * 10 + 2);
DELETE FROM public.$t WHERE id = 30 + $s;
SQL
}

# current_check <table> [final]: after n's type change, `SELECT n` through DuckDB
# (chaos/verify --show: read_parquet by field id) and icebird (icebergRead) gives the
# source's current value for every row of the mirror, also rows untouched since the
# change (the capture's backfill rewrote them); the changelog keeps the history under
# n__v1: the snapshot row of key 1 holds 1.25 there (n null), and step 4's update of key
# 1041 holds its value under n. With `final` also the v_renamed text -> int step: the
# history's text under v_renamed__v1, the current ints under v_renamed.
current_check() {
    local t=$1 final=${2:-} dir=$CHAOS_DIR/warehouse/public/$1 src rows cl reader bad
    # shellcheck disable=SC2016
    # (numbers compared at the column's scale: icebird returns decimals as doubles)
    local num='def num: if . == null then null else (tonumber * 10000 | round) end;'
    src=$(sql -A -t -c "SELECT json_agg(json_build_object('id', id, 'n', n::text,
            'v', $([ -n "$final" ] && echo "v_renamed" || echo "NULL")) ORDER BY id) FROM public.$t") ||
        { echo "$t: cannot read the source"; return 1; }
    for reader in duckdb icebird; do
        if [ $reader = duckdb ]; then
            rows=$(node chaos/verify.mjs --warehouse "$CHAOS_DIR/warehouse" --show "$t" --limit 1000000 \
                2>/dev/null | jq -s -c .) &&
                cl=$(node chaos/verify.mjs --warehouse "$CHAOS_DIR/warehouse" --show "${t}_changelog" \
                    --limit 1000000 2>/dev/null | jq -s -c .)
        else
            rows=$(node tests/js/lib/read_table.mjs "$dir" | jq -c .rows) &&
                cl=$(node tests/js/lib/read_table.mjs "${dir}_changelog" | jq -c .rows)
        fi || { echo "$t: $reader cannot read the tables"; return 1; }
        bad=$(jq -n -c --argjson s "$src" --argjson m "$rows" --arg final "$final" "$num"'
            ($m | map({key: (.id | tostring), value: .}) | from_entries) as $got
            | [$s[] | . as $r | $got[$r.id | tostring] as $g
               | select($g == null or ($r.n | num) != ($g.n | num)
                        or ($final != "" and ($r.v | num) != ($g.v_renamed | num)))
               | {id, source: .n, mirror: $g.n, source_v: .v, mirror_v: $g.v_renamed}]
            | if ($s | map(select(.n != null)) | length) < 30 then ["too few values of n"] else . end')
        [ "$bad" = "[]" ] || { echo "$t: $reader: SELECT n is not the source's current value: $bad"; return 1; }
        jq -e --arg final "$final" "$num"'
            ([.[] | select(._op == "r" and (.id | tostring) == "1")] | length == 1
              and (.[0].n__v1 | num) == (1.25 | num) and .[0].n == null
              and ($final == "" or (.[0].v_renamed__v1 == "v1" and .[0].v_renamed == null)))
            and ([.[] | select(._op == "u" and (.id | tostring) == "1041"
                       and (.n | num) == (1234567890.1234 + 1041 | num))] | length >= 1)' <<<"$cl" >/dev/null ||
            { echo "$t: $reader: the changelog's history is not under n__v1: $(jq -c '[.[] |
                select((.id | tostring) == "1" or (.id | tostring) == "1041")]' <<<"$cl")"; return 1; }
    done
}

# The DDL steps, then the values written under each step's schema (by column name of
# that step). Each line: "<ddl>|<set clause>".
steps=(
    "ALTER TABLE %t ADD COLUMN added text|added = 'added-' || id"
    "ALTER TABLE %t RENAME COLUMN v TO v_renamed|v_renamed = 'renamed-' || id"
    "ALTER TABLE %t ALTER COLUMN a TYPE bigint|a = 9000000000 + id"
    "ALTER TABLE %t ALTER COLUMN n TYPE numeric(14,4)|n = 1234567890.1234 + id"
    "ALTER TABLE %t ALTER COLUMN f TYPE double precision|f = 0.1 + id"
    "ALTER TABLE %t ALTER COLUMN n TYPE numeric(16,4)|n = 123456789012.5678 + id"
    "ALTER TABLE %t DROP COLUMN d|added = 'after-drop-' || id"
    "ALTER TABLE %t ADD COLUMN def text NOT NULL DEFAULT 'x'|def = 'set-' || id"
    "ALTER TABLE %t ADD COLUMN def2 int DEFAULT 7|def2 = id"
    "ALTER TABLE %t ALTER COLUMN v_renamed TYPE int USING length(v_renamed)|v_renamed = id * 7"
    "ALTER TABLE %t ALTER COLUMN def2 TYPE bigint USING def2 * 2|def2 = id"
)

# Every step but the new rows' values: the rows a step inserts get the step's values, and
# so do the rows it updates (the set clause applies to the touched keys only).
step_sql() {
    local t=$1 i=$2 ddl set
    ddl=${steps[$i]%%|*}
    set=${steps[$i]#*|}
    echo "${ddl//%t/public.$t};"
    dml "$t" "$((i + 1))" | sed "s/SET id = id/SET $set/"
    echo "UPDATE public.$t SET $set WHERE id BETWEEN 1000 + $((i + 1)) * 10 + 1 AND 1000 + $((i + 1)) * 10 + 4;"
}

# evo_one: everything in one transaction, rows under old and new types in one epoch
{
    echo "BEGIN;"
    dml evo_one 0 | sed "s/SET id = id/SET v = 'before-' || id/"
    for i in "${!steps[@]}"; do step_sql evo_one "$i"; done
    echo "COMMIT;"
} | sql || fail "the one-transaction DDL script failed"

# evo_sep: one step at a time, each verified (hence committed) before the next
for i in "${!steps[@]}"; do
    step_sql evo_sep "$i" | sql || fail "step $((i + 1)) (${steps[$i]%%|*}) failed"
    pipeline_verify --tables evo_sep --wait 90 >"$tmp/verify-$i.log" 2>&1 ||
        fail "evo_sep after step $((i + 1)) (${steps[$i]%%|*}): the verifier failed" "$tmp/verify-$i.log"
    tail -n 1 "$tmp/verify-$i.log" | sed "s/^/evo_sep step $((i + 1)): /"
    if [ "$i" = 3 ]; then # numeric(10,2) -> numeric(14,4), in its own epoch
        out=$(current_check evo_sep) || fail "evo_sep after step 4: $out"
    fi
done
# DDL that no change follows: the capture's schema probe carries it into the stream
# (docs/capture.md): the drop and the default must reach the tables all the same.
for t in evo_sep evo_one; do
    sql -c "ALTER TABLE public.$t ADD COLUMN late text DEFAULT 'z'; ALTER TABLE public.$t DROP COLUMN def" ||
        fail "$t: the DDL-only step failed"
done
pipeline_verify --tables evo_one,evo_sep --wait 90 >"$tmp/verify-final.log" 2>&1 ||
    fail "the verifier failed on the final state" "$tmp/verify-final.log"
tail -n 1 "$tmp/verify-final.log" | sed 's/^/final: /'
for t in evo_sep evo_one; do
    out=$(current_check "$t" final) || fail "final state: $out"
done
echo "schema_evolution: SELECT n and v_renamed give the current values (DuckDB, icebird), the history under n__v1, v_renamed__v1"

# The Iceberg schemas themselves, read with jq from the metadata the readers use.
for t in evo_sep evo_one; do
    for tbl in "$t" "${t}_changelog"; do
        dir=$CHAOS_DIR/warehouse/public/$tbl
        md=$dir/metadata/v$(cat "$dir/metadata/version-hint.text").metadata.json
        [ -f "$md" ] || fail "$tbl: no metadata at $md"
        cur=$(jq -c '.["current-schema-id"] as $c | .schemas[] | select(.["schema-id"] == $c)
                     | [.fields[] | select(.id < 100000) | {id, name, type}]' "$md")
        want='[{"id":1,"name":"id","type":"int"},{"id":2,"name":"v_renamed__v1","type":"string"},'
        want+='{"id":3,"name":"a","type":"long"},{"id":4,"name":"n__v1","type":"decimal(10,2)"},'
        want+='{"id":6,"name":"f","type":"double"},{"id":7,"name":"added","type":"string"},'
        want+='{"id":8,"name":"n","type":"decimal(16,4)"},'
        want+='{"id":10,"name":"def2","type":"long"},{"id":11,"name":"v_renamed","type":"int"},'
        want+='{"id":12,"name":"late","type":"string"}]'
        # order of the current schema's fields: sort by id for the comparison
        got=$(jq -c 'sort_by(.id)' <<<"$cur")
        [ "$got" = "$want" ] || fail "$tbl: current schema $got, expected $want"
    done
done
# The leader's /status lists the schema changes it committed, the versioned one flagged.
status=$(chaos_status) || fail "no leader status"
jq -e '[.schema_changes[] | select(.versioned and (.changes | contains("earlier values stay in v_renamed__v1")))]
       | length > 0' <<<"$status" >/dev/null ||
    fail "/status lists no versioned schema change: $(jq -c .schema_changes <<<"$status")"

# A DDL that neither a change nor a backfill follows (a drop, a rename): no row carries the
# probe's version, so the capture writes a schema marker (op "s", docs/events.md) to every
# partition and the tables follow it without waiting for the next change.
sql -c "ALTER TABLE public.evo_sep DROP COLUMN late; ALTER TABLE public.evo_one RENAME COLUMN late TO late_r" ||
    fail "the quiet DDL failed"
pipeline_verify --tables evo_one,evo_sep --wait 90 >"$tmp/verify-quiet.log" 2>&1 ||
    fail "the verifier failed after a DDL no change followed" "$tmp/verify-quiet.log"
for tbl in evo_sep evo_sep_changelog evo_one evo_one_changelog; do
    dir=$CHAOS_DIR/warehouse/public/$tbl
    md=$dir/metadata/v$(cat "$dir/metadata/version-hint.text").metadata.json
    names=$(jq -c '.["current-schema-id"] as $c | [.schemas[] | select(.["schema-id"] == $c)
                   | .fields[] | .name]' "$md")
    case $tbl in
    evo_sep*) want_absent=late want_present=def2 ;;
    *) want_absent=late want_present=late_r ;;
    esac
    jq -e --arg a "$want_absent" --arg p "$want_present" 'index($a) == null and index($p) != null' \
        <<<"$names" >/dev/null || fail "$tbl: after the quiet DDL the current schema is $names"
done
echo "schema_evolution: ok"
