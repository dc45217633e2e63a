// Typed-query view of the idempotency ledgers. The tables are created by the frozen hand-written SQL
// sql/idempotency/0015_idempotency.sql (CHECKs, byte caps); this file is excluded from drizzle-kit
// generation and kept equal to the database by test/integration/work-tables-parity.test.ts.
import { integer, pgTable, text, unique } from 'drizzle-orm/pg-core';
import { bigintRef, bytea, clockInstant, identityId, instant, jsonObject } from '../../columns.ts';

export type IdempotencyStatus = 'processing' | 'completed' | 'failed_retryable' | 'failed_permanent';

export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    id: identityId(),
    tenantId: bigintRef('tenant_id').notNull(),
    idempotencyKey: bytea('idempotency_key').notNull(),
    requestFingerprint: bytea('request_fingerprint').notNull(),
    status: text('status').$type<IdempotencyStatus>().notNull().default('processing'),
    attempt: integer('attempt').notNull().default(1),
    outcome: jsonObject('outcome'),
    expiresAt: instant('expires_at').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('idempotency_keys_tenant_key_unique').on(t.tenantId, t.idempotencyKey)],
);

export const platformIdempotencyKeys = pgTable(
  'platform_idempotency_keys',
  {
    id: identityId(),
    idempotencyKey: bytea('idempotency_key').notNull(),
    requestFingerprint: bytea('request_fingerprint').notNull(),
    status: text('status').$type<IdempotencyStatus>().notNull().default('processing'),
    attempt: integer('attempt').notNull().default(1),
    outcome: jsonObject('outcome'),
    expiresAt: instant('expires_at').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [unique('platform_idempotency_keys_key_unique').on(t.idempotencyKey)],
);
