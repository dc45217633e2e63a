// Domain `institutions` (migration 0004_institutions): the reference catalog of financial
// institutions, product groups, products, operation types and offers (loaded by CatalogSeeder, merged
// by natural key `code`), and each tenant's relationship with institutions: which it works with and
// its company id (account) at each of them.
import { pgTable, text, unique } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, fk, identityId, instant } from '../columns.ts';
import { users } from './identity.ts';
import { tenantAccounts, tenants } from './tenants.ts';

export const financialInstitutions = pgTable(
  'financial_institutions',
  {
    id: identityId(),
    /** Institution code (e.g. the 3-digit COMPE code), leading zeros preserved. */
    code: text('code').notNull(),
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('financial_institutions_code_key').on(t.code)],
);

export const productGroups = pgTable(
  'product_groups',
  {
    id: identityId(),
    code: text('code').notNull(),
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('product_groups_code_key').on(t.code)],
);

export const products = pgTable(
  'products',
  {
    id: identityId(),
    productGroupId: bigintRef('product_group_id').notNull(),
    code: text('code').notNull(),
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('products_product_group_fkey', [t.productGroupId], [productGroups.id]),
    unique('products_code_key').on(t.code),
  ],
);

export const operationTypes = pgTable(
  'operation_types',
  {
    id: identityId(),
    code: text('code').notNull(),
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('operation_types_code_key').on(t.code)],
);

/** Which operation types a product admits (e.g. new loan, refinancing, portability). */
export const productOperationTypes = pgTable(
  'product_operation_types',
  {
    id: identityId(),
    productId: bigintRef('product_id').notNull(),
    operationTypeId: bigintRef('operation_type_id').notNull(),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('product_operation_types_product_fkey', [t.productId], [products.id]),
    fk('product_operation_types_operation_type_fkey', [t.operationTypeId], [operationTypes.id]),
    unique('product_operation_types_product_id_operation_type_id_key').on(t.productId, t.operationTypeId),
  ],
);

/** An institution offering a product for an operation type the product admits. */
export const offers = pgTable(
  'offers',
  {
    id: identityId(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    productId: bigintRef('product_id').notNull(),
    operationTypeId: bigintRef('operation_type_id').notNull(),
    name: text('name').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('offers_financial_institution_fkey', [t.financialInstitutionId], [financialInstitutions.id]),
    fk(
      'offers_product_operation_type_fkey',
      [t.productId, t.operationTypeId],
      [productOperationTypes.productId, productOperationTypes.operationTypeId],
    ),
    unique('offers_natural_key').on(t.financialInstitutionId, t.productId, t.operationTypeId),
  ],
);

/** An institution a tenant works with. */
export const tenantFinancialInstitutions = pgTable(
  'tenant_financial_institutions',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('tenant_financial_institutions_tenant_fkey', [t.tenantId], [tenants.id]),
    fk('tenant_financial_institutions_institution_fkey', [t.financialInstitutionId], [financialInstitutions.id]),
    unique('tenant_financial_institutions_tenant_institution_key').on(t.tenantId, t.financialInstitutionId),
  ],
);

/**
 * The company id of one of the tenant's accounts at an institution ("company id by institution"):
 * the group account that owns store codes and serves teams.
 */
export const financialInstitutionAccounts = pgTable(
  'financial_institution_accounts',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    tenantAccountId: bigintRef('tenant_account_id').notNull(),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    /** The company id the institution gave the account, leading zeros preserved. */
    companyCode: text('company_code').notNull(),
    createdByUserId: bigintRef('created_by_user_id'),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk(
      'financial_institution_accounts_tenant_account_fkey',
      [t.tenantAccountId, t.tenantId],
      [tenantAccounts.id, tenantAccounts.tenantId],
    ),
    fk(
      'financial_institution_accounts_tenant_institution_fkey',
      [t.tenantId, t.financialInstitutionId],
      [tenantFinancialInstitutions.tenantId, tenantFinancialInstitutions.financialInstitutionId],
    ),
    fk('financial_institution_accounts_created_by_fkey', [t.createdByUserId], [users.id]),
    unique('financial_institution_accounts_company_code_key').on(t.tenantId, t.financialInstitutionId, t.companyCode),
    unique('financial_institution_accounts_id_tenant_id_key').on(t.id, t.tenantId),
    unique('financial_institution_accounts_id_tenant_institution_key').on(t.id, t.tenantId, t.financialInstitutionId),
  ],
);
