// Every Redis key the service uses, in one place.

/** List the API and dispatchers push onto after commit; the relay blocks on it (BLMPOP, src/kv/wake.ts). */
export const OUTBOX_WAKE_KEY = 'svc:outbox:wake';

/** Set by a relay whose fairness cap holds rows back; the first run to finish after it takes it and wakes the relay (src/kv/wake.ts). */
export const RELAY_CAPPED_KEY = 'svc:relay:capped';

/** Cached status of one run, as served by GET /task-runs/{runId}. */
export function runStatusKey(runId: string): string {
  return `svc:run-status:${runId}`;
}

/**
 * Idempotency gate and fast replay of one unit execution (key is the hex digest), in the namespace of
 * its database (src/kv/database-identity.ts): stacks with databases of their own sharing one Redis
 * never meet each other's gates.
 */
export function idempotencyGateKey(database: string, scope: 'tenant' | 'platform', tenantId: string | null, keyHex: string): string {
  return scope === 'tenant' ? `svc:idem:${database}:t:${tenantId}:${keyHex}` : `svc:idem:${database}:p:${keyHex}`;
}

/**
 * The shared window of a unit's rate limit (src/kv/rate-limit.ts), in the namespace of its database, for
 * one window length (a deploy that changes it starts afresh) and, for a per-tenant limit, one tenant.
 */
export function rateLimitKey(database: string, unit: string, windowMs: number, tenantId: string | null): string {
  return tenantId === null ? `svc:rate:${database}:${unit}:${windowMs}` : `svc:rate:${database}:${unit}:${windowMs}:t:${tenantId}`;
}
