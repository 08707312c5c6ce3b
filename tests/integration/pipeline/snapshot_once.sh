#!/usr/bin/env bash
# An existing slot is adopted, and snapshot reads land exactly once (docs/capture.md, "An
# existing slot"; docs/worker.md, "Snapshot reads exactly once"), end to end on the local
# pipeline (one capture, --snapshot-mode initial as the chaos runs use):
#   a. the slot cdc_slot is created by SQL before the capture ever ran, on tables of
#      SNAP_ROWS rows each, and a backlog of inserts, updates and deletes is written into
#      it; the pipeline then starts: the capture logs that it adopts the slot, never drops
#      it, streams the backlog and reads both tables by incremental snapshots
#      (--snapshot-chunk 500) under a load;
#   b. the capture kills itself (SIGKILL, the test-only CDC_FAULT=snapshot-kill:20) once
#      the rows of its 20th chunk are acked by Kafka and before that chunk's marker is
#      written, so its restart reads the chunk again; a worker is killed (SIGKILL) too;
#   c. after both restarts the snapshots complete; chaos/verify (icebird + DuckDB): mirror
#      == source and the changelog against the audit record (--snapshotted: the rows read
#      are states of their keys, and no key has two snapshot rows); DuckDB over each
#      changelog: no key with two `r` rows, and as many changes (not `r`) as the audit
#      record holds, the backlog's included; the workers dropped the chunk read again
#      (cdc_worker_snapshot_rereads_total > 0);
#   d. the rows from before the slot hold TOASTed notes (the load generator's 5 %), and the
#      backlog updates them without touching the note: those updates reach the changelog
#      with the note null and `_cdc_special` {"note":"unchanged-toast"} (DuckDB), none goes
#      to the DLQ (unresolved_toast 0 on every worker), the workers count them
#      (cdc_worker_unknown_toast_values_total), and the mirror holds every note, from the
#      snapshot read after them (docs/worker.md, "Unchanged TOAST values").
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/snap CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.transactions,public.accounts CHAOS_CAPTURES=1
export CHAOS_INITIAL_ROWS=${SNAP_ROWS:-20000}
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# KEEP=1 keeps the processes' logs in $tmp.procs
trap '[ -z "${KEEP:-}" ] || cp -r "$CHAOS_DIR/procs" "$tmp.procs" 2>/dev/null
      pipeline_down purge >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

fail() {
    echo "snapshot_once: $*" >&2
    for f in "$CHAOS_DIR"/procs/capture-0.log "$CHAOS_DIR"/procs/capture-0.log.1; do
        [ -e "$f" ] || continue
        echo "---- $f" >&2
        grep -E "slot|snapshot|CDC_FAULT|level=error" "$f" | tail -n 20 >&2
    done
    exit 1
}
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }
capture_status() { curl -fsS --max-time 2 "http://$(cat "$CHAOS_DIR/procs/capture-0.http")/status"; }
# a DuckDB query over a warehouse table (the view t), one JSON object per line
duck() { "$PWD/chaos/verify" --warehouse "$CHAOS_DIR/warehouse" --show "$1" --sql "$2"; }

# TOASTed notes in 5 % of the rows from before the slot (the load generator's default): an
# update of such a row that leaves the note alone reaches a worker without it, before the
# snapshot gave the worker the row (docs/capture.md, "An existing slot")
pipeline_servers_up
toasted=$(sql -c "SELECT count(*) FROM public.transactions WHERE entity_id % 10 = 1 AND entity_id % 50 <> 7 AND length(note) > 8000")
[ "$toasted" -gt 0 ] || fail "no TOASTed note among the rows the backlog updates"

# ---- a. the slot exists before the capture, with a backlog --------------------------------
sql <<SQL >/dev/null || fail "could not create the publication and the slot"
CREATE PUBLICATION cdc_pub FOR TABLE $CHAOS_TABLES WITH (publish_via_partition_root = true);
SELECT pg_create_logical_replication_slot('cdc_slot', 'pgoutput');
SQL
sql <<SQL || fail "could not write the backlog"
UPDATE public.transactions SET amount = amount + 1, status = 'backlog' WHERE entity_id % 10 = 1;
DELETE FROM public.transactions WHERE entity_id % 50 = 7;
INSERT INTO public.transactions (entity_id, account, amount, status, note, updated_at)
    SELECT 1000000 + g, 'acct-' || g, g, 'backlog', 'new ' || g, now() FROM generate_series(1, 300) g;
UPDATE public.accounts SET balance = balance + 5, visits = coalesce(visits, 0) + 1 WHERE account_id % 9 = 2;
DELETE FROM public.accounts WHERE account_id % 40 = 3;
SQL
backlog=$(sql -c "SELECT count(*) FROM cdc_audit.changes WHERE op <> 'r'")
[ "$backlog" -gt 1000 ] || fail "the backlog has only $backlog changes"

# ---- b. the pipeline adopts it; the capture dies before its 20th chunk's marker -------------
export CDC_SNAPSHOT_CHUNK=500 CDC_SNAPSHOT_MAX_RATE=20000
CDC_FAULT=snapshot-kill:20 pipeline_procs_up
chaos_wait 60 "the capture to kill itself before a chunk's marker" bash -c \
    "! kill -0 $(proc_pid capture-0) 2>/dev/null" || fail "the capture did not die at its 20th chunk marker"
log0=$CHAOS_DIR/procs/capture-0.log
grep -q "adopting existing slot cdc_slot" "$log0" || fail "the capture did not log that it adopts the slot"
if grep -q "dropping" "$log0"; then fail "the capture dropped the slot: $(grep dropping "$log0")"; fi
grep -q "CDC_FAULT=snapshot-kill:20" "$log0" || fail "the capture died, but not at the fault"
[ "$(sql -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cdc_slot'")" = 1 ] ||
    fail "the slot is gone"
"$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --rate 100 --duration 10s --report-interval 0 \
    --toast-pct 0 >"$tmp/load.log" 2>&1 &
load=$!
proc_restart worker-1 # SIGKILL, then started again
cp "$log0" "$log0.1"
proc_restart capture-0 # CDC_FAULT is not in the environment any more

# ---- c. both snapshots complete; every change and every row once ---------------------------
chaos_wait 120 "both incremental snapshots to complete" bash -c \
    "s=\$(curl -fsS --max-time 2 http://$(cat "$CHAOS_DIR/procs/capture-0.http")/status) &&
     [ \"\$(jq '.snapshots.done' <<<\"\$s\")\" = 2 ] && [ \"\$(jq '.snapshots.running' <<<\"\$s\")\" = 0 ]" ||
    fail "the snapshots did not complete: $(capture_status | jq -c '.snapshots')"
grep -q 'resumes after key \[' "$log0" || fail "the restarted capture did not resume its snapshots"
wait $load || fail "the load generator failed: $(tail -n 5 "$tmp/load.log")"
pipeline_verify --tables transactions,accounts --snapshotted transactions,accounts --wait 120 \
    >"$tmp/verify.log" 2>&1 || {
    cat "$tmp/verify.log" >&2
    fail "the verifier failed"
}
tail -n 1 "$tmp/verify.log"
for t in transactions:entity_id accounts:account_id; do
    name=${t%%:*} pk=${t#*:}
    twice=$(duck "${name}_changelog" "SELECT $pk AS id, count(*) AS n FROM t WHERE _op = 'r' GROUP BY 1 HAVING count(*) > 1 ORDER BY 1 LIMIT 5") ||
        fail "DuckDB could not read ${name}_changelog"
    [ -z "$twice" ] || fail "${name}_changelog: keys with two snapshot rows: $twice"
    reads=$(duck "${name}_changelog" "SELECT count(*) AS n FROM t WHERE _op = 'r'" | jq '.n | tonumber')
    rows=$(sql -c "SELECT count(*) FROM public.$name")
    [ "$reads" -ge "$((rows / 2))" ] || fail "${name}_changelog: only $reads snapshot rows for $rows rows"
    changes=$(duck "${name}_changelog" "SELECT count(*) AS n FROM t WHERE _op <> 'r'" | jq '.n | tonumber')
    audit=$(sql -c "SELECT count(*) FROM cdc_audit.changes WHERE tbl = '$name' AND op <> 'r'")
    [ "$changes" = "$audit" ] || fail "${name}_changelog: $changes changes, the source made $audit"
    echo "snapshot_once: $name: $reads snapshot rows, none twice; $changes changes = audit"
done
rereads=0
for w in 0 1 2; do
    n=$(curl -fsS "http://$(cat "$CHAOS_DIR/procs/worker-$w.http")/metrics" |
        awk '$1 == "cdc_worker_snapshot_rereads_total" { print $2 }')
    rereads=$((rereads + ${n:-0}))
done
[ "$rereads" -gt 0 ] || fail "no worker dropped a re-read snapshot row (cdc_worker_snapshot_rereads_total)"

# ---- d. the backlog's updates of TOASTed rows from before the slot ------------------------------
unknown=$(duck transactions_changelog "SELECT count(*) AS n FROM t WHERE _op = 'u' AND note IS NULL
    AND json_extract_string(_cdc_special, '\$.note') = 'unchanged-toast'" | jq '.n | tonumber')
[ "${unknown:-0}" -gt 0 ] || fail "transactions_changelog: no update with an unchanged-toast note ($toasted TOASTed rows updated)"
left=$(duck transactions "SELECT count(*) AS n FROM t WHERE _cdc_special IS NOT NULL OR note IS NULL" | jq '.n | tonumber')
nulls=$(sql -c "SELECT count(*) FROM public.transactions WHERE note IS NULL")
[ "$left" = "$nulls" ] || fail "transactions mirror: $left rows with a null or special note, the source has $nulls null notes"
counted=0
for w in 0 1 2; do
    st=$(curl -fsS "http://$(cat "$CHAOS_DIR/procs/worker-$w.http")/status") || fail "worker-$w /status"
    [ "$(jq '.dead_letters.unresolved_toast' <<<"$st")" = 0 ] ||
        fail "worker-$w dead-lettered unresolved TOAST: $(jq -c '.dead_letters' <<<"$st")"
    n=$(curl -fsS "http://$(cat "$CHAOS_DIR/procs/worker-$w.http")/metrics" |
        awk '$1 ~ /^cdc_worker_unknown_toast_values_total/ { s += $2 } END { print s + 0 }')
    counted=$((counted + n))
done
# (a worker killed in b. counted some of them in its first life)
[ "$counted" -gt 0 ] || fail "no worker counted an unknown TOAST value (cdc_worker_unknown_toast_values_total)"
echo "snapshot_once: $unknown backlog updates of TOASTed rows in the changelog (note unknown), none dead-lettered"
echo "snapshot_once: ok ($backlog backlog changes; $rereads re-read rows dropped)"
