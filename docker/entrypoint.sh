#!/bin/sh
# Entrypoint of the cdc image: the first argument names the program, the rest are its
# flags; configuration otherwise comes from CDC_* environment variables (flags win).
#   capture | coordinator | worker | cdcctl | kafka-dev | loadgen | <any command>
#   admin [path]   GET path (default /healthz) of this container's own admin server (the
#                  port of CDC_HTTP), https with the certificates of CDC_TLS_CA_FILE,
#                  CDC_TLS_CERT_FILE and CDC_TLS_KEY_FILE when CDC_HTTP_TLS is on or mutual,
#                  else http: the image's and the compose file's health checks, and
#                  chaos/lib.sh's /status requests (docs/security.md, "TLS")
# A worker without CDC_ID (or --id) takes the ordinal of its StatefulSet pod name
# (cdc-worker-2 -> 2) from POD_NAME or HOSTNAME, so ids are stable across restarts and
# rescheduling. --help and --version need no configuration: they go straight through.
set -eu
cmd=${1:-}
[ $# -gt 0 ] && shift

# True when the arguments ask for help or the version, or give the worker id.
needs_no_id() {
    for a in "$@"; do
        case "$a" in
        -h | --help | --help-markdown | --version | --id | --id=*) return 0 ;;
        esac
    done
    return 1
}

case "$cmd" in
capture | coordinator | worker)
    if [ "$cmd" = worker ] && [ -z "${CDC_ID:-}" ] && ! needs_no_id "$@"; then
        name=${POD_NAME:-$(hostname)}
        ordinal=${name##*-}
        case "$ordinal" in
        '' | *[!0-9]*)
            echo "cdc-entrypoint: worker needs CDC_ID, or a pod name ending in its ordinal (got \"$name\")" >&2
            exit 2
            ;;
        esac
        CDC_ID=$ordinal
        export CDC_ID
    fi
    exec "cdc-$cmd" "$@"
    ;;
admin)
    url=127.0.0.1:${CDC_HTTP##*:}${1:-/healthz}
    case "${CDC_HTTP_TLS:-off}" in
    off) exec curl -fsS --max-time 3 "http://$url" ;;
    *)
        exec curl -fsS --max-time 3 --cacert "${CDC_TLS_CA_FILE:?CDC_HTTP_TLS needs CDC_TLS_CA_FILE}" \
            --cert "${CDC_TLS_CERT_FILE:?}" --key "${CDC_TLS_KEY_FILE:?}" "https://$url"
        ;;
    esac
    ;;
cdcctl | kafka-dev | loadgen)
    exec "$cmd" "$@"
    ;;
'' | help | --help)
    echo "usage: <image> capture|coordinator|worker|cdcctl|kafka-dev|loadgen [--flags]"
    echo "       each program takes --help; configuration through CDC_* environment variables"
    exit 0
    ;;
*)
    exec "$cmd" "$@"
    ;;
esac
