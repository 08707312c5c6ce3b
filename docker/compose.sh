#!/usr/bin/env bash
# docker compose front end for the Makefile targets users of the reference pipeline know:
#   docker/compose.sh start       build the image, start everything, wait until healthy
#   docker/compose.sh stop        stop the containers (data kept)
#   docker/compose.sh clean       stop and delete containers, volumes and the exported warehouse
#   docker/compose.sh run-chaos   load + worker kills/pauses (chaos/run.sh, compose backend)
#                                 + verify the warehouse against PostgreSQL
#   docker/compose.sh status|logs [service]|load|export|verify
# Environment: CDC_IMAGE, POSTGRES_*, MINIO_ROOT_*, LOAD_RATE, DURATION (chaos seconds),
# SEED (replay a chaos run); see docs/deployment.md.
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=docker/docker-compose.yml
EXPORT=.run/compose-warehouse

compose() {
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

pg_dsn() {
    echo "host=127.0.0.1 port=${POSTGRES_PORT:-5432} dbname=${POSTGRES_DB:-cdc} user=${POSTGRES_USER:-cdc} password=${POSTGRES_PASSWORD:-cdc}"
}

# Copies the warehouse bucket out of MinIO so the verifier reads it as files.
export_warehouse() {
    rm -rf "$EXPORT"
    mkdir -p "$EXPORT"
    # shellcheck disable=SC2016 # expanded inside the container
    compose run --rm --no-deps -v "$PWD/$EXPORT:/export" --entrypoint /bin/sh minio-init -c \
        'mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null && mc mirror --quiet local/warehouse /export'
}

verify() {
    export_warehouse
    node chaos/verify --pg "$(pg_dsn)" --warehouse "$PWD/$EXPORT" --path-map "s3://warehouse/=$PWD/$EXPORT/"
}

cmd=${1:-}
shift || true
case "$cmd" in
start)
    compose up -d --build --wait
    compose ps
    echo "compose: up. Coordinator admin: http://127.0.0.1:8081/status (standby: 8082),"
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
    LOAD_DURATION=0 compose --profile load up -d loadgen
    CHAOS_BACKEND=compose COMPOSE_FILE="$FILE" chaos/run.sh
    compose --profile load stop loadgen
    # chaos/run.sh waits for catch-up per scenario; verify the final state once more
    verify
    ;;
*)
    echo "usage: docker/compose.sh start|stop|clean|run-chaos|status|logs|load|export|verify" >&2
    exit 2
    ;;
esac
