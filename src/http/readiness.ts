// Readiness: the database and Redis answer and the schema holds this build's newest migration. Each
// probe is bounded so /ready answers promptly; failures become public reasons, never error text.
import type { Redis } from 'ioredis';
import type { Sql } from '../db/client.ts';
import { CONTROL_TABLE } from '../migrator/runner.ts';

export interface Readiness {
  ready: boolean;
  database: 'ok' | 'unreachable';
  redis: 'ok' | 'unreachable';
  /**
   * This build's newest migration when the database answers and does not hold it yet; null otherwise
   * (while the database is unreachable the schema is unknown, and the reason is the database).
   */
  pendingMigration: string | null;
  /**
   * Why the database probe failed, for the log only: the SQLSTATE (28P01 a wrong password), the socket
   * error code (ECONNREFUSED) or PROBE_TIMEOUT; never a message, which may name the user or host.
   */
  databaseProblem: string | null;
}

/** The code of a failed database probe: safe to log (no credential, no host). */
function problemCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(code)) return code;
  return error instanceof ProbeTimeout ? 'PROBE_TIMEOUT' : 'UNKNOWN';
}

class ProbeTimeout extends Error {}

function within<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProbeTimeout('probe timed out')), timeoutMs);
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
  const pendingMigration = migration.status === 'fulfilled' && !migration.value ? deps.latestMigration : null;
  const redisState = redis.status === 'fulfilled' ? 'ok' : 'unreachable';
  return {
    ready: database === 'ok' && redisState === 'ok' && pendingMigration === null,
    database,
    redis: redisState,
    pendingMigration,
    databaseProblem: migration.status === 'rejected' ? problemCode(migration.reason) : null,
  };
}
