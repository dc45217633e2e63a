// Rate limits of units (`rateLimit` in a unit definition) as the consumer applies them: before a
// delivery of a limited unit runs, it takes one place in the unit's shared window (per tenant for
// scope 'tenant'), across every workers process. Redis holds the windows (src/kv/rate-limit.ts),
// keyed by the database's identity like the gate. While Redis is down, slow, or the identity not yet
// read, the database holds them instead: the delivery goes on carrying its window, and its registration
// takes the place in the same transaction as its `received` event (execute/rate-window.ts).
// Over the limit, the message goes back to the queue until the window has room, as a copy that keeps
// its receives (tenant-slots.ts sendBackKeepingReceives): waiting for the limit never spends a receive,
// and writes nothing to the run's trail, since the run did not start.
//
// The place is taken once the delivery holds its unit's slot, just before it runs, so the window counts
// executions as they start. A delivery that then turns out not to run (a duplicate the gate or ledger
// replays) still spent its place in Redis: the limit counts deliveries let through, never more executions.
//
// Redis's windows and the database's are separate counts: when Redis goes away or answers again, the
// switch can let up to one window's `max` more through.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql } from '../../../db/client.ts';
import { knownDatabaseIdentity } from '../../../kv/database-identity.ts';
import { rateLimitKey } from '../../../kv/keys.ts';
import { admitInRedis, type RateDecision } from '../../../kv/rate-limit.ts';
import { redisFallback } from '../../../observe/redis-fallback.ts';
import type { DatabaseRateWindow } from '../execute/rate-window.ts';
import type { RateLimit, WorkUnit } from '../../define/unit.ts';

/** How long a message waits when its place could not be counted in time (the stage deadline passed), seconds. */
export const RATE_LIMIT_UNCOUNTED_DELAY_SECONDS = 2;

export interface RateLimitDeps {
  sql: Sql;
  /** The Redis client while it answers, else undefined (the runtime's health probe decides). */
  redis: () => Redis | undefined;
  logger: Logger;
}

/**
 * Where a decision was taken, the window's key in this process (unit, and tenant for scope `tenant`), and
 * its scope. `via: 'database'`: Redis could not decide, and the delivery carries `database`, the window
 * its registration takes a place in (admitted here, decided there).
 */
export type RateVerdict = (RateDecision & { via: 'redis' } | { admitted: true; via: 'database'; database: DatabaseRateWindow }) & {
  window: string;
  scope: 'unit' | 'tenant';
};

export class RateLimits {
  readonly #limits: ReadonlyMap<string, Required<RateLimit>>;
  readonly #deps: RateLimitDeps;

  constructor(limits: ReadonlyMap<string, Required<RateLimit>>, deps: RateLimitDeps) {
    this.#limits = limits;
    this.#deps = deps;
  }

  /** The limits of the consumed units that have one. */
  static forUnits(units: Iterable<WorkUnit>, deps: RateLimitDeps): RateLimits {
    const limits = new Map<string, Required<RateLimit>>();
    for (const unit of units) if (unit.rateLimit) limits.set(unit.name, unit.rateLimit);
    return new RateLimits(limits, deps);
  }

  get empty(): boolean {
    return this.#limits.size === 0;
  }

  /**
   * Takes a place in the window of the message's unit (and tenant): null when the message is not limited
   * (no limit on its unit, an unreadable body: its checks then decide), else the verdict. Never throws:
   * Redis failing, the database decides (`via: 'database'`). `json`: the message body parsed as JSON.
   */
  async admit(json: unknown): Promise<RateVerdict | null> {
    if (this.#limits.size === 0) return null;
    const { name, tenant_id: tenantId } = (typeof json === 'object' && json !== null ? json : {}) as { name?: unknown; tenant_id?: unknown };
    if (typeof name !== 'string') return null;
    const limit = this.#limits.get(name);
    if (limit === undefined) return null;
    let tenant: string | null = null;
    if (limit.scope === 'tenant') {
      // A tenant unit's message without its tenant is malformed: the checks dead-letter it.
      if (typeof tenantId !== 'string' && typeof tenantId !== 'number') return null;
      tenant = String(tenantId);
    }
    const windowMs = Math.max(1, Math.round(limit.perSeconds * 1000));
    const about = { window: tenant === null ? name : `${name}/${tenant}`, scope: limit.scope };
    const redis = this.#deps.redis();
    const database = knownDatabaseIdentity(this.#deps.sql);
    if (redis && database !== undefined) {
      try {
        return { ...(await admitInRedis(redis, rateLimitKey(database, name, windowMs, tenant), limit.max, windowMs)), via: 'redis', ...about };
      } catch (error) {
        redisFallback('rate_limit');
        this.#deps.logger.debug({ err: error, unit: name }, 'rate limit: redis did not answer, the database holds the window');
      }
    }
    return { admitted: true, via: 'database', database: { key: about.window, max: limit.max, windowMs }, ...about };
  }
}

/**
 * A wait shorter than this is waited in the process instead of in the queue: the queue delays by whole
 * seconds, so a message sent back for the 100 ms until the window has room would come back a second
 * later and leave the room unused. The message gives its unit's slot back meanwhile (consumer.ts).
 */
export const RATE_LIMIT_WAIT_IN_PROCESS_MS = 1_000;
/** Waits in the process one delivery makes at most before it goes back to the queue. */
export const RATE_LIMIT_MAX_WAITS_IN_PROCESS = 10;

/**
 * Whether a delivery refused by `verdict` waits in the process, its `waits` so far and `waiting` the
 * messages of its window already waiting in this consumer. At most the unit's `slots` worth wait per
 * window, so a limited unit never holds more of the process than its own share; for scope `tenant`, at
 * most half of that per tenant, so one tenant's waiting messages never take all of the unit's share.
 */
export function waitsInProcess(verdict: RateVerdict, waits: number, waiting: number, slots: number): boolean {
  if (verdict.admitted || verdict.waitMs >= RATE_LIMIT_WAIT_IN_PROCESS_MS || waits >= RATE_LIMIT_MAX_WAITS_IN_PROCESS) return false;
  return waiting < (verdict.scope === 'tenant' ? Math.max(1, Math.floor(slots / 2)) : slots);
}
