// Seeders run after the schema is current, all of them in ONE transaction: either every seeder's
// effect is committed or none is. The seeder lists of a build come from `seeders/index.ts`.
import type { Sql, TxSql } from '../db/client.ts';
import { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
import { MigratorError } from './migrator-error.ts';
import { MIGRATOR_LOCK_KEY, pendingMigrations } from './runner.ts';

export interface SeedContext {
  /** The migrator's environment (seeders validate the variables they need, e.g. the bootstrap ones). */
  env: Record<string, string | undefined>;
  /** One line per step; never pass a secret. */
  log: (line: string) => void;
  /** Project root (catalog JSON and registry paths are resolved from it). */
  root: string;
}

export interface Seeder {
  /** Class-like name used by `db-seed --class <name>`, e.g. `CatalogSeeder`. */
  name: string;
  run(tx: TxSql, ctx: SeedContext): Promise<void>;
}

/** Refuses to seed a database whose schema is behind this build. */
export async function assertSchemaCurrent(sql: Sql, root: string): Promise<void> {
  const pending = await pendingMigrations(sql, { root });
  if (pending.length) {
    throw new MigratorError(
      'SCHEMA_NOT_CURRENT',
      `the database is missing ${pending.length} migration(s) of this build, first ${pending[0]}; run \`svc migrator apply\` (or deploy) before seeding`,
    );
  }
}

/** Who the seeders act as: the migrator process (app.process = 'migrator'), without a tenant or user. */
export const SEEDER_ACTOR: Actor = { kind: 'system', label: 'migrator' };

export async function runSeeders(sql: Sql, seeders: readonly Seeder[], ctx: SeedContext): Promise<void> {
  await assertSchemaCurrent(sql, ctx.root);
  if (seeders.length === 0) {
    ctx.log('no seeders to run');
    return;
  }
  // What the seeders report (counts of rows inserted, updated) is true only once the transaction commits:
  // their lines are held and printed after the commit, and dropped when a later seeder rolls it back.
  const reports: string[] = [];
  const seederCtx: SeedContext = { ...ctx, log: (line) => reports.push(line) };
  // One unit of work like every other operation: the actor context comes first, so triggers and audit
  // see the migrator process acting (no tenant, no user).
  await inUnitOfWork(sql, SEEDER_ACTOR, async (tx) => {
    // Same key as the migration lock: a second migrator's seeding waits instead of interleaving.
    await tx`SELECT pg_advisory_xact_lock(${MIGRATOR_LOCK_KEY})`;
    for (const seeder of seeders) {
      ctx.log(`seeding ${seeder.name}`);
      try {
        await seeder.run(tx, seederCtx);
      } catch (error) {
        const e = error as { code?: string; message?: string };
        // Keep the seeder's own stable code (e.g. a missing bootstrap variable); SQLSTATEs are not ours.
        const code = e.code && /^[A-Z]+(_[A-Z0-9]+)+$/.test(e.code) ? e.code : 'SEEDER_FAILED';
        throw new MigratorError(
          code,
          `${seeder.name} failed, no seeder's changes were kept: ${e.message ?? String(error)}`,
          { cause: error },
        );
      }
    }
  });
  for (const line of reports) ctx.log(line);
  ctx.log(`seeded ${seeders.map((s) => s.name).join(', ')} (committed)`);
}
