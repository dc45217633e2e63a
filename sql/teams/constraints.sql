-- FROZEN: loaded by migration 0009_teams and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
--
-- Domain teams: the EXCLUDE constraints (GiST over the equality columns plus the half-open daterange
-- [valid_from, valid_until); btree_gist was enabled by the brokers domain). Adjacent periods are allowed.

ALTER TABLE membership_teams
  ADD CONSTRAINT membership_team_no_overlap EXCLUDE USING gist (
    team_id WITH =,
    membership_id WITH =,
    daterange(valid_from, valid_until, '[)') WITH &&
  );

ALTER TABLE team_financial_institution_accounts
  ADD CONSTRAINT team_fi_service_no_overlap EXCLUDE USING gist (
    team_id WITH =,
    financial_institution_account_id WITH =,
    daterange(valid_from, valid_until, '[)') WITH &&
  );

-- The same edge (subordinate, superior) never twice at once. Cycles are not prevented (not implemented).
ALTER TABLE team_hierarchies
  ADD CONSTRAINT team_hierarchy_edge_no_overlap EXCLUDE USING gist (
    subordinate_team_id WITH =,
    superior_team_id WITH =,
    daterange(valid_from, valid_until, '[)') WITH &&
  );
