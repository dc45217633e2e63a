// Domain `credentials` (migration 0005_credentials): secrets and their versions. A user's password
// keeps only a hash; a financial-institution credential (a bank user's password) keeps ciphertext so
// it can be revealed once per version (bank_credential_deliveries).
import { sql } from 'drizzle-orm';
import { check, integer, pgTable, primaryKey, text, unique, uniqueIndex } from 'drizzle-orm/pg-core';
import { bigintRef, bytea, clockInstant, fk, identityId, instant } from '../columns.ts';
import { users } from './identity.ts';
import { financialInstitutions } from './institutions.ts';

export const credentials = pgTable(
  'credentials',
  {
    id: identityId(),
    uid: text('uid').notNull(),
    kind: text('kind').notNull(),
    disabledAt: instant('disabled_at'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    check('credentials_kind_check', sql`kind IN ('password', 'financial_institution')`),
    unique('credentials_uid_key').on(t.uid),
    // Target of (credential_id, kind) references that pin a credential's kind.
    unique('credentials_id_kind_key').on(t.id, t.kind),
  ],
);

/** One version of a credential's secret; exactly one is active (not retired) at a time. */
export const credentialVersions = pgTable(
  'credential_versions',
  {
    id: identityId(),
    credentialId: bigintRef('credential_id').notNull(),
    version: integer('version').notNull(),
    /** How `secret` was produced (e.g. `scrypt` hash, `aes-256-gcm` ciphertext). */
    algorithm: text('algorithm').notNull(),
    secret: bytea('secret').notNull(),
    /** Who set this secret (null when set by a process, e.g. the platform bootstrap). */
    createdByUserId: bigintRef('created_by_user_id'),
    createdAt: clockInstant('created_at'),
    retiredAt: instant('retired_at'),
  },
  (t) => [
    fk('credential_versions_credential_fkey', [t.credentialId], [credentials.id]),
    fk('credential_versions_created_by_fkey', [t.createdByUserId], [users.id]),
    unique('credential_versions_credential_id_version_key').on(t.credentialId, t.version),
    unique('credential_versions_id_credential_id_key').on(t.id, t.credentialId),
    uniqueIndex('credential_versions_one_active_key').on(t.credentialId).where(sql`retired_at IS NULL`),
  ],
);

/** A user's own credentials (login password). */
export const userCredentials = pgTable(
  'user_credentials',
  {
    userId: bigintRef('user_id').notNull(),
    credentialId: bigintRef('credential_id').notNull(),
    /** Always 'password': a user's login credential, never a bank credential. */
    credentialKind: text('credential_kind').notNull().default('password'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    primaryKey({ name: 'user_credentials_pkey', columns: [t.userId, t.credentialId] }),
    fk('user_credentials_user_fkey', [t.userId], [users.id]),
    fk('user_credentials_credential_fkey', [t.credentialId, t.credentialKind], [credentials.id, credentials.kind]),
    check('user_credentials_credential_kind_check', sql`credential_kind = 'password'`),
    unique('user_credentials_credential_id_key').on(t.credentialId),
  ],
);

/** The login of a credential at a financial institution (one-to-one with the credential). */
export const financialInstitutionCredentials = pgTable(
  'financial_institution_credentials',
  {
    credentialId: bigintRef('credential_id').primaryKey(),
    /** Always 'financial_institution': pins the credential's kind through the composite reference. */
    credentialKind: text('credential_kind').notNull().default('financial_institution'),
    financialInstitutionId: bigintRef('financial_institution_id').notNull(),
    /** The bank-user login at the institution. */
    login: text('login').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk(
      'financial_institution_credentials_credential_fkey',
      [t.credentialId, t.credentialKind],
      [credentials.id, credentials.kind],
    ),
    fk('financial_institution_credentials_institution_fkey', [t.financialInstitutionId], [financialInstitutions.id]),
    check('financial_institution_credentials_kind_check', sql`credential_kind = 'financial_institution'`),
    // Target of user_banks (credential_id, financial_institution_id): a bank user's credential is of its institution.
    unique('financial_institution_credentials_credential_institution_key').on(t.credentialId, t.financialInstitutionId),
  ],
);
