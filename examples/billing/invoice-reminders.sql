-- The table of the billing example: one row per reminder billing.send_invoice_reminder recorded, stamped
-- by billing.email_invoice_reminder once the e-mail went out.
--
-- In a project this is a migration: a drizzle table in src/db/schema/billing.ts and
-- `npm run migrations:create -- billing`, or this SQL as a frozen file loaded by a `--custom` migration
-- (docs/database.md). The example keeps it out of the project's migration set on purpose: every
-- database the project deploys, and the tests that count its tables, would gain a table no product
-- uses. The example's tests apply this file to their own database instead (see their beforeAll).
CREATE TABLE invoice_reminders (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id bigint NOT NULL REFERENCES tenants (id),
  invoice_id text NOT NULL,
  email text NOT NULL,
  amount_cents bigint NOT NULL,
  due_on date NOT NULL,
  -- The run that recorded it: a handler keys what it writes by run.runId.
  run_id uuid NOT NULL UNIQUE,
  reminded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  emailed_at timestamptz
);
CREATE INDEX invoice_reminders_invoice ON invoice_reminders (tenant_id, invoice_id);
