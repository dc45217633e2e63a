-- FROZEN: loaded by migration 0008_memberships and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
--
-- Domain memberships. Foreign keys of identity (an earlier domain) to memberships, created here.

-- A session acts as a membership of its own user (user_id pinned on both sides).
ALTER TABLE session_memberships
  ADD CONSTRAINT session_memberships_membership_fkey FOREIGN KEY (membership_id, user_id, tenant_id)
  REFERENCES memberships (id, user_id, tenant_id);

-- ... and for a broker link of that same membership.
ALTER TABLE session_membership_brokers
  ADD CONSTRAINT session_membership_brokers_link_fkey FOREIGN KEY (membership_broker_id, membership_id)
  REFERENCES membership_brokers (id, membership_id);
