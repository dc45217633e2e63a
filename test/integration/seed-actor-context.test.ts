// The seeders' single transaction is a unit of work like any other operation: it applies the actor
// context (the migrator process, no tenant, no user) before the first seeder runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSeeders, type Seeder } from '../../src/migrator/seed-runner.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { PROJECT_ROOT } from './seed-support.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
});
afterAll(async () => {
  await db?.drop();
});

describe('seeders unit of work', () => {
  it('R-EXE-11 R-SEED-01 inside a seeder app.process is migrator, with no tenant and no user', async () => {
    const seen: Array<Record<string, unknown>> = [];
    // A fixture seeder that only reads the transaction's actor settings.
    const probe: Seeder = {
      name: 'ActorProbeSeeder',
      async run(tx) {
        const [row] = await tx`SELECT current_setting('app.process', true) AS process,
                                      current_setting('app.tenant_id', true) AS tenant,
                                      current_setting('app.user_id', true) AS "user"`;
        seen.push({ ...row });
      },
    };
    await runSeeders(db.sql, [probe, probe], { env: {}, log: () => {}, root: PROJECT_ROOT });
    expect(seen).toEqual([
      { process: 'migrator', tenant: '', user: '' },
      { process: 'migrator', tenant: '', user: '' },
    ]);
    // Transaction-local: the pool's sessions keep no actor after the seeders' commit.
    const [after] = await db.sql`SELECT coalesce(current_setting('app.process', true), '') AS process`;
    expect(after!.process).toBe('');
  });
});
