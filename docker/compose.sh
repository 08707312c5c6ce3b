#!/usr/bin/env bash
# docker compose front end for the Makefile targets users of the reference pipeline know:
#   docker/compose.sh start       build the image, start everything, wait until healthy
#   docker/compose.sh stop        stop the containers (data kept)
#   docker/compose.sh clean       stop and delete containers, volumes and the exported warehouse
#   docker/compose.sh run-chaos   the chaos scenarios against the containers (chaos/run.sh,
#                                 compose backend): per scenario load, faults, recovery, and
#                                 the warehouse verified against PostgreSQL
#   docker/compose.sh status|logs [service]|load|export|verify
# Environment: CDC_IMAGE, POSTGRES_*, MINIO_ROOT_*, LOAD_RATE, DURATION (chaos seconds),
# SEED (replay a chaos run), SCENARIOS; see docs/deployment.md. Without an image registry,
# `make compose-test` runs the same stack with podman (docker/compose-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=docker/docker-compose.yml
EXPORT=.run/compose-warehouse

# The worker secret and the admin token the stack's compose secrets mount (generated once,
# kept with the data; readable by the containers' user 10001: a development stack).
# shellcheck source=tools/auth-files.sh
. tools/auth-files.sh
export COMPOSE_SECRETS_DIR=$PWD/.run/compose-secrets
secrets() {
    cdc_compose_secrets "$COMPOSE_SECRETS_DIR"
}

compose() {
    secrets || exit 1
    if docker compose version >/dev/null 2>&1; then
        docker compose -f "$FILE" "$@"
    elif command -v docker-compose >/dev/null 2>&1; then
        docker-compose -f "$FILE" "$@"
    else
        echo "compose: docker compose (v2) is required and not available here" >&2
        echo "hint: install Docker Engine with the compose plugin, or use \`make run\` (no containers)" >&2
        exit 1
    fi
}

# Export and verification are chaos/lib.sh's (compose backend): MinIO's bucket mirrored
# into $EXPORT, then chaos/verify against PostgreSQL.
export CHAOS_BACKEND=compose CHAOS_DIR=$PWD/.run/compose-chaos COMPOSE_FILE=$FILE
# shellcheck source=chaos/lib.sh
. chaos/lib.sh

export_warehouse() {
    rm -rf "$EXPORT"
    chaos_compose_export "$PWD/$EXPORT"
}

verify() {
    export_warehouse
    node chaos/verify --pg "$(chaos_pg_dsn)" --warehouse "$PWD/$EXPORT" --path-map "s3://warehouse/=$PWD/$EXPORT/"
}

action=${1:-}
shift || true
case "$action" in
start)
    compose up -d --build --wait
    compose ps
    echo "compose: up, encrypted. Coordinator admin: https://127.0.0.1:8081/status (standby: 8082):"
    echo "         curl --cacert $COMPOSE_SECRETS_DIR/ca.crt --cert $COMPOSE_SECRETS_DIR/node.crt \\"
    echo "             --key $COMPOSE_SECRETS_DIR/node.key https://127.0.0.1:8081/status"
    echo "         admin token: CDC_HTTP_TOKEN_FILE=$CDC_HTTP_TOKEN_FILE (cdcctl, POSTs),"
    echo "         MinIO console http://127.0.0.1:9001, PostgreSQL 127.0.0.1:${POSTGRES_PORT:-5432}."
    echo "         Load: docker/compose.sh load   Kafka UI: docker compose -f $FILE --profile ui up -d"
    ;;
stop) compose --profile load --profile ui stop ;;
clean)
    compose --profile load --profile ui down --volumes --remove-orphans
    rm -rf "$EXPORT"
    ;;
status) compose ps ;;
logs) compose logs --tail=200 "$@" ;;
load) compose --profile load up -d loadgen ;;
export) export_warehouse ;;
verify) verify ;;
run-chaos)
    compose up -d --build --wait
    chaos/run.sh
    ;;
*)
    echo "usage: docker/compose.sh start|stop|clean|run-chaos|status|logs|load|export|verify" >&2
    exit 2
    ;;
esac
