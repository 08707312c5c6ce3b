#!/usr/bin/env bash
# Helpers of the disk-fault tests (tests/integration/pipeline/disk_*.sh; docs/operations.md,
# "Disk faults"), sourced after chaos/lib.sh: the fault shim (diskfault.c) in the
# coordinators and workers, its control file, and what the processes report.

# disk_shim_on <control file>: the coordinators and workers started from now on run with
# the shim (CHAOS_PROC_WRAP, kept for restarts); a sanitizer runtime of the build goes
# first, as it must.
disk_shim_on() {
    DISK_CTL=$1
    local shim=$CHAOS_BUILD/tests/faults/libdiskfault.so san
    [ -f "$shim" ] || return 1
    san=$(ldd "$CHAOS_BUILD/cdc-worker" 2>/dev/null | awk '/lib(a|t)san\.so/ {print $3; exit}')
    export CHAOS_PROC_WRAP="env LD_PRELOAD=${san:+$san:}$shim DISKFAULT_CTL=$DISK_CTL"
}

# disk_fault_on "<ENOSPC|EIO> <pattern>" | "DELAY <ms> <pattern>": on at once for every
# process under the shim (written whole, then renamed).
disk_fault_on() {
    chaos_log "disk fault on: $1"
    printf '%s\n' "$1" >"$DISK_CTL.new" && mv -f "$DISK_CTL.new" "$DISK_CTL"
}

disk_fault_off() {
    [ -n "${DISK_CTL:-}" ] && [ -e "$DISK_CTL" ] && chaos_log "disk fault off" && rm -f "$DISK_CTL"
    return 0
}

# The /status of each process of a role (worker, coordinator), one line each.
disk_statuses() {
    local f
    for f in "$CHAOS_DIR"/procs/"$1"-*.http; do
        curl -fsS --max-time 2 "http://$(cat "$f")/status" 2>/dev/null && echo
    done
}

# workers_report <disk> true|false: true: a worker's /status has disk.<disk>.full; false:
# every live worker's says it is not full.
workers_report() {
    local s
    s=$(disk_statuses worker | jq -s -c "map(.disk.$1.full)") || return 1
    if [ "$2" = true ]; then
        jq -e 'any(. == true)' <<<"$s" >/dev/null
    else
        jq -e 'length > 0 and all(. == false)' <<<"$s" >/dev/null
    fi
}

# coordinator_reports true|false: the leader's /status disk.warehouse.full.
coordinator_reports() {
    chaos_status | jq -e ".disk.warehouse.full == $1" >/dev/null
}

# disk_errors_at_least <role> <disk> <n>: the role's processes counted n writes that failed
# on the full disk.
disk_errors_at_least() {
    local sum
    sum=$(disk_statuses "$1" | jq -s "map(.disk.$2.full_errors // 0) | add // 0") || return 1
    [ "$sum" -ge "$3" ]
}

# metric_is <role> <series> <value>: a process of the role exposes the series at value
# (else the series as each exposes it goes to stderr).
metric_is() {
    local f m
    for f in "$CHAOS_DIR"/procs/"$1"-*.http; do
        m=$(curl -fsS --max-time 2 "http://$(cat "$f")/metrics" 2>/dev/null)
        grep -qxF "$2 $3" <<<"$m" && return 0
    done
    for f in "$CHAOS_DIR"/procs/"$1"-*.http; do
        echo "$(basename "$f" .http): $(curl -fsS --max-time 2 "http://$(cat "$f")/metrics" 2>/dev/null |
            grep -F "${2%%\{*}")" >&2
    done
    return 1
}

# disk_verified <verify log>: the verifier's verdict is 0 lost, 0 duplicated, 0 mismatched.
disk_verified() {
    grep -qE '^VERIFY ok .* lost=0 duplicated=0 mismatched=0$' <<<"$(tail -n 1 "$1")"
}

# disk_fail <test> <message> [<file>]: the logs' tails, the message, exit 1.
disk_fail() {
    tail -n 25 "$CHAOS_DIR"/procs/coordinator-0.log "$CHAOS_DIR"/procs/worker-*.log >&2 2>/dev/null
    [ -n "${3:-}" ] && tail -n 40 "$3" >&2
    echo "$1: $2" >&2
    exit 1
}
