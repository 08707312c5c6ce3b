#!/usr/bin/env bash
# `make run`: the whole pipeline on loopback, all data under .run/ in the checkout:
# the harness's PostgreSQL, etcd and development Kafka broker, the demo schema with
# INITIAL_ROWS rows per table (captured by the initial snapshot), two cdc-captures (active +
# standby), two
# coordinators (leader + standby), three workers (without --tables: they follow the job's
# tables), and the load generator. Shows progress
# (source changes, last committed epoch, records and duration of the last checkpoint,
# live workers, leader) until Ctrl-C, which stops everything and keeps .run/ for a look.
# Authentication is on: the harness generates the worker secret and the admin token into
# <dir>/servers/{worker-secret,http-token} (tools/auth-files.sh) and every process reads
# them through CDC_WORKER_SECRET_FILE and CDC_HTTP_TOKEN_FILE; the banner says where.
#   DURATION=<s>     stop the load after s seconds, wait for the tables to catch up, run
#                    the verifier (chaos/verify), print its report, exit with its status
#   LOAD_RATE=<n>    changes per second (default 500)
#   INITIAL_ROWS=<n> rows per table before the capture starts (default 1000)
#   CATCHUP=<s>      how long the verifier waits for the tables (default 120)
#   RUN_DIR=<dir>    data directory (default .run); the warehouse is <dir>/warehouse
#   TLS=0            plain, for a look at the traffic: tcp://, http://, etcd http://.
#                    By default the run is encrypted: a CA and certificates in <dir>/certs
#                    (tools/certs.sh), the coordinators on tls+tcp:// (mutual TLS), every
#                    admin server https with mutual TLS, and an etcd of its own with TLS and
#                    client certificates (chaos/lib.sh, pipeline_etcd_tls_up) instead of the
#                    harness's plain one (docs/security.md, "TLS"); the banner gives the curl
#                    and cdcctl commands with the certificates
# Pipeline start/stop and the process supervisor live in chaos/lib.sh (shared with the
# chaos suite); logs are in <dir>/procs/<name>.log.
set -uo pipefail
# shellcheck source=tools/launched.sh
. "$(dirname "$0")/../tools/launched.sh"
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build}
export CDC_BUILD_DIR=$ROOT/$BUILD
RUN_DIR=${RUN_DIR:-$ROOT/.run}
export CHAOS_DIR=$RUN_DIR CHAOS_BUILD=$CDC_BUILD_DIR
# No --tables on the captures or the workers: the capture set is the publication cdc_pub,
# and a table added to it joins while the pipeline runs (docs/operations.md, "Changing the
# tables").
export CHAOS_CAPTURE_TABLES=${CHAOS_CAPTURE_TABLES-} CHAOS_WORKER_TABLES=${CHAOS_WORKER_TABLES-}
# The capture's default snapshot: the first rows read by resumable incremental snapshots
# while the stream runs (docs/capture.md, "Initial snapshot"); the verifier takes each
# snapshot row for some state of its key (--snapshotted).
export CHAOS_SNAPSHOT_MODE=${CHAOS_SNAPSHOT_MODE:-incremental}
# shellcheck source=chaos/lib.sh
. chaos/lib.sh

LOAD_RATE=${LOAD_RATE:-500}
CATCHUP=${CATCHUP:-120}
log() { echo "run: $*" >&2; }

for b in cdc-capture cdc-coordinator cdc-worker loadgen kafka-dev; do
    [ -x "$BUILD/$b" ] || {
        log "$BUILD/$b is not built (make bins)"
        exit 1
    }
done

case "${TLS:-1}" in
0 | 1) ;;
*)
    log "TLS must be 1 (the default: encrypted) or 0 (plain), not \"$TLS\""
    exit 2
    ;;
esac

# A previous run killed hard may have left servers and processes behind.
if [ -d "$RUN_DIR/servers" ]; then
    # shellcheck source=tests/harness/harness.sh
    . tests/harness/harness.sh
    CDC_TEST_TMP=$RUN_DIR/servers pipeline_down purge 2>/dev/null
fi
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"

stopped=0
stop() {
    [ "$stopped" = 1 ] && return
    stopped=1
    # Output to a pipe whose reader died (`make run | tee run.log`, then Ctrl-C, which
    # stops tee first) must not kill this script before it stops what it started: from
    # here on writes to it fail instead (docs/development.md, "Nothing outlives its
    # launcher"; build/launch stops whatever is left if this script dies all the same).
    trap '' INT TERM HUP PIPE
    log "stopping"
    pipeline_down
    log "stopped; data kept in $RUN_DIR"
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
# The terminal closed: stop everything as for Ctrl-C.
trap 'stop; exit 129' HUP
trap 'stop' EXIT

# TLS is on unless TLS=0 (docs/security.md, "TLS")
scheme=http curl_tls="" ctl_tls=""
case "${TLS:-1}" in
0) ;;
1)
    tools/certs.sh "$RUN_DIR/certs" >/dev/null || exit 1
    export CHAOS_TLS_DIR=$RUN_DIR/certs
    export CDC_HARNESS_SERVICES="pg kafka" # etcd: pipeline_etcd_tls_up's, with TLS
    scheme=https
    curl_tls="--cacert $CHAOS_TLS_DIR/ca.crt --cert $CHAOS_TLS_DIR/node.crt --key $CHAOS_TLS_DIR/node.key "
    ctl_tls="\\
                 CDC_HTTP_TLS=mutual CDC_TLS_CA_FILE=$CHAOS_TLS_DIR/ca.crt \\
                 CDC_TLS_CERT_FILE=$CHAOS_TLS_DIR/node.crt CDC_TLS_KEY_FILE=$CHAOS_TLS_DIR/node.key"
    ;;
esac
export CHAOS_INITIAL_ROWS=${INITIAL_ROWS:-1000}
pipeline_servers_up || exit 1
[ -z "${CHAOS_TLS_DIR:-}" ] || pipeline_etcd_tls_up || exit 1
pipeline_procs_up || exit 1
proc_start loadgen "$CDC_BUILD_DIR/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false \
    --rate "$LOAD_RATE" --report-interval 10s

cat <<EOT

  PostgreSQL   psql "$PIPELINE_PG_DSN"
  etcd         $CDC_TEST_ETCD      Kafka (development broker) $CDC_TEST_KAFKA
  Kafka control CDC_KAFKA_DEV_CONTROL=$CDC_KAFKA_DEV_CONTROL (for cdc processes started by hand)
  coordinators $(for i in 0 1; do printf '%s://%s/status  ' "$scheme" "$(cat "$RUN_DIR/procs/coordinator-$i.http")"; done)
  dashboard    $(for i in 0 1; do printf '%s://%s/  ' "$scheme" "$(cat "$RUN_DIR/procs/coordinator-$i.http")"; done)(either: a standby's names the leader)
  status       curl -fsS ${curl_tls}$scheme://$(cat "$RUN_DIR/procs/coordinator-0.http")/status${CHAOS_TLS_DIR:+
  TLS          on (TLS=0 make run: plain): certificates in $CHAOS_TLS_DIR; NNG tls+tcp://,
               admin servers https with mutual TLS, etcd https with client certificates:
               etcdctl --endpoints $CDC_TEST_ETCD --cacert $CHAOS_TLS_DIR/ca.crt \\
                 --cert $CHAOS_TLS_DIR/node.crt --key $CHAOS_TLS_DIR/node.key get --prefix /cdc --keys-only}
  warehouse    $RUN_DIR/warehouse/$CHAOS_NAMESPACE/{transactions,accounts}{,_changelog}
  logs         $RUN_DIR/procs/*.log
  secrets      worker secret $CDC_WORKER_SECRET_FILE, admin token $CDC_HTTP_TOKEN_FILE
               (generated for this run; POSTs and cdcctl's actions need the token); cdcctl:
               export CDC_HTTP_TOKEN_FILE=$CDC_HTTP_TOKEN_FILE ${ctl_tls}
  verify       chaos/verify --pg "$PIPELINE_PG_DSN" --warehouse $RUN_DIR/warehouse
  add a table  psql "$PIPELINE_PG_DSN" -c 'ALTER PUBLICATION cdc_pub ADD TABLE public.<table>'
  re-read one  $BUILD/cdcctl snapshot public.<table> --capture $(cat "$RUN_DIR/procs/capture-0.http") --wait
  query        docs/deployment.md and README (DuckDB read_parquet, icebird icebergRead)

EOT

progress() {
    local s changes
    changes=$(psql -X -A -t -d "$PIPELINE_PG_DSN" -c 'SELECT coalesce(max(seq), 0) FROM cdc_audit.changes' 2>/dev/null)
    if s=$(chaos_status 2>/dev/null); then
        jq -r --arg ch "${changes:-?}" '"run: source changes \($ch)  committed epoch \(.epochs.last_committed)  " +
            "last checkpoint \((.checkpoints[0].records // 0)) records in \((.checkpoints[0].duration_ms // 0)) ms  " +
            "workers \([.workers[] | select(.alive)] | length)/\(.workers | length)  leader \(.id) term \(.term)"' <<<"$s" >&2
    else
        log "source changes ${changes:-?}  (no leader answering)"
    fi
}

if [ -n "${DURATION:-}" ]; then
    log "load for ${DURATION}s at ${LOAD_RATE}/s"
    end=$((SECONDS + DURATION))
    while [ "$SECONDS" -lt "$end" ]; do
        sleep 2
        progress
    done
    proc_signal loadgen TERM
    chaos_wait 30 "the load generator to stop" bash -c "! kill -0 $(proc_pid loadgen) 2>/dev/null"
    tail -n1 "$RUN_DIR/procs/loadgen.log" >&2
    log "load stopped; waiting up to ${CATCHUP}s for the tables to catch up, then verifying"
    snapshotted=()
    [ "$CHAOS_SNAPSHOT_MODE" = incremental ] && snapshotted=(--snapshotted "transactions,accounts")
    pipeline_verify --wait "$CATCHUP" "${snapshotted[@]}"
    rc=$?
    progress
    exit "$rc"
fi
log "running; Ctrl-C stops everything"
while true; do
    sleep 5
    progress
done
