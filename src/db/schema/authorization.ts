// Domain `authorization` (migration 0007_authorization): permissions, access profiles and their
// templates (tenant and platform), platform grants and invitations, and operator session contexts.
// The scope ceiling (function permission_scope_ceiling and its triggers) is hand-written SQL loaded by
// 0012/0013/0017. constraints.sql adds tenants.blueprint_id -> platform_tenant_blueprints, the
// NULLS NOT DISTINCT name index of access_profiles and the append-only triggers of the audit tables.
import { sql } from 'drizzle-orm';
import { bigint, check, integer, jsonb, pgTable, primaryKey, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, bytea, clockInstant, fk, identityId, instant, jsonObject } from '../columns.ts';
import { tenantBrokers } from './brokers.ts';
import { sessions, users } from './identity.ts';
import { tenants } from './tenants.ts';

export const permissions = pgTable(
  'permissions',
  {
    id: identityId(),
    /** Dotted code, e.g. `access.task_runs.read`. */
    code: text('code').notNull(),
    scope: text('scope').notNull(),
    description: text('description').notNull(),
    /** Explicit rename: the code this one replaces. */
    replacesCode: text('replaces_code'),
    introducedAt: clockInstant('introduced_at'),
    /** Set when the permission left the code; a permission is never deleted. */
    deprecatedAt: instant('deprecated_at'),
  },
  (t) => [
    check('permissions_scope_check', sql`scope IN ('platform', 'tenant', 'broker')`),
    unique('permissions_code_key').on(t.code),
  ],
);

/** Use cases gated by a permission; synchronized at deploy. */
export const permissionUseCases = pgTable(
  'permission_use_cases',
  {
    permissionId: bigintRef('permission_id').notNull(),
    useCase: text('use_case').notNull(),
  },
  (t) => [
    primaryKey({ name: 'permission_use_cases_pkey', columns: [t.permissionId, t.useCase] }),
    fk('permission_use_cases_permission_fkey', [t.permissionId], [permissions.id]),
  ],
);

/** Audit of permission registry changes (append-only; no code writes it today). */
export const permissionChanges = pgTable(
  'permission_changes',
  {
    id: identityId(),
    permissionCode: text('permission_code').notNull(),
    change: text('change').notNull(),
    before: jsonb('before').$type<Record<string, unknown>>(),
    after: jsonb('after').$type<Record<string, unknown>>(),
    commitSha: text('commit_sha').notNull(),
    /** Declarative: as written in the commit. */
    commitAuthor: text('commit_author').notNull(),
    approvedBy: text('approved_by'),
    /** Trusted CI identity. */
    deployedBy: text('deployed_by').notNull(),
    recordedAt: clockInstant('recorded_at'),
  },
  () => [
    check('permission_changes_change_check', sql`change IN ('added', 'modified', 'deprecated', 'renamed')`),
    check('permission_changes_before_check', sql`before IS NULL OR jsonb_typeof(before) = 'object'`),
    check('permission_changes_after_check', sql`after IS NULL OR jsonb_typeof(after) = 'object'`),
  ],
);

export const platformTenantBlueprints = pgTable(
  'platform_tenant_blueprints',
  {
    id: identityId(),
    name: text('name').notNull(),
    description: text('description').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('platform_tenant_blueprints_name_key').on(t.name)],
);

/** Templates copied into a new tenant's access_profile_templates; later edits do not reach tenants. */
export const platformAccessProfileTemplates = pgTable(
  'platform_access_profile_templates',
  {
    id: identityId(),
    blueprintId: bigintRef('blueprint_id').notNull(),
    scope: text('scope').notNull(),
    name: text('name').notNull(),
    description: text('description').notNull(),
    autoAssign: text('auto_assign'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('platform_access_profile_templates_blueprint_fkey', [t.blueprintId], [platformTenantBlueprints.id]),
    check('platform_access_profile_templates_scope_check', sql`scope IN ('tenant', 'broker')`),
    check(
      'platform_access_profile_templates_auto_assign_check',
      sql`auto_assign IN ('tenant_admin', 'broker_master', 'broker_member')`,
    ),
  ],
);

export const platformAccessProfileTemplatePermissions = pgTable(
  'platform_access_profile_template_permissions',
  {
    templateId: bigintRef('template_id').notNull(),
    permissionId: bigintRef('permission_id').notNull(),
  },
  (t) => [
    primaryKey({ name: 'platform_access_profile_template_permissions_pkey', columns: [t.templateId, t.permissionId] }),
    fk('platform_access_profile_template_permissions_template_fkey', [t.templateId], [platformAccessProfileTemplates.id]),
    fk('platform_access_profile_template_permissions_permission_fkey', [t.permissionId], [permissions.id]),
  ],
);

export const accessProfileTemplates = pgTable(
  'access_profile_templates',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    scope: text('scope').notNull(),
    name: text('name').notNull(),
    description: text('description').notNull(),
    autoAssign: text('auto_assign'),
    /** Rises at each confirmed edit. */
    version: integer('version').notNull().default(1),
    sourcePlatformTemplateId: bigintRef('source_platform_template_id'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('access_profile_templates_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('access_profile_templates_source_fkey', [t.sourcePlatformTemplateId], [platformAccessProfileTemplates.id]),
    check('access_profile_templates_scope_check', sql`scope IN ('tenant', 'broker')`),
    check(
      'access_profile_templates_auto_assign_check',
      sql`auto_assign IN ('tenant_admin', 'broker_master', 'broker_member')`,
    ),
    unique('access_profile_templates_id_tenant_id_key').on(t.id, t.tenantId),
    unique('access_profile_templates_id_tenant_id_scope_key').on(t.id, t.tenantId, t.scope),
  ],
);

export const accessProfileTemplatePermissions = pgTable(
  'access_profile_template_permissions',
  {
    templateId: bigintRef('template_id').notNull(),
    permissionId: bigintRef('permission_id').notNull(),
  },
  (t) => [
    primaryKey({ name: 'access_profile_template_permissions_pkey', columns: [t.templateId, t.permissionId] }),
    fk('access_profile_template_permissions_template_fkey', [t.templateId], [accessProfileTemplates.id]),
    fk('access_profile_template_permissions_permission_fkey', [t.permissionId], [permissions.id]),
  ],
);

/**
 * A tenant's access profile. `scope` is generated: `tenant` without broker, `broker` with one. Linked to
 * a template it inherits the template's permissions live, until detached (then it uses its own).
 */
export const accessProfiles = pgTable(
  'access_profiles',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id'),
    scope: text('scope')
      .notNull()
      .generatedAlwaysAs(sql`CASE WHEN broker_id IS NULL THEN 'tenant' ELSE 'broker' END`),
    /** A label only; it has no effect. */
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
    templateId: bigintRef('template_id'),
    templateVersion: integer('template_version'),
    detachedAt: instant('detached_at'),
    detachedByUserId: bigintRef('detached_by_user_id'),
  },
  (t) => [
    fk(
      'access_profiles_template_fkey',
      [t.templateId, t.tenantId, t.scope],
      [accessProfileTemplates.id, accessProfileTemplates.tenantId, accessProfileTemplates.scope],
    ),
    fk('access_profiles_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk('access_profiles_detached_by_fkey', [t.detachedByUserId], [users.id]),
    fk('access_profiles_tenant_fkey', [t.tenantId], [tenants.id]),
    unique('access_profiles_id_tenant_id_broker_id_key').on(t.id, t.tenantId, t.brokerId),
    unique('access_profiles_id_tenant_id_key').on(t.id, t.tenantId),
    unique('access_profiles_id_tenant_id_scope_key').on(t.id, t.tenantId, t.scope),
    // (tenant_id, broker_id, name) NULLS NOT DISTINCT: a unique index drizzle cannot express; in constraints.sql.
  ],
);

export const accessProfilePermissions = pgTable(
  'access_profile_permissions',
  {
    accessProfileId: bigintRef('access_profile_id').notNull(),
    permissionId: bigintRef('permission_id').notNull(),
  },
  (t) => [
    primaryKey({ name: 'access_profile_permissions_pkey', columns: [t.accessProfileId, t.permissionId] }),
    fk('access_profile_permissions_profile_fkey', [t.accessProfileId], [accessProfiles.id]),
    fk('access_profile_permissions_permission_fkey', [t.permissionId], [permissions.id]),
  ],
);

/** A confirmed template edit (append-only). */
export const accessProfileTemplateChanges = pgTable(
  'access_profile_template_changes',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    templateId: bigintRef('template_id').notNull(),
    fromVersion: integer('from_version').notNull(),
    toVersion: integer('to_version').notNull(),
    addedPermissionIds: bigint('added_permission_ids', { mode: 'number' }).array().notNull(),
    removedPermissionIds: bigint('removed_permission_ids', { mode: 'number' }).array().notNull(),
    reason: text('reason').notNull(),
    changedByUserId: bigintRef('changed_by_user_id').notNull(),
    changedAt: clockInstant('changed_at'),
  },
  (t) => [
    fk(
      'access_profile_template_changes_template_fkey',
      [t.templateId, t.tenantId],
      [accessProfileTemplates.id, accessProfileTemplates.tenantId],
    ),
    fk('access_profile_template_changes_changed_by_fkey', [t.changedByUserId], [users.id]),
  ],
);

/** What each affected profile did about a template change (append-only). */
export const accessProfileTemplateChangeDecisions = pgTable(
  'access_profile_template_change_decisions',
  {
    changeId: bigintRef('change_id').notNull(),
    accessProfileId: bigintRef('access_profile_id').notNull(),
    decision: text('decision').notNull(),
    affectedUsers: integer('affected_users').notNull(),
  },
  (t) => [
    primaryKey({ name: 'access_profile_template_change_decisions_pkey', columns: [t.changeId, t.accessProfileId] }),
    fk('access_profile_template_change_decisions_change_fkey', [t.changeId], [accessProfileTemplateChanges.id]),
    fk('access_profile_template_change_decisions_profile_fkey', [t.accessProfileId], [accessProfiles.id]),
    check('access_profile_template_change_decisions_decision_check', sql`decision IN ('followed', 'detached')`),
  ],
);

/** Platform profiles are always of scope `platform`. */
export const platformAccessProfiles = pgTable(
  'platform_access_profiles',
  {
    id: identityId(),
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('platform_access_profiles_name_key').on(t.name)],
);

export const platformAccessProfilePermissions = pgTable(
  'platform_access_profile_permissions',
  {
    platformAccessProfileId: bigintRef('platform_access_profile_id').notNull(),
    permissionId: bigintRef('permission_id').notNull(),
  },
  (t) => [
    primaryKey({
      name: 'platform_access_profile_permissions_pkey',
      columns: [t.platformAccessProfileId, t.permissionId],
    }),
    fk('platform_access_profile_permissions_profile_fkey', [t.platformAccessProfileId], [platformAccessProfiles.id]),
    fk('platform_access_profile_permissions_permission_fkey', [t.permissionId], [permissions.id]),
  ],
);

/** An invitation to become a platform operator; only the SHA-256 of its token is stored. */
export const platformInvitations = pgTable(
  'platform_invitations',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    channel: text('channel').notNull(),
    destination: text('destination').notNull(),
    destinationNormalized: text('destination_normalized').notNull(),
    tokenSha256: bytea('token_sha256').notNull(),
    platformAccessProfileId: bigintRef('platform_access_profile_id').notNull(),
    status: text('status').notNull().default('pending'),
    expiresAt: instant('expires_at').notNull(),
    createdByUserId: bigintRef('created_by_user_id'),
    createdByProcess: text('created_by_process'),
    acceptedAt: instant('accepted_at'),
    acceptedByUserId: bigintRef('accepted_by_user_id'),
    revokedAt: instant('revoked_at'),
    revokedByUserId: bigintRef('revoked_by_user_id'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('platform_invitations_profile_fkey', [t.platformAccessProfileId], [platformAccessProfiles.id]),
    fk('platform_invitations_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('platform_invitations_accepted_by_fkey', [t.acceptedByUserId], [users.id]),
    fk('platform_invitations_revoked_by_fkey', [t.revokedByUserId], [users.id]),
    check('platform_invitations_channel_check', sql`channel IN ('email', 'phone')`),
    check('platform_invitations_status_check', sql`status IN ('pending', 'accepted', 'revoked', 'expired')`),
    check('platform_invitations_creator_check', sql`num_nonnulls(created_by_user_id, created_by_process) = 1`),
    check('platform_invitations_token_check', sql`octet_length(token_sha256) = 32`),
    unique('platform_invitations_uid_key').on(t.uid),
    unique('platform_invitations_token_sha256_key').on(t.tokenSha256),
  ],
);

/** One send of a platform invitation; a resend is a new row. */
export const platformInvitationDeliveries = pgTable(
  'platform_invitation_deliveries',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    platformInvitationId: bigintRef('platform_invitation_id').notNull(),
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
    requestedByUserId: bigintRef('requested_by_user_id'),
    requestedByProcess: text('requested_by_process'),
  },
  (t) => [
    fk('platform_invitation_deliveries_invitation_fkey', [t.platformInvitationId], [platformInvitations.id]),
    fk('platform_invitation_deliveries_requested_by_fkey', [t.requestedByUserId], [users.id]),
    check('platform_invitation_deliveries_channel_check', sql`channel IN ('email', 'sms', 'whatsapp')`),
    check(
      'platform_invitation_deliveries_status_check',
      sql`status IN ('queued', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'failed', 'complained')`,
    ),
    check(
      'platform_invitation_deliveries_requester_check',
      sql`num_nonnulls(requested_by_user_id, requested_by_process) = 1`,
    ),
    unique('platform_invitation_deliveries_uid_key').on(t.uid),
    unique('platform_invitation_deliveries_provider_message_key').on(t.provider, t.providerMessageId),
  ],
);

/** Provider webhook events of a delivery (append-only); a repeated webhook does not duplicate. */
export const platformInvitationDeliveryEvents = pgTable(
  'platform_invitation_delivery_events',
  {
    id: identityId(),
    deliveryId: bigintRef('delivery_id').notNull(),
    status: text('status').notNull(),
    /** Provider time (UTC). */
    occurredAt: instant('occurred_at').notNull(),
    receivedAt: clockInstant('received_at'),
    /** Provider event id, or the SHA-256 of the payload. */
    dedupKey: text('dedup_key').notNull(),
    /** Stored without the invitation token; under 64000 bytes. */
    payload: jsonObject('payload'),
  },
  (t) => [
    fk('platform_invitation_delivery_events_delivery_fkey', [t.deliveryId], [platformInvitationDeliveries.id]),
    check(
      'platform_invitation_delivery_events_payload_check',
      sql`jsonb_typeof(payload) = 'object' AND octet_length(payload::text) < 64000`,
    ),
    unique('platform_invitation_delivery_events_dedup_key').on(t.deliveryId, t.dedupKey),
  ],
);

/** A platform grant: active while revoked_at is null; every grant originates from a platform invitation. */
export const platformGrants = pgTable(
  'platform_grants',
  {
    id: identityId(),
    userId: bigintRef('user_id').notNull(),
    platformAccessProfileId: bigintRef('platform_access_profile_id').notNull(),
    grantedByUserId: bigintRef('granted_by_user_id').notNull(),
    grantedAt: clockInstant('granted_at'),
    reason: text('reason').notNull(),
    revokedByUserId: bigintRef('revoked_by_user_id'),
    revokedAt: instant('revoked_at'),
    originPlatformInvitationId: bigintRef('origin_platform_invitation_id').notNull(),
  },
  (t) => [
    fk('platform_grants_user_fkey', [t.userId], [users.id]),
    fk('platform_grants_profile_fkey', [t.platformAccessProfileId], [platformAccessProfiles.id]),
    fk('platform_grants_granted_by_fkey', [t.grantedByUserId], [users.id]),
    fk('platform_grants_revoked_by_fkey', [t.revokedByUserId], [users.id]),
    fk('platform_grants_origin_invitation_fkey', [t.originPlatformInvitationId], [platformInvitations.id]),
    uniqueIndex('platform_grants_live_key').on(t.userId).where(sql`revoked_at IS NULL`),
  ],
);

/** An operator acting inside a tenant (not impersonation: the actor stays the real user). */
export const sessionContexts = pgTable(
  'session_contexts',
  {
    id: identityId(),
    sessionId: bigintRef('session_id').notNull(),
    platformGrantId: bigintRef('platform_grant_id').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    reason: text('reason').notNull(),
    enteredAt: clockInstant('entered_at'),
    leftAt: instant('left_at'),
  },
  (t) => [
    fk('session_contexts_session_fkey', [t.sessionId], [sessions.id]),
    fk('session_contexts_grant_fkey', [t.platformGrantId], [platformGrants.id]),
    fk('session_contexts_tenant_fkey', [t.tenantId], [tenants.id]),
    unique('session_contexts_id_tenant_id_key').on(t.id, t.tenantId),
    uniqueIndex('session_contexts_live_key').on(t.sessionId).where(sql`left_at IS NULL`),
  ],
);
