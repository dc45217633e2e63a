// Domain `brokers` (migration 0006_brokers): the broker is global (a party); a tenant knows it through
// tenant_brokers, and most tables reference (tenant_id, broker_id) of tenant_brokers. Store codes are
// the codes under which institutions register business; broker_store_codes says which code a broker
// uses, when (EXCLUDE broker_store_codes_no_overlap in constraints.sql).
import { sql } from 'drizzle-orm';
import { check, pgTable, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, day, fk, identityId, instant } from '../columns.ts';
import { users } from './identity.ts';
import { financialInstitutionAccounts, financialInstitutions } from './institutions.ts';
import { parties } from './parties.ts';
import { tenantAccounts, tenants } from './tenants.ts';

export const brokers = pgTable(
  'brokers',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    partyId: bigintRef('party_id').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('brokers_party_fkey', [t.partyId], [parties.id]),
    unique('brokers_uid_key').on(t.uid),
  ],
);

export const tenantBrokers = pgTable(
  'tenant_brokers',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    brokerCode: text('broker_code'),
    disabledAt: instant('disabled_at'),
    disabledReason: text('disabled_reason'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('tenant_brokers_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('tenant_brokers_broker_fkey', [t.brokerId], [brokers.id]),
    unique('tenant_brokers_tenant_id_broker_id_key').on(t.tenantId, t.brokerId),
    unique('tenant_brokers_tenant_id_broker_code_key').on(t.tenantId, t.brokerCode),
  ],
);

/** A broker under another broker of the same tenant. Cycles and date order: application rules. */
export const brokerAffiliations = pgTable(
  'broker_affiliations',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    parentId: bigintRef('parent_id').notNull(),
    startedOn: day('started_on').notNull(),
    endedOn: day('ended_on'),
    endedBy: bigintRef('ended_by'),
    endedReason: text('ended_reason'),
    approvedBy: bigintRef('approved_by'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('broker_affiliations_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk('broker_affiliations_parent_fkey', [t.tenantId, t.parentId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk('broker_affiliations_ended_by_fkey', [t.endedBy], [users.id]),
    fk('broker_affiliations_approved_by_fkey', [t.approvedBy], [users.id]),
    unique('broker_affiliations_uid_key').on(t.uid),
    uniqueIndex('broker_affiliations_open_key').on(t.tenantId, t.brokerId).where(sql`ended_on IS NULL`),
  ],
);

/** The tenant account (company) a broker works under. No date-order check, no EXCLUDE. */
export const tenantBrokerAccounts = pgTable(
  'tenant_broker_accounts',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    tenantAccountId: bigintRef('tenant_account_id').notNull(),
    signedOn: day('signed_on'),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('tenant_broker_accounts_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk(
      'tenant_broker_accounts_account_fkey',
      [t.tenantAccountId, t.tenantId],
      [tenantAccounts.id, tenantAccounts.tenantId],
    ),
    uniqueIndex('tenant_broker_accounts_open_key')
      .on(t.tenantId, t.brokerId, t.tenantAccountId)
      .where(sql`valid_until IS NULL`),
  ],
);

/** A code under which an institution registers business; owned by a group account or by a broker. */
export const storeCodes = pgTable(
  'store_codes',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    /** Leading zeros preserved. */
    code: text('code').notNull(),
    financialInstitutionAccountId: bigintRef('financial_institution_account_id'),
    brokerId: bigintRef('broker_id'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('store_codes_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('store_codes_institution_fkey', [t.financialInstitutionId], [financialInstitutions.id]),
    fk(
      'store_codes_account_fkey',
      [t.financialInstitutionAccountId, t.tenantId, t.financialInstitutionId],
      [
        financialInstitutionAccounts.id,
        financialInstitutionAccounts.tenantId,
        financialInstitutionAccounts.financialInstitutionId,
      ],
    ),
    fk('store_codes_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    check('store_codes_one_owner_check', sql`num_nonnulls(financial_institution_account_id, broker_id) = 1`),
    unique('store_codes_tenant_institution_code_key').on(t.tenantId, t.financialInstitutionId, t.code),
    unique('store_codes_id_institution_tenant_key').on(t.id, t.financialInstitutionId, t.tenantId),
    unique('store_codes_id_tenant_institution_key').on(t.id, t.tenantId, t.financialInstitutionId),
  ],
);

/** Which store code a broker uses at an institution, and when (no overlapping periods). */
export const brokerStoreCodes = pgTable(
  'broker_store_codes',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    brokerId: bigintRef('broker_id').notNull(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    storeCodeId: bigintRef('store_code_id').notNull(),
    regime: text('regime').notNull(),
    validFrom: day('valid_from').notNull(),
    validUntil: day('valid_until'),
    assignedByUserId: bigintRef('assigned_by_user_id').notNull(),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('broker_store_codes_broker_fkey', [t.tenantId, t.brokerId], [tenantBrokers.tenantId, tenantBrokers.brokerId]),
    fk(
      'broker_store_codes_store_code_fkey',
      [t.storeCodeId, t.tenantId, t.financialInstitutionId],
      [storeCodes.id, storeCodes.tenantId, storeCodes.financialInstitutionId],
    ),
    fk('broker_store_codes_assigned_by_fkey', [t.assignedByUserId], [users.id]),
    check('broker_store_codes_regime_check', sql`regime IN ('standard', 'substabelecido', 'indicado', 'subzero')`),
    check('broker_store_codes_period_check', sql`valid_until IS NULL OR valid_until > valid_from`),
  ],
);
