// Readiness: the database and Redis answer and the schema holds this build's newest migration. Each
// probe is bounded so /ready answers promptly; failures become public reasons, never error text.
import type { Redis } from 'ioredis';
import type { Sql } from '../db/client.ts';
import { CONTROL_TABLE } from '../migrator/runner.ts';

export interface Readiness {
  ready: boolean;
  database: 'ok' | 'unreachable';
  redis: 'ok' | 'unreachable';
  /** This build's newest migration when the database does not hold it yet; null otherwise. */
  pendingMigration: string | null;
}

function within<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('probe timed out')), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** True when the migration-control table holds `name`; a missing table means nothing is applied. */
export async function migrationApplied(sql: Sql, name: string): Promise<boolean> {
  try {
    const [row] = await sql.unsafe(`SELECT EXISTS (SELECT 1 FROM ${CONTROL_TABLE} WHERE name = $1) AS applied`, [name]);
    return Boolean(row?.applied);
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return false; // undefined_table: never migrated
    throw error;
  }
}

export async function checkReadiness(
  deps: { sql: Sql; redis: Redis; latestMigration: string },
  timeoutMs: number,
): Promise<Readiness> {
  const [migration, redis] = await Promise.allSettled([
    within(migrationApplied(deps.sql, deps.latestMigration), timeoutMs),
    within(deps.redis.ping(), timeoutMs),
  ]);
  const database = migration.status === 'fulfilled' ? 'ok' : 'unreachable';
  const pendingMigration = migration.status === 'fulfilled' && migration.value ? null : deps.latestMigration;
  const redisState = redis.status === 'fulfilled' ? 'ok' : 'unreachable';
  return {
    ready: database === 'ok' && redisState === 'ok' && pendingMigration === null,
    database,
    redis: redisState,
    pendingMigration,
  };
}
