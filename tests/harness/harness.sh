#!/usr/bin/env bash
# Test harness: starts and stops the servers the component tests, the shell tests and
# `make run` need, all on 127.0.0.1 with free ports and all data in one directory:
#   (1) PostgreSQL 15 with wal_level=logical (run as an unprivileged user when root),
#   (2) etcd 3.4, (3) the development Kafka broker build/kafka-dev (3 mock brokers).
#
# Sourced (tests/run.sh):   . tests/harness/harness.sh; harness_up; ...; harness_down
# As a command:             tests/harness/harness.sh up [dir] | down [dir] | env [dir]
#                           tests/harness/harness.sh etcd-stop|etcd-start|pg-stop|pg-start [dir]
#                           tests/harness/harness.sh status [dir]
#                           tests/harness/harness.sh kafka-ctl "BROKER DOWN 2" ...
# [dir] defaults to $CDC_TEST_TMP. Every process the harness starts runs in its own
# process group whose id is kept in <dir>/<service>.pid, so `down` (and harness_down)
# can kill the whole group even after a restart by etcd-start/pg-start from a test.
#
# Exported after harness_up (also written to <dir>/env as export lines):
#   CDC_TEST_TMP        scratch directory (removed by harness_down unless CDC_TEST_KEEP=1)
#   CDC_TEST_PG_DSN     libpq conninfo of a superuser (trust auth over TCP)
#   CDC_TEST_PG_PORT, CDC_TEST_PG_USER, CDC_TEST_PG_DATA
#   CDC_TEST_ETCD       http://127.0.0.1:<client port>
#   CDC_TEST_ETCD_PID, CDC_TEST_ETCD_DATA
#   CDC_TEST_KAFKA      bootstrap servers of the development broker
#   CDC_TEST_KAFKA_CTL  its control channel, host:port (line protocol, tools/kafka-dev)
#   CDC_TEST_KAFKA_PID
#   CDC_TEST_HARNESS    absolute path of this script (C tests run "$CDC_TEST_HARNESS etcd-stop")
#   CDC_WORKER_SECRET_FILE, CDC_HTTP_TOKEN_FILE  <dir>/worker-secret, <dir>/http-token
#                       (tools/auth-files.sh): every process a test starts reads them, as
#                       authentication is on by default; a test of the unauthenticated
#                       behaviour passes --insecure explicitly
# Knobs: CDC_HARNESS_TIMEOUT (readiness deadline per server, seconds, default 60),
#   CDC_TEST_KAFKA_PARTITIONS (default partitions of auto-created topics, default 12),
#   CDC_HARNESS_SERVICES (default "pg etcd kafka"), CDC_TEST_KEEP=1 (keep the directory).

_harness_self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
_harness_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tools/auth-files.sh
. "$_harness_root/tools/auth-files.sh"
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

_hlog() { echo "harness: $*" >&2; }

# --- processes -----------------------------------------------------------------------

# True when any non-zombie process is still in process group $1.
_harness_group_alive() {
    ps -eo pgid=,stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'
}

# Starts "$@" in a new session (so its pid is its process group id) with output to
# $2's log; writes the pid to the pid file $1. Usage: _harness_spawn pidfile logfile cmd...
# Also the chaos suite's process supervisor (chaos/lib.sh, proc_start).
_harness_spawn() {
    local pidfile=$1 logfile=$2 i
    shift 2
    rm -f "$pidfile"
    # setsid may fork (when the caller is a group leader); the inner shell writes the
    # pid of the process that then execs the server, so the pid file is always right.
    # shellcheck disable=SC2016
    setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$pidfile" "$@" \
        </dev/null >>"$logfile" 2>&1 &
    disown "$!" 2>/dev/null # no "Killed" job notices when a test stops a server
    # the inner shell writes it within milliseconds: poll finely (processes start in turn)
    for ((i = 0; i < 500; i++)); do
        [ -s "$pidfile" ] && return 0
        sleep 0.01
    done
    _hlog "could not start $1: no pid file $pidfile after 5 s"
    return 1
}

# Stops the process group in pid file $1: signal $2 (default TERM) first, KILL after
# a few seconds. Removes the pid file.
_harness_kill() {
    local pidfile=$1 sig=${2:-TERM} pid i
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && _harness_group_alive "$pid"; then
        kill -"$sig" -- "-$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null
        for ((i = 0; i < 100; i++)); do
            _harness_group_alive "$pid" || break
            sleep 0.05
        done
        if _harness_group_alive "$pid"; then
            _hlog "process group $pid did not stop on SIG$sig, killing it"
            kill -KILL -- "-$pid" 2>/dev/null
            for ((i = 0; i < 100; i++)); do
                _harness_group_alive "$pid" || break
                sleep 0.05
            done
        fi
    fi
    rm -f "$pidfile"
}

# --- ports, waiting --------------------------------------------------------------------

# harness_wait_for <seconds> <command...>: polls the command (output discarded) every
# 50 ms until it succeeds; returns 1 when the seconds passed first. For shell tests.
harness_wait_for() {
    local secs=$1
    shift
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < end)) || return 1
        sleep 0.05
    done
}

# harness_fail_logs <dir> <message...>: for shell tests; prints FAIL: <message> and the
# last 20 lines of every <dir>/*.log to stderr, then exits 1.
harness_fail_logs() {
    local dir=$1 f
    shift
    echo "FAIL: $*" >&2
    for f in "$dir"/*.log; do
        echo "--- $f" >&2
        tail -20 "$f" >&2
    done
    exit 1
}

_harness_used_ports=${_harness_used_ports:-} # kept when sourced again (chaos/lib.sh)
# Prints a TCP port that nothing listens on and that this harness has not handed out.
# Range below the Linux ephemeral range so outgoing connections do not take it.
harness_free_port() {
    local listening p i
    listening=$(ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
    for ((i = 0; i < 1000; i++)); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
        case " $_harness_used_ports " in *" $p "*) continue ;; esac
        if ! grep -qx "$p" <<<"$listening"; then
            _harness_used_ports="$_harness_used_ports $p"
            echo "$p"
            return 0
        fi
    done
    return 1
}

# Polls "$@" until it succeeds, $1 seconds pass, or the process group in pid file $3
# is gone (then it fails at once). Usage: _harness_wait secs what pidfile cmd...
_harness_wait() {
    local secs=$1 what=$2 pidfile=$3 deadline
    shift 3
    deadline=$((SECONDS + secs))
    while ! "$@" >/dev/null 2>&1; do
        if ! _harness_group_alive "$(cat "$pidfile" 2>/dev/null || echo 0)"; then
            _hlog "$what exited during startup"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            _hlog "$what not ready after ${secs}s"
            return 1
        fi
        sleep 0.1
    done
}

_harness_dir() {
    local d=${1:-${CDC_TEST_TMP:-}}
    if [ -z "$d" ] || [ ! -d "$d" ]; then
        _hlog "no harness directory (give one or set CDC_TEST_TMP)"
        return 1
    fi
    (cd "$d" && pwd)
}

# --- PostgreSQL ------------------------------------------------------------------------

# User PostgreSQL runs as: ourselves, or when root an unprivileged account.
_harness_pg_user() {
    if [ "$(id -u)" -ne 0 ]; then
        id -un
    elif id postgres >/dev/null 2>&1; then
        echo postgres
    else
        id cdctest >/dev/null 2>&1 || useradd --system --no-create-home cdctest || return 1
        echo cdctest
    fi
}

_harness_as() {
    local user=$1
    shift
    if [ "$(id -u)" -eq 0 ] && [ "$user" != root ]; then
        setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@"
    else
        "$@"
    fi
}

_harness_pg_init() {
    local dir=$1 user data
    user=$(_harness_pg_user) || return 1
    data=$dir/pg
    if [ "$(id -u)" -eq 0 ] && ! _harness_as "$user" test -x "$dir"; then
        # The account cannot reach $dir (e.g. .run/ in a root-only home): keep the
        # cluster in a temporary directory and link it.
        local alt
        alt=$(mktemp -d "${TMPDIR:-/tmp}/cdc-pg.XXXXXX") || return 1
        chmod 755 "$alt"
        ln -sfn "$alt/pg" "$data"
        data=$alt/pg
    fi
    mkdir -p "$data"
    chmod 700 "$data"
    [ "$(id -u)" -eq 0 ] && chown "$user" "$data"
    if [ ! -f "$data/PG_VERSION" ]; then
        _harness_as "$user" "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 \
            --locale=C.UTF-8 --no-sync >"$dir/pg-initdb.log" 2>&1 || {
            _hlog "initdb failed:"
            tail -n 20 "$dir/pg-initdb.log" >&2
            return 1
        }
    fi
    echo "$user" >"$dir/pg.user"
}

_harness_pg_start() {
    local dir=$1 port user data
    port=$(cat "$dir/pg.port")
    user=$(cat "$dir/pg.user")
    data=$(readlink -f "$dir/pg")
    rm -f "$data/postmaster.pid"
    touch "$dir/pg.log"
    [ "$(id -u)" -eq 0 ] && chown "$user" "$dir/pg.log"
    local -a cmd=("$PG_BIN/postgres" -D "$data" -p "$port" -c listen_addresses=127.0.0.1
        -c unix_socket_directories= -c wal_level=logical -c max_replication_slots=20
        -c max_wal_senders=20 -c max_connections=200 -c fsync=off -c full_page_writes=off
        -c wal_sender_timeout=60s -c log_min_messages=warning -c shared_buffers=128MB)
    if [ "$(id -u)" -eq 0 ] && [ "$user" != root ]; then
        cmd=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "${cmd[@]}")
    fi
    _harness_spawn "$dir/pg.pid" "$dir/pg.log" "${cmd[@]}" || return 1
    _harness_wait "${CDC_HARNESS_TIMEOUT:-60}" "postgresql on port $port" "$dir/pg.pid" \
        "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres || {
        tail -n 20 "$dir/pg.log" >&2
        return 1
    }
}

_harness_pg_stop() {
    # SIGINT = fast shutdown: the postmaster ends its backends and exits.
    _harness_kill "$1/pg.pid" INT
}

# --- etcd ------------------------------------------------------------------------------

_harness_etcd_start() {
    local dir=$1 cport pport
    cport=$(cat "$dir/etcd.port")
    pport=$(cat "$dir/etcd.peer-port")
    mkdir -p "$dir/etcd"
    chmod 700 "$dir/etcd"
    _harness_spawn "$dir/etcd.pid" "$dir/etcd.log" etcd --name cdc-test \
        --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$cport" \
        --advertise-client-urls "http://127.0.0.1:$cport" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "cdc-test=http://127.0.0.1:$pport" \
        --initial-cluster-state new --logger zap --log-level warn || return 1
    _harness_wait "${CDC_HARNESS_TIMEOUT:-60}" "etcd on port $cport" "$dir/etcd.pid" \
        _harness_etcd_healthy "$cport" || {
        tail -n 20 "$dir/etcd.log" >&2
        return 1
    }
}

_harness_etcd_healthy() {
    grep -q '"health":"true"' <<<"$(curl -sf --max-time 2 "http://127.0.0.1:$1/health")"
}

# --- development Kafka broker ------------------------------------------------------------

_harness_kafka_start() {
    local dir=$1 bin
    bin=${CDC_BUILD_DIR:-$_harness_root/build}/kafka-dev
    if [ ! -x "$bin" ]; then
        # Tests that need Kafka fail on the missing CDC_TEST_KAFKA; the others still run.
        _hlog "WARNING: $bin not found (run make first); no Kafka broker"
        return 0
    fi
    rm -f "$dir/kafka.info"
    # shellcheck disable=SC2086
    _harness_spawn "$dir/kafka.pid" "$dir/kafka.log" "$bin" --info-file="$dir/kafka.info" \
        --default-partitions="${CDC_TEST_KAFKA_PARTITIONS:-12}" ${CDC_TEST_KAFKA_ARGS:-} ||
        return 1
    _harness_wait "${CDC_HARNESS_TIMEOUT:-60}" "kafka-dev" "$dir/kafka.pid" \
        grep -q '^READY' "$dir/kafka.info" || {
        tail -n 20 "$dir/kafka.log" >&2
        return 1
    }
    sed -n 's/^BOOTSTRAP //p' "$dir/kafka.info" >"$dir/kafka.bootstrap"
    sed -n 's/^CONTROL //p' "$dir/kafka.info" >"$dir/kafka.control"
}

# --- environment -------------------------------------------------------------------------

_harness_write_env() {
    local dir=$1 f=$1/env
    : >"$f"
    {
        echo "export CDC_TEST_TMP='$dir'"
        echo "export CDC_TEST_HARNESS='$_harness_self'"
        if cdc_auth_files "$dir"; then
            echo "export CDC_WORKER_SECRET_FILE='$dir/worker-secret'"
            echo "export CDC_HTTP_TOKEN_FILE='$dir/http-token'"
        fi
        if [ -f "$dir/pg.port" ]; then
            echo "export CDC_TEST_PG_PORT=$(cat "$dir/pg.port")"
            echo "export CDC_TEST_PG_USER=postgres"
            echo "export CDC_TEST_PG_DATA='$(readlink -f "$dir/pg")'"
            echo "export CDC_TEST_PG_DSN='host=127.0.0.1 port=$(cat "$dir/pg.port") user=postgres dbname=postgres'"
        fi
        if [ -f "$dir/etcd.port" ]; then
            echo "export CDC_TEST_ETCD=http://127.0.0.1:$(cat "$dir/etcd.port")"
            echo "export CDC_TEST_ETCD_PID=$(cat "$dir/etcd.pid" 2>/dev/null)"
            echo "export CDC_TEST_ETCD_DATA='$dir/etcd'"
        fi
        if [ -s "$dir/kafka.bootstrap" ]; then
            echo "export CDC_TEST_KAFKA='$(cat "$dir/kafka.bootstrap")'"
            echo "export CDC_TEST_KAFKA_CTL='$(cat "$dir/kafka.control")'"
            echo "export CDC_KAFKA_DEV_CONTROL='$(cat "$dir/kafka.control")'"
            echo "export CDC_TEST_KAFKA_PID=$(cat "$dir/kafka.pid" 2>/dev/null)"
        fi
    } >>"$f"
}

# --- public API ----------------------------------------------------------------------------

# Starts the servers in $1 (created when missing; default: a new temporary directory)
# and exports the CDC_TEST_* variables. On failure stops what it started and returns 1.
harness_up() {
    local dir=${1:-} svc attempt
    if [ -z "$dir" ]; then
        dir=$(mktemp -d "${TMPDIR:-/tmp}/cdc-test.XXXXXX") || return 1
    fi
    mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || return 1
    chmod 755 "$dir"
    export CDC_TEST_TMP=$dir
    echo "$$" >"$dir/owner.pid"
    for svc in ${CDC_HARNESS_SERVICES:-pg etcd kafka}; do
        case "$svc" in
        pg)
            [ -f "$dir/pg.port" ] || harness_free_port >"$dir/pg.port"
            _harness_pg_init "$dir" || {
                harness_down "$dir"
                return 1
            }
            # A port can be taken between choosing and binding (parallel runs): retry
            # on fresh ports.
            for attempt in 1 2 3; do
                _harness_pg_start "$dir" && break
                _harness_kill "$dir/pg.pid" KILL
                [ "$attempt" = 3 ] && {
                    harness_down "$dir"
                    return 1
                }
                harness_free_port >"$dir/pg.port"
            done
            ;;
        etcd)
            [ -f "$dir/etcd.port" ] || harness_free_port >"$dir/etcd.port"
            [ -f "$dir/etcd.peer-port" ] || harness_free_port >"$dir/etcd.peer-port"
            for attempt in 1 2 3; do
                _harness_etcd_start "$dir" && break
                _harness_kill "$dir/etcd.pid" KILL
                [ "$attempt" = 3 ] && {
                    harness_down "$dir"
                    return 1
                }
                harness_free_port >"$dir/etcd.port"
                harness_free_port >"$dir/etcd.peer-port"
            done
            ;;
        kafka)
            _harness_kafka_start "$dir" || {
                harness_down "$dir"
                return 1
            }
            ;;
        *)
            _hlog "unknown service $svc"
            harness_down "$dir"
            return 1
            ;;
        esac
    done
    _harness_write_env "$dir"
    # shellcheck disable=SC1091
    . "$dir/env"
    # A watchdog stops everything if the shell that sourced us dies without harness_down
    # (SIGKILL, CI timeout). Not for `harness.sh up`, whose process exits right away.
    if [ "${_harness_cmd_mode:-0}" != 1 ] && [ "${CDC_HARNESS_WATCH:-1}" = 1 ]; then
        _harness_spawn "$dir/watch.pid" "$dir/watch.log" bash "$_harness_self" watch "$dir" "$$"
    fi
    _hlog "up in $dir"
}

# Stops everything started in $1 (default $CDC_TEST_TMP); removes a temporary
# directory unless CDC_TEST_KEEP=1. Safe to call twice.
harness_down() {
    local dir=${1:-${CDC_TEST_TMP:-}} pgdata
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    if [ "$(cat "$dir/watch.pid" 2>/dev/null)" != "$$" ]; then
        _harness_kill "$dir/watch.pid" TERM
    fi
    _harness_kill "$dir/kafka.pid" TERM
    _harness_kill "$dir/etcd.pid" TERM
    _harness_pg_stop "$dir"
    pgdata=$(readlink "$dir/pg" 2>/dev/null || true)
    if [ "${CDC_TEST_KEEP:-0}" != 1 ] && [[ $(basename "$dir") == cdc-test.* ]]; then
        rm -rf "$dir"
        case "$pgdata" in */cdc-pg.*/pg) rm -rf "$(dirname "$pgdata")" ;; esac
    fi
    return 0
}

# Stops etcd (SIGKILL by default: a crash; pass TERM for a clean stop) keeping its data.
harness_etcd_stop() {
    local dir
    dir=$(_harness_dir "${2:-}") || return 1
    _harness_kill "$dir/etcd.pid" "${1:-KILL}"
}

# Starts etcd again on the same ports with the same data; waits until healthy.
harness_etcd_start() {
    local dir
    dir=$(_harness_dir "${1:-}") || return 1
    _harness_etcd_start "$dir" || return 1
    _harness_write_env "$dir"
    CDC_TEST_ETCD_PID=$(cat "$dir/etcd.pid")
    export CDC_TEST_ETCD_PID
}

# Stops PostgreSQL (fast shutdown by default; IMMEDIATE=QUIT for a crash) keeping its data.
harness_pg_stop() {
    local dir
    dir=$(_harness_dir "${2:-}") || return 1
    _harness_kill "$dir/pg.pid" "${1:-INT}"
}

harness_pg_start() {
    local dir
    dir=$(_harness_dir "${1:-}") || return 1
    _harness_pg_start "$dir"
}

# Sends each argument as one command line to the kafka-dev control channel and prints
# the replies; fails when any reply is not "OK ...". Usage: harness_kafka_ctl "BROKER DOWN 2"
harness_kafka_ctl() {
    local ctl=${CDC_TEST_KAFKA_CTL:-} line rc=0 fd
    if [ -z "$ctl" ] && [ -n "${CDC_TEST_TMP:-}" ] && [ -s "$CDC_TEST_TMP/kafka.control" ]; then
        ctl=$(cat "$CDC_TEST_TMP/kafka.control")
    fi
    [ -n "$ctl" ] || {
        _hlog "no kafka-dev control address (CDC_TEST_KAFKA_CTL)"
        return 1
    }
    exec {fd}<>"/dev/tcp/${ctl%:*}/${ctl##*:}" || return 1
    printf '%s\n' "$@" >&"$fd"
    for _ in "$@"; do
        if ! read -r -t 30 line <&"$fd"; then
            rc=1
            break
        fi
        echo "$line"
        [[ $line == OK* ]] || rc=1
    done
    exec {fd}>&-
    return "$rc"
}

# --- command mode ------------------------------------------------------------------------

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    _harness_cmd_mode=1
    action=${1:-}
    shift || true
    case "$action" in
    up)
        harness_up "${1:-}" || exit 1
        cat "$CDC_TEST_TMP/env"
        ;;
    down)
        dir=$(_harness_dir "${1:-}") || exit 1
        harness_down "$dir"
        ;;
    env)
        dir=$(_harness_dir "${1:-}") || exit 1
        cat "$dir/env"
        ;;
    etcd-stop) harness_etcd_stop "${2:-KILL}" "${1:-}" ;;
    etcd-start) harness_etcd_start "${1:-}" ;;
    pg-stop) harness_pg_stop "${2:-INT}" "${1:-}" ;;
    pg-start) harness_pg_start "${1:-}" ;;
    kafka-ctl) harness_kafka_ctl "$@" ;;
    watch)
        # internal: harness_up's watchdog (dir, owner pid)
        trap '' INT
        while kill -0 "$2" 2>/dev/null; do sleep 1; done
        [ -s "$1/owner.pid" ] && [ "$(cat "$1/owner.pid")" = "$2" ] && harness_down "$1"
        ;;
    status)
        dir=$(_harness_dir "${1:-}") || exit 1
        for s in pg etcd kafka; do
            if [ -s "$dir/$s.pid" ] && _harness_group_alive "$(cat "$dir/$s.pid")"; then
                echo "$s running pid $(cat "$dir/$s.pid")"
            else
                echo "$s stopped"
            fi
        done
        ;;
    *)
        echo "usage: $0 up [dir] | down [dir] | env [dir] | status [dir] |" \
            "etcd-stop [dir] [signal] | etcd-start [dir] | pg-stop [dir] [signal] |" \
            "pg-start [dir] | kafka-ctl <command>..." >&2
        exit 2
        ;;
    esac
fi
