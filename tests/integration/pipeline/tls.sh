#!/usr/bin/env bash
# TLS on every channel the pipeline owns (issue 37; docs/security.md, "TLS"), end to end:
# certificates made here with tools/certs.sh (openssl): a CA with one certificate for the
# processes, and a second CA with its own for the negative cases. An etcd with TLS and
# --client-cert-auth, a capture, two coordinators (tls+tcp:// listeners, mutual TLS) and
# two workers, every admin server https with mutual TLS:
#   - the pipeline commits under load and chaos/verify finds the mirror and the changelog
#     equal to the source;
#   - NNG: the listener's handshake fails without a client certificate and with one of
#     the other CA (openssl s_client), and a worker that dials it over plain tcp:// or
#     with the other CA's certificate never registers while the job commits on;
#   - HTTP: plain http://, https without a client certificate and with the other CA's are
#     refused; the standby forwards /status to the leader over https; cdcctl speaks https;
#   - etcd: plain http:// and the other CA's certificate are refused; cdcctl reads the
#     leader record with the CA and the certificate;
#   - rotation: new certificates written over the files are picked up (logged, counted in
#     cdc_tls_reloads_total) and served on new connections, NNG and HTTP, with no restart,
#     and SIGHUP makes a worker reload too.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/tls CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_WORKERS=2 CHAOS_COORDINATORS=2 CHAOS_CAPTURES=1
export CDC_HARNESS_SERVICES="pg kafka" # etcd: the one with TLS started below
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap '[ -n "${KEEP_TLS_TMP:-}" ] || { pipeline_down purge >/dev/null 2>&1; rm -rf "$tmp"; }; [ -z "${KEEP_TLS_TMP:-}" ] || pipeline_down >/dev/null 2>&1' EXIT

fail() {
    tail -n 20 "$CHAOS_DIR"/procs/coordinator-*.log "$CHAOS_DIR"/procs/worker-*.log \
        "$CHAOS_DIR"/procs/etcd.log >&2 2>/dev/null
    echo "tls: $1" >&2
    exit 1
}
certs=$tmp/certs other=$tmp/other
tools/certs.sh "$certs" >/dev/null || fail "tools/certs.sh failed"
tools/certs.sh "$other" >/dev/null || fail "tools/certs.sh failed (other CA)"

pipeline_servers_up

# etcd with TLS, client certificates required
export CHAOS_TLS_DIR=$certs
pipeline_etcd_tls_up
eport=${CDC_TEST_ETCD##*:}
good=(--cacert "$certs/ca.crt" --cert "$certs/node.crt" --key "$certs/node.key")
pipeline_procs_up

"$CHAOS_BUILD/loadgen" --pg-dsn "$PIPELINE_PG_DSN" --create-schema=false --rate 200 \
    --duration 20s --seed 37 --report-interval 0 >>"$CHAOS_DIR/procs/loadgen.log" 2>&1 &
load_pid=$!

leader=""
for t in coordinator-0 coordinator-1; do
    s=$(chaos_curl -fsS --max-time 2 "$(cat "$CHAOS_DIR/procs/$t.http")/status?local=1") ||
        fail "$t's /status over https with the certificates failed"
    [ "$(jq -r .is_leader <<<"$s")" = true ] && leader=$t || standby=$t
done
[ -n "$leader" ] && [ -n "${standby:-}" ] || fail "no leader and standby among the coordinators"
lhttp=$(cat "$CHAOS_DIR/procs/$leader.http")
lport=$(grep -o 'tls+tcp://127.0.0.1:[0-9]*' "$CHAOS_DIR/procs/$leader.cmd" | head -n1 | sed 's/.*://')
[ -n "$lport" ] || fail "no tls+tcp:// listener in $leader's command"

# ---- HTTP ---------------------------------------------------------------------------
curl -fsS --max-time 3 -o /dev/null "http://$lhttp/healthz" 2>/dev/null &&
    fail "plain http:// to the admin server was answered"
curl -fsS --max-time 3 -o /dev/null --cacert "$certs/ca.crt" "https://$lhttp/healthz" 2>/dev/null &&
    fail "https without a client certificate was answered (--http-tls=mutual)"
curl -fsS --max-time 3 -o /dev/null --cacert "$certs/ca.crt" --cert "$other/node.crt" \
    --key "$other/node.key" "https://$lhttp/healthz" 2>/dev/null &&
    fail "a client certificate of another CA was accepted by the admin server"
curl -fsS --max-time 3 -o /dev/null --cacert "$other/ca.crt" "${good[@]:2}" \
    "https://$lhttp/healthz" 2>/dev/null &&
    fail "curl trusted the admin server's certificate with another CA"
s=$(chaos_curl -fsS --max-time 5 "$(cat "$CHAOS_DIR/procs/$standby.http")/status") ||
    fail "the standby's /status over https failed"
[ "$(jq -r .is_leader <<<"$s")" = true ] && [ "$(jq -r '.forward_error // ""' <<<"$s")" = "" ] ||
    fail "the standby did not forward /status to the leader over https: $(jq -c '{is_leader, forward_error}' <<<"$s")"
etcd_tls=(--etcd-ca-file "$certs/ca.crt" --etcd-cert-file "$certs/node.crt" --etcd-key-file "$certs/node.key")
ctl=("$CHAOS_BUILD/cdcctl" --job "$CDC_JOB" --etcd "$CDC_TEST_ETCD" "${etcd_tls[@]}" --http-tls mutual)
"${ctl[@]}" --tls-ca-file "$certs/ca.crt" --tls-cert-file "$certs/node.crt" \
    --tls-key-file "$certs/node.key" status >"$tmp/ctl.out" 2>&1 ||
    fail "cdcctl status over https failed: $(cat "$tmp/ctl.out")"
"${ctl[@]}" --tls-ca-file "$certs/ca.crt" --tls-cert-file "$certs/node.crt" \
    --tls-key-file "$certs/node.key" --tls-server-name localhost status >/dev/null 2>&1 ||
    fail "cdcctl --tls-server-name=localhost (a name of the certificate) failed"
"${ctl[@]}" --tls-ca-file "$certs/ca.crt" --tls-cert-file "$certs/node.crt" \
    --tls-key-file "$certs/node.key" --tls-server-name cdc-coordinator.example status \
    >/dev/null 2>&1 && fail "cdcctl accepted a server certificate without the expected name"
"${ctl[@]}" --tls-ca-file "$certs/ca.crt" --tls-cert-file "$other/node.crt" \
    --tls-key-file "$other/node.key" status >"$tmp/ctl-other.out" 2>&1 &&
    fail "cdcctl with another CA's certificate was answered"

# ---- etcd ---------------------------------------------------------------------------
curl -fsS --max-time 3 -o /dev/null "http://127.0.0.1:$eport/health" 2>/dev/null &&
    fail "etcd answered plain http://"
curl -fsS --max-time 3 -o /dev/null --cacert "$certs/ca.crt" --cert "$other/node.crt" \
    --key "$other/node.key" -X POST -d '{"key":"Lw=="}' "$CDC_TEST_ETCD/v3/kv/range" 2>/dev/null &&
    fail "etcd accepted a client certificate of another CA"
ctl=("$CHAOS_BUILD/cdcctl" --job "$CDC_JOB" --etcd "$CDC_TEST_ETCD" --etcd-ca-file "$certs/ca.crt")
"${ctl[@]}" "${etcd_tls[@]:2}" leader >"$tmp/leader.out" 2>&1 || fail "cdcctl leader through etcd's TLS failed: $(cat "$tmp/leader.out")"
grep -q "tls+tcp://" "$tmp/leader.out" || fail "the leader record names no tls+tcp:// endpoint: $(cat "$tmp/leader.out")"
"${ctl[@]}" --etcd-cert-file "$other/node.crt" --etcd-key-file "$other/node.key" leader \
    >/dev/null 2>&1 && fail "cdcctl read etcd with another CA's certificate"

# ---- NNG ----------------------------------------------------------------------------
handshake() { # <extra s_client args...>: whether a TLS session with the NNG listener is set up
    timeout 10 openssl s_client -connect "127.0.0.1:$lport" -CAfile "$certs/ca.crt" \
        -verify_return_error "$@" </dev/null >"$tmp/s_client.out" 2>&1
    grep -aq "Verify return code: 0" "$tmp/s_client.out" &&
        grep -aq "Cipher is ECDHE\|Cipher is DHE\|Cipher is AES" "$tmp/s_client.out" &&
        ! grep -aqi "alert\|:error:" "$tmp/s_client.out"
}
handshake -cert "$certs/node.crt" -key "$certs/node.key" ||
    fail "a TLS handshake with the NNG listener and the right certificates failed: $(tail -5 "$tmp/s_client.out")"
handshake && fail "the NNG listener accepted a connection without a client certificate"
handshake -cert "$other/node.crt" -key "$other/node.key" &&
    fail "the NNG listener accepted a client certificate of another CA"
# workers that dial over plain tcp:// and with the other CA's certificate
for bad in plain other; do
    args=(--coordinator "tls+tcp://127.0.0.1:$lport" --tls-ca-file "$other/ca.crt"
        --tls-cert-file "$other/node.crt" --tls-key-file "$other/node.key")
    [ "$bad" = other ] || args=(--coordinator "tcp://127.0.0.1:$lport")
    mkdir -p "$CHAOS_DIR/state/$bad"
    proc_start "worker-$bad" "$CHAOS_BUILD/cdc-worker" --id "$bad" --job "$CDC_JOB" \
        --kafka "$CDC_TEST_KAFKA" --tables "$CHAOS_TABLES" --warehouse "$CHAOS_DIR/warehouse" \
        --state-dir "$CHAOS_DIR/state/$bad" --http 127.0.0.1:0 "${args[@]}"
done
chaos_wait 30 "the rogue workers to dial" bash -c "grep -q 'dialing coordinator' '$CHAOS_DIR/procs/worker-plain.log' &&
    grep -q 'dialing coordinator' '$CHAOS_DIR/procs/worker-other.log'" || fail "the rogue workers did not start"
e0=$(pipeline_committed)
pipeline_wait_recovered $((e0 + 3)) 60 || fail "the job stopped committing"
s=$(chaos_status) || fail "no /status"
jq -e '[.workers[] | select(.id == "plain" or .id == "other")] | length == 0' <<<"$s" >/dev/null ||
    fail "a worker without the pipeline's certificates registered: $(jq -c '[.workers[].id]' <<<"$s")"
proc_signal worker-plain KILL
proc_signal worker-other KILL
rm -f "$CHAOS_DIR/procs/worker-plain.pid" "$CHAOS_DIR/procs/worker-other.pid"

# ---- rotation -----------------------------------------------------------------------
serial() { openssl x509 -noout -serial -in "$1" | cut -d= -f2; }
served() { # <port> <extra>: the serial of the certificate served on port
    timeout 10 openssl s_client -connect "127.0.0.1:$1" -CAfile "$certs/ca.crt" \
        -cert "$certs/node.crt" -key "$certs/node.key" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}
old=$(serial "$certs/node.crt")
[ "$(served "$lport")" = "$old" ] || fail "the NNG listener does not serve node.crt"
tools/certs.sh "$certs" >/dev/null || fail "tools/certs.sh (renewal) failed"
new=$(serial "$certs/node.crt")
[ "$new" != "$old" ] || fail "the renewal made the same certificate"
chaos_wait 30 "the leader to reload the renewed certificates" \
    bash -c "grep -q 'tls: reloaded' '$CHAOS_DIR/procs/$leader.log'" || fail "the leader did not reload"
# NNG arms each accept with the certificates of its time: the connection accepted next may
# still get the old ones, the one after it the new (docs/security.md, "Rotation")
serves_new() { for _ in 1 2 3; do [ "$(served "$1")" = "$new" ] && return 0; done; return 1; }
serves_new "$lport" || fail "the NNG listener still serves the old certificate"
hport=${lhttp##*:}
serves_new "$hport" || fail "the admin server still serves the old certificate"
m=$(chaos_curl -fsS --max-time 3 "$lhttp/metrics") || fail "no /metrics"
grep -q 'cdc_tls_reloads_total{result="ok"} [1-9]' <<<"$m" ||
    fail "cdc_tls_reloads_total{result=\"ok\"} did not count the reload"
n=$(grep -c 'tls: reloaded' "$CHAOS_DIR/procs/worker-0.log")
proc_signal worker-0 HUP
chaos_wait 10 "worker-0 to reload on SIGHUP" \
    bash -c "[ \$(grep -c 'tls: reloaded.*SIGHUP' '$CHAOS_DIR/procs/worker-0.log') -ge 1 ]" ||
    fail "worker-0 did not reload on SIGHUP (reloads before: $n)"
# a new link with the new certificates: the workers reconnect after their leader's pipe drops
e1=$(pipeline_committed)
pipeline_wait_recovered "$e1" 60 || fail "the job stopped committing after the rotation"

wait "$load_pid" || fail "the load failed (see $CHAOS_DIR/procs/loadgen.log)"
pipeline_verify --wait 90 >"$tmp/verify.log" 2>&1 || {
    tail -n 30 "$tmp/verify.log" >&2
    fail "the mirror differs from the source"
}
echo "tls: NNG, HTTP and etcd with mutual TLS; plain and foreign-CA clients refused; rotation without restart; mirror verified"
