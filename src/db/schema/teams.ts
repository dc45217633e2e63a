// Domain `teams` (migration 0009_teams): teams of a tenant, who is in them, how they nest and which
// institution accounts serve them, each dated by a half-open [valid_from, valid_until) period. The four
// EXCLUDE constraints live in constraints.sql. Not covered by the database: that portfolios and edges
// stay within the validity of the membership_teams they depend on, and cycles in hierarchies.
import { sql } from 'drizzle-orm';
import { check, pgTable, text, unique } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, day, fk, identityId, instant } from '../columns.ts';
import { users } from './identity.ts';
import { financialInstitutionAccounts } from './institutions.ts';
import { memberships } from './memberships.ts';
import { tenants } from './tenants.ts';

export const teams = pgTable(
  'teams',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    name: text('name').notNull(),
    createdByUserId: bigintRef('created_by_user_id'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('teams_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('teams_created_by_fkey', [t.createdByUserId], [users.id]),
    unique('teams_uid_key').on(t.uid),
    unique('teams_tenant_id_name_key').on(t.tenantId, t.name),
    unique('teams_id_tenant_id_key').on(t.id, t.tenantId),
  ],
);

/** A membership in a team, for a period (membership_team_no_overlap). */
export const membershipTeams = pgTable(
  'membership_teams',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    teamId: bigintRef('team_id').notNull(),
    membershipId: bigintRef('membership_id').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    createdByUserId: bigintRef('created_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('membership_teams_team_fkey', [t.teamId, t.tenantId], [teams.id, teams.tenantId]),
    fk('membership_teams_membership_fkey', [t.membershipId, t.tenantId], [memberships.id, memberships.tenantId]),
    fk('membership_teams_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('membership_teams_ended_by_fkey', [t.endedByUserId], [users.id]),
    check('membership_teams_period_check', sql`valid_until IS NULL OR valid_until > valid_from`),
  ],
);

/** A subordinate team under a superior team, for a period (team_hierarchy_edge_no_overlap). */
export const teamHierarchies = pgTable(
  'team_hierarchies',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    subordinateTeamId: bigintRef('subordinate_team_id').notNull(),
    superiorTeamId: bigintRef('superior_team_id').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    createdByUserId: bigintRef('created_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('team_hierarchies_subordinate_fkey', [t.subordinateTeamId, t.tenantId], [teams.id, teams.tenantId]),
    fk('team_hierarchies_superior_fkey', [t.superiorTeamId, t.tenantId], [teams.id, teams.tenantId]),
    fk('team_hierarchies_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('team_hierarchies_ended_by_fkey', [t.endedByUserId], [users.id]),
    check('team_hierarchies_period_check', sql`valid_until IS NULL OR valid_until > valid_from`),
  ],
);

/** An institution account (company id by institution) serving a team, for a period (team_fi_service_no_overlap). */
export const teamFinancialInstitutionAccounts = pgTable(
  'team_financial_institution_accounts',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    teamId: bigintRef('team_id').notNull(),
    financialInstitutionAccountId: bigintRef('financial_institution_account_id').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    createdByUserId: bigintRef('created_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('team_financial_institution_accounts_team_fkey', [t.teamId, t.tenantId], [teams.id, teams.tenantId]),
    fk(
      'team_financial_institution_accounts_account_fkey',
      [t.financialInstitutionAccountId, t.tenantId],
      [financialInstitutionAccounts.id, financialInstitutionAccounts.tenantId],
    ),
    fk('team_financial_institution_accounts_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('team_financial_institution_accounts_ended_by_fkey', [t.endedByUserId], [users.id]),
    check('team_financial_institution_accounts_period_check', sql`valid_until IS NULL OR valid_until > valid_from`),
  ],
);
