// Domain `invitations` (migration 0010_invitations): invitations to join a tenant, the brokers and
// profiles they grant, their deliveries (a resend is a new row) with provider events, and, for an
// invitation created by a platform operator acting inside the tenant, that session context. Only the
// SHA-256 of an invitation token is stored.
import { sql } from 'drizzle-orm';
import { check, pgTable, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, bytea, clockInstant, fk, identityId, instant, jsonObject } from '../columns.ts';
import { accessProfiles, sessionContexts } from './authorization.ts';
import { tenantBrokers } from './brokers.ts';
import { users } from './identity.ts';
import { memberships } from './memberships.ts';
import { tenants } from './tenants.ts';

export const invitations = pgTable(
  'invitations',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    channel: text('channel').notNull(),
    destination: text('destination').notNull(),
    destinationNormalized: text('destination_normalized').notNull(),
    tokenSha256: bytea('token_sha256').notNull(),
    /** Tenant-level profile granted on acceptance (broker profiles: invitation_brokers). */
    accessProfileId: bigintRef('access_profile_id'),
    /** Always 'tenant': with the profile's generated `scope` it makes the profile a tenant profile. */
    accessProfileScope: text('access_profile_scope').notNull().default('tenant'),
    status: text('status').notNull().default('pending'),
    expiresAt: instant('expires_at').notNull(),
    createdByUserId: bigintRef('created_by_user_id').notNull(),
    /** The creator's membership (null when a platform operator created it: see invitation_session_contexts). */
    createdByMembershipId: bigintRef('created_by_membership_id'),
    createdAt: clockInstant('created_at'),
    acceptedAt: instant('accepted_at'),
    acceptedByUserId: bigintRef('accepted_by_user_id'),
    acceptedMembershipId: bigintRef('accepted_membership_id'),
    revokedAt: instant('revoked_at'),
    revokedByUserId: bigintRef('revoked_by_user_id'),
  },
  (t) => [
    fk('invitations_tenant_fkey', [t.tenantId], [tenants.id]),
    fk(
      'invitations_profile_fkey',
      [t.accessProfileId, t.tenantId, t.accessProfileScope],
      [accessProfiles.id, accessProfiles.tenantId, accessProfiles.scope],
    ),
    fk('invitations_created_by_fkey', [t.createdByUserId], [users.id]),
    fk(
      'invitations_created_by_membership_fkey',
      [t.createdByMembershipId, t.createdByUserId, t.tenantId],
      [memberships.id, memberships.userId, memberships.tenantId],
    ),
    fk('invitations_accepted_by_fkey', [t.acceptedByUserId], [users.id]),
    fk(
      'invitations_accepted_membership_fkey',
      [t.acceptedMembershipId, t.tenantId],
      [memberships.id, memberships.tenantId],
    ),
    fk('invitations_revoked_by_fkey', [t.revokedByUserId], [users.id]),
    check('invitations_channel_check', sql`channel IN ('email', 'phone')`),
    check('invitations_status_check', sql`status IN ('pending', 'accepted', 'revoked', 'expired')`),
    check('invitations_access_profile_scope_check', sql`access_profile_scope = 'tenant'`),
    unique('invitations_uid_key').on(t.uid),
    unique('invitations_token_sha256_key').on(t.tokenSha256),
    unique('invitations_id_tenant_id_key').on(t.id, t.tenantId),
    // One pending invitation per destination in a tenant; a revoked or expired one may be sent again.
    uniqueIndex('invitations_pending_key')
      .on(t.tenantId, t.channel, t.destinationNormalized)
      .where(sql`status = 'pending'`),
  ],
);

/** A broker the invitee will act for once accepted, with its role and optional broker profile. */
export const invitationBrokers = pgTable(
  'invitation_brokers',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    invitationId: bigintRef('invitation_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    role: text('role').notNull(),
    accessProfileId: bigintRef('access_profile_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('invitation_brokers_invitation_fkey', [t.invitationId, t.tenantId], [invitations.id, invitations.tenantId]),
    fk('invitation_brokers_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    // A broker profile must belong to that broker.
    fk(
      'invitation_brokers_profile_fkey',
      [t.accessProfileId, t.tenantId, t.brokerId],
      [accessProfiles.id, accessProfiles.tenantId, accessProfiles.brokerId],
    ),
    check('invitation_brokers_role_check', sql`role IN ('master', 'member')`),
    unique('invitation_brokers_invitation_id_broker_id_key').on(t.invitationId, t.brokerId),
  ],
);

/** One send of an invitation; a resend is a new row. */
export const invitationDeliveries = pgTable(
  'invitation_deliveries',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    invitationId: bigintRef('invitation_id').notNull(),
    channel: text('channel').notNull(),
    /** Snapshot at send time. */
    destinationNormalized: text('destination_normalized').notNull(),
    provider: text('provider').notNull(),
    providerMessageId: text('provider_message_id'),
    status: text('status').notNull().default('queued'),
    queuedAt: clockInstant('queued_at'),
    sentAt: instant('sent_at'),
    deliveredAt: instant('delivered_at'),
    openedAt: instant('opened_at'),
    failedAt: instant('failed_at'),
    failureReason: text('failure_reason'),
    requestedByUserId: bigintRef('requested_by_user_id').notNull(),
  },
  (t) => [
    fk('invitation_deliveries_invitation_fkey', [t.invitationId, t.tenantId], [invitations.id, invitations.tenantId]),
    fk('invitation_deliveries_requested_by_fkey', [t.requestedByUserId], [users.id]),
    check('invitation_deliveries_channel_check', sql`channel IN ('email', 'sms', 'whatsapp')`),
    check(
      'invitation_deliveries_status_check',
      sql`status IN ('queued', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'failed', 'complained')`,
    ),
    unique('invitation_deliveries_uid_key').on(t.uid),
    unique('invitation_deliveries_provider_message_key').on(t.provider, t.providerMessageId),
    unique('invitation_deliveries_id_tenant_id_key').on(t.id, t.tenantId),
  ],
);

/** Provider webhook events of a delivery; a repeated webhook does not duplicate. */
export const invitationDeliveryEvents = pgTable(
  'invitation_delivery_events',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    deliveryId: bigintRef('delivery_id').notNull(),
    status: text('status').notNull(),
    occurredAt: instant('occurred_at').notNull(),
    receivedAt: clockInstant('received_at'),
    dedupKey: text('dedup_key').notNull(),
    /** Stored without the invitation token; under 64000 bytes. */
    payload: jsonObject('payload'),
  },
  (t) => [
    fk(
      'invitation_delivery_events_delivery_fkey',
      [t.deliveryId, t.tenantId],
      [invitationDeliveries.id, invitationDeliveries.tenantId],
    ),
    check(
      'invitation_delivery_events_payload_check',
      sql`jsonb_typeof(payload) = 'object' AND octet_length(payload::text) < 64000`,
    ),
    unique('invitation_delivery_events_dedup_key').on(t.deliveryId, t.dedupKey),
  ],
);

/**
 * The operator session context (a platform operator acting inside the tenant) an invitation was
 * created in; one-to-one with the invitation, same tenant on both references.
 */
export const invitationSessionContexts = pgTable(
  'invitation_session_contexts',
  {
    invitationId: bigintRef('invitation_id').primaryKey(),
    tenantId: bigintRef('tenant_id').notNull(),
    sessionContextId: bigintRef('session_context_id').notNull(),
    recordedAt: clockInstant('recorded_at'),
  },
  (t) => [
    fk('invitation_session_contexts_invitation_fkey', [t.invitationId, t.tenantId], [invitations.id, invitations.tenantId]),
    fk(
      'invitation_session_contexts_context_fkey',
      [t.sessionContextId, t.tenantId],
      [sessionContexts.id, sessionContexts.tenantId],
    ),
  ],
);
