-- Demo schema for the load generator, `make run`, docker compose and the chaos suite.
-- Idempotent: run it again on an existing database and nothing changes.
-- Two source tables (public.transactions, public.accounts) and an audit table that a
-- trigger fills in the same transaction as every change, so only committed changes are
-- recorded; the verifier (chaos/verify) trusts it as the independent record of what
-- happened. seq orders the changes of one key in commit order (a second transaction
-- that touches the same key waits for the first one's row lock, then takes a later seq).
CREATE TABLE IF NOT EXISTS public.transactions (
    entity_id  bigint PRIMARY KEY,
    account    text,
    amount     numeric(12, 2),
    status     text,
    note       text,
    updated_at timestamptz
);

CREATE TABLE IF NOT EXISTS public.accounts (
    account_id bigint PRIMARY KEY,
    owner      text,
    balance    numeric(14, 2),
    active     boolean,
    score      double precision,
    visits     integer,
    opened_on  date,
    updated_at timestamptz
);

CREATE SCHEMA IF NOT EXISTS cdc_audit;

CREATE TABLE IF NOT EXISTS cdc_audit.changes (
    seq       bigserial PRIMARY KEY,
    tbl       text     NOT NULL,
    op        char(1)  NOT NULL,      -- c (insert), u (update), d (delete), r (snapshot)
    pk        bigint   NOT NULL,
    txid      bigint   NOT NULL,
    row_image jsonb    NOT NULL,      -- the new row (c, u) or the old row (d)
    -- WAL insert position when the change was made: a little past the change's own LSN,
    -- so the verifier can tell changes the tables have not reached yet from lost ones
    wal_lsn   pg_lsn   DEFAULT pg_current_wal_insert_lsn()
);
ALTER TABLE cdc_audit.changes ADD COLUMN IF NOT EXISTS wal_lsn pg_lsn
    DEFAULT pg_current_wal_insert_lsn();
CREATE INDEX IF NOT EXISTS changes_tbl_pk ON cdc_audit.changes (tbl, pk, seq);

CREATE OR REPLACE FUNCTION cdc_audit.record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    img jsonb;
BEGIN
    IF TG_OP = 'DELETE' THEN
        img := to_jsonb(OLD);
    ELSE
        img := to_jsonb(NEW);
    END IF;
    -- a partition's row counts for its partitioned table, which the pipeline captures
    INSERT INTO cdc_audit.changes (tbl, op, pk, txid, row_image)
    VALUES (coalesce((SELECT c.relname FROM pg_class c WHERE c.oid = pg_partition_root(TG_RELID)),
                     TG_TABLE_NAME),
            CASE TG_OP WHEN 'INSERT' THEN 'c' WHEN 'UPDATE' THEN 'u' ELSE 'd' END,
            (img ->> TG_ARGV[0])::bigint, txid_current(), img);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER transactions_audit AFTER INSERT OR UPDATE OR DELETE ON public.transactions
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('entity_id');

CREATE OR REPLACE TRIGGER accounts_audit AFTER INSERT OR UPDATE OR DELETE ON public.accounts
    FOR EACH ROW EXECUTE FUNCTION cdc_audit.record('account_id');

-- Column names in effect over time, so the verifier can resolve a column of an audit
-- image recorded before a RENAME or a type change by its identity (attnum): after every
-- CREATE/ALTER TABLE, an event trigger records the table's columns with the highest audit
-- seq so far (DDL waits for the table's running changes, so every image with a larger
-- seq follows the new columns). Event triggers need a superuser: without one the history
-- stays empty and the verifier falls back to the names the Iceberg schemas had.
CREATE TABLE IF NOT EXISTS cdc_audit.columns (
    seq     bigint NOT NULL, -- images with seq > this follow these columns
    tbl     text   NOT NULL,
    attnum  int    NOT NULL,
    attname text   NOT NULL
);
CREATE OR REPLACE FUNCTION cdc_audit.record_columns() RETURNS event_trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cdc_audit.columns (seq, tbl, attnum, attname)
    SELECT (SELECT coalesce(max(seq), 0) FROM cdc_audit.changes), c.relname, a.attnum, a.attname
    FROM pg_event_trigger_ddl_commands() d
    JOIN pg_class c ON c.oid = d.objid
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    WHERE d.object_type = 'table' AND c.relnamespace <> 'cdc_audit'::regnamespace;
END
$$;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'cdc_audit_columns') THEN
        CREATE EVENT TRIGGER cdc_audit_columns ON ddl_command_end
            WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE')
            EXECUTE FUNCTION cdc_audit.record_columns();
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'no event trigger (not a superuser): column renames are resolved by Iceberg names';
END
$$;
INSERT INTO cdc_audit.columns (seq, tbl, attnum, attname)
SELECT 0, c.relname, a.attnum, a.attname
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid IN ('public.transactions'::regclass, 'public.accounts'::regclass)
  AND NOT EXISTS (SELECT 1 FROM cdc_audit.columns x WHERE x.tbl = c.relname);
