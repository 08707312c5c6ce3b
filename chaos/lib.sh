#!/usr/bin/env bash
# Shared library of the chaos suite, `make run` and `make chaos` (sourced, not run):
#   - seeds: one printed seed drives every random choice (SEED=<n> replays a run);
#   - a small supervisor for local processes (start in their own process group, pid
#     files, restart from the saved command line, stop all);
#   - the local pipeline: the harness's servers (PostgreSQL, etcd, development Kafka
#     broker), the demo schema, two cdc-captures (one streams, one waits as a standby),
#     two coordinators and three workers, each
#     worker optionally behind its own fault-injecting proxy (chaos/faultproxy.mjs);
#   - fault backends with one interface, chosen by CHAOS_BACKEND:
#       local    kill -9 / SIGSTOP+SIGCONT of process groups, proxy cut/heal, harness etcd restart
#       compose  docker compose kill / pause / unpause / start, network disconnect/connect
#       k8s      kubectl delete pod --grace-period=0 --force or kill -9 of the pod's
#                processes (the container restarts in place), at random; kill -STOP/-CONT
#                inside the pod; a deny-all NetworkPolicy on one pod, labelled out of the
#                base policy (chaos/k8s.sh, which also holds the load and the verifier)
#     chaos_targets <role>, chaos_kill, chaos_pause, chaos_resume, chaos_partition,
#     chaos_heal, chaos_recover <target>, chaos_leader, chaos_status (leader's /status),
#     chaos_active_capture.
# Roles: worker, coordinator, capture, etcd. Targets: worker-0.., coordinator-0..,
# capture-0.. (local; compose and k8s run one capture).

CHAOS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHAOS_BACKEND=${CHAOS_BACKEND:-local}
CHAOS_BUILD=${CHAOS_BUILD:-$CHAOS_ROOT/build}
CDC_JOB=${CDC_JOB:-demo}
CHAOS_WORKERS=${CHAOS_WORKERS:-3}
CHAOS_COORDINATORS=${CHAOS_COORDINATORS:-2}
CHAOS_CAPTURES=${CHAOS_CAPTURES:-2}
CHAOS_TABLES=${CHAOS_TABLES:-public.transactions,public.accounts}
CHAOS_NAMESPACE=${CHAOS_NAMESPACE:-public}
CHAOS_K8S_NAMESPACE=${CHAOS_K8S_NAMESPACE:-cdc}
CHAOS_COMPOSE_FILE=${COMPOSE_FILE:-$CHAOS_ROOT/docker/docker-compose.yml}
# The coordinator's heartbeat timeout; pauses and cuts outlast it.
CHAOS_HEARTBEAT_TIMEOUT=${CHAOS_HEARTBEAT_TIMEOUT:-3}

chaos_log() { printf '%s chaos: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
chaos_die() {
    chaos_log "error: $*"
    exit 1
}

# ---- seeds --------------------------------------------------------------------------------

# Sets SEED (from the argument, $SEED, or fresh) and the generator's state. The
# generator keeps its state in CHAOS_RNG and answers in REPLY: call these functions
# directly, never in $(...), whose subshell would not advance the state.
chaos_seed() {
    SEED=${1:-${SEED:-$(((RANDOM << 15 | RANDOM) % 1000000000 + 1))}}
    CHAOS_RNG=$SEED
    export SEED
    chaos_log "seed=$SEED (replay with SEED=$SEED)"
}

# REPLY = a pseudo-random integer in [0, n) (a 31-bit linear congruential generator).
chaos_rand() {
    CHAOS_RNG=$(((CHAOS_RNG * 1103515245 + 12345) % 2147483648))
    REPLY=$(((CHAOS_RNG >> 8) % $1))
}

# REPLY = a pseudo-random integer in [lo, hi].
chaos_between() {
    chaos_rand $(($2 - $1 + 1))
    REPLY=$(($1 + REPLY))
}

# REPLY = one of the arguments, at random.
chaos_pick() {
    local a=("$@")
    chaos_rand "${#a[@]}"
    REPLY=${a[REPLY]}
}

# Polls "$@" every 200 ms until it succeeds or timeout seconds pass.
chaos_wait() {
    local timeout=$1 what=$2
    shift 2
    local deadline=$((SECONDS + timeout))
    until "$@"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            chaos_log "timed out after ${timeout}s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
}

# ---- local process supervisor --------------------------------------------------------------

CHAOS_DIR=${CHAOS_DIR:-$CHAOS_ROOT/.run}

# proc_start <name> <cmd>...: starts cmd in its own process group, output to
# $CHAOS_DIR/procs/<name>.log; the command line is saved for proc_restart.
proc_start() {
    local name=$1
    shift
    local d=$CHAOS_DIR/procs
    mkdir -p "$d"
    printf '%q ' "$@" >"$d/$name.cmd"
    rm -f "$d/$name.pid"
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$d/$name.pid" "$@" \
        </dev/null >>"$d/$name.log" 2>&1 &
    disown "$!" 2>/dev/null
    # the inner shell writes it within milliseconds: poll finely (processes start in turn)
    local i
    for ((i = 0; i < 250; i++)); do
        [ -s "$d/$name.pid" ] && return 0
        sleep 0.02
    done
    chaos_log "timed out after 5s waiting for pid file of $name"
    return 1
}

proc_pid() { cat "$CHAOS_DIR/procs/$1.pid" 2>/dev/null; }

proc_alive() {
    local pid
    pid=$(proc_pid "$1") || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# proc_signal <name> <signal>: signals the whole process group.
proc_signal() {
    local pid
    pid=$(proc_pid "$1") || return 1
    [ -n "$pid" ] && kill -s "$2" -- "-$pid" 2>/dev/null
}

proc_restart() {
    local name=$1 cmd
    cmd=$(cat "$CHAOS_DIR/procs/$name.cmd") || return 1
    proc_signal "$name" KILL || true
    chaos_wait 10 "$name to exit" bash -c "! kill -0 $(proc_pid "$name") 2>/dev/null"
    eval "proc_start $name $cmd"
}

# Stops every supervised process: SIGTERM (SIGCONT first, for paused ones), then SIGKILL.
proc_stop_all() {
    local f name
    for f in "$CHAOS_DIR"/procs/*.pid; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .pid)
        proc_signal "$name" CONT || true
        proc_signal "$name" TERM || true
    done
    for f in "$CHAOS_DIR"/procs/*.pid; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .pid)
        chaos_wait 15 "$name to stop" bash -c "! kill -0 $(cat "$f") 2>/dev/null" ||
            proc_signal "$name" KILL || true
        rm -f "$f"
    done
}

# ---- the local pipeline --------------------------------------------------------------------

# pipeline_up: servers + schema + capture + coordinators + workers under $CHAOS_DIR.
# CHAOS_PROXY=1 puts a fault proxy between each worker and the coordinator.
# CHAOS_INITIAL_ROWS rows per table exist before the capture starts (snapshot, op r).
# It is pipeline_servers_up (servers + schema) then pipeline_procs_up (the processes);
# benchmarks call the two separately to measure PostgreSQL alone in between.
pipeline_up() {
    pipeline_servers_up
    pipeline_procs_up
}

pipeline_servers_up() {
    mkdir -p "$CHAOS_DIR"
    CHAOS_DIR=$(cd "$CHAOS_DIR" && pwd)
    export CDC_TEST_TMP=$CHAOS_DIR/servers CDC_TEST_KEEP=1
    mkdir -p "$CDC_TEST_TMP" "$CHAOS_DIR/warehouse" "$CHAOS_DIR/state"
    # shellcheck source=tests/harness/harness.sh
    . "$CHAOS_ROOT/tests/harness/harness.sh"
    harness_up "$CDC_TEST_TMP" || chaos_die "the servers did not start (see $CDC_TEST_TMP)"
    PIPELINE_PG_DSN=$CDC_TEST_PG_DSN
    export PIPELINE_PG_DSN
    "$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --setup-only --drop \
        --initial-rows "${CHAOS_INITIAL_ROWS:-0}" --mark-snapshot --report-interval 0 ||
        chaos_die "could not create the demo schema"
}

pipeline_procs_up() {
    local i port http
    # two captures: the one that gets the slot streams, the other waits as a standby
    # (docs/capture.md, "Two captures")
    for ((i = 0; i < CHAOS_CAPTURES; i++)); do
        port=$(harness_free_port)
        proc_start "capture-$i" "$CHAOS_BUILD/cdc-capture" --pg-dsn "$PIPELINE_PG_DSN" \
            --tables "$CHAOS_TABLES" --create-publication=true --kafka "$CDC_TEST_KAFKA" \
            --http "127.0.0.1:$port"
        echo "127.0.0.1:$port" >"$CHAOS_DIR/procs/capture-$i.http"
    done

    for ((i = 0; i < CHAOS_COORDINATORS; i++)); do
        port=$(harness_free_port)
        http=$(harness_free_port)
        proc_start "coordinator-$i" "$CHAOS_BUILD/cdc-coordinator" --id "coordinator-$i" \
            --job "$CDC_JOB" --etcd "$CDC_TEST_ETCD" --listen "tcp://127.0.0.1:$port" \
            --http "127.0.0.1:$http" --warehouse "$CHAOS_DIR/warehouse" --kafka "$CDC_TEST_KAFKA" \
            --heartbeat-timeout "${CHAOS_HEARTBEAT_TIMEOUT}s" --expected-workers "$CHAOS_WORKERS"
        echo "127.0.0.1:$http" >"$CHAOS_DIR/procs/coordinator-$i.http"
    done

    for ((i = 0; i < CHAOS_WORKERS; i++)); do
        pipeline_start_worker "$i"
    done
    chaos_wait 60 "a leader with ${CHAOS_WORKERS} live workers" pipeline_ready ||
        chaos_die "the pipeline did not come up; logs in $CHAOS_DIR/procs"
    chaos_log "pipeline up: warehouse $CHAOS_DIR/warehouse, logs $CHAOS_DIR/procs/*.log"
}

# pipeline_down [purge]: stops everything; with purge also deletes $CHAOS_DIR and the
# PostgreSQL data directory the harness may keep outside it.
# pipeline_start_worker <i>: starts worker-<i> (id <i>), behind proxy-<i> with CHAOS_PROXY=1,
# with the extra options in CHAOS_WORKER_ARGS (split on spaces).
pipeline_start_worker() {
    local i=$1 http coord=()
    if [ "${CHAOS_PROXY:-0}" = 1 ]; then
        rm -f "$CHAOS_DIR/procs/proxy-$i.port"
        proc_start "proxy-$i" node "$CHAOS_ROOT/chaos/faultproxy.mjs" --listen 127.0.0.1:0 \
            --port-file "$CHAOS_DIR/procs/proxy-$i.port" --etcd "$CDC_TEST_ETCD" --job "$CDC_JOB"
        chaos_wait 10 "proxy-$i" test -s "$CHAOS_DIR/procs/proxy-$i.port" ||
            chaos_die "fault proxy $i did not start"
        coord=(--coordinator "tcp://127.0.0.1:$(cat "$CHAOS_DIR/procs/proxy-$i.port")")
    fi
    http=$(harness_free_port)
    mkdir -p "$CHAOS_DIR/state/worker-$i"
    proc_start "worker-$i" "$CHAOS_BUILD/cdc-worker" --id "$i" --job "$CDC_JOB" \
        --etcd "$CDC_TEST_ETCD" "${coord[@]}" --kafka "$CDC_TEST_KAFKA" \
        --tables "$CHAOS_TABLES" --warehouse "$CHAOS_DIR/warehouse" \
        --state-dir "$CHAOS_DIR/state/worker-$i" --http "127.0.0.1:$http" ${CHAOS_WORKER_ARGS:-}
    echo "127.0.0.1:$http" >"$CHAOS_DIR/procs/worker-$i.http"
}

pipeline_down() {
    local pgdata=""
    proc_stop_all
    if declare -F harness_down >/dev/null && [ -d "${CDC_TEST_TMP:-}" ]; then
        pgdata=$(readlink "$CDC_TEST_TMP/pg" 2>/dev/null || true)
        harness_down "$CDC_TEST_TMP" || true
    fi
    if [ "${1:-}" = purge ]; then
        case "$pgdata" in */cdc-pg.*/pg) rm -rf "$(dirname "$pgdata")" ;; esac
        rm -rf "$CHAOS_DIR"
    fi
}

# True when a leader reports every worker alive and has committed at least one epoch.
pipeline_ready() {
    local s
    s=$(chaos_status) || return 1
    [ "$(jq -r '[.workers[] | select(.alive)] | length' <<<"$s")" -ge "$CHAOS_WORKERS" ] &&
        [ "$(jq -r '.epochs.last_committed // 0' <<<"$s")" -gt 0 ]
}

# Prints the last committed epoch (0 when unknown).
pipeline_committed() {
    local s
    s=$(chaos_status 2>/dev/null) || {
        echo 0
        return
    }
    jq -r '.epochs.last_committed // 0' <<<"$s"
}

# Waits until the leader commits an epoch after the given one with every worker alive.
pipeline_wait_recovered() {
    local after=$1 timeout=${2:-60}
    # shellcheck disable=SC2016
    chaos_wait "$timeout" "recovery (a commit after epoch $after with all workers)" \
        bash -c '. "$1"; s=$(chaos_status) && [ "$(jq -r ".epochs.last_committed // 0" <<<"$s")" -gt "$2" ] &&
                 [ "$(jq -r "[.workers[] | select(.alive)] | length" <<<"$s")" -ge "$3" ]' \
        _ "$CHAOS_ROOT/chaos/lib.sh" "$after" "$CHAOS_WORKERS"
}

# Runs the verifier against the local pipeline; extra arguments go to chaos/verify.
pipeline_verify() {
    "$CHAOS_ROOT/chaos/verify" --pg "$PIPELINE_PG_DSN" --warehouse "$CHAOS_DIR/warehouse" \
        --namespace "$CHAOS_NAMESPACE" "$@"
}

# ---- backends -------------------------------------------------------------------------------

_compose() { docker compose -f "$CHAOS_COMPOSE_FILE" "$@"; }
_kubectl() { kubectl -n "$CHAOS_K8S_NAMESPACE" "$@"; }

# Prints the targets of a role, one per line.
chaos_targets() {
    local role=$1 i
    case "$CHAOS_BACKEND" in
    local)
        case "$role" in
        worker) for ((i = 0; i < CHAOS_WORKERS; i++)); do echo "worker-$i"; done ;;
        coordinator) for ((i = 0; i < CHAOS_COORDINATORS; i++)); do echo "coordinator-$i"; done ;;
        capture) for ((i = 0; i < CHAOS_CAPTURES; i++)); do echo "capture-$i"; done ;;
        *) echo "$role" ;;
        esac
        ;;
    compose)
        case "$role" in
        worker) _compose config --services | grep '^worker-' ;;
        coordinator) _compose config --services | grep '^coordinator-' ;;
        *) echo "$role" ;;
        esac
        ;;
    k8s)
        case "$role" in
        worker) _kubectl get pods -l app.kubernetes.io/name=cdc-worker -o name | sed 's|^pod/||' ;;
        coordinator) _kubectl get pods -l app.kubernetes.io/name=cdc-coordinator -o name | sed 's|^pod/||' ;;
        capture) _kubectl get pods -l app.kubernetes.io/name=cdc-capture -o name | sed 's|^pod/||' ;;
        *) echo "$role" ;;
        esac
        ;;
    *) chaos_die "unknown CHAOS_BACKEND \"$CHAOS_BACKEND\" (local, compose, k8s)" ;;
    esac
}

chaos_kill() {
    chaos_log "kill -9 $1"
    case "$CHAOS_BACKEND" in
    local)
        if [ "$1" = etcd ]; then harness_etcd_stop; else proc_signal "$1" KILL; fi
        ;;
    compose) _compose kill -s KILL "$1" ;;
    k8s)
        chaos_pick pod process
        if [ "$REPLY" = process ]; then
            k8s_kill_process "$1"
        else
            _kubectl delete pod "$1" --grace-period=0 --force --wait=false
        fi
        ;;
    esac
}

chaos_pause() {
    chaos_log "pause $1"
    case "$CHAOS_BACKEND" in
    local) proc_signal "$1" STOP ;;
    compose) _compose pause "$1" ;;
    # every process in the pod but its init (tini) stops
    k8s) _kubectl exec "$1" -- sh -c 'kill -STOP -1' ;;
    esac
}

chaos_resume() {
    chaos_log "resume $1"
    case "$CHAOS_BACKEND" in
    local) proc_signal "$1" CONT ;;
    compose) _compose unpause "$1" ;;
    k8s) _kubectl exec "$1" -- sh -c 'kill -CONT -1' ;;
    esac
}

# Cuts a worker off the coordinator (local: its proxy goes silent; compose: the
# container leaves the network; k8s: a deny-all NetworkPolicy on the pod).
chaos_partition() {
    chaos_log "partition $1"
    case "$CHAOS_BACKEND" in
    local)
        [ "${CHAOS_PROXY:-0}" = 1 ] || chaos_die "partition needs CHAOS_PROXY=1"
        proc_signal "proxy-${1#worker-}" USR1
        ;;
    compose) docker network disconnect cdc_cdc "$(_compose ps -q "$1")" ;;
    k8s) k8s_partition "$1" ;;
    esac
}

chaos_heal() {
    chaos_log "heal $1"
    case "$CHAOS_BACKEND" in
    local) proc_signal "proxy-${1#worker-}" USR2 ;;
    compose) docker network connect cdc_cdc "$(_compose ps -q "$1")" ;;
    k8s) k8s_heal "$1" ;;
    esac
}

# Brings a killed target back (Kubernetes controllers and compose's restart policy do it
# on their own; locally the supervisor restarts the saved command).
chaos_recover() {
    case "$CHAOS_BACKEND" in
    local)
        if [ "$1" = etcd ]; then harness_etcd_start; else proc_restart "$1"; fi
        ;;
    compose) _compose start "$1" ;;
    k8s) : ;;
    esac
}

# Prints the capture target that streams the slot (its /readyz answers 200; a standby's
# does not), or the first capture when none does or the backend runs one.
chaos_active_capture() {
    local t
    if [ "$CHAOS_BACKEND" = local ]; then
        for t in $(chaos_targets capture); do
            if curl -fsS --max-time 2 -o /dev/null \
                "http://$(cat "$CHAOS_DIR/procs/$t.http" 2>/dev/null)/readyz" 2>/dev/null; then
                echo "$t"
                return 0
            fi
        done
    fi
    chaos_targets capture | head -n1
}

# Prints the /status JSON of the coordinator that leads.
chaos_status() {
    local t s
    for t in $(chaos_targets coordinator); do
        case "$CHAOS_BACKEND" in
        local) s=$(curl -fsS --max-time 2 "http://$(cat "$CHAOS_DIR/procs/$t.http" 2>/dev/null)/status" 2>/dev/null) ;;
        compose) s=$(_compose exec -T "$t" curl -fsS --max-time 2 http://127.0.0.1:8080/status 2>/dev/null) ;;
        k8s) s=$(_kubectl exec "$t" -- curl -fsS --max-time 2 http://127.0.0.1:8080/status 2>/dev/null) ;;
        esac
        if [ -n "$s" ] && [ "$(jq -r '.is_leader' <<<"$s" 2>/dev/null)" = true ]; then
            echo "$s"
            return 0
        fi
    done
    return 1
}

# Prints the target name of the leading coordinator.
chaos_leader() {
    local s id t
    s=$(chaos_status) || return 1
    id=$(jq -r '.id' <<<"$s")
    for t in $(chaos_targets coordinator); do
        case "$CHAOS_BACKEND" in
        local) [ "$t" = "$id" ] && echo "$t" && return 0 ;;
        *) [[ "$id" == "$t"* ]] && echo "$t" && return 0 ;;
        esac
    done
    echo "$id"
}

# shellcheck source=chaos/k8s.sh
. "$CHAOS_ROOT/chaos/k8s.sh"
