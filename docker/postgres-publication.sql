-- The publication the capture streams (docker-compose.yml): the capture runs without
-- CDC_TABLES, so its tables are this publication's, and a table added to it (ALTER
-- PUBLICATION cdc_pub ADD TABLE ..., or cdcctl tables add --capture) joins the running
-- pipeline (docs/operations.md, "Changing the tables"). Run once, on a new data volume,
-- after 10-schema.sql.
CREATE PUBLICATION cdc_pub FOR TABLE public.transactions, public.accounts
    WITH (publish_via_partition_root = true);
