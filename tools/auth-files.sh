#!/usr/bin/env bash
# The secrets that authentication by default needs (docs/security.md), for the launchers
# that run the processes on one host: `make run` (tools/run.sh), the test harness
# (tests/harness/harness.sh), the chaos suite and the benchmarks (chaos/lib.sh), the compose
# stack (make compose-test).
#
# Sourced:     . tools/auth-files.sh; cdc_auth_files <dir>
#   creates <dir>/worker-secret and <dir>/http-token (mode 600, 32 random bytes in base64;
#   kept when present) and exports CDC_WORKER_SECRET_FILE and CDC_HTTP_TOKEN_FILE pointing at
#   them: every cdc-* process and cdcctl started from that shell reads them as its
#   --worker-secret-file and --http-token-file.
#   cdc_auth_header prints "Authorization: Bearer <token>" of CDC_HTTP_TOKEN_FILE (the
#   token of its first line), for curl -H.
#   cdc_compose_secrets <dir> the compose stack's secrets (docker/docker-compose.yml):
#   the two files and the certificates of its TLS (tools/certs.sh <dir> with the names
#   the containers reach each other by: etcd, coordinator-1, coordinator-2; leaf
#   certificates renewed under the same CA each time), readable by the containers' user
#   10001 (mode 644, a development stack) in a directory of mode 700; etcd's key stays 600
#   (etcd runs as root in its image) and the CA's key is mounted nowhere.
# As a command: tools/auth-files.sh <dir>   (creates the files, prints the export lines)

# A random secret: 32 bytes in base64 (no ':', so a token file line is a bare token).
_cdc_auth_random() {
    head -c 32 /dev/urandom | base64 | tr -d '\n'
}

cdc_auth_files() {
    local dir=${1:?usage: cdc_auth_files <dir>} f
    mkdir -p "$dir" || return 1
    dir=$(cd "$dir" && pwd) || return 1
    for f in worker-secret http-token; do
        if [ ! -s "$dir/$f" ]; then
            (umask 077 && _cdc_auth_random >"$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f") || return 1
        fi
    done
    export CDC_WORKER_SECRET_FILE=$dir/worker-secret CDC_HTTP_TOKEN_FILE=$dir/http-token
}

cdc_compose_secrets() {
    local dir=${1:?usage: cdc_compose_secrets <dir>}
    cdc_auth_files "$dir" &&
        "$(dirname "${BASH_SOURCE[0]}")/certs.sh" "$dir" etcd coordinator-1 coordinator-2 >/dev/null &&
        chmod 700 "$dir" &&
        (cd "$dir" && chmod 644 worker-secret http-token ca.crt node.crt node.key etcd.crt)
}

cdc_auth_header() {
    local line
    line=$(head -n 1 "${CDC_HTTP_TOKEN_FILE:?no CDC_HTTP_TOKEN_FILE}")
    case "$line" in
    *:*) line=${line#*:} ;;
    esac
    echo "Authorization: Bearer $line"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -eu
    cdc_auth_files "${1:?usage: $0 <dir>}"
    echo "export CDC_WORKER_SECRET_FILE='$CDC_WORKER_SECRET_FILE'"
    echo "export CDC_HTTP_TOKEN_FILE='$CDC_HTTP_TOKEN_FILE'"
fi
