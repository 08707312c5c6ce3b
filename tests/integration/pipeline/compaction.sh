#!/usr/bin/env bash
# Table maintenance end to end (docs/iceberg.md, "Table maintenance"): the local pipeline
# (two coordinators, three workers) with an aggressive compaction policy under a load of
# inserts, updates, deletes and re-inserts, then
#   a. compactions happen (cdc_coordinator_compactions_total and the per-table counter on
#      /metrics, compactions in /status), the mirror's live files stay few, and the
#      verifier (icebird + DuckDB, deletes applied by sequence number) finds mirror ==
#      source: lost=0 duplicated=0 mismatched=0;
#   b. `cdcctl compact public.transactions` answers with its result, after which the
#      mirror has no delete file (read with icebird, and in /status); `cdcctl tables`
#      prints the table; /compact answers 404 for an unknown table, 503 on the standby,
#      405 to a GET;
#   c. a leader killed in the middle of a rewrite (--fault=exit-mid-compaction: exit 86
#      once a rewrite's files are written, before its commit) leaves files no snapshot
#      names; the next leader's orphan cleanup removes them, and the verifier still finds
#      0/0/0 after more load.
# CDC_TEST_KEEP=1 keeps the directory (logs in <dir>/compaction/procs).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/compaction CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_INITIAL_ROWS=200
export CHAOS_COORDINATOR_ARGS="--compact-interval=1s --compact-min-files=3 --compact-target-size=1MiB --snapshot-retention=20s --snapshot-min-keep=5"
table=public.transactions
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
cleanup() {
    if [ "${CDC_TEST_KEEP:-0}" = 1 ]; then
        pipeline_down >/dev/null 2>&1
        echo "compaction: kept $tmp" >&2
    else
        pipeline_down purge >/dev/null 2>&1
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT

fail() {
    echo "compaction: $*" >&2
    tail -n 30 "$CHAOS_DIR"/procs/coordinator-*.log >&2 2>/dev/null
    exit 1
}
admin() { cat "$CHAOS_DIR/procs/$1.http"; }
ctl() { "$CHAOS_BUILD/cdcctl" --etcd "$CDC_TEST_ETCD" --job "$CDC_JOB" "$@"; }
# mirror <field>: a field of the mirror's health in the leader's /status
mirror() { chaos_status | jq -r --arg t "$table" ".tables[] | select(.table == \$t) | .mirror.$1"; }
# metric <leader> <name>[{labels}]: the sample's value on the leader's /metrics (0 if none)
metric() {
    curl -fsS "http://$(admin "$1")/metrics" |
        awk -v m="$2" '$1 == m { v = $2 } END { print v == "" ? 0 : v }'
}
# live_files: the mirror's live data and delete files, from the table metadata and the
# Avro manifests of its current snapshot read with icebird ("<data> <deletes>")
live_files() {
    node --input-type=module -e '
      import { pathToFileURL } from "node:url";
      const [root, dir] = process.argv.slice(1);
      const v = await import(pathToFileURL(root + "/chaos/verify.mjs").href);
      const { icebird } = await import(pathToFileURL(root + "/tests/js/deploy/readers.mjs").href);
      v.configure([]);
      const md = await icebird.icebergMetadata({ tableUrl: dir });
      let data = 0, deletes = 0;
      for (const { entries } of await icebird.icebergManifests(md))
        for (const e of entries) if (e.status !== 2) e.data_file.content ? deletes++ : data++;
      console.log(data, deletes);
    ' "$PWD" "$CHAOS_DIR/warehouse/public/transactions"
}
compact_files() { find "$CHAOS_DIR/warehouse" -name '*-compact*' -type f | sort; }
load() { # load <seconds> <seed>
    "$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false --rate 300 \
        --duration "${1}s" --seed "$2" --report-interval 0 >>"$CHAOS_DIR/procs/loadgen.log" 2>&1
}

pipeline_servers_up
pipeline_procs_up
leader=$(chaos_leader) || fail "no leader"

# ---- a. compaction under load ---------------------------------------------------------
load 25 17 &
load_pid=$!
max_files=0
while kill -0 "$load_pid" 2>/dev/null; do
    n=$(($(mirror data_files || echo 0) + $(mirror delete_files || echo 0)))
    [ "$n" -gt "$max_files" ] && max_files=$n
    sleep 1
done
wait "$load_pid" || fail "the load failed (see $CHAOS_DIR/procs/loadgen.log)"
epochs=$(chaos_status | jq -r '.epochs.last_committed')
compactions=$(mirror compactions)
total=$(metric "$leader" cdc_coordinator_compactions_total)
per_table=$(metric "$leader" "cdc_coordinator_table_compactions_total{table=\"$table\"}")
rewritten=$(metric "$leader" "cdc_coordinator_table_rewritten_bytes_total{table=\"$table\"}")
echo "a. $epochs epochs: $compactions compactions of $table in /status, $total partition rewrites," \
    "$per_table on /metrics ($rewritten bytes rewritten); at most $max_files live files"
[ "${compactions:-0}" -gt 0 ] || fail "/status shows no compaction of $table"
awk -v v="$total" 'BEGIN { exit !(v > 0) }' || fail "cdc_coordinator_compactions_total is $total"
awk -v v="$per_table" 'BEGIN { exit !(v > 0) }' || fail "the per-table compaction counter is $per_table"
awk -v v="$rewritten" 'BEGIN { exit !(v > 0) }' || fail "no bytes rewritten on /metrics"
# 12 partition slots, compacted past 3 files each: without compaction every epoch adds
# a data and a delete file to most slots
[ "$max_files" -le 120 ] || fail "the mirror held $max_files live files under compaction"
pipeline_verify --wait 90 >"$tmp/verify-a.log" 2>&1 || {
    cat "$tmp/verify-a.log" >&2
    fail "a: the verifier failed after the load"
}
tail -n 1 "$tmp/verify-a.log" | sed 's/^/a. /'

# ---- b. cdcctl compact, tables, and the endpoint's answers -----------------------------
read -r data deletes < <(live_files) || fail "icebird could not list the mirror's files"
echo "b. before cdcctl compact: $data data files, $deletes delete files (icebird)"
out=$(ctl compact "$table") || fail "cdcctl compact $table failed: $out"
echo "b. $out"
grep -Eq "^$table: [0-9]+ partitions rewritten" <<<"$out" || fail "unexpected cdcctl compact output"
read -r data deletes < <(live_files) || fail "icebird could not list the mirror's files"
echo "b. after cdcctl compact: $data data files, $deletes delete files (icebird)"
[ "$deletes" = 0 ] || fail "the mirror still has $deletes delete files after cdcctl compact"
chaos_wait 5 "/status to show no delete file" bash -c "[ \"\$(curl -fsS http://$(admin "$leader")/status |
    jq -r '.tables[] | select(.table == \"$table\") | .mirror.delete_files')\" = 0 ]" ||
    fail "/status still shows delete files"
tables=$(ctl tables) || fail "cdcctl tables failed"
grep -q "^$table " <<<"$tables" || fail "cdcctl tables does not list $table: $tables"
grep -q "^${table}_changelog " <<<"$tables" || fail "cdcctl tables does not list the changelog"
sed "s/^/b. /" <<<"$tables"
if out=$(ctl compact public.nope 2>&1); then fail "cdcctl compact of an unknown table succeeded"; fi
grep -q "HTTP 404" <<<"$out" || fail "unknown table: $out"
standby=$(chaos_targets coordinator | grep -vx "$leader" | head -n1)
code=$(curl -s -o "$tmp/standby.json" -w '%{http_code}' -H "$(cdc_auth_header)" -X POST "http://$(admin "$standby")/compact?table=$table")
[ "$code" = 503 ] || fail "the standby answered POST /compact with $code"
jq -e --arg a "$(admin "$leader")" '.leader == $a' "$tmp/standby.json" >/dev/null ||
    fail "the standby's 503 does not name the leader: $(cat "$tmp/standby.json")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$(admin "$leader")/compact?table=$table")
[ "$code" = 405 ] || fail "GET /compact answered $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$(cdc_auth_header)" -X POST "http://$(admin "$leader")/compact")
[ "$code" = 400 ] || fail "POST /compact without a table answered $code"

# ---- c. a leader killed in the middle of a rewrite ------------------------------------
# the standby stops, so that the faulty coordinator leads next
proc_signal "$standby" TERM
chaos_wait 20 "$standby to stop" bash -c "! kill -0 $(proc_pid "$standby") 2>/dev/null" ||
    fail "$standby did not stop"
compact_files >"$tmp/compact-before"
cmd=$(cat "$CHAOS_DIR/procs/$leader.cmd")
proc_signal "$leader" TERM
chaos_wait 20 "$leader to stop" bash -c "! kill -0 $(proc_pid "$leader") 2>/dev/null" ||
    fail "$leader did not stop"
load 40 23 &
load_pid=$!
eval "set -- $cmd"
timeout 90 "$@" --fault=exit-mid-compaction >>"$CHAOS_DIR/procs/$leader-fault.log" 2>&1
rc=$?
[ "$rc" = 86 ] || {
    tail -n 30 "$CHAOS_DIR/procs/$leader-fault.log" >&2
    fail "the coordinator with --fault=exit-mid-compaction exited with $rc, not 86"
}
compact_files >"$tmp/compact-after"
comm -13 "$tmp/compact-before" "$tmp/compact-after" >"$tmp/abandoned"
echo "c. the faulty leader exited 86 leaving $(wc -l <"$tmp/abandoned") rewritten files uncommitted"
[ -s "$tmp/abandoned" ] || fail "the faulty leader wrote no file before it exited"
eval "proc_start $leader $cmd --orphan-interval=2s --orphan-age=3s"
abandoned_left() { local f n=0; while read -r f; do [ -e "$f" ] && n=$((n + 1)); done <"$tmp/abandoned"; [ "$n" = 0 ]; }
chaos_wait 60 "the orphan cleanup to remove the abandoned files" abandoned_left ||
    fail "abandoned files are still there: $(while read -r f; do [ -e "$f" ] && echo "$f"; done <"$tmp/abandoned")"
echo "c. the next leader's orphan cleanup removed them"
wait "$load_pid" || fail "the second load failed"
pipeline_verify --wait 90 >"$tmp/verify-c.log" 2>&1 || {
    cat "$tmp/verify-c.log" >&2
    fail "c: the verifier failed after the interrupted rewrite"
}
tail -n 1 "$tmp/verify-c.log" | sed 's/^/c. /'
echo "compaction: ok"
