-- FROZEN: loaded by migration 0007_authorization and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
--
-- Domain authorization: what drizzle cannot express. The scope ceiling is in scope-ceiling.sql (0012).

-- tenants (an earlier domain): creating a tenant means choosing a blueprint.
ALTER TABLE tenants
  ADD CONSTRAINT tenants_blueprint_fkey FOREIGN KEY (blueprint_id) REFERENCES platform_tenant_blueprints (id);

-- One profile name per tenant and broker, tenant profiles (broker_id null) included: nulls count as equal.
CREATE UNIQUE INDEX access_profiles_name_key ON access_profiles (tenant_id, broker_id, name) NULLS NOT DISTINCT;

-- Audit rows are append-only: UPDATE, DELETE and TRUNCATE are refused, naming the table.
CREATE FUNCTION refuse_audit_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only audit: it accepts INSERT only (% refused)', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'restrict_violation', TABLE = TG_TABLE_NAME,
          HINT = 'Insert a new row instead of changing or removing an existing one.';
END;
$$;

CREATE TRIGGER permission_changes_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON permission_changes
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_change();
CREATE TRIGGER access_profile_template_changes_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON access_profile_template_changes
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_change();
CREATE TRIGGER access_profile_template_change_decisions_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON access_profile_template_change_decisions
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_change();
CREATE TRIGGER platform_invitation_delivery_events_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON platform_invitation_delivery_events
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_change();
