// Status of one run for GET /task-runs/{runId}: Redis first, then the database inside a unit of work
// bound to the caller, then cached (5 s in progress, 1 day finished; see src/kv/run-status-cache.ts).
// The cache entry carries the run's tenant so a run of another tenant reads exactly like a missing one,
// and its database's identity so an entry written by a stack on another database sharing the Redis
// (the same run id in a clone or a copy) is never served here: it reads as a miss.
import type { Redis } from 'ioredis';
import type { Sql } from '../db/client.ts';
import { inUnitOfWork } from '../db/unit-of-work.ts';
import type { Session } from '../auth/session-resolver.ts';
import { databaseIdentityOf } from '../kv/database-identity.ts';
import { cacheRunStatus, readCachedRunStatus } from '../kv/run-status-cache.ts';

/** The `data` of a run-status response. Instants are ISO 8601 UTC with Z; no internal numeric id. */
export interface RunStatus {
  runId: string;
  name: string;
  queue: string;
  status: string;
  progress: number;
  attempts: number;
  outcome: Record<string, unknown>;
  queuedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
}

const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

export async function selectRunStatus(sql: Sql, session: Session, runId: string): Promise<RunStatus | null> {
  return inUnitOfWork(
    sql,
    { kind: 'user', tenantId: session.tenantId, userId: session.userId, membershipId: session.membershipId, label: 'api' },
    async (tx) => {
      const rows = await tx.unsafe(
        `SELECT run_id::text AS "runId", name, queue, status, progress, attempts, outcome,
                ${iso('queued_at')} AS "queuedAt", ${iso('started_at')} AS "startedAt",
                ${iso('finished_at')} AS "finishedAt", ${iso('updated_at')} AS "updatedAt"
           FROM task_runs WHERE run_id = $1 AND tenant_id = $2`,
        [runId, session.tenantId],
      );
      return (rows[0] as RunStatus | undefined) ?? null;
    },
  );
}

/** Cache entry: `<tenantId>@<database identity>|<data JSON>`, so a hit needs no JSON parse before it is served. */
function cacheEntry(tenantId: string, database: string, dataJson: string): string {
  return `${tenantId}@${database}|${dataJson}`;
}

/** The JSON of `data` for the caller's run, or null when no such run exists for the caller's tenant. */
export async function runStatusJson(sql: Sql, redis: Redis, session: Session, runId: string): Promise<string | null> {
  const [cached, database] = await Promise.all([readCachedRunStatus(redis, runId), databaseIdentityOf(sql)]);
  if (cached !== null) {
    const bar = cached.indexOf('|');
    const at = cached.lastIndexOf('@', bar);
    // Another database's entry (or one without a database) is a miss; this database's entry of another tenant is no run.
    if (bar > 0 && at > 0 && cached.slice(at + 1, bar) === database) {
      return cached.slice(0, at) === session.tenantId ? cached.slice(bar + 1) : null;
    }
  }
  const status = await selectRunStatus(sql, session, runId);
  if (!status) return null;
  const json = JSON.stringify(status);
  await cacheRunStatus(redis, runId, status.status, cacheEntry(session.tenantId, database, json));
  return json;
}
