-- FROZEN: loaded by migration 0011_bank-users and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
--
-- Domain bank-users: transfers and credential deliveries are append-only audit (refuse_audit_change()
-- comes from the authorization domain).
CREATE TRIGGER bank_user_transfers_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON bank_user_transfers
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_change();
CREATE TRIGGER bank_credential_deliveries_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON bank_credential_deliveries
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_change();
