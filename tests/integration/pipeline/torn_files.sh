#!/usr/bin/env bash
# Torn warehouse files (issue 38, "Disk faults"; docs/operations.md, "Disk faults"), as a
# committer that crashed while writing to a file system without atomic rename leaves
# them: the leading coordinator is killed, and before it comes back a table gets
#   - the next metadata version (v<N+1>.metadata.json, past the hint) cut in half,
#   - a manifest and a Parquet data file cut in half under new names, and a temp file;
# then
#   - the coordinator loads the table (the torn version ignored, logged), its next commit
#     replaces the torn version with a whole one (logged "deleted torn version"), and
#     commits go on;
#   - nothing points at the torn manifest and data file (no metadata, manifest list or
#     manifest names them);
#   - chaos/verify (DuckDB and icebird read the tables) finds every change once.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/tf CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_WORKERS=2 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1 CHAOS_INITIAL_ROWS=50 LOAD_RATE=150
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
# shellcheck source=tests/faults/lib.sh
. tests/faults/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"' EXIT
fail() { disk_fail torn_files "$@"; }
committed_over() { [ "$(pipeline_committed)" -gt "$1" ]; }
half() { head -c "$(($(stat -c %s "$1") / 2))" "$1" >"$2"; }

pipeline_servers_up
pipeline_procs_up
chaos_load_start 60 42
chaos_wait 30 "commits with the load" committed_over 3 || fail "no commits under load"
c=$(pipeline_committed)
proc_signal coordinator-0 KILL
chaos_wait 10 "coordinator-0 to exit" bash -c "! kill -0 $(proc_pid coordinator-0) 2>/dev/null" ||
    fail "coordinator-0 did not die"
md=$CHAOS_DIR/warehouse/public/accounts/metadata
n=$(cat "$md/version-hint.text") || fail "no version hint in $md"
while [ -e "$md/v$((n + 1)).metadata.json" ]; do n=$((n + 1)); done
half "$md/v$n.metadata.json" "$md/v$((n + 1)).metadata.json"
avro=$(find "$md" -name '*.avro' ! -name 'snap-*' | head -n 1)
[ -n "$avro" ] || fail "no manifest in $md"
half "$avro" "$md/torn-00000-m0.avro"
pq=$(find "$CHAOS_DIR/warehouse/public/accounts/data" -name '*.parquet' | head -n 1)
[ -n "$pq" ] || fail "no data file"
half "$pq" "$(dirname "$pq")/torn-data-00000.parquet"
half "$md/v$n.metadata.json" "$md/v$n.metadata.json.tmp.Ab12Cd"
echo "torn_files: accounts at version $n; torn: v$((n + 1)).metadata.json, a manifest, a data file, a temp file"

proc_restart coordinator-0
pipeline_wait_recovered "$c" 90 || fail "no commit after the coordinator came back"
# the torn version replaced by a whole one with the table's next commit
whole() { jq -e '."format-version" == 2' "$md/v$((n + 1)).metadata.json" >/dev/null 2>&1; }
chaos_wait 60 "a whole version $((n + 1)) of accounts" whole ||
    fail "v$((n + 1)).metadata.json is still torn"
grep -q "deleted torn version $((n + 1))" "$CHAOS_DIR/procs/coordinator-0.log" ||
    fail "the coordinator did not log the torn version it replaced"
chaos_wait 30 "commits after that" committed_over "$(pipeline_committed)" || fail "commits stopped"
kill "$LOAD_PID" 2>/dev/null
wait "$LOAD_PID" 2>/dev/null
pipeline_verify --wait 90 >"$tmp/verify.log" 2>&1 || fail "the verifier failed" "$tmp/verify.log"
disk_verified "$tmp/verify.log" || fail "the verifier did not report 0 lost and 0 duplicated" "$tmp/verify.log"
# nothing points at the torn files: no metadata, manifest list or manifest names them
if grep -rlaF -e 'torn-00000-m0.avro' -e 'torn-data-00000.parquet' "$md" --exclude='torn-*'; then
    fail "a metadata file names a torn file"
fi
echo "torn_files: ok ($(tail -n 1 "$tmp/verify.log"))"
