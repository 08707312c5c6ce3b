#!/usr/bin/env bash
# Tests the chaos suite's shared library without the pipeline: seeded choices replay,
# the local supervisor starts, pauses, resumes, restarts and stops process groups.
set -euo pipefail
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
cleanup() {
    proc_stop_all 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "chaos_lib: $*" >&2
    exit 1
}

picks() {
    chaos_seed "$1" 2>/dev/null
    local n out=""
    for n in 1 2 3 4 5 6 7 8; do
        chaos_pick a b c d e
        out+="$REPLY"
        chaos_between 1 9
        out+="$REPLY$n "
    done
    echo "$out"
}
[ "$(picks 42)" = "$(picks 42)" ] || fail "the same seed gave different choices"
[ "$(picks 42)" != "$(picks 43)" ] || fail "different seeds gave the same choices"

proc_start sleeper sleep 300
proc_alive sleeper || fail "sleeper not running"
pid=$(proc_pid sleeper)
proc_signal sleeper STOP
chaos_wait 5 "sleeper stopped" bash -c "ps -o stat= -p $pid | grep -q T" || fail "SIGSTOP"
proc_signal sleeper CONT
chaos_wait 5 "sleeper running" bash -c "! ps -o stat= -p $pid | grep -q T" || fail "SIGCONT"
proc_signal sleeper KILL
chaos_wait 5 "sleeper dead" bash -c "! kill -0 $pid 2>/dev/null" || fail "SIGKILL"
proc_restart sleeper
proc_alive sleeper || fail "restart"
[ "$(proc_pid sleeper)" != "$pid" ] || fail "restart kept the old pid"
pid=$(proc_pid sleeper)
proc_stop_all
kill -0 "$pid" 2>/dev/null && fail "proc_stop_all left the sleeper running"
echo "chaos_lib: ok"
