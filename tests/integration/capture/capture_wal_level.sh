#!/usr/bin/env bash
# cdc-capture against a throwaway PostgreSQL started with wal_level=replica: it must
# exit with status 1 and a message that names wal_level and gives the fix. Runs under
# tests/run.sh integration (needs CDC_TEST_TMP, CDC_TEST_KAFKA, CDC_BUILD_DIR).
set -uo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
: "${CDC_TEST_KAFKA:?run through tests/run.sh integration}"
: "${CDC_BUILD_DIR:?run through tests/run.sh integration}"
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
dir=$(mktemp -d "$CDC_TEST_TMP/walreplica.XXXXXX")
chmod 755 "$dir"
user=$(cat "$CDC_TEST_TMP/pg.user" 2>/dev/null || id -un)
as_user() {
    if [ "$(id -u)" -eq 0 ] && [ "$user" != root ]; then
        setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@"
    else
        "$@"
    fi
}
[ "$(id -u)" -eq 0 ] && chown "$user" "$dir"
port=$((21000 + RANDOM % 8000))
while grep -q ":$port\$" <<<"$(ss -Htln | awk '{ print $4 }')"; do port=$((port + 1)); done
pgpid=""
cleanup() {
    if [ -n "$pgpid" ]; then
        # SIGINT = fast shutdown; wait reaps it (kill -0 would see the zombie)
        kill -INT "$pgpid" 2>/dev/null
        wait "$pgpid" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
as_user "$PG_BIN/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
    --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; exit 1; }
cmd=("$PG_BIN/postgres" -D "$dir/pg" -p "$port" -c listen_addresses=127.0.0.1
    -c unix_socket_directories= -c wal_level=replica -c fsync=off)
if [ "$(id -u)" -eq 0 ] && [ "$user" != root ]; then
    cmd=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "${cmd[@]}")
fi
# started directly (not through a function) so $! is the postmaster itself
"${cmd[@]}" >"$dir/pg.log" 2>&1 &
pgpid=$!
ok=""
for _ in $(seq 1 600); do
    if "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then ok=1; break; fi
    sleep 0.1
done
[ -n "$ok" ] || { echo "throwaway postgres did not start"; cat "$dir/pg.log"; exit 1; }
dsn="host=127.0.0.1 port=$port user=postgres dbname=postgres"
psql "$dsn" -Xq -c "CREATE TABLE t (id int PRIMARY KEY)" || exit 1
out=$(timeout 60 "$CDC_BUILD_DIR/cdc-capture" --pg-dsn="$dsn" --kafka-bootstrap="$CDC_TEST_KAFKA" \
    --tables=public.t --create-publication --http-addr= --slot=walcheck 2>&1)
status=$?
if [ "$status" -ne 1 ]; then
    echo "expected exit status 1, got $status; output:"
    echo "$out"
    exit 1
fi
for want in 'wal_level "logical"' 'ALTER SYSTEM SET wal_level = logical'; do
    if ! grep -qF "$want" <<<"$out"; then
        echo "message lacks \"$want\"; output:"
        echo "$out"
        exit 1
    fi
done
echo "ok: wal_level=replica refused with the fix"
