-- FROZEN: loaded by migration 0006_brokers and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
--
-- Domain brokers: what drizzle cannot express. btree_gist lets GiST compare the bigint equality
-- columns of the EXCLUDE constraints (here and in teams).
CREATE EXTENSION IF NOT EXISTS btree_gist;

-- No overlapping periods of store codes for the same (tenant, broker, financial institution).
-- Validity is half-open [valid_from, valid_until): the day in valid_until belongs to the next period,
-- so adjacent periods do not overlap; a null valid_until has no defined end.
ALTER TABLE broker_store_codes
  ADD CONSTRAINT broker_store_codes_no_overlap EXCLUDE USING gist (
    tenant_id WITH =,
    broker_id WITH =,
    financial_institution_id WITH =,
    daterange(valid_from, valid_until, '[)') WITH &&
  );
