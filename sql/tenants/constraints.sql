-- FROZEN: loaded by migration 0003_tenants and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
--
-- Domain tenants. Foreign keys of earlier domains to tenants (created here, by the later domain).

-- identity: a tenant login identifier belongs to an existing tenant.
ALTER TABLE user_logins
  ADD CONSTRAINT user_logins_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
