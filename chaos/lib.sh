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
#       compose  kill -9 / pause / unpause / stop / start of a service's container, network
#                disconnect/connect, through the container engine (CHAOS_ENGINE: docker or
#                podman) and the compose command (CHAOS_COMPOSE), see "compose" below
#       k8s      kubectl delete pod --grace-period=0 --force or kill -9 of the pod's
#                processes (the container restarts in place), at random; kill -STOP/-CONT
#                inside the pod; a deny-all NetworkPolicy on one pod, labelled out of the
#                base policy (chaos/k8s.sh, which also holds the load and the verifier)
#     chaos_targets <role>, chaos_kill, chaos_pause, chaos_resume, chaos_partition,
#     chaos_heal, chaos_recover <target>, chaos_stop <target> <grace>, chaos_restart,
#     chaos_leader, chaos_status (leader's /status), chaos_active_capture;
#   - load and verification per backend: chaos_load_start <seconds> <seed> (sets LOAD_PID),
#     chaos_verify <catch-up seconds> (the verifier's report; its last line is the verdict),
#     chaos_logs <target> (a target's log, for a failed run's summary).
# Roles: worker, coordinator, capture, etcd. Targets: worker-0.., coordinator-0..,
# capture-0.. (local; compose and k8s run one capture).

CHAOS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# the harness's servers (local backend) and its process spawner (proc_start)
# shellcheck source=tests/harness/harness.sh
. "$CHAOS_ROOT/tests/harness/harness.sh"
CHAOS_BACKEND=${CHAOS_BACKEND:-local}
CHAOS_BUILD=${CHAOS_BUILD:-$CHAOS_ROOT/build}
CDC_JOB=${CDC_JOB:-demo}
CHAOS_WORKERS=${CHAOS_WORKERS:-3}
CHAOS_COORDINATORS=${CHAOS_COORDINATORS:-2}
CHAOS_CAPTURES=${CHAOS_CAPTURES:-2}
CHAOS_TABLES=${CHAOS_TABLES:-public.transactions,public.accounts}
# The captures' --tables: CHAOS_TABLES unless set; empty: none, the capture set is the
# publication (made for CHAOS_TABLES by pipeline_servers_up), and tables added to it join
# while the pipeline runs (docs/capture.md, "Adding a table").
CHAOS_CAPTURE_TABLES=${CHAOS_CAPTURE_TABLES-$CHAOS_TABLES}
# The workers' --tables: CHAOS_TABLES unless set; empty: none, the workers follow the job's
# tables (docs/worker.md, "The job's tables").
CHAOS_WORKER_TABLES=${CHAOS_WORKER_TABLES-$CHAOS_TABLES}
# The captures' --snapshot-mode: initial here (the chaos runs check that the first rows are
# exactly those of the slot's snapshot, CHAOS_INITIAL_ROWS); tools/run.sh runs the
# capture's default, incremental, and verifies those rows as snapshotted.
CHAOS_SNAPSHOT_MODE=${CHAOS_SNAPSHOT_MODE:-initial}
CHAOS_NAMESPACE=${CHAOS_NAMESPACE:-public}
CHAOS_K8S_NAMESPACE=${CHAOS_K8S_NAMESPACE:-cdc}
CHAOS_COMPOSE_FILE=${COMPOSE_FILE:-$CHAOS_ROOT/docker/docker-compose.yml}
# compose: the compose command (docker/compose-test.sh runs podman-compose with the local
# override), the engine that acts on one container, the project (container labels, the
# network <project>_cdc), where the S3 endpoint keeps its objects on this host (s3rver of
# the local stack; empty: MinIO, mirrored out with mc) and the PostgreSQL the stack
# publishes (for the verifier).
CHAOS_COMPOSE=${CHAOS_COMPOSE:-docker compose -f $CHAOS_COMPOSE_FILE}
CHAOS_ENGINE=${CHAOS_ENGINE:-docker}
CHAOS_COMPOSE_PROJECT=${CHAOS_COMPOSE_PROJECT:-cdc}
CHAOS_S3_DIR=${CHAOS_S3_DIR:-}
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
    _harness_spawn "$d/$name.pid" "$d/$name.log" "$@"
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
# CHAOS_COORDINATOR_ARGS and CHAOS_WORKER_ARGS: extra options of every coordinator / worker
# (split on spaces), e.g. --compact=false.
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
    harness_up "$CDC_TEST_TMP" || chaos_die "the servers did not start (see $CDC_TEST_TMP)"
    PIPELINE_PG_DSN=$CDC_TEST_PG_DSN
    export PIPELINE_PG_DSN
    "$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --setup-only --drop \
        --initial-rows "${CHAOS_INITIAL_ROWS:-0}" --mark-snapshot --report-interval 0 ||
        chaos_die "could not create the demo schema"
    if [ -z "$CHAOS_CAPTURE_TABLES" ]; then
        psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" -c "DROP PUBLICATION IF EXISTS cdc_pub" \
            -c "CREATE PUBLICATION cdc_pub FOR TABLE $CHAOS_TABLES WITH (publish_via_partition_root = true)" \
            >/dev/null || chaos_die "could not create the publication"
    fi
}

# TLS of the local pipeline (docs/security.md, "TLS"): with CHAOS_TLS_DIR set to a
# directory of tools/certs.sh (ca.crt, node.crt, node.key), the coordinators listen on
# tls+tcp:// and every admin server speaks https with mutual TLS; CHAOS_ETCD_TLS=1 also
# gives the coordinators and workers those files for etcd (an https:// CDC_TEST_ETCD
# started with --client-cert-auth). Admin requests of this library follow (chaos_curl).
pipeline_tls_args() {
    [ -n "${CHAOS_TLS_DIR:-}" ] || return 0
    printf '%s\n' --tls-ca-file "$CHAOS_TLS_DIR/ca.crt" --tls-cert-file "$CHAOS_TLS_DIR/node.crt" \
        --tls-key-file "$CHAOS_TLS_DIR/node.key" --http-tls mutual
    [ "${CHAOS_ETCD_TLS:-0}" != 1 ] ||
        printf '%s\n' --etcd-ca-file "$CHAOS_TLS_DIR/ca.crt" \
            --etcd-cert-file "$CHAOS_TLS_DIR/node.crt" --etcd-key-file "$CHAOS_TLS_DIR/node.key"
}

# pipeline_etcd_tls_up: the local pipeline's etcd with TLS (docs/security.md, "TLS"): https
# only, client certificates of the CA required (--client-cert-auth), the certificates of
# CHAOS_TLS_DIR (tools/certs.sh: etcd.crt, etcd.key, ca.crt); process "etcd" of this
# supervisor (stopped with the others), data in $CHAOS_DIR/etcd. Exports CDC_TEST_ETCD
# (https://127.0.0.1:<port>; the port also in procs/etcd.port) and CHAOS_ETCD_TLS=1, so that pipeline_procs_up gives the
# coordinators and workers the certificates for it. The harness then starts without its
# plain one: CDC_HARNESS_SERVICES="pg kafka" before pipeline_servers_up.
pipeline_etcd_tls_up() {
    local d=${CHAOS_TLS_DIR:?pipeline_etcd_tls_up needs CHAOS_TLS_DIR} cport pport
    cport=$(harness_free_port)
    pport=$(harness_free_port)
    export CDC_TEST_ETCD=https://127.0.0.1:$cport CHAOS_ETCD_TLS=1
    proc_start etcd etcd --name cdc-tls --data-dir "$CHAOS_DIR/etcd" \
        --listen-client-urls "$CDC_TEST_ETCD" --advertise-client-urls "$CDC_TEST_ETCD" \
        --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "cdc-tls=http://127.0.0.1:$pport" --cert-file "$d/etcd.crt" \
        --key-file "$d/etcd.key" --client-cert-auth --trusted-ca-file "$d/ca.crt" \
        --logger zap --log-level warn
    echo "$cport" >"$CHAOS_DIR/procs/etcd.port"
    chaos_wait 30 "etcd with TLS on $CDC_TEST_ETCD" _pipeline_etcd_tls_healthy ||
        chaos_die "etcd with TLS did not start (see $CHAOS_DIR/procs/etcd.log)"
}

_pipeline_etcd_tls_healthy() {
    grep -q '"health":"true"' <<<"$(curl -fsS --max-time 2 --cacert "$CHAOS_TLS_DIR/ca.crt" \
        --cert "$CHAOS_TLS_DIR/node.crt" --key "$CHAOS_TLS_DIR/node.key" "$CDC_TEST_ETCD/health" 2>/dev/null)"
}

# chaos_curl <curl args...> <host:port/path>: an admin request of the local pipeline,
# https with the pipeline's certificates under CHAOS_TLS_DIR.
chaos_curl() {
    local args=("$@") n=$#
    local target=${args[n - 1]}
    unset 'args[n-1]'
    if [ -n "${CHAOS_TLS_DIR:-}" ]; then
        curl "${args[@]}" --cacert "$CHAOS_TLS_DIR/ca.crt" --cert "$CHAOS_TLS_DIR/node.crt" \
            --key "$CHAOS_TLS_DIR/node.key" "https://$target"
    else
        curl "${args[@]}" "http://$target"
    fi
}

# The coordinators take the extra options in CHAOS_COORDINATOR_ARGS (split on spaces, as
# CHAOS_WORKER_ARGS for the workers), e.g. an aggressive compaction policy.
# CHAOS_PROC_WRAP (split on spaces) goes before the coordinators' and workers' commands,
# kept for their restarts: the disk-fault tests run them under `env LD_PRELOAD=<shim> ...`
# (tests/faults/lib.sh).
pipeline_procs_up() {
    local i port http tls=() scheme=tcp
    mapfile -t tls < <(pipeline_tls_args)
    [ -z "${CHAOS_TLS_DIR:-}" ] || scheme="tls+tcp"
    # two captures: the one that gets the slot streams, the other waits as a standby
    # (docs/capture.md, "Two captures")
    for ((i = 0; i < CHAOS_CAPTURES; i++)); do
        port=$(harness_free_port)
        proc_start "capture-$i" "$CHAOS_BUILD/cdc-capture" --pg-dsn "$PIPELINE_PG_DSN" \
            ${CHAOS_CAPTURE_TABLES:+--tables "$CHAOS_CAPTURE_TABLES" --create-publication=true} \
            --snapshot-mode "$CHAOS_SNAPSHOT_MODE" \
            --kafka "$CDC_TEST_KAFKA" --http "127.0.0.1:$port" ${tls[@]+"${tls[@]:0:8}"}
        echo "127.0.0.1:$port" >"$CHAOS_DIR/procs/capture-$i.http"
    done

    for ((i = 0; i < CHAOS_COORDINATORS; i++)); do
        port=$(harness_free_port)
        http=$(harness_free_port)
        proc_start "coordinator-$i" ${CHAOS_PROC_WRAP:-} "$CHAOS_BUILD/cdc-coordinator" --id "coordinator-$i" \
            --job "$CDC_JOB" --etcd "$CDC_TEST_ETCD" --listen "$scheme://127.0.0.1:$port" \
            ${tls[@]+"${tls[@]}"} \
            --http "127.0.0.1:$http" --warehouse "$CHAOS_DIR/warehouse" --kafka "$CDC_TEST_KAFKA" \
            --heartbeat-timeout "${CHAOS_HEARTBEAT_TIMEOUT}s" --expected-workers "$CHAOS_WORKERS" \
            ${CHAOS_COORDINATOR_ARGS:-}
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
# with --tables "$CHAOS_WORKER_TABLES" (none when empty) and the extra options in
# CHAOS_WORKER_ARGS (split on spaces).
pipeline_start_worker() {
    local i=$1 http coord=() tables_opt=() tls=()
    mapfile -t tls < <(pipeline_tls_args)
    [ -z "$CHAOS_WORKER_TABLES" ] || tables_opt=(--tables "$CHAOS_WORKER_TABLES")
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
    proc_start "worker-$i" ${CHAOS_PROC_WRAP:-} "$CHAOS_BUILD/cdc-worker" --id "$i" --job "$CDC_JOB" \
        --etcd "$CDC_TEST_ETCD" "${coord[@]}" --kafka "$CDC_TEST_KAFKA" \
        "${tables_opt[@]}" --warehouse "$CHAOS_DIR/warehouse" \
        --state-dir "$CHAOS_DIR/state/worker-$i" --http "127.0.0.1:$http" \
        ${tls[@]+"${tls[@]}"} ${CHAOS_WORKER_ARGS:-}
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

_compose() {
    local words
    read -r -a words <<<"$CHAOS_COMPOSE"
    "${words[@]}" "$@"
}
_kubectl() { kubectl -n "$CHAOS_K8S_NAMESPACE" "$@"; }
_engine() { "$CHAOS_ENGINE" "$@"; }

# Prints the id of a compose service's container, found by the labels that docker compose
# and podman-compose both set (fails when it has none).
_container() {
    local id
    id=$(_engine ps -aq --filter "label=com.docker.compose.project=$CHAOS_COMPOSE_PROJECT" \
        --filter "label=com.docker.compose.service=$1" | head -n1)
    [ -n "$id" ] || {
        chaos_log "no container for service $1 (project $CHAOS_COMPOSE_PROJECT)"
        return 1
    }
    echo "$id"
}

# Prints the services of the compose project that have a container, one per line.
_compose_services() {
    local ids
    mapfile -t ids < <(_engine ps -aq --filter "label=com.docker.compose.project=$CHAOS_COMPOSE_PROJECT")
    [ "${#ids[@]}" -gt 0 ] || return 0
    _engine inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "${ids[@]}" | sort -u
}

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
        worker) _compose_services | grep '^worker-' ;;
        coordinator) _compose_services | grep '^coordinator-' ;;
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
    compose) _engine kill -s KILL "$(_container "$1")" >/dev/null ;;
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
    _chaos_stop_cont STOP pause "$1"
}

chaos_resume() {
    chaos_log "resume $1"
    _chaos_stop_cont CONT unpause "$1"
}

# _chaos_stop_cont <STOP|CONT> <pause|unpause> <target>: stops or continues a target's
# processes: local, the process group; compose, the container (the engine's <pause|unpause>);
# k8s, every process in the pod but its init (tini).
_chaos_stop_cont() {
    case "$CHAOS_BACKEND" in
    local) proc_signal "$3" "$1" ;;
    compose) _engine "$2" "$(_container "$3")" >/dev/null ;;
    k8s) _kubectl exec "$3" -- sh -c "kill -$1 -1" ;;
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
    compose)
        # remember the address: the container gets it back when healed, as after a real
        # partition (a new one would leave every established connection dead)
        local id net=${CHAOS_COMPOSE_PROJECT}_cdc
        id=$(_container "$1") || return 1
        mkdir -p "$CHAOS_DIR"
        _engine inspect -f "{{(index .NetworkSettings.Networks \"$net\").IPAddress}} {{(index .NetworkSettings.Networks \"$net\").MacAddress}}" \
            "$id" >"$CHAOS_DIR/partition-$1"
        _engine network disconnect "$net" "$id"
        ;;
    k8s) k8s_partition "$1" ;;
    esac
}

chaos_heal() {
    chaos_log "heal $1"
    case "$CHAOS_BACKEND" in
    local) proc_signal "proxy-${1#worker-}" USR2 ;;
    compose)
        # back with its address (and, with podman, its MAC address, so that the peers'
        # neighbour caches stay right) and its service name as alias, as compose set them
        local ip="" mac="" args
        read -r ip mac <"$CHAOS_DIR/partition-$1" 2>/dev/null
        args=(--alias "$1")
        [ -n "$ip" ] && args+=(--ip "$ip")
        [ -n "$mac" ] && [ "$CHAOS_ENGINE" = podman ] && args+=(--mac-address "$mac")
        _engine network connect "${args[@]}" "${CHAOS_COMPOSE_PROJECT}_cdc" "$(_container "$1")"
        rm -f "$CHAOS_DIR/partition-$1"
        ;;
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
    compose) _engine start "$(_container "$1")" >/dev/null ;;
    k8s) : ;;
    esac
}

# chaos_stop <target> <grace seconds>: SIGTERM, then SIGKILL after the grace (compose:
# the engine's stop; the container stays down until chaos_recover).
chaos_stop() {
    chaos_log "stop $1 (SIGTERM, ${2}s grace)"
    case "$CHAOS_BACKEND" in
    local) proc_signal "$1" TERM ;;
    compose) _engine stop -t "$2" "$(_container "$1")" >/dev/null ;;
    k8s) _kubectl delete pod "$1" --grace-period="$2" --wait=true ;;
    esac
}

# Kills a target and brings it back at once (a worker left behind by a scenario).
chaos_restart() {
    case "$CHAOS_BACKEND" in
    local) proc_restart "$1" ;;
    compose) _engine restart -t 10 "$(_container "$1")" >/dev/null ;;
    k8s) _kubectl delete pod "$1" --wait=false ;;
    esac
}

# Prints the capture target that streams the slot (its /readyz answers 200; a standby's
# does not), or the first capture when none does or the backend runs one.
chaos_active_capture() {
    local t
    if [ "$CHAOS_BACKEND" = local ]; then
        for t in $(chaos_targets capture); do
            if chaos_curl -fsS --max-time 2 -o /dev/null \
                "$(cat "$CHAOS_DIR/procs/$t.http" 2>/dev/null)/readyz" 2>/dev/null; then
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
        local) s=$(chaos_curl -fsS --max-time 2 "$(cat "$CHAOS_DIR/procs/$t.http" 2>/dev/null)/status" 2>/dev/null) ;;
        # the container's own admin request, https with its certificates (docker/entrypoint.sh)
        compose) s=$(_engine exec "$(_container "$t" 2>/dev/null)" cdc-entrypoint admin /status 2>/dev/null) ;;
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

# ---- load and verification ------------------------------------------------------------------

# The PostgreSQL the verifier compares with: the local pipeline's, or the one the compose
# stack publishes on this host (POSTGRES_* as in docker/docker-compose.yml).
chaos_pg_dsn() {
    case "$CHAOS_BACKEND" in
    local) echo "$PIPELINE_PG_DSN" ;;
    *) echo "host=127.0.0.1 port=${POSTGRES_PORT:-5432} dbname=${POSTGRES_DB:-cdc} user=${POSTGRES_USER:-cdc} password=${POSTGRES_PASSWORD:-cdc}" ;;
    esac
}

# chaos_load_start <seconds> <seed>: the load generator in the background for that long at
# LOAD_RATE changes/s (local: a process; compose: a one-off container of the stack's
# loadgen service, its output appended to $CHAOS_DIR/loadgen.log; k8s: the load generator
# Deployment scaled up, until k8s_load_stop); LOAD_PID is the process to wait for (empty
# for k8s).
# shellcheck disable=SC2034 # LOAD_PID is read by chaos/run.sh
chaos_load_start() {
    LOAD_PID=
    mkdir -p "$CHAOS_DIR"
    case "$CHAOS_BACKEND" in
    local)
        "$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false \
            --rate "$LOAD_RATE" --duration "${1}s" --seed "$2" --report-interval 0 \
            ${CHAOS_LOAD_MIX:+--mix "$CHAOS_LOAD_MIX"} >>"$CHAOS_DIR/procs/loadgen.log" 2>&1 &
        LOAD_PID=$!
        ;;
    compose)
        _compose run --rm --no-deps -T -e CDC_RATE="$LOAD_RATE" -e CDC_DURATION="${1}s" \
            -e CDC_SEED="$2" loadgen loadgen --create-schema=false --report-interval=0 \
            </dev/null >>"$CHAOS_DIR/loadgen.log" 2>&1 &
        LOAD_PID=$!
        ;;
    k8s) k8s_load_start "$LOAD_RATE" "$2" ;;
    esac
}

# Copies the warehouse out of the stack's S3 endpoint into dir (compose): s3rver's object
# files (CHAOS_S3_DIR) with chaos/s3export.mjs, or MinIO's bucket with mc mirror.
chaos_compose_export() {
    local dir=$1
    mkdir -p "$dir"
    if [ -n "$CHAOS_S3_DIR" ]; then
        node "$CHAOS_ROOT/chaos/s3export.mjs" "$CHAOS_S3_DIR/warehouse" "$dir"
    else
        # shellcheck disable=SC2016 # expanded inside the container
        _compose run --rm --no-deps -v "$dir:/export" --entrypoint /bin/sh minio-init -c \
            'mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null && mc mirror --quiet --overwrite local/warehouse /export'
    fi
}

# chaos_verify <catch-up seconds>: runs the verifier until it passes or the time is up
# (the tables catch up after the load stopped); prints its report, whose last line is the
# verdict (VERIFY ok|FAILED ...). Compose: the warehouse is copied out before each try;
# k8s: k8s_verify (chaos/k8s.sh).
chaos_verify() {
    local wait=$1 deadline out rc
    case "$CHAOS_BACKEND" in
    local)
        # (tables a scenario added: CHAOS_VERIFY_TABLES, those an incremental snapshot read
        # among them: CHAOS_VERIFY_SNAPSHOTTED)
        pipeline_verify --wait "$wait" ${CHAOS_VERIFY_TABLES:+--tables "$CHAOS_VERIFY_TABLES"} \
            ${CHAOS_VERIFY_SNAPSHOTTED:+--snapshotted "$CHAOS_VERIFY_SNAPSHOTTED"}
        ;;
    compose)
        deadline=$((SECONDS + wait))
        while :; do
            out=$(chaos_compose_export "$CHAOS_DIR/warehouse" 2>&1 &&
                "$CHAOS_ROOT/chaos/verify" --pg "$(chaos_pg_dsn)" --warehouse "$CHAOS_DIR/warehouse" \
                    --namespace "$CHAOS_NAMESPACE" --path-map "s3://warehouse/=$CHAOS_DIR/warehouse/" 2>&1)
            rc=$?
            if [ "$rc" -eq 0 ] || [ "$SECONDS" -ge "$deadline" ]; then
                echo "$out"
                return "$rc"
            fi
            sleep 2
        done
        ;;
    k8s) k8s_verify "$wait" ;;
    esac
}

# Prints a target's log (local: its log file; compose: the container's).
chaos_logs() {
    case "$CHAOS_BACKEND" in
    local) cat "$CHAOS_DIR/procs/$1.log" 2>/dev/null ;;
    compose) _engine logs "$(_container "$1" 2>/dev/null)" 2>&1 ;;
    k8s) _kubectl logs "$1" 2>&1 ;;
    esac
}

# shellcheck source=chaos/k8s.sh
. "$CHAOS_ROOT/chaos/k8s.sh"
