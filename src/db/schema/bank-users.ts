// Domain `bank-users` (migration 0011_bank-users): bank users (logins of a user at a financial
// institution) are global and sensitive; routes reach them only through assignments, which carry tenant
// and broker. Transfers and credential deliveries are append-only (triggers in constraints.sql).
import { sql } from 'drizzle-orm';
import { check, pgTable, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, day, fk, identityId, instant } from '../columns.ts';
import { storeCodes, tenantBrokers } from './brokers.ts';
import { credentialVersions, financialInstitutionCredentials } from './credentials.ts';
import { users } from './identity.ts';
import { financialInstitutions } from './institutions.ts';
import { membershipBrokers, memberships } from './memberships.ts';

/** A bank user. `kind` and `status` have no value check in the database. */
export const userBanks = pgTable(
  'user_banks',
  {
    id: identityId(),
    userId: bigintRef('user_id').notNull(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    credentialId: bigintRef('credential_id').notNull(),
    kind: text('kind').notNull(),
    status: text('status').notNull(),
    confirmedAt: instant('confirmed_at').notNull(),
    closedAt: instant('closed_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('user_banks_user_fkey', [t.userId], [users.id]),
    fk('user_banks_institution_fkey', [t.financialInstitutionId], [financialInstitutions.id]),
    // The credential is a login at this same institution.
    fk(
      'user_banks_credential_fkey',
      [t.credentialId, t.financialInstitutionId],
      [financialInstitutionCredentials.credentialId, financialInstitutionCredentials.financialInstitutionId],
    ),
    unique('user_banks_credential_id_key').on(t.credentialId),
    unique('user_banks_id_credential_id_key').on(t.id, t.credentialId),
    unique('user_banks_id_user_institution_key').on(t.id, t.userId, t.financialInstitutionId),
    uniqueIndex('user_banks_open_key').on(t.userId, t.financialInstitutionId).where(sql`closed_at IS NULL`),
  ],
);

/** Which tenant and broker a bank user serves, for a period; one open per bank user. */
export const bankUserAssignments = pgTable(
  'bank_user_assignments',
  {
    id: identityId(),
    userBankId: bigintRef('user_bank_id').notNull(),
    userId: bigintRef('user_id').notNull(),
    partyId: bigintRef('party_id').notNull(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    createdByUserId: bigintRef('created_by_user_id'),
    endedByUserId: bigintRef('ended_by_user_id'),
    changeReason: text('change_reason'),
    createdAt: clockInstant('created_at'),
    endedRecordedAt: instant('ended_recorded_at'),
    /** The store code under which the bank user was created. */
    storeCodeId: bigintRef('store_code_id').notNull(),
    /** The acting link (membership for a broker) the assignment originates from. */
    originMembershipBrokerId: bigintRef('origin_membership_broker_id').notNull(),
  },
  (t) => [
    fk(
      'bank_user_assignments_origin_link_fkey',
      [t.originMembershipBrokerId, t.tenantId, t.brokerId, t.userId],
      [membershipBrokers.id, membershipBrokers.tenantId, membershipBrokers.brokerId, membershipBrokers.userId],
    ),
    fk(
      'bank_user_assignments_store_code_fkey',
      [t.storeCodeId, t.financialInstitutionId, t.tenantId],
      [storeCodes.id, storeCodes.financialInstitutionId, storeCodes.tenantId],
    ),
    fk('bank_user_assignments_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk(
      'bank_user_assignments_user_bank_fkey',
      [t.userBankId, t.userId, t.financialInstitutionId],
      [userBanks.id, userBanks.userId, userBanks.financialInstitutionId],
    ),
    fk('bank_user_assignments_user_party_fkey', [t.userId, t.partyId], [users.id, users.partyId]),
    fk('bank_user_assignments_created_by_fkey', [t.createdByUserId], [users.id]),
    fk('bank_user_assignments_ended_by_fkey', [t.endedByUserId], [users.id]),
    check('bank_user_assignments_period_check', sql`valid_until IS NULL OR valid_until > valid_from`),
    unique('bank_user_assignments_id_tenant_id_key').on(t.id, t.tenantId),
    unique('bank_user_assignments_id_user_bank_id_key').on(t.id, t.userBankId),
    unique('bank_user_assignments_id_bank_tenant_broker_key').on(t.id, t.userBankId, t.tenantId, t.brokerId),
    uniqueIndex('bank_assignments_one_open_key').on(t.userBankId).where(sql`valid_until IS NULL`),
  ],
);

/** A bank user moving from one broker's assignment to another's (append-only). */
export const bankUserTransfers = pgTable(
  'bank_user_transfers',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    userBankId: bigintRef('user_bank_id').notNull(),
    fromAssignmentId: bigintRef('from_assignment_id').notNull(),
    fromBrokerId: bigintRef('from_broker_id').notNull(),
    toAssignmentId: bigintRef('to_assignment_id').notNull(),
    toBrokerId: bigintRef('to_broker_id').notNull(),
    effectiveOn: day('effective_on').notNull(),
    actorUserId: bigintRef('actor_user_id').notNull(),
    actorMembershipId: bigintRef('actor_membership_id'),
    actorBrokerId: bigintRef('actor_broker_id'),
    reason: text('reason').notNull(),
    recordedAt: clockInstant('recorded_at'),
  },
  (t) => [
    fk(
      'bank_user_transfers_from_fkey',
      [t.fromAssignmentId, t.userBankId, t.tenantId, t.fromBrokerId],
      [bankUserAssignments.id, bankUserAssignments.userBankId, bankUserAssignments.tenantId, bankUserAssignments.brokerId],
    ),
    fk(
      'bank_user_transfers_to_fkey',
      [t.toAssignmentId, t.userBankId, t.tenantId, t.toBrokerId],
      [bankUserAssignments.id, bankUserAssignments.userBankId, bankUserAssignments.tenantId, bankUserAssignments.brokerId],
    ),
    fk('bank_user_transfers_actor_fkey', [t.actorUserId], [users.id]),
    fk(
      'bank_user_transfers_actor_membership_fkey',
      [t.actorMembershipId, t.actorUserId, t.tenantId],
      [memberships.id, memberships.userId, memberships.tenantId],
    ),
    fk(
      'bank_user_transfers_actor_broker_fkey',
      [t.tenantId, t.actorBrokerId],
      [tenantBrokers.tenantId, tenantBrokers.brokerId],
    ),
    check('bank_user_transfers_distinct_check', sql`from_assignment_id <> to_assignment_id`),
    unique('bank_user_transfers_from_assignment_id_key').on(t.fromAssignmentId),
    unique('bank_user_transfers_to_assignment_id_key').on(t.toAssignmentId),
  ],
);

/**
 * The one reveal of a bank password version. The viewer comes from the server-side authenticated
 * identity, never from a payload; the password is returned only after commit (append-only).
 */
export const bankCredentialDeliveries = pgTable(
  'bank_credential_deliveries',
  {
    credentialVersionId: bigintRef('credential_version_id').primaryKey(),
    credentialId: bigintRef('credential_id').notNull(),
    userBankId: bigintRef('user_bank_id').notNull(),
    assignmentId: bigintRef('assignment_id').notNull(),
    consumedAt: clockInstant('consumed_at'),
    viewedByUserId: bigintRef('viewed_by_user_id').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
  },
  (t) => [
    fk(
      'bank_credential_deliveries_version_fkey',
      [t.credentialVersionId, t.credentialId],
      [credentialVersions.id, credentialVersions.credentialId],
    ),
    fk('bank_credential_deliveries_user_bank_fkey', [t.userBankId, t.credentialId], [userBanks.id, userBanks.credentialId]),
    fk(
      'bank_credential_deliveries_assignment_bank_fkey',
      [t.assignmentId, t.userBankId],
      [bankUserAssignments.id, bankUserAssignments.userBankId],
    ),
    fk(
      'bank_credential_deliveries_assignment_tenant_fkey',
      [t.assignmentId, t.tenantId],
      [bankUserAssignments.id, bankUserAssignments.tenantId],
    ),
    fk('bank_credential_deliveries_viewer_fkey', [t.viewedByUserId], [users.id]),
  ],
);
