// Domain `identity` (migration 0002_identity; `platform_logins` by 0014_identity-platform-logins):
// users, their login identifiers, sessions and what a session acts as. No route writes sessions yet.
// Foreign keys to later domains are created by those domains' constraints.sql:
// user_logins.tenant_id -> tenants (tenants); session_memberships -> memberships and
// session_membership_brokers -> membership_brokers (memberships).
import { sql } from 'drizzle-orm';
import { check, pgTable, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, bytea, clockInstant, fk, identityId, instant } from '../columns.ts';
import { parties } from './parties.ts';

/** A person who can log in; the person itself is a party. */
export const users = pgTable(
  'users',
  {
    id: identityId(),
    partyId: bigintRef('party_id').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('users_party_fkey', [t.partyId], [parties.id]),
    unique('users_party_id_key').on(t.partyId),
    // Target of (user_id, party_id) references that pin a copied party_id (bank_user_assignments).
    unique('users_id_party_id_key').on(t.id, t.partyId),
  ],
);

/** Login identifiers of a user inside one tenant (e-mail, phone, username, tax id). */
export const userLogins = pgTable(
  'user_logins',
  {
    id: identityId(),
    userId: bigintRef('user_id').notNull(),
    /** References tenants.id (created by the tenants domain). */
    tenantId: bigintRef('tenant_id').notNull(),
    kind: text('kind').notNull(),
    value: text('value').notNull(),
    valueNormalized: text('value_normalized').notNull(),
    verifiedAt: instant('verified_at'),
    createdAt: clockInstant('created_at'),
    removedAt: instant('removed_at'),
    removedByUserId: bigintRef('removed_by_user_id'),
  },
  (t) => [
    fk('user_logins_user_fkey', [t.userId], [users.id]),
    fk('user_logins_removed_by_fkey', [t.removedByUserId], [users.id]),
    check('user_logins_kind_check', sql`kind IN ('email', 'phone', 'username', 'tax_id')`),
    uniqueIndex('user_logins_live_key').on(t.tenantId, t.kind, t.valueNormalized).where(sql`removed_at IS NULL`),
  ],
);

/** One-time codes proving a login identifier belongs to the user (only their SHA-256 is stored). */
export const userLoginVerifications = pgTable(
  'user_login_verifications',
  {
    id: identityId(),
    userLoginId: bigintRef('user_login_id').notNull(),
    codeSha256: bytea('code_sha256').notNull(),
    expiresAt: instant('expires_at').notNull(),
    consumedAt: instant('consumed_at'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('user_login_verifications_login_fkey', [t.userLoginId], [userLogins.id]),
  ],
);

/** A login session; only the SHA-256 of the session token is stored. */
export const sessions = pgTable(
  'sessions',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    userId: bigintRef('user_id').notNull(),
    tokenSha256: bytea('token_sha256').notNull(),
    createdAt: clockInstant('created_at'),
    lastSeenAt: instant('last_seen_at'),
    expiresAt: instant('expires_at').notNull(),
    revokedAt: instant('revoked_at'),
    revokedByUserId: bigintRef('revoked_by_user_id'),
  },
  (t) => [
    fk('sessions_user_fkey', [t.userId], [users.id]),
    fk('sessions_revoked_by_fkey', [t.revokedByUserId], [users.id]),
    unique('sessions_uid_key').on(t.uid),
    unique('sessions_token_sha256_key').on(t.tokenSha256),
    unique('sessions_id_user_id_key').on(t.id, t.userId),
  ],
);

/** Rotating refresh tokens of a session: one live (unconsumed) at a time; each names its replacement. */
export const refreshTokens = pgTable(
  'refresh_tokens',
  {
    id: identityId(),
    sessionId: bigintRef('session_id').notNull(),
    tokenSha256: bytea('token_sha256').notNull(),
    createdAt: clockInstant('created_at'),
    expiresAt: instant('expires_at').notNull(),
    consumedAt: instant('consumed_at'),
    /** The token issued when this one was consumed: always of the same session. */
    replacedById: bigintRef('replaced_by_id'),
  },
  (t) => [
    fk('refresh_tokens_session_fkey', [t.sessionId], [sessions.id]),
    fk('refresh_tokens_replaced_by_fkey', [t.replacedById, t.sessionId], [t.id, t.sessionId]),
    unique('refresh_tokens_token_sha256_key').on(t.tokenSha256),
    unique('refresh_tokens_id_session_id_key').on(t.id, t.sessionId),
    uniqueIndex('refresh_tokens_live_key').on(t.sessionId).where(sql`consumed_at IS NULL`),
  ],
);

/** The membership a session acts as; one at a time per session. */
export const sessionMemberships = pgTable(
  'session_memberships',
  {
    id: identityId(),
    sessionId: bigintRef('session_id').notNull(),
    userId: bigintRef('user_id').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    /** (membership_id, user_id, tenant_id) references memberships (created by the memberships domain). */
    membershipId: bigintRef('membership_id').notNull(),
    enteredAt: clockInstant('entered_at'),
    leftAt: instant('left_at'),
  },
  (t) => [
    // The membership must be the session user's: user_id is pinned on both references.
    fk('session_memberships_session_fkey', [t.sessionId, t.userId], [sessions.id, sessions.userId]),
    unique('session_memberships_id_membership_id_key').on(t.id, t.membershipId),
    uniqueIndex('session_memberships_live_key').on(t.sessionId).where(sql`left_at IS NULL`),
  ],
);

/** The broker a session membership acts for (one-to-one with the session membership). */
export const sessionMembershipBrokers = pgTable(
  'session_membership_brokers',
  {
    sessionMembershipId: bigintRef('session_membership_id').primaryKey(),
    membershipId: bigintRef('membership_id').notNull(),
    /** (membership_broker_id, membership_id) references membership_brokers (memberships domain). */
    membershipBrokerId: bigintRef('membership_broker_id').notNull(),
    selectedAt: clockInstant('selected_at'),
  },
  (t) => [
    fk(
      'session_membership_brokers_session_membership_fkey',
      [t.sessionMembershipId, t.membershipId],
      [sessionMemberships.id, sessionMemberships.membershipId],
    ),
  ],
);

/** Login identifiers of platform operators: no tenant. */
export const platformLogins = pgTable(
  'platform_logins',
  {
    id: identityId(),
    userId: bigintRef('user_id').notNull(),
    kind: text('kind').notNull(),
    value: text('value').notNull(),
    valueNormalized: text('value_normalized').notNull(),
    createdAt: clockInstant('created_at'),
    removedAt: instant('removed_at'),
  },
  (t) => [
    fk('platform_logins_user_fkey', [t.userId], [users.id]),
    check('platform_logins_kind_check', sql`kind IN ('username', 'email')`),
    uniqueIndex('platform_logins_live_key').on(t.kind, t.valueNormalized).where(sql`removed_at IS NULL`),
  ],
);
