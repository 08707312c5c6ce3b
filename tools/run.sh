#!/usr/bin/env bash
# `make run`: the local pipeline on loopback, all data under .run/ in the checkout.
# Starts the services in SERVICES order (the harness' PostgreSQL, etcd and development
# Kafka broker first, then whatever pipeline processes exist), prints the endpoints,
# and stops everything in reverse order on Ctrl-C / SIGTERM, or after DURATION seconds.
#
# Adding a service: write start_<name> (start it in the background with run_bg, which
# records its pid in .run/<name>.pid and its log in .run/<name>.log) and optionally
# stop_<name> (default: SIGTERM to the process group from the pid file), then add the
# name to SERVICES.
#   DURATION=<s>   stop after s seconds (later: catch up and verify; exit status = verifier)
#   RUN_DIR=<dir>  data directory (default .run)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build}
export CDC_BUILD_DIR=$ROOT/$BUILD
RUN_DIR=${RUN_DIR:-$ROOT/.run}
mkdir -p "$RUN_DIR"
RUN_DIR=$(cd "$RUN_DIR" && pwd)

# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh

SERVICES=(infra)
started=()
sleeper=""

log() { echo "run: $*" >&2; }

# Starts "$@" in its own process group; pid in $RUN_DIR/<name>.pid, output in <name>.log.
run_bg() {
    local name=$1
    shift
    _harness_spawn "$RUN_DIR/$name.pid" "$RUN_DIR/$name.log" "$@"
}

start_infra() {
    # A previous run that was killed hard may have left servers behind: stop them.
    harness_down "$RUN_DIR"
    harness_up "$RUN_DIR" || return 1
}

stop_infra() {
    harness_down "$RUN_DIR"
}

stop_default() {
    _harness_kill "$RUN_DIR/$1.pid" TERM
}

stop_all() {
    local i name
    [ "${#started[@]}" -gt 0 ] || return 0
    trap '' INT TERM
    [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
    for ((i = ${#started[@]} - 1; i >= 0; i--)); do
        name=${started[$i]}
        if declare -F "stop_$name" >/dev/null; then
            "stop_$name"
        else
            stop_default "$name"
        fi
    done
    started=()
    log "stopped"
}

print_endpoints() {
    cat <<EOT

  PostgreSQL   $CDC_TEST_PG_DSN
               psql "$CDC_TEST_PG_DSN"
  etcd         $CDC_TEST_ETCD
  Kafka (dev)  bootstrap $CDC_TEST_KAFKA
               control   $CDC_TEST_KAFKA_CTL  (tests/harness/harness.sh kafka-ctl HELP)
  data         $RUN_DIR   (environment: $RUN_DIR/env)

EOT
}

trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
trap 'stop_all' EXIT

for svc in "${SERVICES[@]}"; do
    log "starting $svc"
    if ! "start_$svc"; then
        log "could not start $svc (logs in $RUN_DIR)"
        exit 1
    fi
    started+=("$svc")
done
print_endpoints
if [ -n "${DURATION:-}" ]; then
    log "running for ${DURATION}s"
    end=$((SECONDS + DURATION))
    while ((SECONDS < end)); do
        sleep 1 &
        sleeper=$!
        wait "$sleeper"
    done
    exit 0
fi
log "running; Ctrl-C stops everything"
while true; do
    sleep 3600 &
    sleeper=$!
    wait "$sleeper"
done
