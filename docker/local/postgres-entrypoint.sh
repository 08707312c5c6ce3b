#!/bin/sh
# Entrypoint of the local PostgreSQL 15 image (docker/local/Dockerfile, target postgres),
# built from Debian's postgresql-15 where no image registry is reachable (make
# compose-test). It has the interface of the postgres image docker/docker-compose.yml
# names, as far as the compose file uses it: on the first start POSTGRES_USER (a
# superuser, password POSTGRES_PASSWORD) and POSTGRES_DB are created and the
# /docker-entrypoint-initdb.d/*.sql files run once; `postgres [-c name=value]...` then runs
# the server as user postgres, listening on every interface (password auth over TCP).
set -eu
PGBIN=/usr/lib/postgresql/15/bin
PGDATA=${PGDATA:-/var/lib/postgresql/data}
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }
log() { echo "postgres-entrypoint: $*" >&2; }

if [ "${1:-}" != postgres ]; then
    exec "$@"
fi
shift
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        log "POSTGRES_PASSWORD is required to initialise $PGDATA"
        exit 1
    fi
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    chown postgres "$pwfile"
    as_postgres "$PGBIN/initdb" -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 \
        --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    {
        echo "host all all all scram-sha-256"
        echo "host replication all all scram-sha-256"
    } >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    # initialise over the socket only: nobody connects before it is done
    as_postgres "$PGBIN/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w -s start
    if [ "$db" != postgres ]; then
        as_postgres "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$user" -d postgres \
            -c "CREATE DATABASE \"$db\""
    fi
    for f in /docker-entrypoint-initdb.d/*.sql; do
        [ -e "$f" ] || continue
        log "running $f"
        as_postgres "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$user" -d "$db" -f "$f" >/dev/null
    done
    as_postgres "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w -s stop
    log "initialised $PGDATA (user $user, database $db)"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$PGBIN/postgres" -D "$PGDATA" "$@"
