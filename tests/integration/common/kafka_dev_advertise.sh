#!/usr/bin/env bash
# kafka-dev --advertise-host (the broker of the local compose stack, reached from other
# containers by name): its brokers listen on every interface at --broker-port and the
# ports after it, and advertise host:port in metadata and the BOOTSTRAP line; records
# produced through one broker are consumed through another; BROKER DOWN/UP keeps the
# port; a port in use is refused with a message that names it. Needs the harness
# environment (CDC_TEST_TMP, CDC_BUILD_DIR) and kcat.
set -uo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
: "${CDC_BUILD_DIR:?run through tests/run.sh integration}"
cd "$(dirname "$0")/../../.." || exit 1
# shellcheck source=tests/harness/harness.sh
. tests/harness/harness.sh

dir=$(mktemp -d "$CDC_TEST_TMP/kdadv.XXXXXX")
pid=""
cleanup() {
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    tail -n 20 "$dir/kd.log" >&2 2>/dev/null
    exit 1
}

# three consecutive free ports: try a few bases
for _ in 1 2 3 4 5 6 7 8; do
    base=$(harness_free_port) || fail "no free port"
    listening=$(ss -Htln | awk '{ n = split($4, a, ":"); print a[n] }')
    grep -qxE "$((base + 1))|$((base + 2))" <<<"$listening" || break
done
"$CDC_BUILD_DIR/kafka-dev" --advertise-host=localhost --broker-port="$base" \
    --info-file="$dir/info" >"$dir/kd.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    [ -s "$dir/info" ] && break
    kill -0 "$pid" 2>/dev/null || fail "kafka-dev exited"
    sleep 0.1
done
[ -s "$dir/info" ] || fail "kafka-dev did not write its info file"
want="BOOTSTRAP localhost:$base,localhost:$((base + 1)),localhost:$((base + 2))"
grep -qx "$want" "$dir/info" || fail "info file: want \"$want\", got: $(cat "$dir/info")"

md=$(kcat -L -b "localhost:$((base + 1))" 2>&1) || fail "kcat -L: $md"
for i in 1 2 3; do
    grep -q "broker $i at localhost:$((base + i - 1))" <<<"$md" ||
        fail "metadata does not advertise broker $i at localhost:$((base + i - 1)): $md"
done

printf 'a\nb\nc\n' | kcat -P -b "localhost:$base" -t adv -p 0 || fail "produce"
got=$(kcat -C -b "localhost:$((base + 2))" -t adv -p 0 -o beginning -e -q 2>&1 | tr '\n' ' ')
[ "$got" = "a b c " ] || fail "consumed \"$got\", want \"a b c \""

CDC_TEST_KAFKA_CTL=$(sed -n 's/^CONTROL //p' "$dir/info") harness_kafka_ctl "BROKER DOWN 1" \
    "BROKER UP 1" >/dev/null || fail "BROKER DOWN/UP 1"
md=$(kcat -L -b "localhost:$base" 2>&1) || fail "broker 1 does not answer on port $base after DOWN/UP: $md"

# a port in use is refused, naming it
out=$("$CDC_BUILD_DIR/kafka-dev" --advertise-host=localhost --broker-port="$base" 2>&1)
status=$?
[ "$status" -ne 0 ] || fail "a second kafka-dev on port $base started"
grep -q "cannot listen on port $base" <<<"$out" || fail "no port in the message: $out"
echo "kafka_dev_advertise: ok"
