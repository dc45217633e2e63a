// Domain `tenants` (migration 0003_tenants): the tenants and the companies (accounts) each operates.
// Its constraints.sql also creates identity's user_logins.tenant_id reference (identity comes first).
// tenants.blueprint_id references platform_tenant_blueprints, created by the authorization domain.
import { pgTable, text, unique } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, fk, identityId, instant } from '../columns.ts';
import { users } from './identity.ts';
import { companyProfiles } from './parties.ts';

export const tenants = pgTable(
  'tenants',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    name: text('name').notNull(),
    /** The platform blueprint chosen at creation (creating a tenant means choosing one). */
    blueprintId: bigintRef('blueprint_id').notNull(),
    /** The platform operator who created it (null for seeded tenants). */
    createdByUserId: bigintRef('created_by_user_id'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('tenants_created_by_fkey', [t.createdByUserId], [users.id]),
    unique('tenants_uid_key').on(t.uid),
  ],
);

/** A company (CNPJ) under which a tenant operates; brokers sign with accounts. */
export const tenantAccounts = pgTable(
  'tenant_accounts',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    companyPartyId: bigintRef('company_party_id').notNull(),
    createdByUserId: bigintRef('created_by_user_id'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('tenant_accounts_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('tenant_accounts_company_fkey', [t.companyPartyId], [companyProfiles.partyId]),
    fk('tenant_accounts_created_by_fkey', [t.createdByUserId], [users.id]),
    unique('tenant_accounts_tenant_id_company_party_id_key').on(t.tenantId, t.companyPartyId),
    unique('tenant_accounts_id_tenant_id_key').on(t.id, t.tenantId),
  ],
);
