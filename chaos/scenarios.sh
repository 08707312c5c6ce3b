#!/usr/bin/env bash
# Chaos scenarios (sourced by chaos/run.sh; needs chaos/lib.sh). Each scenario_<name>
# takes a time budget in seconds, injects faults while the load runs, brings the
# system back, and adds to the counters FAULTS and RECOVERIES. All random choices come
# from the seeded RANDOM, so SEED=<n> replays the same sequence of faults.

# shellcheck disable=SC2034 # used by chaos/run.sh
CHAOS_SCENARIOS=(kill-workers pause-worker kill-leader kill-capture etcd-restart
    partition-worker double-fault scale-workers schema-change sigterm backlog-uncompressed
    add-table resnapshot)

FAULTS=0
RECOVERIES=0

# Counts recoveries (one per fault injected, default 1) when the leader commits again
# with every worker after the faults.
# The seconds each took (from the repair to that commit) go to $CHAOS_DIR/recoveries.tsv
# (<unix ms> <seconds>), which make soak reports.
_recovered() {
    local before=$1 n=${2:-1} t0
    t0=$(date +%s%3N)
    if pipeline_wait_recovered "$before" "${CHAOS_RECOVERY_TIMEOUT:-60}"; then
        RECOVERIES=$((RECOVERIES + n))
        printf '%s\t%s\n' "$t0" "$(awk -v a="$t0" -v b="$(date +%s%3N)" 'BEGIN { printf "%.3f", (b - a) / 1000 }')" \
            >>"$CHAOS_DIR/recoveries.tsv"
    else
        chaos_log "no recovery within ${CHAOS_RECOVERY_TIMEOUT:-60}s"
    fi
}

# REPLY = a random worker target.
# (CHAOS_SPARE names workers no scenario picks: make soak spares worker-0, so that one
# process lives the whole run and its RSS, descriptors and threads show a leak, which a
# process restarted every minute cannot)
_random_worker() {
    local ws=() w
    while IFS= read -r w; do
        case " ${CHAOS_SPARE:-} " in *" $w "*) continue ;; esac
        ws+=("$w")
    done < <(chaos_targets worker)
    chaos_pick "${ws[@]}"
}

# _fault <inject> <heal> <target> <lo> <hi> [<base>]: one fault and its repair. The
# target gets <inject> (chaos_kill, chaos_pause, chaos_partition), stays so for a random
# while (chaos_between lo hi: that many tenths of a second, or with <base>, base + that
# many seconds), then gets <heal>; its recovery counts when the leader commits again.
_fault() {
    local inject=$1 heal=$2 t=$3 lo=$4 hi=$5 base=${6-} before
    before=$(pipeline_committed)
    "$inject" "$t"
    FAULTS=$((FAULTS + 1))
    chaos_between "$lo" "$hi"
    if [ -n "$base" ]; then
        sleep $((base + REPLY))
    else
        sleep "0.$REPLY"
    fi
    "$heal" "$t"
    _recovered "$before"
}

# _sigterm_exits <target> [<while>]: SIGTERM to a process of the local backend, which
# must exit within 10 s; false (logged) when it does not.
_sigterm_exits() {
    local t=$1 pid start
    pid=$(proc_pid "$t")
    start=$SECONDS
    kill -TERM "$pid" 2>/dev/null
    if ! chaos_wait 10 "$t to exit after SIGTERM" bash -c "! kill -0 $pid 2>/dev/null"; then
        chaos_log "$t did not exit within 10 s of SIGTERM${2:+ $2}"
        return 1
    fi
    chaos_log "$t exited $((SECONDS - start)) s after SIGTERM"
}

# kill -9 of random workers, repeatedly, each restarted after a random delay.
scenario_kill-workers() {
    local end=$((SECONDS + $1))
    while [ "$SECONDS" -lt "$end" ]; do
        _random_worker
        _fault chaos_kill chaos_recover "$REPLY" 1 9
        chaos_between 1 3
        sleep "$REPLY"
    done
}

# SIGSTOP of one worker past the heartbeat timeout, then SIGCONT (a zombie that wakes up).
scenario_pause-worker() {
    _random_worker
    _fault chaos_pause chaos_resume "$REPLY" 2 5 "$CHAOS_HEARTBEAT_TIMEOUT"
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

# kill -9 of the capture that streams the slot: the standby capture takes it over (or,
# with one capture, the killed one restarts) from the slot's confirmed LSN (at-least-once
# into Kafka, deduplicated downstream).
scenario_kill-capture() {
    local t
    t=$(chaos_active_capture)
    _fault chaos_kill chaos_recover "$t" 2 9
}

# SIGTERM under load to a random one of: a worker, the leading coordinator, the capture
# streaming the slot. The process must exit within 10 s (local backend: measured; compose
# and k8s: their stop/delete grace) and comes back; the verifier then checks nothing was
# lost or duplicated.
scenario_sigterm() {
    local t before
    chaos_between 0 2
    case "$REPLY" in
    0)
        _random_worker
        t=$REPLY
        ;;
    1) t=$(chaos_leader) || return 0 ;;
    *) t=$(chaos_active_capture) ;;
    esac
    before=$(pipeline_committed)
    chaos_log "SIGTERM $t"
    FAULTS=$((FAULTS + 1))
    case "$CHAOS_BACKEND" in
    local) _sigterm_exits "$t" || return 0 ;; # (no recovery counted: the run fails)
    compose | k8s) chaos_stop "$t" 10 ;;
    esac
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
    compose) chaos_stop etcd 10 ;;
    k8s) _kubectl delete pod -l app.kubernetes.io/name=etcd --wait=false ;;
    esac
    chaos_log "etcd stopped"
    FAULTS=$((FAULTS + 1))
    chaos_between 2 5
    sleep "${CHAOS_ETCD_DOWN:-$REPLY}"
    case "$CHAOS_BACKEND" in
    local) harness_etcd_start ;;
    compose) chaos_recover etcd ;;
    # the StatefulSet brings it back on its PersistentVolumeClaim, data kept
    k8s) _kubectl rollout status statefulset/etcd --timeout=120s >/dev/null ;;
    esac
    chaos_log "etcd started"
    _recovered "$before"
}

# One worker loses the coordinator longer than the heartbeat timeout, then heals.
scenario_partition-worker() {
    _random_worker
    _fault chaos_partition chaos_heal "$REPLY" 2 6 "$CHAOS_HEARTBEAT_TIMEOUT"
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

# Random DDL on the demo tables under load (docs/worker.md, "Schema changes"): a column
# is added (maybe with a default), written, then renamed, promoted, changed to a type
# Iceberg cannot promote, rewritten through USING, or dropped; a worker is killed once in
# between. Only columns the scenario added are touched (the load generator writes the
# table's own columns by position). Each DDL counts as a fault, recovered when the
# leader commits again with every worker. With SCHEMA_CHANGE_MAX_COLUMNS (make soak sets
# it), a table keeps at most that many of the scenario's columns: the oldest is dropped
# before another is added. Local backend only.
scenario_schema-change() {
    # (column numbers go on across runs of the scenario: make soak runs it again and again)
    local end=$((SECONDS + $1)) n=${SCHEMA_CHANGE_COLUMNS:-0} t col type def next before w killed=0
    if [ "$CHAOS_BACKEND" != local ]; then
        chaos_log "schema-change runs against the local backend only; skipped"
        return 0
    fi
    _ddl() {
        chaos_log "ddl: $*"
        psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" -c "$*" >/dev/null ||
            chaos_log "ddl failed: $*"
    }
    while [ "$SECONDS" -lt "$end" ]; do
        n=$((n + 1))
        chaos_pick transactions accounts
        t=public.$REPLY
        col=x_$n
        chaos_pick text int "numeric(10,2)"
        type=$REPLY
        chaos_pick "" " DEFAULT 7"
        def=$REPLY
        if [ -n "${SCHEMA_CHANGE_MAX_COLUMNS:-}" ]; then
            local added
            mapfile -t added < <(psql -X -At -d "$PIPELINE_PG_DSN" -c "SELECT attname FROM pg_attribute
                WHERE attrelid = '$t'::regclass AND attnum > 0 AND NOT attisdropped
                AND attname LIKE 'x\_%' ORDER BY attnum")
            if [ "${#added[@]}" -ge "$SCHEMA_CHANGE_MAX_COLUMNS" ]; then
                before=$(pipeline_committed)
                _ddl "ALTER TABLE $t DROP COLUMN ${added[0]}"
                FAULTS=$((FAULTS + 1))
                _recovered "$before"
            fi
        fi
        before=$(pipeline_committed)
        _ddl "ALTER TABLE $t ADD COLUMN $col $type$def"
        FAULTS=$((FAULTS + 1))
        _ddl "UPDATE $t SET $col = 3 WHERE ctid IN (SELECT ctid FROM $t ORDER BY random() LIMIT 20)"
        _recovered "$before"
        if [ "$killed" = 0 ]; then
            _random_worker
            w=$REPLY
            chaos_kill "$w"
            FAULTS=$((FAULTS + 1))
            killed=1
        fi
        case "$type" in
        text) chaos_pick rename "int USING length($col)" drop keep ;;
        int) chaos_pick rename bigint "numeric(12,2)" drop keep ;;
        *) chaos_pick rename "numeric(14,2)" "numeric(12,4)" drop keep ;;
        esac
        next=$REPLY
        before=$(pipeline_committed)
        case "$next" in
        rename) _ddl "ALTER TABLE $t RENAME COLUMN $col TO ${col}_r" && col=${col}_r ;;
        drop) _ddl "ALTER TABLE $t DROP COLUMN $col" ;;
        keep) ;;
        *) _ddl "ALTER TABLE $t ALTER COLUMN $col TYPE $next" ;;
        esac
        local pending=0
        if [ "$killed" = 1 ]; then
            chaos_recover "$w"
            killed=2
            pending=1
        fi
        if [ "$next" != drop ]; then
            _ddl "UPDATE $t SET $col = 5 WHERE ctid IN (SELECT ctid FROM $t ORDER BY random() LIMIT 20)"
        fi
        if [ "$next" != keep ]; then
            FAULTS=$((FAULTS + 1))
            pending=$((pending + 1))
        fi
        [ "$pending" -gt 0 ] && _recovered "$before" "$pending"
        chaos_between 1 3
        sleep "$REPLY"
    done
    SCHEMA_CHANGE_COLUMNS=$n
    return 0
}

# A backlog drained from uncompressed topics, with a rebalance in the middle: every
# capture is killed while the load runs, and CHAOS_BACKLOG_ROWS rows (default 40,000,
# keys far above the load generator's) are inserted in transactions of 1,000, so changes
# pile up in the slot; the captures come back writing uncompressed record batches
# (--kafka-compression=none); while the workers drain the backlog, with fetching paused
# by --max-staged-bytes (chaos/run.sh keeps it small), one gets SIGTERM (it must exit
# within 10 s) and is restarted, so the partitions are assigned again while paused: the
# silent stall of docs/worker.md ("A paused partition assigned again"). The backlog must
# then drain within 25 s, and the verifier finds whatever a stalled partition left behind.
# Local backend only.
scenario_backlog-uncompressed() {
    local before t w caps=() rows=${CHAOS_BACKLOG_ROWS:-40000}
    if [ "$CHAOS_BACKEND" != local ]; then
        chaos_log "backlog-uncompressed runs against the local backend only; skipped"
        return 0
    fi
    _streaming() {
        local c
        for c in "${caps[@]}"; do
            curl -fsS --max-time 2 -o /dev/null "http://$(cat "$CHAOS_DIR/procs/$c.http")/readyz" \
                2>/dev/null && return 0
        done
        return 1
    }
    mapfile -t caps < <(chaos_targets capture)
    before=$(pipeline_committed)
    for t in "${caps[@]}"; do chaos_kill "$t"; done
    FAULTS=$((FAULTS + 1))
    chaos_log "backlog: $rows rows inserted while no capture runs"
    psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" >/dev/null <<EOF ||
DO \$\$
DECLARE
    base bigint := 1000000000 + (SELECT count(*) FROM cdc_audit.changes) * 100;
BEGIN
    FOR i IN 0 .. ($rows - 1) / 1000 LOOP
        INSERT INTO public.transactions (entity_id, account, amount, status, note, updated_at)
        SELECT base + g, 'acct-' || (g % 97), g % 1000, 'backlog', repeat('b', 200), now()
        FROM generate_series(i * 1000 + 1, least((i + 1) * 1000, $rows)) g;
        COMMIT;
    END LOOP;
END
\$\$;
EOF
        chaos_log "backlog: the insert failed"
    CDC_KAFKA_COMPRESSION=none
    export CDC_KAFKA_COMPRESSION
    for t in "${caps[@]}"; do chaos_recover "$t"; done
    unset CDC_KAFKA_COMPRESSION
    chaos_wait 30 "a capture streaming the slot" _streaming
    # the workers are draining (and pausing): a rebalance now
    chaos_wait 30 "the workers to pause fetching" \
        grep -qs "fetching paused" "$CHAOS_DIR"/procs/worker-*.log
    # SIGTERM under the backlog: the worker must be gone within 10 s (its partitions move
    # to the others, which are paused), then it comes back
    _random_worker
    w=$REPLY
    chaos_log "SIGTERM $w"
    FAULTS=$((FAULTS + 1))
    _sigterm_exits "$w" "under the backlog" || return 0 # (no recovery counted: the run fails)
    chaos_recover "$w"
    _recovered "$before"
    # Drained well before a progress watchdog (30 s) would have to step in: a partition
    # left paused by the new assignment keeps its share of the backlog behind its
    # checkpointed offset. The ends come from the broker (kcat), not from the owners,
    # whose view of a paused partition's end is stale.
    _drained() {
        local st args=() topic p lag
        st=$(chaos_status 2>/dev/null) || return 1
        for topic in $(jq -r '[.assignment[].offsets | keys[]] | unique[]' <<<"$st"); do
            for ((p = 0; p < 12; p++)); do args+=(-t "$topic:$p:-1"); done
        done
        [ "${#args[@]}" -gt 0 ] || return 1
        lag=$(kcat -b "$CDC_TEST_KAFKA" -Q "${args[@]}" 2>/dev/null |
            jq -R -s --argjson st "$st" '
                [split("\n")[] | capture("^(?<t>\\S+) \\[(?<p>[0-9]+)\\] offset (?<o>-?[0-9]+)")
                 | (.o | tonumber) - ($st.assignment[.p | tonumber].offsets[.t] // 0 | if . < 0 then 0 else . end)]
                | add // 0') || return 1
        LAST_LAG=$lag
        [ -n "$lag" ] && [ "$lag" -lt "${CHAOS_BACKLOG_LAG:-1000}" ]
    }
    if chaos_wait 25 "the backlog to drain (leader's lag under ${CHAOS_BACKLOG_LAG:-1000})" _drained; then
        RECOVERIES=$((RECOVERIES + 1))
    else
        chaos_log "backlog not drained: ${LAST_LAG:-?} records behind the checkpointed offsets"
    fi
    # make soak: the backlog's rows go again (deleted under the load, checked by the
    # verifier after the run), so that the table is as large at every schema change's
    # backfill and the soak's data stays the same size
    if [ "${CHAOS_BACKLOG_DELETE:-0}" = 1 ]; then
        chaos_log "backlog: its rows deleted again"
        psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" -c \
            "DELETE FROM public.transactions WHERE status = 'backlog' AND entity_id >= 1000000000" \
            >/dev/null || chaos_log "backlog: the delete failed"
    fi
}

# _capture_table_state <table>: the state of schema.table in the active capture's /status
# ("snapshotting", "streaming", ...; "snapshot-done" once its incremental snapshot ended).
_capture_table_state() {
    local c
    c=$(chaos_active_capture)
    curl -fsS --max-time 2 "http://$(cat "$CHAOS_DIR/procs/$c.http" 2>/dev/null)/status" 2>/dev/null |
        jq -r --arg t "$1" '[.tables[]? | select(.table == $t)][0] // {} |
            if .snapshot.done == true then "snapshot-done" else (.state // "none") end' 2>/dev/null
}

_table_state_is() { [ "$(_capture_table_state "$1")" = "$2" ]; }

# _writer_start <table> <keys>: changes keys 1..keys of the table (update, delete and
# re-insert, insert of new keys) in transactions of their own until _writer_stop.
_writer_start() {
    local t=$1 keys=$2
    (
        i=0
        while :; do
            i=$((i + 1))
            k=$((RANDOM % keys + 1))
            echo "UPDATE $t SET v = 'w$i', n = n + 1 WHERE id = $k;"
            echo "DELETE FROM $t WHERE id = $(((k * 7) % keys + 1));"
            echo "INSERT INTO $t VALUES ($(((k * 7) % keys + 1)), 'back$i', $i) ON CONFLICT (id) DO UPDATE SET v = 'back$i';"
            echo "INSERT INTO $t VALUES ($((keys + i)), 'new$i', $i);"
            echo "SELECT pg_sleep(0.02);"
        done | psql -X -q -d "$PIPELINE_PG_DSN" >/dev/null 2>&1
    ) &
    WRITER_PID=$!
}
_writer_stop() {
    [ -n "${WRITER_PID:-}" ] || return 0
    pkill -P "$WRITER_PID" 2>/dev/null
    kill "$WRITER_PID" 2>/dev/null
    wait "$WRITER_PID" 2>/dev/null
    WRITER_PID=
}

# A table created and filled while the pipeline runs joins it through the publication
# (ALTER PUBLICATION ... ADD TABLE, docs/capture.md "Adding a table"): its rows come by an
# incremental snapshot while a writer keeps changing them, the capture streaming the slot
# is killed during the snapshot (the standby takes the slot and resumes it) and so is a
# worker. From then on the verifier checks the table too, as one an incremental snapshot
# read (--snapshotted: its changelog holds snapshot rows, then the changes since it joined).
# Needs the capture set to be the publication (CHAOS_CAPTURE_TABLES empty) and the
# workers to follow the job's tables (CHAOS_WORKER_TABLES empty); local backend only.
scenario_add-table() {
    local t before cap w rows=${CHAOS_ADD_ROWS:-20000} faults0=$FAULTS
    if [ "$CHAOS_BACKEND" != local ] || [ -n "$CHAOS_CAPTURE_TABLES" ] || [ -n "$CHAOS_WORKER_TABLES" ]; then
        chaos_log "add-table needs the local backend, the publication as capture set and workers without --tables; skipped"
        return 0
    fi
    ADDED_TABLES=$((${ADDED_TABLES:-0} + 1))
    t=chaos_added_$ADDED_TABLES
    psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" >/dev/null <<SQL || {
CREATE TABLE public.$t (id bigint PRIMARY KEY, v text, n int);
CREATE TRIGGER ${t}_audit AFTER INSERT OR UPDATE OR DELETE ON public.$t
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('id');
INSERT INTO public.$t SELECT g, 'v' || g, g FROM generate_series(1, $rows) g;
SQL
        chaos_log "add-table: could not create public.$t"
        return 0
    }
    _writer_start "public.$t" "$rows"
    before=$(pipeline_committed)
    chaos_log "ALTER PUBLICATION cdc_pub ADD TABLE public.$t ($rows rows, changed meanwhile)"
    psql -X -q -d "$PIPELINE_PG_DSN" -c "ALTER PUBLICATION cdc_pub ADD TABLE public.$t" >/dev/null ||
        chaos_log "add-table: ALTER PUBLICATION failed"
    FAULTS=$((FAULTS + 1))
    CHAOS_VERIFY_TABLES="${CHAOS_VERIFY_TABLES:-transactions,accounts},$t"
    CHAOS_VERIFY_SNAPSHOTTED="${CHAOS_VERIFY_SNAPSHOTTED:+$CHAOS_VERIFY_SNAPSHOTTED,}$t"
    # kill the capture streaming the slot in the middle of the snapshot, then a worker
    if chaos_wait 30 "the incremental snapshot of public.$t" _table_state_is "public.$t" snapshotting; then
        cap=$(chaos_active_capture)
        _random_worker
        w=$REPLY
        chaos_kill "$cap"
        chaos_kill "$w"
        FAULTS=$((FAULTS + 2))
        chaos_recover "$cap"
        chaos_recover "$w"
    else
        chaos_log "add-table: public.$t was not seen snapshotting (state $(_capture_table_state "public.$t"))"
    fi
    chaos_wait 120 "the end of the incremental snapshot of public.$t" \
        _table_state_is "public.$t" snapshot-done ||
        chaos_log "add-table: the snapshot of public.$t did not end (state $(_capture_table_state "public.$t"))"
    _writer_stop
    _recovered "$before" "$((FAULTS - faults0))"
    # cdcctl tables --capture shows the table streaming and its snapshot done (counted as
    # one more fault that recovers only then, so that the scenario fails otherwise)
    local out
    FAULTS=$((FAULTS + 1))
    out=$("$CHAOS_BUILD/cdcctl" --coordinator "$(cat "$CHAOS_DIR/procs/$(chaos_leader).http")" \
        --capture "$(cat "$CHAOS_DIR/procs/$(chaos_active_capture).http")" tables 2>&1)
    if grep -Eq "^public\.$t +streaming .*incremental: [0-9]+ rows, done" <<<"$out"; then
        RECOVERIES=$((RECOVERIES + 1))
    else
        chaos_log "add-table: cdcctl tables does not show public.$t streaming with its snapshot done: $out"
    fi
}

# `cdcctl snapshot` of a table under load: the capture re-reads public.accounts while the
# load changes it (rows with source.snapshot "backfill": the mirror only), and the verifier
# checks the mirror equals the source and the changelog is untouched by it.
scenario_resnapshot() {
    local before cap
    if [ "$CHAOS_BACKEND" != local ]; then
        chaos_log "resnapshot runs against the local backend only; skipped"
        return 0
    fi
    before=$(pipeline_committed)
    cap=$(chaos_active_capture)
    chaos_log "cdcctl snapshot public.accounts --capture $(cat "$CHAOS_DIR/procs/$cap.http")"
    FAULTS=$((FAULTS + 1))
    if "$CHAOS_BUILD/cdcctl" snapshot public.accounts --capture "$(cat "$CHAOS_DIR/procs/$cap.http")" \
        --wait=60s >>"$CHAOS_DIR/procs/cdcctl.log" 2>&1; then
        _recovered "$before"
    else
        chaos_log "cdcctl snapshot failed: $(tail -n 2 "$CHAOS_DIR/procs/cdcctl.log")"
    fi
}
