// Cache of run status for GET /task-runs/{runId}: a run in progress for 5 s, a finished run for 1 day.
// The entry names its tenant and database (src/http/run-status.ts): the key is shared by every stack on the Redis.
// Every committed transition evicts it. Redis failures are swallowed: the database answers instead.
import type { Redis } from 'ioredis';
import { redisFallback } from '../observe/redis-fallback.ts';
import { runStatusKey } from './keys.ts';

export const RUN_STATUS_TTL_IN_PROGRESS_MS = 5_000;
export const RUN_STATUS_TTL_FINISHED_MS = 86_400_000;
export const FINISHED_STATUSES = new Set(['succeeded', 'failed', 'skipped']);

export async function readCachedRunStatus(redis: Redis, runId: string): Promise<string | null> {
  try {
    return await redis.get(runStatusKey(runId));
  } catch {
    redisFallback('run_status_read');
    return null;
  }
}

export async function cacheRunStatus(redis: Redis, runId: string, status: string, json: string): Promise<void> {
  const ttl = FINISHED_STATUSES.has(status) ? RUN_STATUS_TTL_FINISHED_MS : RUN_STATUS_TTL_IN_PROGRESS_MS;
  try {
    await redis.set(runStatusKey(runId), json, 'PX', ttl);
  } catch {
    redisFallback('run_status_write');
    // Not authoritative: a missed cache write only costs a database read.
  }
}

/** Called after every committed transition of a run (or of several: one DEL for all of them). */
export async function evictRunStatus(redis: Redis | undefined, runId: string | readonly string[]): Promise<void> {
  if (!redis) return;
  const keys = typeof runId === 'string' ? [runStatusKey(runId)] : runId.map(runStatusKey);
  if (keys.length === 0) return;
  try {
    await redis.del(...keys);
  } catch {
    redisFallback('run_status_evict');
    // If Redis is down nothing is cached there either; a stale entry expires within 5 s.
  }
}
