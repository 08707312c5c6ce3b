#!/usr/bin/env bash
# Chaos scenarios (sourced by chaos/run.sh; needs chaos/lib.sh). Each scenario_<name>
# takes a time budget in seconds, injects faults while the load runs, brings the
# system back, and adds to the counters FAULTS and RECOVERIES. All random choices come
# from the seeded RANDOM, so SEED=<n> replays the same sequence of faults.

# shellcheck disable=SC2034 # used by chaos/run.sh
CHAOS_SCENARIOS=(kill-workers pause-worker kill-leader kill-capture etcd-restart
    partition-worker double-fault scale-workers)

FAULTS=0
RECOVERIES=0

# Counts recoveries (one per fault injected, default 1) when the leader commits again
# with every worker after the faults.
_recovered() {
    local before=$1 n=${2:-1}
    if pipeline_wait_recovered "$before" "${CHAOS_RECOVERY_TIMEOUT:-60}"; then
        RECOVERIES=$((RECOVERIES + n))
    else
        chaos_log "no recovery within ${CHAOS_RECOVERY_TIMEOUT:-60}s"
    fi
}

# REPLY = a random worker target.
_random_worker() {
    local ws
    mapfile -t ws < <(chaos_targets worker)
    chaos_pick "${ws[@]}"
}

# kill -9 of random workers, repeatedly, each restarted after a random delay.
scenario_kill-workers() {
    local end=$((SECONDS + $1)) w before
    while [ "$SECONDS" -lt "$end" ]; do
        _random_worker
        w=$REPLY
        before=$(pipeline_committed)
        chaos_kill "$w"
        FAULTS=$((FAULTS + 1))
        chaos_between 1 9
        sleep "0.$REPLY"
        chaos_recover "$w"
        _recovered "$before"
        chaos_between 1 3
        sleep "$REPLY"
    done
}

# SIGSTOP of one worker past the heartbeat timeout, then SIGCONT (a zombie that wakes up).
scenario_pause-worker() {
    local w before
    _random_worker
    w=$REPLY
    before=$(pipeline_committed)
    chaos_pause "$w"
    FAULTS=$((FAULTS + 1))
    chaos_between 2 5
    sleep $((CHAOS_HEARTBEAT_TIMEOUT + REPLY))
    chaos_resume "$w"
    _recovered "$before"
}

# kill -9 of the leading coordinator; the standby takes over, the old one comes back.
scenario_kill-leader() {
    local l before
    l=$(chaos_leader) || {
        chaos_log "no leader to kill"
        return 0
    }
    before=$(pipeline_committed)
    chaos_kill "$l"
    FAULTS=$((FAULTS + 1))
    _recovered "$before"
    chaos_recover "$l"
}

# kill -9 of the capture: it restarts from the slot's confirmed LSN (at-least-once into
# Kafka, deduplicated downstream).
scenario_kill-capture() {
    local t before
    t=$(chaos_targets capture | head -n1)
    before=$(pipeline_committed)
    chaos_kill "$t"
    FAULTS=$((FAULTS + 1))
    chaos_between 2 9
    sleep "0.$REPLY"
    chaos_recover "$t"
    _recovered "$before"
}

# etcd stops and starts again (local: the harness's etcd; elsewhere: its container/pod).
# CHAOS_ETCD_DOWN=<s> fixes the outage (past the 5 s lease TTL the leader steps down).
scenario_etcd-restart() {
    local before
    before=$(pipeline_committed)
    case "$CHAOS_BACKEND" in
    local) harness_etcd_stop ;;
    compose) _compose stop etcd ;;
    k8s) _kubectl delete pod -l app.kubernetes.io/name=etcd --wait=false ;;
    esac
    chaos_log "etcd stopped"
    FAULTS=$((FAULTS + 1))
    chaos_between 2 5
    sleep "${CHAOS_ETCD_DOWN:-$REPLY}"
    case "$CHAOS_BACKEND" in
    local) harness_etcd_start ;;
    compose) _compose start etcd ;;
    k8s) : ;;
    esac
    chaos_log "etcd started"
    _recovered "$before"
}

# One worker loses the coordinator longer than the heartbeat timeout, then heals.
scenario_partition-worker() {
    local w before
    _random_worker
    w=$REPLY
    before=$(pipeline_committed)
    chaos_partition "$w"
    FAULTS=$((FAULTS + 1))
    chaos_between 2 6
    sleep $((CHAOS_HEARTBEAT_TIMEOUT + REPLY))
    chaos_heal "$w"
    _recovered "$before"
}

# Two faults at once: a worker and the leading coordinator die together.
scenario_double-fault() {
    local w l before
    _random_worker
    w=$REPLY
    l=$(chaos_leader) || l=""
    before=$(pipeline_committed)
    chaos_kill "$w"
    [ -n "$l" ] && chaos_kill "$l"
    FAULTS=$((FAULTS + ${l:+1} + 1))
    chaos_between 1 9
    sleep "0.$REPLY"
    chaos_recover "$w"
    _recovered "$before" $((${l:+1} + 1))
    [ -n "$l" ] && chaos_recover "$l"
    return 0
}

# Scale out by one worker and back in (a clean SIGTERM): two rebalances under load.
scenario_scale-workers() {
    local n before
    n=$(chaos_targets worker | wc -l)
    before=$(pipeline_committed)
    chaos_log "scale workers $n -> $((n + 1))"
    case "$CHAOS_BACKEND" in
    local) pipeline_start_worker "$n" ;;
    compose)
        chaos_log "compose has a fixed set of worker services; scale-workers skipped"
        return 0
        ;;
    k8s) _kubectl scale statefulset cdc-worker --replicas=$((n + 1)) ;;
    esac
    FAULTS=$((FAULTS + 1))
    CHAOS_WORKERS=$((n + 1)) _recovered "$before"
    chaos_between 2 5
    sleep "$REPLY"
    before=$(pipeline_committed)
    chaos_log "scale workers $((n + 1)) -> $n"
    case "$CHAOS_BACKEND" in
    local)
        proc_signal "worker-$n" TERM
        proc_signal "proxy-$n" TERM
        chaos_wait 30 "worker-$n to leave" bash -c "! kill -0 $(proc_pid "worker-$n") 2>/dev/null"
        rm -f "$CHAOS_DIR/procs/worker-$n.pid" "$CHAOS_DIR/procs/proxy-$n.pid"
        ;;
    k8s) _kubectl scale statefulset cdc-worker --replicas="$n" ;;
    esac
    FAULTS=$((FAULTS + 1))
    _recovered "$before"
}
