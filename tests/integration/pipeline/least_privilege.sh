#!/usr/bin/env bash
# The capture as a least-privilege PostgreSQL role (docs/security.md, "PostgreSQL: a
# least-privilege role"), end to end on the local pipeline:
#   a. the owner (the harness's superuser) creates the demo tables and the publication
#      cdc_pub; the role cdc_capture gets LOGIN REPLICATION, USAGE on the schema and SELECT on
#      the captured tables, nothing else (no superuser, no table or publication it owns, no
#      CREATE anywhere);
#   b. the pipeline runs with the capture connected as cdc_capture (pg_stat_replication
#      names it): the initial snapshot of LP_ROWS rows per table and a load of changes
#      written by the owner; the capture logs no permission error;
#   c. chaos/verify (icebird + DuckDB): mirror == source and the changelog against the audit
#      record.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/lp CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.transactions,public.accounts CHAOS_CAPTURES=1 CHAOS_WORKERS=2
export CHAOS_COORDINATORS=1 CHAOS_INITIAL_ROWS=${LP_ROWS:-2000}
# no --tables on the capture: the owner's publication cdc_pub is the capture set
export CHAOS_CAPTURE_TABLES=
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap '[ -z "${KEEP:-}" ] || cp -r "$CHAOS_DIR/procs" "$tmp.procs" 2>/dev/null
      pipeline_down purge >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

fail() {
    echo "least_privilege: $*" >&2
    [ -e "$CHAOS_DIR/procs/capture-0.log" ] &&
        grep -E "level=(warn|error)" "$CHAOS_DIR/procs/capture-0.log" | tail -n 20 >&2
    exit 1
}

# ---- a. the owner's schema and publication; the role and its grants ---------------------
pipeline_servers_up # as the superuser: the demo schema and CREATE PUBLICATION cdc_pub
owner_dsn=$PIPELINE_PG_DSN
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$owner_dsn" "$@"; }
# the statements of docs/security.md (the password: the test's own)
sql <<'SQL' || fail "could not create the role"
CREATE ROLE cdc_capture WITH LOGIN REPLICATION PASSWORD 'lp-test-password';
GRANT USAGE ON SCHEMA public TO cdc_capture;
GRANT SELECT ON public.transactions, public.accounts TO cdc_capture;
SQL
# nothing more than that
[ "$(sql -c "SELECT rolsuper OR rolcreatedb OR rolcreaterole OR rolbypassrls FROM pg_roles
             WHERE rolname = 'cdc_capture'")" = f ] || fail "cdc_capture has more than REPLICATION"
[ "$(sql -c "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
             WHERE r.rolname = 'cdc_capture'")" = 0 ] || fail "cdc_capture owns a relation"
[ "$(sql -c "SELECT count(*) FROM pg_publication p JOIN pg_roles r ON r.oid = p.pubowner
             WHERE r.rolname = 'cdc_capture'")" = 0 ] || fail "cdc_capture owns a publication"
[ "$(sql -c "SELECT has_schema_privilege('cdc_capture', 'public', 'CREATE')
             OR has_database_privilege('cdc_capture', current_database(), 'CREATE')
             OR has_table_privilege('cdc_capture', 'public.transactions', 'INSERT,UPDATE,DELETE,TRUNCATE')")" = f ] ||
    fail "cdc_capture may create or write"

# ---- b. the pipeline, the capture as cdc_capture ----------------------------------------
PIPELINE_PG_DSN="$owner_dsn user=cdc_capture password=lp-test-password"
pipeline_procs_up
PIPELINE_PG_DSN=$owner_dsn
replicating() {
    [ "$(sql -c "SELECT string_agg(usename, ',') FROM pg_stat_replication")" = cdc_capture ]
}
chaos_wait 30 "the capture to stream as cdc_capture" replicating ||
    fail "pg_stat_replication does not show cdc_capture alone: $(sql -c 'SELECT usename FROM pg_stat_replication')"
"$CHAOS_BUILD/loadgen" --pg-dsn "$owner_dsn" --create-schema=false --rate 200 --duration 8s \
    --report-interval 0 >"$tmp/load.log" 2>&1 || fail "the load failed: $(tail -n 5 "$tmp/load.log")"
if grep -E "permission denied|must be (owner|superuser)" "$CHAOS_DIR/procs/capture-0.log"; then
    fail "the capture met a permission error"
fi

# ---- c. mirror == source --------------------------------------------------------------
pipeline_verify --wait 120 || fail "chaos/verify found a difference"
replicating || fail "the capture no longer streams as cdc_capture"
echo "least_privilege: ok (capture as cdc_capture: REPLICATION, USAGE, SELECT)"
