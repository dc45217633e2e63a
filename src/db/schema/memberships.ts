// Domain `memberships` (migration 0008_memberships): a user's membership of a tenant, the brokers it
// acts for, its access profiles, the broker portfolios it holds (and their transfers) and the brokers'
// prospects. constraints.sql also creates identity's references to memberships and membership_brokers.
import { sql } from 'drizzle-orm';
import { check, pgTable, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, day, fk, identityId, instant } from '../columns.ts';
import { accessProfiles } from './authorization.ts';
import { tenantBrokers } from './brokers.ts';
import { users } from './identity.ts';
import { parties } from './parties.ts';
import { tenants } from './tenants.ts';

/** A user's membership of a tenant: one active per (tenant, user); a removed user may return. */
export const memberships = pgTable(
  'memberships',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    userId: bigintRef('user_id').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
    createdByUserId: bigintRef('created_by_user_id'),
    removedAt: instant('removed_at'),
    removedByUserId: bigintRef('removed_by_user_id'),
  },
  (t) => [
    fk('memberships_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('memberships_user_fkey', [t.userId], [users.id]),
    fk('memberships_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('memberships_removed_by_fkey', [t.removedByUserId], [users.id]),
    unique('memberships_uid_key').on(t.uid),
    unique('memberships_id_tenant_id_key').on(t.id, t.tenantId),
    // Target of (membership_id, user_id, tenant_id) references (runs' actors, broker links, sessions).
    unique('memberships_id_user_id_tenant_id_key').on(t.id, t.userId, t.tenantId),
    uniqueIndex('memberships_live_key').on(t.tenantId, t.userId).where(sql`removed_at IS NULL`),
  ],
);

/** A membership acting for a broker of the tenant: one open link per (membership, broker). */
export const membershipBrokers = pgTable(
  'membership_brokers',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    membershipId: bigintRef('membership_id').notNull(),
    /** Copied from the membership and pinned by the composite reference. */
    userId: bigintRef('user_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    role: text('role').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    createdByUserId: bigintRef('created_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk(
      'membership_brokers_membership_fkey',
      [t.membershipId, t.userId, t.tenantId],
      [memberships.id, memberships.userId, memberships.tenantId],
    ),
    fk('membership_brokers_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk('membership_brokers_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('membership_brokers_ended_by_fkey', [t.endedByUserId], [users.id]),
    check('membership_brokers_role_check', sql`role IN ('master', 'member')`),
    unique('membership_brokers_id_membership_id_key').on(t.id, t.membershipId),
    unique('membership_brokers_id_tenant_broker_user_key').on(t.id, t.tenantId, t.brokerId, t.userId),
    uniqueIndex('membership_brokers_live_key').on(t.membershipId, t.brokerId).where(sql`valid_until IS NULL`),
  ],
);

/**
 * An access profile held by a membership, at tenant level (no broker) or for one broker. The generated
 * `profile_scope` must equal the profile's generated `scope`: a tenant-level link needs a tenant
 * profile, a broker link a broker profile, and that of the same broker.
 */
export const membershipAccessProfiles = pgTable(
  'membership_access_profiles',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    membershipId: bigintRef('membership_id').notNull(),
    brokerId: bigintRef('broker_id'),
    accessProfileId: bigintRef('access_profile_id').notNull(),
    profileScope: text('profile_scope')
      .notNull()
      .generatedAlwaysAs(sql`CASE WHEN broker_id IS NULL THEN 'tenant' ELSE 'broker' END`),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    grantedByUserId: bigintRef('granted_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('membership_access_profiles_membership_fkey', [t.membershipId, t.tenantId], [memberships.id, memberships.tenantId]),
    // Same tenant by construction (R-DB-15); the two references below refine it by scope and broker.
    fk(
      'membership_access_profiles_profile_fkey',
      [t.accessProfileId, t.tenantId],
      [accessProfiles.id, accessProfiles.tenantId],
    ),
    fk(
      'membership_access_profiles_profile_scope_fkey',
      [t.accessProfileId, t.tenantId, t.profileScope],
      [accessProfiles.id, accessProfiles.tenantId, accessProfiles.scope],
    ),
    fk(
      'membership_access_profiles_profile_broker_fkey',
      [t.accessProfileId, t.tenantId, t.brokerId],
      [accessProfiles.id, accessProfiles.tenantId, accessProfiles.brokerId],
    ),
    fk('membership_access_profiles_granted_by_fkey', [t.grantedByUserId], [users.id]),
    fk('membership_access_profiles_ended_by_fkey', [t.endedByUserId], [users.id]),
    uniqueIndex('membership_access_profiles_open_key')
      .on(t.membershipId, t.accessProfileId)
      .where(sql`valid_until IS NULL`),
  ],
);

/** The membership holding a broker's portfolio: one open per (tenant, broker). */
export const membershipPortfolios = pgTable(
  'membership_portfolios',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    membershipId: bigintRef('membership_id').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    assignedByUserId: bigintRef('assigned_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('membership_portfolios_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk('membership_portfolios_membership_fkey', [t.membershipId, t.tenantId], [memberships.id, memberships.tenantId]),
    fk('membership_portfolios_assigned_by_fkey', [t.assignedByUserId], [users.id]),
    fk('membership_portfolios_ended_by_fkey', [t.endedByUserId], [users.id]),
    check('membership_portfolios_period_check', sql`valid_until IS NULL OR valid_until > valid_from`),
    unique('membership_portfolios_id_tenant_broker_key').on(t.id, t.tenantId, t.brokerId),
    uniqueIndex('membership_portfolios_open_key').on(t.tenantId, t.brokerId).where(sql`valid_until IS NULL`),
  ],
);

/**
 * A portfolio moving from one membership to another: the origin closes and the destination opens on
 * `effective_on` (application rule). `uid` is unique per tenant.
 */
export const portfolioTransfers = pgTable(
  'portfolio_transfers',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    fromPortfolioId: bigintRef('from_portfolio_id').notNull(),
    toPortfolioId: bigintRef('to_portfolio_id').notNull(),
    effectiveOn: day('effective_on').notNull(),
    actorUserId: bigintRef('actor_user_id').notNull(),
    /** The actor's membership in this tenant (null for a platform operator acting in a session context). */
    actorMembershipId: bigintRef('actor_membership_id'),
    reason: text('reason').notNull(),
    recordedAt: clockInstant('recorded_at'),
  },
  (t) => [
    fk(
      'portfolio_transfers_from_fkey',
      [t.fromPortfolioId, t.tenantId, t.brokerId],
      [membershipPortfolios.id, membershipPortfolios.tenantId, membershipPortfolios.brokerId],
    ),
    fk(
      'portfolio_transfers_to_fkey',
      [t.toPortfolioId, t.tenantId, t.brokerId],
      [membershipPortfolios.id, membershipPortfolios.tenantId, membershipPortfolios.brokerId],
    ),
    fk('portfolio_transfers_actor_fkey', [t.actorUserId], [users.id]),
    fk(
      'portfolio_transfers_actor_membership_fkey',
      [t.actorMembershipId, t.actorUserId, t.tenantId],
      [memberships.id, memberships.userId, memberships.tenantId],
    ),
    unique('portfolio_transfers_tenant_id_uid_key').on(t.tenantId, t.uid),
    unique('portfolio_transfers_from_portfolio_id_key').on(t.fromPortfolioId),
    unique('portfolio_transfers_to_portfolio_id_key').on(t.toPortfolioId),
  ],
);

/** A broker's prospective client (lead), optionally followed by a membership. */
export const brokerProspects = pgTable(
  'broker_prospects',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    /** Set once the prospect is identified as a party. */
    partyId: bigintRef('party_id'),
    name: text('name').notNull(),
    taxId: text('tax_id'),
    email: text('email'),
    phone: text('phone'),
    /** Free text lifecycle (e.g. `open`, `converted`, `discarded`); not checked by the database. */
    status: text('status').notNull().default('open'),
    ownerMembershipId: bigintRef('owner_membership_id'),
    createdByUserId: bigintRef('created_by_user_id').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('broker_prospects_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk('broker_prospects_party_fkey', [t.partyId], [parties.id]),
    fk('broker_prospects_owner_fkey', [t.ownerMembershipId, t.tenantId], [memberships.id, memberships.tenantId]),
    fk('broker_prospects_created_by_fkey', [t.createdByUserId], [users.id]),
    unique('broker_prospects_uid_key').on(t.uid),
  ],
);
