#!/usr/bin/env bash
# Nothing outlives its launcher (docs/development.md, "Nothing outlives its launcher"):
# `make run` is started in its own process group, as a shell starts a foreground job, and
# ended each way a user ends it:
#   int    Ctrl-C: SIGINT to the whole group;
#   term   SIGTERM to make alone;
#   hup    the terminal closed: SIGHUP to the whole group;
#   pipe   `make run | tee run.log`, tee stopped first, then Ctrl-C;
#   kill9  make killed with SIGKILL.
# Each time, every process the run started (the tree under make when the pipeline was up:
# PostgreSQL and its backends, etcd, the Kafka broker, the captures, coordinators, workers,
# the load generator and the harness's watchdog) must be gone within 45 s, and none of the
# ports they listened on may still be listening.
# Before that, in each mode: the run is encrypted by default (docs/security.md, "TLS"): the
# coordinators listen on tls+tcp://, the admin servers answer https with the run's
# certificates and refuse plain http:// and https without a client certificate, and etcd
# answers https with them and refuses plain http://.
# LAUNCHER_MODES="int kill9" runs some of the modes only.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
root=$PWD
build=${CDC_BUILD_DIR:-$root/build}
build=${build#"$root"/}
tmp=$(mktemp -d)
cleanup() {
    # whatever a failed mode left: the same group, then the directory
    [ -n "${group:-}" ] && kill -KILL -- "-$group" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "launcher_exit: $*" >&2
    exit 1
}

# descendants <pid>: the pids of the whole tree under pid (not pid itself).
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            for (i in pids) {
                p = pids[i]; q = parent[p]
                while (q != "" && q != 0 && q != 1) {
                    if (q == root) { print p; break }
                    q = parent[q]
                }
            }
        }'
}

# ports <run dir>: the TCP ports the run's servers and processes listen on.
ports() {
    local d=$1
    cat "$d"/servers/pg.port "$d"/servers/etcd.port "$d"/procs/etcd.port 2>/dev/null
    tr ',' '\n' <"$d/servers/kafka.bootstrap" 2>/dev/null | sed 's/.*://'
    sed 's/.*://' "$d"/servers/kafka.control "$d"/procs/*.http 2>/dev/null
}

alive_any() {
    local p
    for p in "$@"; do
        kill -0 "$p" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] &&
            return 0
    done
    return 1
}

listening_any() {
    local p
    for p in "$@"; do
        [ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && return 0
    done
    return 1
}

# encrypted <run dir>: make run's default is TLS on every channel it owns.
encrypted() {
    local d=$1 c=$1/certs http eport
    local good=(--cacert "$c/ca.crt" --cert "$c/node.crt" --key "$c/node.key")
    http=$(cat "$d/procs/coordinator-0.http") || fail "no coordinator-0.http in $d/procs"
    eport=$(cat "$d/procs/etcd.port" 2>/dev/null) || fail "no etcd with TLS (procs/etcd.port)"
    grep -q -- '--listen tls+tcp://' "$d/procs/coordinator-0.cmd" ||
        fail "coordinator-0 does not listen on tls+tcp://: $(cat "$d/procs/coordinator-0.cmd")"
    grep -q -- '--etcd https://' "$d/procs/worker-0.cmd" ||
        fail "worker-0 does not reach etcd over https://: $(cat "$d/procs/worker-0.cmd")"
    curl -fsS --max-time 3 -o /dev/null "${good[@]}" "https://$http/healthz" ||
        fail "https with the run's certificates to coordinator-0 failed"
    curl -fsS --max-time 3 -o /dev/null "http://$http/healthz" 2>/dev/null &&
        fail "coordinator-0's admin server answered plain http://"
    curl -fsS --max-time 3 -o /dev/null --cacert "$c/ca.crt" "https://$http/healthz" 2>/dev/null &&
        fail "coordinator-0's admin server answered https without a client certificate"
    grep -q '"health":"true"' <<<"$(curl -fsS --max-time 3 "${good[@]}" "https://127.0.0.1:$eport/health")" ||
        fail "etcd did not answer https with the run's certificates"
    curl -fsS --max-time 3 -o /dev/null "http://127.0.0.1:$eport/health" 2>/dev/null &&
        fail "etcd answered plain http://"
    return 0
}

run_mode() {
    local mode=$1 dir=$tmp/$1 log=$tmp/$1.log make_pid tree=() port_list=() i tee_pid
    rm -rf "$dir"
    # setsid: a process group of its own, as a shell gives a foreground job; env: with the
    # default action for SIGINT, which a background job of a script ignores; without
    # LAUNCH_PID, which the test runner's own launch sets
    if [ "$mode" = pipe ]; then
        setsid env --default-signal -u LAUNCH_PID bash -c 'make --no-print-directory run BUILD="$1" RUN_DIR="$2" INITIAL_ROWS=10 \
            LOAD_RATE=100 2>"$3" | tee "$3.out" >/dev/null' _ "$build" "$dir" "$log" &
    else
        setsid env --default-signal -u LAUNCH_PID make --no-print-directory run BUILD="$build" RUN_DIR="$dir" INITIAL_ROWS=10 \
            LOAD_RATE=100 >"$log.out" 2>"$log" &
    fi
    group=$!
    for ((i = 0; i < 900; i++)); do
        grep -q "running; Ctrl-C stops everything" "$log" 2>/dev/null && break
        kill -0 "$group" 2>/dev/null || fail "$mode: make run ended before the pipeline was up: $(tail -n 20 "$log")"
        sleep 0.2
    done
    grep -q "running; Ctrl-C stops everything" "$log" || fail "$mode: the pipeline did not come up in 180 s: $(tail -n 20 "$log")"
    make_pid=$(pgrep -g "$group" -x make | head -n1)
    [ -n "$make_pid" ] || fail "$mode: no make process in group $group"
    mapfile -t tree < <(descendants "$make_pid")
    mapfile -t port_list < <(ports "$dir")
    [ "${#tree[@]}" -ge 10 ] || fail "$mode: only ${#tree[@]} processes under make: ${tree[*]}"
    [ "${#port_list[@]}" -ge 8 ] || fail "$mode: only ${#port_list[@]} ports found: ${port_list[*]}"
    listening_any "${port_list[@]}" || fail "$mode: none of the ports ${port_list[*]} is listening"
    encrypted "$dir"

    case "$mode" in
    int) kill -INT -- "-$group" ;;
    term) kill -TERM "$make_pid" ;;
    hup) kill -HUP -- "-$group" ;;
    pipe)
        tee_pid=$(pgrep -g "$group" -x tee | head -n1)
        [ -n "$tee_pid" ] || fail "pipe: no tee in group $group"
        kill -INT "$tee_pid"
        for ((i = 0; i < 50; i++)); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done
        kill -INT -- "-$group"
        ;;
    kill9) kill -KILL "$make_pid" ;;
    esac

    for ((i = 0; i < 450; i++)); do
        alive_any "${tree[@]}" || listening_any "${port_list[@]}" || break
        sleep 0.1
    done
    if alive_any "${tree[@]}" || listening_any "${port_list[@]}"; then
        for p in "${tree[@]}"; do
            kill -0 "$p" 2>/dev/null && ps -o pid=,ppid=,pgid=,args= -p "$p" >&2
        done
        for p in "${port_list[@]}"; do ss -Hltnp "sport = :$p" >&2; done
        tail -n 15 "$log" >&2
        for p in "${tree[@]}"; do kill -KILL "$p" 2>/dev/null; done
        fail "$mode: processes or ports outlived the launcher (above)"
    fi
    wait "$group" 2>/dev/null
    group=
    echo "launcher_exit: $mode: encrypted (tls+tcp, https, etcd https); ${#tree[@]} processes and ${#port_list[@]} ports gone"
}

for mode in ${LAUNCHER_MODES:-int term hup pipe kill9}; do
    run_mode "$mode"
done
