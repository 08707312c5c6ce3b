#!/usr/bin/env bash
# Component test of the harness itself: etcd killed and restarted keeps its data on the
# same port, PostgreSQL stopped and started keeps its data, and the kafka-dev control
# channel answers garbage with ERR and keeps serving. Needs the harness environment.
set -euo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
: "${CDC_TEST_ETCD:?}" "${CDC_TEST_PG_DSN:?}" "${CDC_TEST_KAFKA_CTL:?}" "${CDC_TEST_HARNESS:?}"
H=$CDC_TEST_HARNESS

# shellcheck source=tests/harness/harness.sh
. "$H" # for harness_wait_for (sourcing starts nothing)
wait_for() { harness_wait_for "$@"; }

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

etcd_get() {
    curl -sf --max-time 2 -X POST "$CDC_TEST_ETCD/v3/kv/range" -d '{"key":"aGFybmVzcy1rZXk="}'
}
etcd_down() { ! curl -sf --max-time 1 "$CDC_TEST_ETCD/health" >/dev/null; }

# etcd: write, crash, restart, read back
curl -sf -X POST "$CDC_TEST_ETCD/v3/kv/put" -d '{"key":"aGFybmVzcy1rZXk=","value":"djE="}' \
    >/dev/null || fail "etcd put"
old_pid=$(cat "$CDC_TEST_TMP/etcd.pid")
bash "$H" etcd-stop || fail "etcd-stop"
wait_for 10 etcd_down || fail "etcd still answers after etcd-stop"
! kill -0 "$old_pid" 2>/dev/null || [ "$(ps -o stat= -p "$old_pid" | cut -c1)" = Z ] ||
    fail "etcd process $old_pid survived etcd-stop"
bash "$H" etcd-start || fail "etcd-start"
[ "$(cat "$CDC_TEST_TMP/etcd.pid")" != "$old_pid" ] || fail "etcd pid did not change"
grep -q '"value":"djE="' <<<"$(etcd_get)" || fail "etcd lost its data across a restart"

# PostgreSQL: write, stop, start, read back
psql -q -X "$CDC_TEST_PG_DSN" -c 'CREATE TABLE IF NOT EXISTS harness_probe(v int);
    INSERT INTO harness_probe VALUES (42)' || fail "psql insert"
bash "$H" pg-stop || fail "pg-stop"
! psql -q -X "$CDC_TEST_PG_DSN" -c 'SELECT 1' >/dev/null 2>&1 || fail "postgres still up"
bash "$H" pg-start || fail "pg-start"
[ "$(psql -qtAX "$CDC_TEST_PG_DSN" -c 'SELECT max(v) FROM harness_probe')" = 42 ] ||
    fail "postgres lost its data across a restart"
psql -q -X "$CDC_TEST_PG_DSN" -c 'DROP TABLE harness_probe'

# kafka-dev control channel: garbage gets ERR, the same connection keeps working,
# and a client that vanishes mid-line does not hurt the next one.
ctl=$CDC_TEST_KAFKA_CTL
exec {fd}<>"/dev/tcp/${ctl%:*}/${ctl##*:}"
printf 'PING\n\001\002garbage\nBROKER SIDEWAYS 9\nCREATE bad/topic 3\nERRORS x y z\nPING\n' >&"$fd"
replies=()
for _ in 1 2 3 4 5 6; do
    read -r -t 10 line <&"$fd" || fail "no reply from kafka-dev"
    replies+=("$line")
done
exec {fd}>&-
[ "${replies[0]}" = "OK PONG" ] || fail "first PING: ${replies[0]}"
for i in 1 2 3 4; do
    [[ ${replies[$i]} == ERR* ]] || fail "garbage line $i answered: ${replies[$i]}"
done
[ "${replies[5]}" = "OK PONG" ] || fail "PING after garbage: ${replies[5]}"
exec {fd}<>"/dev/tcp/${ctl%:*}/${ctl##*:}"
printf 'CREATE half-a-li' >&"$fd"
exec {fd}>&-
bash "$H" kafka-ctl PING >/dev/null || fail "kafka-dev stopped serving after a dropped client"
echo "harness_restart: ok"
