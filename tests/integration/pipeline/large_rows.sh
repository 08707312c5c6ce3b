#!/usr/bin/env bash
# Rows of any size, end to end (issue 36; docs/events.md, "Chunked events"; docs/worker.md,
# "Large rows"): real PostgreSQL, two captures (one streams, one stands by), the
# development broker, a coordinator and a worker. Into a captured table go a 3 MB text, a
# 12 MB jsonb, a 40 MB bytea and a 256 MB text, each followed by ordinary rows of the same
# table and of a second table. The active capture is killed (SIGKILL) as soon as it has
# produced the first chunks of the 256 MB row (usually in the middle of the row: the
# worker then discards the torn sequence), and the standby takes the slot over and sends
# what was not confirmed again.
# Then:
#   - every value reaches the mirror and the changelog byte for byte: the md5 of each
#     value in PostgreSQL equals the md5 DuckDB computes over what it reads back (the
#     files found by icebird, deletes applied: large_rows_digest.mjs), and the changelog
#     holds each insert once;
#   - the ordinary table passes chaos/verify (mirror == source, changelog == audit);
#   - the peak RSS (VmHWM) of each capture and of the worker stays under the bounds
#     docs/capture.md and docs/worker.md state for a 256 MB row;
#   - the hard cap: with the worker restarted at --max-record-bytes=8MiB, a 12 MiB row goes
#     to cdc.public.big.dlq as its 14 chunks (key, cdc.chunk header, a message with its
#     size and LSN), counted in the metric and /status, and the row after it is applied;
#   - replayed with `cdcctl dlq replay` by a worker with the default limit, the chunks go
#     back as chunks and the row reaches the mirror and the changelog byte for byte.
# Values repeat a 32-character pattern, so lz4 batches stay far below the development
# broker's 5 MiB a partition (docs/worker.md, Known issues).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/large CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.big,public.small CHAOS_WORKERS=1 CHAOS_COORDINATORS=1
export CHAOS_CAPTURES=2 CHAOS_SNAPSHOT_MODE=never
# compaction reads the large values back (parquet_read.c) and writes them again
export CHAOS_COORDINATOR_ARGS="--compact-interval=1s --compact-min-files=1 --compact-idle=3s"
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'if [ -n "${KEEP:-}" ]; then pipeline_down >/dev/null 2>&1; echo "kept $tmp"; else pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"; fi' EXIT

BIG_MB=256
# Bounds of the peak RSS with a 256 MiB row in flight (docs/capture.md and docs/worker.md,
# "Large rows"), in MiB: the capture 3.5 x the row, the worker 4 x the row plus 200 MiB of
# its own (measured 886 to 987 MiB: 3.5 to 3.9 x, base included).
CAPTURE_MAX_MB=$((7 * BIG_MB / 2))
WORKER_MAX_MB=$((4 * BIG_MB + 200))

fail() {
    tail -n 25 "$CHAOS_DIR"/procs/worker-0.log "$CHAOS_DIR"/procs/capture-*.log >&2 2>/dev/null
    echo "large_rows: $*" >&2
    exit 1
}
log() { echo "large_rows: $(date -u +%H:%M:%S) $*"; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }
# hwm <proc>: peak RSS of a running process, in MiB (0 when it is not running)
hwm() {
    local pid kb
    pid=$(proc_pid "$1") || { echo 0; return; }
    kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    echo $(((${kb:-0} + 1023) / 1024))
}
metric() { # metric <proc> <series>: its value on the process's /metrics (0 when absent)
    curl -fsS --max-time 2 "http://$(cat "$CHAOS_DIR/procs/$1.http")/metrics" 2>/dev/null |
        awk -v n="$2" '$1 == n {v = $2} END {print v + 0}'
}

pipeline_servers_up
sql <<'SQL' || fail "could not create the tables"
CREATE TABLE public.big (id int PRIMARY KEY, kind text NOT NULL, t text, j jsonb, b bytea);
CREATE TABLE public.small (id int PRIMARY KEY, v text NOT NULL);
CREATE TRIGGER small_audit AFTER INSERT OR UPDATE OR DELETE ON public.small
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('id');
SQL
pipeline_procs_up

# ordinary <from>: 10 rows of small and one ordinary row of big, after a large one
ordinary() {
    sql -c "INSERT INTO public.small SELECT g, 'v' || g FROM generate_series($1, $1 + 9) g" \
        -c "INSERT INTO public.big (id, kind, t) VALUES ($1, 'ordinary', 'row ' || $1)" ||
        fail "could not insert ordinary rows after $1"
}
# repeat of a 32-character pattern making n MiB
pattern() { echo "repeat(md5('$1'), $2 * 32768)"; }

sql -c "INSERT INTO public.big (id, kind, t) VALUES (1, 'text3', $(pattern t 3))" ||
    fail "could not insert the 3 MB text"
ordinary 100
sql -c "INSERT INTO public.big (id, kind, j) VALUES (2, 'jsonb12',
        jsonb_build_object('k', $(pattern j 12), 'n', 1))" || fail "could not insert the 12 MB jsonb"
ordinary 200
# (80 MiB of hex digits: 40 MiB of bytes)
sql -c "INSERT INTO public.big (id, kind, b) VALUES (3, 'bytea40', decode($(pattern b 80), 'hex'))" ||
    fail "could not insert the 40 MB bytea"
ordinary 300
chaos_wait 120 "the 40 MB row in the worker" \
    bash -c '[ "$(curl -fsS "http://$(cat "$1")/metrics" | awk "\$1 == \"cdc_worker_chunked_events_total\" {print \$2}")" = 3 ]' \
    _ "$CHAOS_DIR/procs/worker-0.http" || fail "the first three large rows were not put back together"

# the 256 MB row; its capture is killed while it produces the row's chunks
active=$(chaos_active_capture)
chunks0=$(metric "$active" cdc_capture_event_chunks_total)
log "inserting the ${BIG_MB} MB row (capture $active has produced $chunks0 chunks)"
sql -c "INSERT INTO public.big (id, kind, t) VALUES (4, 'text256', $(pattern big $BIG_MB))" ||
    fail "could not insert the ${BIG_MB} MB row"
ordinary 400
# as soon as the first of its chunks is counted (polled without a pause)
deadline=$((SECONDS + 120))
until [ "$(metric "$active" cdc_capture_event_chunks_total)" -gt "$chunks0" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the capture produced no chunk of the ${BIG_MB} MB row"
done
cap_peak=$(hwm "$active")
log "killing $active (peak RSS ${cap_peak} MiB) after $(($(metric "$active" cdc_capture_event_chunks_total) - chunks0)) of the row's 292 chunks"
proc_signal "$active" KILL
ordinary 500
chaos_wait 120 "the standby to take the slot" \
    bash -c '. chaos/lib.sh; a=$(chaos_active_capture) && [ "$a" != "$1" ] && curl -fsS "http://$(cat "$CHAOS_DIR/procs/$a.http")/readyz" >/dev/null' \
    _ "$active" || fail "no capture took the slot over"
standby=$(chaos_active_capture)
ordinary 600

# ---- every value, byte for byte ------------------------------------------------------------

expect=$tmp/expect
sql -A -t -F $'\t' -c "SELECT id, '-', coalesce(md5(t), 'null') || ' ' || coalesce(md5(j::text), 'null')
                                  || ' ' || coalesce(md5(b), 'null') FROM public.big" | sort >"$expect" ||
    fail "could not read the source digests"
# the changelog: each insert once, with the same values
sed 's/\t-\t/\tc\t/' "$expect" >"$expect.changelog"
digest() { node tests/integration/pipeline/large_rows_digest.mjs "$CHAOS_DIR/warehouse/public/$1" t j b | sort; }
same() {
    digest big >"$tmp/mirror" 2>"$tmp/digest.err" && digest big_changelog >"$tmp/changelog" 2>>"$tmp/digest.err" &&
        cmp -s "$expect" "$tmp/mirror" && cmp -s "$expect.changelog" "$tmp/changelog"
}
if ! chaos_wait 180 "every value in the mirror and the changelog" same; then
    cat "$tmp/digest.err" >&2
    diff "$expect" "$tmp/mirror" | head -n 20 >&2
    diff "$expect.changelog" "$tmp/changelog" | head -n 20 >&2
    fail "the warehouse does not hold every value of public.big byte for byte"
fi
log "mirror and changelog of public.big: $(wc -l <"$expect") rows, every value's md5 equal"
pipeline_verify --tables small --wait 60 >"$tmp/verify.log" 2>&1 ||
    fail "chaos/verify: $(tail -n 3 "$tmp/verify.log")"
log "public.small: $(tail -n 1 "$tmp/verify.log")"

# ---- memory -------------------------------------------------------------------------------

standby_peak=$(hwm "$standby")
worker_peak=$(hwm worker-0)
torn=$(metric worker-0 cdc_worker_torn_chunk_sequences_total)
resent=$(metric "$standby" cdc_capture_event_chunks_total)
log "peak RSS: capture $active ${cap_peak} MiB (killed), capture $standby ${standby_peak} MiB" \
    "(it produced $resent chunks), worker ${worker_peak} MiB; torn sequences the worker discarded: $torn"
[ "$cap_peak" -le "$CAPTURE_MAX_MB" ] && [ "$standby_peak" -le "$CAPTURE_MAX_MB" ] ||
    fail "a capture's peak RSS passed ${CAPTURE_MAX_MB} MiB with a ${BIG_MB} MB row"
# the chunks a killed capture had produced: the worker discarded them whole, once the
# standby sent the row again (or Kafka had them all and the slot was confirmed past it)
[ "$torn" -eq 0 ] || [ "$resent" -ge 292 ] ||
    fail "the worker discarded a torn sequence but the standby did not send the row again"
[ "$worker_peak" -le "$WORKER_MAX_MB" ] ||
    fail "the worker's peak RSS ${worker_peak} MiB passed ${WORKER_MAX_MB} MiB with a ${BIG_MB} MB row"

# ---- the hard cap: a row above --max-record-bytes goes to the dead letters, whole ---------

proc_signal worker-0 TERM
chaos_wait 15 "worker-0 to stop" bash -c '! kill -0 "$1" 2>/dev/null' _ "$(proc_pid worker-0)" ||
    fail "worker-0 did not stop"
CHAOS_WORKER_ARGS="--max-record-bytes=8MiB" pipeline_start_worker 0
sql -c "INSERT INTO public.big (id, kind, t) VALUES (7, 'text12', $(pattern capped 12))" ||
    fail "could not insert the capped row"
ordinary 700
capped_done() {
    [ "$(metric worker-0 'cdc_worker_dlq_records_total{class="oversized"}')" = 1 ] &&
        node tests/integration/pipeline/large_rows_digest.mjs "$CHAOS_DIR/warehouse/public/big" t |
        grep -q "^700	"
}
chaos_wait 90 "the capped row dead-lettered and the next ordinary row applied" capped_done ||
    fail "the row above --max-record-bytes did not go to the dead letters, or the rows after it stopped"
grep -q "^7	" <<<"$(node tests/integration/pipeline/large_rows_digest.mjs "$CHAOS_DIR/warehouse/public/big" t)" &&
    fail "the row above --max-record-bytes reached the mirror"
# every chunk in the dead-letter topic, in order, with its header, the key and the message
kcat -C -b "$CDC_TEST_KAFKA" -t cdc.public.big.dlq -o beginning -e -q -f '%k %h\n' >"$tmp/dlq" 2>/dev/null ||
    fail "could not read cdc.public.big.dlq"
# (dead letters are at least once: a replayed epoch may write a chunk again; count each once)
chunks=$(grep -o 'cdc.chunk=[0-9a-f]*/[0-9]*/14/' "$tmp/dlq" | sort -u | wc -l)
[ "$chunks" -eq 14 ] && grep -q '^{"id":7} ' "$tmp/dlq" &&
    grep -q 'cdc.error.message=event of [0-9]* bytes at LSN [0-9]* is larger than --max-record-bytes (8388608): chunk 14 of 14' "$tmp/dlq" ||
    fail "the dead letters do not hold the capped row's 14 chunks with key, size and LSN: $(head -c 600 "$tmp/dlq")"
status=$(curl -fsS "http://$(cat "$CHAOS_DIR/procs/worker-0.http")/status") &&
    [ "$(jq -r .chunked_events.oversized <<<"$status")" = 1 ] ||
    fail "the worker's /status does not show the oversized row: $status"
log "the 12 MiB row above --max-record-bytes=8MiB: 14 chunks dead-lettered with key, size and LSN; rows after it applied"

# ---- replayed with the limit raised: the chunks go back as chunks and the row arrives -------

proc_signal worker-0 TERM
chaos_wait 15 "worker-0 to stop" bash -c '! kill -0 "$1" 2>/dev/null' _ "$(proc_pid worker-0)" ||
    fail "worker-0 did not stop"
CHAOS_WORKER_ARGS="" pipeline_start_worker 0
replayed=$("$CHAOS_BUILD/cdcctl" --kafka "$CDC_TEST_KAFKA" dlq replay --table public.big --class oversized |
    grep -c '^replayed  ')
# (at least 14: a chunk dead-lettered twice is replayed twice, and the worker's dedup
# keeps one; the mirror and changelog below tell)
[ "$replayed" -ge 14 ] || fail "cdcctl dlq replay replayed $replayed of the 14 chunks"
sql -A -t -F $'\t' -c "SELECT id, '-', coalesce(md5(t), 'null') || ' ' || coalesce(md5(j::text), 'null')
                                  || ' ' || coalesce(md5(b), 'null') FROM public.big" | sort >"$expect" ||
    fail "could not read the source digests"
sed 's/\t-\t/\tc\t/' "$expect" >"$expect.changelog"
if ! chaos_wait 90 "the replayed row in the mirror and the changelog" same; then
    diff "$expect" "$tmp/mirror" | head -n 20 >&2
    fail "the replayed chunks did not put the row back together"
fi
log "the dead-lettered row replayed as 14 chunks: mirror and changelog equal to the source again"

# ---- compaction: the 256 MiB row read back and written again by the coordinator ------------

compacted() { # a compacted data file of public.big holds row 4
    local files
    mapfile -t files < <(find "$CHAOS_DIR/warehouse/public/big/data" -name '*-compact*.parquet' 2>/dev/null)
    [ "${#files[@]}" -gt 0 ] && node --input-type=module -e '
        const { DuckDBInstance } = await import(process.argv[1]);
        const c = await (await DuckDBInstance.create(":memory:")).connect();
        const list = process.argv.slice(2).map((f) => `'"'"'${f}'"'"'`).join(", ");
        const r = await (await c.runAndReadAll(
          `SELECT count(*)::INT AS n FROM read_parquet([${list}]) WHERE id = 4`)).getRowObjectsJson();
        process.exit(r[0].n > 0 ? 0 : 1);' "$PWD/tests/js/deploy/readers.mjs" "${files[@]}" 2>/dev/null
}
chaos_wait 120 "a compaction of the partition that holds the ${BIG_MB} MiB row" compacted ||
    fail "no compaction rewrote the ${BIG_MB} MiB row"
chaos_wait 60 "the compacted mirror equal to the source" same ||
    fail "after compaction the mirror or the changelog of public.big differs from the source"
log "compacted: the ${BIG_MB} MiB row rewritten, every value's md5 still equal;" \
    "peak RSS of the coordinator $(hwm coordinator-0) MiB"
log "ok"
