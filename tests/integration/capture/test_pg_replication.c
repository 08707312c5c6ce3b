/*
 * Component test against the harness PostgreSQL: the server runs with wal_level=logical
 * and enough slots and senders, and a libpq replication connection
 * (replication=database) answers IDENTIFY_SYSTEM and can create and drop a logical
 * slot with pgoutput.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "tests/harness/harness.h"

static PGconn *connect_to(const char *extra)
{
    char conninfo[1024];
    PGconn *conn;

    snprintf(conninfo, sizeof(conninfo), "%s %s", cdc_test_require("CDC_TEST_PG_DSN"), extra);
    conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK)
        fail_msg("could not connect to \"%s\": %s", conninfo, PQerrorMessage(conn));
    return conn;
}

static void test_server_settings(void **state)
{
    PGconn *conn = connect_to("");
    PGresult *r;
    (void)state;

    r = PQexec(conn, "SELECT current_setting('wal_level'), "
                     "current_setting('max_replication_slots')::int, "
                     "current_setting('max_wal_senders')::int, "
                     "current_setting('server_version_num')::int, "
                     "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "logical");
    assert_true(atoi(PQgetvalue(r, 0, 1)) >= 10);
    assert_true(atoi(PQgetvalue(r, 0, 2)) >= 10);
    assert_true(atoi(PQgetvalue(r, 0, 3)) >= 150000);
    assert_string_equal(PQgetvalue(r, 0, 4), "t");
    PQclear(r);
    PQfinish(conn);
}

static void test_identify_system(void **state)
{
    PGconn *conn = connect_to("replication=database");
    PGresult *r;
    unsigned hi, lo;
    (void)state;

    r = PQexec(conn, "IDENTIFY_SYSTEM");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("IDENTIFY_SYSTEM failed: %s", PQerrorMessage(conn));
    assert_int_equal(PQntuples(r), 1);
    assert_int_equal(PQnfields(r), 4);
    assert_string_equal(PQfname(r, 0), "systemid");
    assert_true(strlen(PQgetvalue(r, 0, 0)) > 0);
    assert_string_equal(PQgetvalue(r, 0, 1), "1"); /* timeline */
    assert_int_equal(sscanf(PQgetvalue(r, 0, 2), "%X/%X", &hi, &lo), 2);
    assert_string_equal(PQgetvalue(r, 0, 3), "postgres"); /* dbname */
    PQclear(r);

    /* a logical slot with pgoutput can be created and dropped on this connection */
    r = PQexec(conn, "CREATE_REPLICATION_SLOT cdc_harness_probe TEMPORARY LOGICAL pgoutput");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("CREATE_REPLICATION_SLOT failed: %s", PQerrorMessage(conn));
    assert_string_equal(PQgetvalue(r, 0, 0), "cdc_harness_probe");
    PQclear(r);
    PQfinish(conn); /* TEMPORARY: dropped with the session */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_settings),
        cmocka_unit_test(test_identify_system),
    };
    cdc_test_require("CDC_TEST_PG_DSN");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
