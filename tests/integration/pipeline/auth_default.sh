#!/usr/bin/env bash
# Authentication on by default (docs/security.md, "Authentication by default", "Audit
# trail"), with real processes against the harness's etcd, Kafka broker and PostgreSQL:
#   a. without their secrets, cdc-coordinator, cdc-worker and cdc-capture refuse to start:
#      status 2, the message names --worker-secret-file / --http-token-file;
#   b. with --insecure and no secrets they start: a warning naming --insecure in the log,
#      "insecure": true in /status, cdc_insecure 1 in /metrics; their POSTs are open and
#      audited as who="insecure";
#   c. with named tokens (ops:..., ci:...): every POST without a token or with a wrong one
#      is 401 (coordinator /tables and /compact, capture /snapshot and /tables?add=), with
#      one it runs; /status and /metrics stay open (cdc_insecure 0), and --http-token-reads
#      closes them; each POST is one audit line with the token's name, method, path,
#      parameters and status.
set -euo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
: "${CDC_TEST_ETCD:?}" "${CDC_TEST_KAFKA:?}" "${CDC_TEST_PG_DSN:?}" "${CDC_BUILD_DIR:?}"
cd "$(dirname "$0")/../../.."
# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh

dir=$(mktemp -d "$CDC_TEST_TMP/auth.XXXXXX")
job=auth$$
slot=auth_$$
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    psql -X -q -d "$CDC_TEST_PG_DSN" -c "SELECT pg_drop_replication_slot('$slot')
        FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { harness_fail_logs "$dir" "$@"; }

# code <method> <addr> <path> [token]: the HTTP status (000 when nothing answered)
code() {
    local auth=()
    [ -z "${4:-}" ] || auth=(-H "Authorization: Bearer $4")
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X "$1" "${auth[@]}" "http://$2$3" || true
}
body() { curl -s --max-time 3 "http://$1$2" || true; }
up() { [ "$(code GET "$1" /healthz)" = 200 ]; }
# runs "$@" (a command or one of the functions below) without the harness's secrets; only
# in a subshell ($(...) or &), whose environment it changes
bare() {
    unset CDC_WORKER_SECRET_FILE CDC_HTTP_TOKEN_FILE
    "$@"
}
wrap="" # a command the functions below exec their program under (timeout)

coordinator() { # <id> <admin> [extra options...]
    local id=$1 admin=$2
    shift 2
    exec $wrap "$CDC_BUILD_DIR/cdc-coordinator" --id "$id" --job "$job$id" --etcd "$CDC_TEST_ETCD" \
        --listen tcp://127.0.0.1:0 --http "$admin" --warehouse "$dir/warehouse" \
        --expected-workers 1 --orphan-interval 0 "$@"
}
worker() { # <id> <admin> [extra options...]
    local id=$1 admin=$2
    shift 2
    exec $wrap "$CDC_BUILD_DIR/cdc-worker" --id "$id" --job "$job$id" --etcd "$CDC_TEST_ETCD" \
        --kafka "$CDC_TEST_KAFKA" --tables public.auth_t --topic-prefix "$job" \
        --warehouse "$dir/warehouse" --state-dir "$dir/state-$id" --http "$admin" "$@"
}
capture() { # <admin> [extra options...]
    local admin=$1
    shift
    exec $wrap "$CDC_BUILD_DIR/cdc-capture" --pg-dsn "$CDC_TEST_PG_DSN" --kafka "$CDC_TEST_KAFKA" \
        --slot "$slot" --publication "pub_$slot" --create-publication=true \
        --tables public.auth_t --topic-prefix "$job" --http "$admin" "$@"
}
psql -X -q -v ON_ERROR_STOP=1 -d "$CDC_TEST_PG_DSN" \
    -c "CREATE TABLE IF NOT EXISTS public.auth_t (id int PRIMARY KEY, v text)" \
    -c "INSERT INTO public.auth_t VALUES (1, 'a') ON CONFLICT DO NOTHING" >/dev/null

# ---- a. no secrets: each program refuses to start, naming the options -------------------
refused() { # <name> <expected options text> <command...>
    local name=$1 want=$2 out rc
    shift 2
    set +e
    out=$(wrap="timeout 20" bare "$@" 2>&1)
    rc=$?
    set -e
    [ "$rc" = 2 ] || fail "$name without secrets exited with $rc, expected 2: $out"
    grep -q -- "authentication is on by default and $want" <<<"$out" ||
        fail "$name's refusal does not name $want: $out"
    grep -q -- "--insecure" <<<"$out" || fail "$name's refusal does not mention --insecure: $out"
    echo "a. $name refused: $(head -c 160 <<<"$out")..."
}
refused cdc-coordinator "--worker-secret-file and --http-token-file are not set" \
    coordinator a 127.0.0.1:0
refused cdc-worker "--worker-secret-file and --http-token-file are not set" \
    worker a 127.0.0.1:0
refused cdc-capture "--http-token-file is not set" capture 127.0.0.1:0
# a secret alone is not enough for a coordinator with an admin API
refused "cdc-coordinator with only a worker secret" "--http-token-file is not set" \
    env CDC_WORKER_SECRET_FILE="$CDC_WORKER_SECRET_FILE" timeout 20 \
    "$CDC_BUILD_DIR/cdc-coordinator" --job "${job}x" --etcd "$CDC_TEST_ETCD" --warehouse "$dir/warehouse"

# ---- b. --insecure: starts, says so, its POSTs are open and audited ---------------------
ci=127.0.0.1:$(harness_free_port)
wi=127.0.0.1:$(harness_free_port)
bare coordinator ci "$ci" --insecure >"$dir/coordinator-ci.log" 2>&1 &
pids+=($!)
bare worker wi "$wi" --insecure >"$dir/worker-wi.log" 2>&1 &
pids+=($!)
harness_wait_for 30 up "$ci" || fail "the --insecure coordinator did not come up"
harness_wait_for 30 up "$wi" || fail "the --insecure worker did not come up"
for p in "coordinator-ci:$ci" "worker-wi:$wi"; do
    name=${p%%:*} addr=${p#*:}
    grep -q "level=warn.*runs with --insecure, without --worker-secret-file and --http-token-file" \
        "$dir/$name.log" || fail "$name did not log --insecure as a warning"
    harness_wait_for 10 bash -c "curl -s 'http://$addr/status?local=1' | jq -e '.insecure == true' >/dev/null" ||
        fail "$name's /status does not say insecure: $(body "$addr" '/status?local=1' | head -c 300)"
    grep -qx 'cdc_insecure 1' <<<"$(body "$addr" /metrics)" || fail "$name's /metrics lacks cdc_insecure 1"
done
# no token at all: the action runs (400: no table named), audited as who="insecure"
[ "$(code POST "$ci" /compact)" = 400 ] || fail "the --insecure coordinator refused POST /compact"
harness_wait_for 5 grep -q 'audit: who=\\"insecure\\" method=POST path=\\"/compact\\" params=\\"\\" status=400' \
    "$dir/coordinator-ci.log" || fail "no audit line for the --insecure POST /compact"
echo "b. --insecure: started, warned, /status insecure, cdc_insecure 1, POST audited"

# ---- c. named tokens: POSTs need one, reads stay open unless --http-token-reads --------
printf 'ops:ops-t0ken\nci:ci-t0ken\n' >"$dir/tokens"
chmod 600 "$dir/tokens"
ct=127.0.0.1:$(harness_free_port)
cr=127.0.0.1:$(harness_free_port)
pt=127.0.0.1:$(harness_free_port)
coordinator ct "$ct" --http-token-file "$dir/tokens" >"$dir/coordinator-ct.log" 2>&1 &
pids+=($!)
coordinator cr "$cr" --http-token-file "$dir/tokens" --http-token-reads \
    >"$dir/coordinator-cr.log" 2>&1 &
pids+=($!)
capture "$pt" --http-token-file "$dir/tokens" >"$dir/capture.log" 2>&1 &
pids+=($!)
for a in "$ct" "$cr" "$pt"; do
    harness_wait_for 60 up "$a" || fail "$a did not come up"
done

expect() { # <want> <method> <addr> <path> [token]
    local got
    got=$(code "$2" "$3" "$4" "${5:-}")
    [ "$got" = "$1" ] || fail "$2 http://$3$4${5:+ (token $5)} answered $got, expected $1"
}
# mutating: 401 without a token and with a wrong one
for a in "$ct" "$cr"; do
    expect 401 POST "$a" "/tables?add=$job.public.auth_t"
    expect 401 POST "$a" "/compact?table=public.auth_t" wrong-token
done
expect 401 POST "$pt" "/snapshot?table=public.auth_t"
expect 401 POST "$pt" "/tables?add=public.auth_t" ops-t0kenX
# with a named token they run (the coordinator: 404 for a table it does not know; the
# capture's snapshot: whatever the capture answers, 503 while it is not yet streaming)
expect 404 POST "$ct" "/compact?table=public.nope" ci-t0ken
set +e
snap=$(code POST "$pt" "/snapshot?table=public.auth_t" ops-t0ken)
set -e
case "$snap" in 401 | 000) fail "POST /snapshot with the ops token answered $snap" ;; esac
# reads: open by default, closed by --http-token-reads; probes always open
expect 200 GET "$ct" /status
expect 200 GET "$ct" /metrics
grep -qx 'cdc_insecure 0' <<<"$(body "$ct" /metrics)" || fail "the coordinator's /metrics lacks cdc_insecure 0"
[ "$(body "$ct" '/status?local=1' | jq -r .insecure)" = false ] || fail "/status insecure is not false"
expect 401 GET "$cr" /status
expect 401 GET "$cr" /metrics
expect 200 GET "$cr" /status ops-t0ken
expect 200 GET "$cr" /healthz
[ "$(code GET "$cr" /readyz)" != 401 ] || fail "/readyz wants the token" # 503: no worker yet
expect 200 GET "$pt" /status

# the audit lines: who, what, outcome; one per POST
audit() { # <log> <line pattern>
    grep -q "audit: $2" "$dir/$1" || fail "$1 has no audit line $2: $(grep audit: "$dir/$1" || true)"
}
audit coordinator-ct.log "who=\\\\\"-\\\\\" method=POST path=\\\\\"/tables\\\\\" params=\\\\\"add=$job.public.auth_t\\\\\" status=401"
audit coordinator-ct.log "who=\\\\\"-\\\\\" method=POST path=\\\\\"/compact\\\\\" params=\\\\\"table=public.auth_t\\\\\" status=401"
audit coordinator-ct.log "who=\\\\\"ci\\\\\" method=POST path=\\\\\"/compact\\\\\" params=\\\\\"table=public.nope\\\\\" status=404"
audit capture.log "who=\\\\\"-\\\\\" method=POST path=\\\\\"/snapshot\\\\\" params=\\\\\"table=public.auth_t\\\\\" status=401"
audit capture.log "who=\\\\\"-\\\\\" method=POST path=\\\\\"/tables\\\\\" params=\\\\\"add=public.auth_t\\\\\" status=401"
audit capture.log "who=\\\\\"ops\\\\\" method=POST path=\\\\\"/snapshot\\\\\" params=\\\\\"table=public.auth_t\\\\\" status=$snap"
n=$(grep -c "audit: " "$dir/coordinator-ct.log" || true)
[ "$n" = 3 ] || fail "coordinator ct logged $n audit lines for 3 POSTs"
n=$(grep -c "audit: " "$dir/coordinator-cr.log" || true)
[ "$n" = 2 ] || fail "coordinator cr logged $n audit lines for 2 POSTs"
! grep -q "ops-t0ken\|ci-t0ken" "$dir"/*.log || fail "a token appears in a log"
grep -qx 'cdc_http_audited_requests_total 3' <<<"$(body "$ct" /metrics)" ||
    fail "cdc_http_audited_requests_total is not 3: $(body "$ct" /metrics | grep audited)"
echo "c. tokens: POSTs 401 without, audited by name; reads open, closed by --http-token-reads"
echo "auth_default: ok"
