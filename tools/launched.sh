# shellcheck shell=bash
# Sourced first (before any cd) by the scripts that start processes: tools/run.sh (make run),
# tests/run.sh, benchmarks/run.sh and chaos/run.sh. Unless the script already runs under
# build/launch (LAUNCH_PID set), it runs itself again under it, so that nothing it starts
# outlives it however it ends (docs/development.md, "Nothing outlives its launcher").
# Before the first build there is no launch binary: the script then runs as it is.
_cdc_launch=${CDC_BUILD_DIR:-$(dirname "${BASH_SOURCE[0]}")/../${BUILD:-build}}/launch
if [ -z "${LAUNCH_PID:-}" ] && [ -x "$_cdc_launch" ]; then
    LAUNCH_PID=$$ exec "$_cdc_launch" "$0" "$@"
fi
unset _cdc_launch
