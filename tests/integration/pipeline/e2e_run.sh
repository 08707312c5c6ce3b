#!/usr/bin/env bash
# End to end, short: `make run DURATION=15` in a temporary data directory (the whole
# pipeline, load, catch-up, verifier), then the short chaos run CI does on every change:
# every scenario once (kill/pause/partition workers, kill the leader and the capture,
# restart etcd, two faults at once), each followed by the verifier.
# Both start their own servers (the harness) next to the suite's.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build=${CDC_BUILD_DIR:-$PWD/build}

RUN_DIR=$tmp/run BUILD=$(realpath --relative-to="$PWD" "$build") DURATION=${E2E_DURATION:-15} \
    INITIAL_ROWS=200 LOAD_RATE=300 CATCHUP=90 tools/run.sh >"$tmp/run.log" 2>&1
rc=$?
grep -E '^(VERIFY|public\.)' "$tmp/run.log"
if [ "$rc" -ne 0 ] || ! grep -q '^VERIFY ok' <<<"$(tail -n 5 "$tmp/run.log")"; then
    tail -n 40 "$tmp/run.log"
    echo "e2e_run: make run DURATION failed (rc=$rc)" >&2
    exit 1
fi
rm -rf "$tmp/run"

# Every scenario (CHAOS_CI_SCENARIOS: only these).
CHAOS_DIR=$tmp/chaos CHAOS_BUILD=$build DURATION=${CHAOS_CI_DURATION:-70} \
    SCENARIOS="${CHAOS_CI_SCENARIOS:-}" chaos/run.sh >"$tmp/chaos.log" 2>&1
rc=$?
sed -n '/^chaos: seed=.*duration=/,$p' "$tmp/chaos.log"
if [ "$rc" -ne 0 ]; then
    grep -v '^    ' "$tmp/chaos.log" | tail -n 40
    # the verifier's findings (which keys, which columns); chaos/run.sh printed each
    # process's last warnings above
    grep -E '^ +([a-z_]+: )?(mirror|changelog): key' "$tmp/chaos.log" | sort -u | head -n 40
    echo "e2e_run: the short chaos run failed (rc=$rc)" >&2
    exit 1
fi
echo "e2e_run: ok"
