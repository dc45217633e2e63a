// The typed-only drizzle objects of the hand-written tables (src/db/schema/handwritten/) must say the
// same as the database the frozen SQL creates: columns, types, nullability, defaults, uniques.
import { getTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as idempotency from '../../src/db/schema/handwritten/idempotency.ts';
import * as work from '../../src/db/schema/handwritten/work.ts';
import type { TestDatabase } from '../support/services.ts';
import { workDatabase } from './work-tables-support.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await workDatabase({ max: 2 });
});
afterAll(async () => db?.drop());

const tables = (Object.values({ ...idempotency, ...work }) as unknown[]).filter(
  (v): v is PgTable => typeof v === 'object' && v !== null && 'getSQL' in v,
);

describe('hand-written tables parity', () => {
  it('covers the ten infrastructure tables', () => {
    expect(tables.map((t) => getTableConfig(t).name).sort()).toEqual([
      'idempotency_keys', 'outbox_messages', 'platform_idempotency_keys', 'platform_outbox_messages',
      'platform_task_run_events', 'platform_task_run_schedule_origins', 'platform_task_runs', 'task_run_events',
      'task_run_user_actors', 'task_runs',
    ]);
  });

  for (const table of tables) {
    const config = getTableConfig(table);
    it(`${config.name}: drizzle columns, defaults and uniques equal the database`, async () => {
      const dbColumns = await db.sql`
        SELECT column_name, data_type, is_nullable = 'NO' AS not_null,
               (column_default IS NOT NULL OR is_identity = 'YES') AS has_default
          FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ${config.name} ORDER BY column_name`;
      const model = config.columns
        .map((c) => ({
          column_name: c.name,
          data_type: c.getSQLType(),
          not_null: c.notNull,
          has_default: c.hasDefault || Boolean((c as { generatedIdentity?: unknown }).generatedIdentity),
        }))
        .sort((a, b) => a.column_name.localeCompare(b.column_name));
      expect(model).toEqual(dbColumns.map((c) => ({ ...c })));
      const dbUniques = await db.sql`SELECT conname FROM pg_constraint
        WHERE conrelid = ${config.name}::regclass AND contype = 'u' ORDER BY conname`;
      expect(config.uniqueConstraints.map((u) => u.getName()).sort()).toEqual(dbUniques.map((u) => u.conname));
    });
  }
});
