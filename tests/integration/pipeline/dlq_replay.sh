#!/usr/bin/env bash
# Dead letters, inspected and replayed with `cdcctl dlq` (docs/operations.md, "Dead
# letters: inspection and replay"), end to end: real PostgreSQL, cdc-capture, the
# development broker, a coordinator and a worker, and chaos/verify (icebird + DuckDB).
#
# The capture writes to the topic prefix `src`; this script relays its events into the
# worker's topics (prefix `cdc`, same key and partition, schema documents renamed) and
# turns chosen ones into poison on the way, one per class the worker dead-letters:
#   malformed_json    id 11's insert gets a "LOG: " prefix (a misconfigured producer)
#   missing_key       id 12's insert loses its key column
#   unknown_op        id 13's update says op "x"
#   type_mismatch     id 14's and id 17's inserts carry amount as a string
#   unknown_schema    id 15's insert names schema version 99
#   oversized         id 16's insert is real but larger than the worker's
#                     --max-record-bytes (64 KiB)
#   unresolved_toast  id 17's update (a real one: its TOASTed note unchanged) finds no
#                     earlier image in state, since id 17's insert is a dead letter
# So the source holds changes the tables lack. The test checks `cdcctl dlq list` and
# `show` (text and --json), replays one record without a fix (it comes back with its
# replay count, the original marked replayed), then fixes each class: a command
# (--transform-cmd) for malformed JSON and the amounts, JSON Patch files (--transform)
# for the key, the op and the schema version, a worker restarted with a larger limit for
# the oversized record, and, once id 17's insert is back, a plain replay of its TOAST
# update. chaos/verify then reports the mirror equal to the source and every change once
# in the changelog, in order. Everything is replayed a second time: the worker drops all
# of it as duplicates and the verifier still reports the same tables.
#
# A second table, dlq_late, holds the case the verifier cannot: an update that failed
# while a later update of the row went through. Replayed, it must not overwrite the newer
# row (the mirror keeps amount 3) and reaches the changelog once (docs/worker.md,
# "Replayed dead letters").
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/dlq CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.dlq_orders,public.dlq_late CHAOS_WORKERS=1 CHAOS_COORDINATORS=1
export CHAOS_CAPTURES=1
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'if [ -n "${KEEP:-}" ]; then pipeline_down >/dev/null 2>&1; echo "kept $tmp"; else pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"; fi' EXIT

fail() {
    echo "dlq_replay: $*" >&2
    tail -n 20 "$CHAOS_DIR"/procs/worker-0.log "$CHAOS_DIR"/procs/capture-0.log >&2 2>/dev/null
    exit 1
}
log() { echo "dlq_replay: $*"; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }

pipeline_servers_up
K=$CDC_TEST_KAFKA
ctl() { "$CHAOS_BUILD/cdcctl" --kafka "$K" "$@"; }

sql <<'SQL' || fail "could not create the tables"
CREATE TABLE public.dlq_orders (id int PRIMARY KEY, amount int NOT NULL, note text);
-- out of line and uncompressed: an update that leaves a long note alone does not send it
ALTER TABLE public.dlq_orders ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TRIGGER dlq_orders_audit AFTER INSERT OR UPDATE OR DELETE ON public.dlq_orders
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('id');
CREATE TABLE public.dlq_late (id int PRIMARY KEY, amount int NOT NULL);
SQL
for t in cdc.public.dlq_orders cdc.public.dlq_late; do
    harness_kafka_ctl "CREATE $t 12" >/dev/null || fail "could not create topic $t"
done
harness_kafka_ctl "CREATE cdc._schemas 1" >/dev/null || fail "could not create cdc._schemas"

port=$(harness_free_port)
proc_start capture-0 "$CHAOS_BUILD/cdc-capture" --pg-dsn "$PIPELINE_PG_DSN" \
    --tables "$CHAOS_TABLES" --create-publication=true --publication dlq_pub --slot dlq_slot \
    --snapshot-mode "$CHAOS_SNAPSHOT_MODE" \
    --kafka "$K" --topic-prefix src --http "127.0.0.1:$port"
port=$(harness_free_port)
http=$(harness_free_port)
proc_start coordinator-0 "$CHAOS_BUILD/cdc-coordinator" --id coordinator-0 --job "$CDC_JOB" \
    --etcd "$CDC_TEST_ETCD" --listen "tcp://127.0.0.1:$port" --http "127.0.0.1:$http" \
    --warehouse "$CHAOS_DIR/warehouse" --expected-workers 1
echo "127.0.0.1:$http" >"$CHAOS_DIR/procs/coordinator-0.http"
CHAOS_WORKER_ARGS="--max-record-bytes=64KiB" pipeline_start_worker 0
chaos_wait 90 "a leader with its worker" pipeline_ready || fail "the pipeline did not come up"

# ---- the relay: src.* -> cdc.*, with poison --------------------------------------------------

declare -A next=()
relayed=0

# poison <table> <key> <op> <value>: prints the value as the worker gets it.
poison() {
    local v=$4
    case "$1|$2|$3" in
    'dlq_orders|{"id":11}|c') v="LOG: $v" ;;
    'dlq_orders|{"id":12}|c') v=${v/'"after":{"id":12,'/'"after":{'} ;;
    'dlq_orders|{"id":13}|u') v=${v/'"op":"u"'/'"op":"x"'} ;;
    'dlq_orders|{"id":14}|c' | 'dlq_orders|{"id":17}|c') v=$(sed -E 's/"amount":([0-9]+)/"amount":"\1"/' <<<"$v") ;;
    'dlq_late|{"id":1}|u') v=${v/'"amount":2}'/'"amount":"2"}'} ;; # the first update only
    'dlq_orders|{"id":15}|c') v=${v/'"schema_version":1,'/'"schema_version":99,'} ;;
    esac
    printf '%s\n' "$v"
}

# Copies what is new in src.<t> (every partition) to cdc.<t>, poisoned where planned.
relay_topic() {
    local t=$1 p o k v op n out
    for ((p = 0; p < 12; p++)); do
        out=$tmp/relay.$p
        : >"$out"
        n=0
        while IFS=$'\t' read -r o k v; do
            op=
            [[ $v =~ \"op\":\"([a-z])\" ]] && op=${BASH_REMATCH[1]}
            printf '%s\t' "$k" >>"$out"
            poison "$t" "$k" "$op" "$v" >>"$out"
            next[$t.$p]=$((o + 1))
            n=$((n + 1))
        done < <(timeout 30 kcat -C -q -b "$K" -t "src.public.$t" -p "$p" -o "${next[$t.$p]:-0}" \
            -e -f '%o\t%k\t%s\n' 2>/dev/null)
        if [ "$n" -gt 0 ]; then
            timeout 30 kcat -P -b "$K" -t "cdc.public.$t" -p "$p" -K $'\t' <"$out" ||
                fail "could not relay to cdc.public.$t partition $p"
            relayed=$((relayed + n))
        fi
    done
}

# Schema documents: renamed to the cdc prefix (key <topic>/<version> and "topic").
relay_schemas() {
    local out=$tmp/relay.schemas
    timeout 30 kcat -C -q -b "$K" -t src._schemas -p 0 -o "${next[schemas]:-0}" -e \
        -f '%o\t%k\t%s\n' 2>/dev/null | sed 's/src\.public\./cdc.public./g' >"$out"
    [ -s "$out" ] || return 0
    next[schemas]=$(($(tail -n 1 "$out" | cut -f1) + 1))
    cut -f2- "$out" | timeout 30 kcat -P -b "$K" -t cdc._schemas -p 0 -K $'\t' ||
        fail "could not relay the schema documents"
}

# Relays until every change the audit records (and dlq_late's 3) went through.
relay_all() {
    local want deadline=$((SECONDS + 90))
    want=$(($(sql -At -c "SELECT count(*) FROM cdc_audit.changes WHERE tbl = 'dlq_orders'") + 3))
    while [ "$relayed" -lt "$want" ]; do
        [ "$SECONDS" -lt "$deadline" ] || fail "relayed $relayed of $want events in 90 s"
        relay_schemas
        relay_topic dlq_orders
        relay_topic dlq_late
        [ "$relayed" -ge "$want" ] || sleep 0.5
    done
    log "relayed $relayed events"
}

# ---- changes: good ones, and the ones that will be poison ----------------------------------

sql <<'SQL' || fail "the changes failed"
INSERT INTO public.dlq_orders SELECT g, g * 10, 'n' || g FROM generate_series(1, 10) g;
UPDATE public.dlq_orders SET amount = amount + 1 WHERE id IN (2, 4, 6);
DELETE FROM public.dlq_orders WHERE id = 9;
INSERT INTO public.dlq_orders VALUES (11, 110, 'n11'), (12, 120, 'n12'), (13, 130, 'n13'),
    (14, 140, 'n14'), (15, 150, 'n15');
UPDATE public.dlq_orders SET amount = 131 WHERE id = 13;
INSERT INTO public.dlq_orders VALUES (16, 160, repeat('x', 80000));
INSERT INTO public.dlq_orders
    SELECT 17, 170, string_agg(md5(g::text), '') FROM generate_series(1, 100) g;
UPDATE public.dlq_orders SET amount = 171 WHERE id = 17;
INSERT INTO public.dlq_late VALUES (1, 1);
UPDATE public.dlq_late SET amount = 2 WHERE id = 1;
UPDATE public.dlq_late SET amount = 3 WHERE id = 1;
SQL
relay_all

classes() { ctl dlq list --json --table public.dlq_orders 2>/dev/null | jq -sc '[.[].class] | sort'; }
all='["malformed_json","missing_key","oversized","type_mismatch","unknown_op","unknown_schema","unresolved_toast"]'
every_class() { [ "$(classes)" = "$all" ]; }
late_dead() { grep -q '"class":"type_mismatch"' <<<"$(ctl dlq show --table public.dlq_late --json)"; }
chaos_wait 90 "a dead letter of every class" every_class || fail "dead letters of $(classes), expected $all"
chaos_wait 60 "dlq_late's dead letter" late_dead || fail "no dead letter for dlq_late"

# ---- inspection ------------------------------------------------------------------------------

out=$(ctl dlq list) || fail "dlq list failed"
echo "$out"
grep -Eq '^public\.dlq_orders +type_mismatch +2 +0 +20[0-9-]+T' <<<"$out" ||
    fail "dlq list: no line for the two type mismatches with their first time"
ctl dlq list --json | jq -e -s 'all(.[]; .records >= 1 and .first != "" and .last >= .first and .dlq_topic != "")' >/dev/null ||
    fail "dlq list --json: a group without records or times"
ctl dlq show --table public.dlq_orders --class unknown_op --json >"$tmp/op.json" ||
    fail "dlq show failed"
jq -e -s 'length == 1 and (.[0] | .class == "unknown_op" and (.message | test("unknown op")) and
          .origin.topic == "cdc.public.dlq_orders" and .origin.partition == .partition and
          .origin.offset >= 0 and (.time | test("Z$")) and .replay_count == 0 and
          .replayed == false and .key == "{\"id\":13}" and (.payload | fromjson | .op) == "x" and
          .headers["cdc.error.class"] == "unknown_op" and (.id | startswith("cdc.public.dlq_orders.dlq:")))' \
    "$tmp/op.json" >/dev/null || fail "dlq show --json: $(cat "$tmp/op.json")"
grep -q '^  origin   cdc.public.dlq_orders\[' <<<"$(ctl dlq show --table public.dlq_orders --class unknown_op)" ||
    fail "dlq show: no origin line"
op_id=$(jq -r .id "$tmp/op.json")

# A replay without a fix: the record fails again and comes back with its replay count;
# the original is marked replayed.
ctl dlq replay --table public.dlq_orders --class unknown_op >/dev/null || fail "replay of unknown_op failed"
back_again() {
    ctl dlq show --table public.dlq_orders --class unknown_op --json |
        jq -e -s 'length == 2 and any(.[]; .replay_count == 1 and .replayed == false)' >/dev/null
}
chaos_wait 60 "the unfixed record back in the DLQ" back_again ||
    fail "the record replayed without a fix did not come back with replay_count 1: $(ctl dlq show --class unknown_op --json)"
ctl dlq show --table public.dlq_orders --class unknown_op --json |
    jq -e -s --arg id "$op_id" 'any(.[]; .id == $id and .replayed and .replay.replay_count == 1)' >/dev/null ||
    fail "the replayed record is not marked replayed"
ctl dlq show --table public.dlq_orders --class unknown_op --skip-replayed --json | jq -e -s 'length == 1' >/dev/null ||
    fail "--skip-replayed still shows the replayed record"

# ---- fixes -------------------------------------------------------------------------------------

cat >"$tmp/key.json" <<'EOF'
[{"op": "test", "path": "/after/note", "value": "n12"},
 {"op": "add", "path": "/after/id", "value": 12}]
EOF
cat >"$tmp/op.patch.json" <<'EOF'
[{"op": "test", "path": "/op", "value": "x"}, {"op": "replace", "path": "/op", "value": "u"}]
EOF
cat >"$tmp/version.json" <<'EOF'
[{"op": "test", "path": "/source/schema_version", "value": 99},
 {"op": "replace", "path": "/source/schema_version", "value": 1}]
EOF
amounts='sed -E "s/\"amount\":\"([0-9]+)\"/\"amount\":\1/g"'

# fix_all: replays every class but two (below) with its fix; prints how many records went
# back.
fix_all() {
    local n=0
    replay() {
        local o
        o=$(ctl dlq replay --table public.dlq_orders "$@") || fail "replay $* failed: $o"
        n=$((n + $(grep -c '^replayed  ' <<<"$o")))
    }
    ctl dlq show --table public.dlq_orders --class missing_key --json | jq -r .id >"$tmp/ids" ||
        fail "could not list the missing_key records"
    replay --class malformed_json --transform-cmd "sed 's/^LOG: //'"
    replay --ids-file "$tmp/ids" --transform "$tmp/key.json"
    replay --class unknown_op --transform "$tmp/op.patch.json"
    replay --class unknown_schema --transform "$tmp/version.json"
    replay --class type_mismatch --transform-cmd "$amounts"
    echo "$n"
}
n1=$(fix_all) || exit 1
log "replayed $n1 fixed records"
[ "$n1" -ge 7 ] || fail "only $n1 records replayed"

# oversized: the cause is the worker's limit, raised; the record goes back as it is
proc_signal worker-0 TERM
chaos_wait 15 "worker-0 to stop" bash -c "! kill -0 $(proc_pid worker-0) 2>/dev/null" ||
    fail "worker-0 did not stop"
CHAOS_WORKER_ARGS="--max-record-bytes=1MiB" pipeline_start_worker 0
grep -q '^replayed  ' <<<"$(ctl dlq replay --table public.dlq_orders --class oversized)" ||
    fail "the oversized record was not replayed"
# unresolved TOAST: its cause was id 17's insert, back now; the update goes back as it is
in_mirror() {
    node tests/js/lib/read_table.mjs "$CHAOS_DIR/warehouse/public/dlq_orders" |
        jq -e --argjson id "$1" '.rows | any(.id == $id)' >/dev/null
}
chaos_wait 60 "id 17 in the mirror" in_mirror 17 ||
    fail "id 17's insert did not reach the mirror"
grep -q '^replayed  ' <<<"$(ctl dlq replay --table public.dlq_orders --class unresolved_toast)" ||
    fail "the unresolved TOAST record was not replayed"

pipeline_verify --tables dlq_orders --wait 120 >"$tmp/verify1.log" 2>&1 || {
    cat "$tmp/verify1.log" >&2
    fail "after the fixes: the verifier failed"
}
tail -n 1 "$tmp/verify1.log" | sed 's/^/fixed: /'
changes1=$(grep -o 'changelog [0-9]* changes' "$tmp/verify1.log" | tail -n 1)

# dlq_late: the failed update is older than the row's state: changelog only
grep -q '^replayed  ' <<<"$(ctl dlq replay --table public.dlq_late --transform-cmd="$amounts")" ||
    fail "dlq_late: replay failed"
late_ok() {
    local m c
    m=$(node tests/js/lib/read_table.mjs "$CHAOS_DIR/warehouse/public/dlq_late") || return 1
    c=$(node tests/js/lib/read_table.mjs "$CHAOS_DIR/warehouse/public/dlq_late_changelog") || return 1
    [ "$(jq -c '[.rows[] | [.id, .amount]]' <<<"$m")" = '[[1,3]]' ] &&
        [ "$(jq -c '[.rows[] | .amount] | sort' <<<"$c")" = '[1,2,3]' ]
}
chaos_wait 60 "dlq_late: mirror amount 3, changelog 1, 2, 3" late_ok ||
    fail "dlq_late: mirror $(node tests/js/lib/read_table.mjs "$CHAOS_DIR/warehouse/public/dlq_late" | jq -c .rows), changelog $(node tests/js/lib/read_table.mjs "$CHAOS_DIR/warehouse/public/dlq_late_changelog" | jq -c '[.rows[] | .amount]')"
log "dlq_late: the late update is in the changelog only; the mirror kept the newer row"

# ---- everything again: nothing changes ---------------------------------------------------------

dups() {
    curl -fsS "http://$(cat "$CHAOS_DIR/procs/worker-0.http")/metrics" 2>/dev/null |
        awk '/^cdc_worker_replayed_records_total\{result="duplicate"\}/ { n = $2 } END { print n + 0 }'
}
before=$(dups)
n2=$(fix_all) || exit 1
n2=$((n2 + $(ctl dlq replay --table public.dlq_orders --class oversized,unresolved_toast | grep -c '^replayed  ')))
n2=$((n2 + $(ctl dlq replay --table public.dlq_late --transform-cmd="$amounts" | grep -c '^replayed  ')))
log "replayed $n2 records a second time"
dropped() { [ "$(dups)" -ge $((before + n2)) ]; }
chaos_wait 90 "$n2 duplicates in the worker" dropped ||
    fail "the worker counted $(($(dups) - before)) of $n2 replays as duplicates"
pipeline_verify --tables dlq_orders --wait 60 >"$tmp/verify2.log" 2>&1 || {
    cat "$tmp/verify2.log" >&2
    fail "after the second replay: the verifier failed"
}
changes2=$(grep -o 'changelog [0-9]* changes' "$tmp/verify2.log" | tail -n 1)
[ "$changes1" = "$changes2" ] || fail "the changelog changed: $changes1, then $changes2"
late_ok || fail "dlq_late changed after the second replay"
tail -n 1 "$tmp/verify2.log" | sed 's/^/replayed twice: /'
ctl dlq list
echo "dlq_replay: ok"
