// Rate limits of units (`rateLimit` in a unit definition) as the consumer applies them: before a
// delivery of a limited unit runs, it takes one place in the unit's shared window (per tenant for
// scope 'tenant'), across every workers process. Redis holds the windows (src/kv/rate-limit.ts),
// keyed by the database's identity like the gate; while Redis is down, slow, or the identity not yet
// read, this process counts on its own, in memory, with the same arithmetic (process-rate-windows.ts).
// Over the limit, the message goes back to the queue until the window has room, as a copy that keeps
// its receives (tenant-slots.ts sendBackKeepingReceives): waiting for the limit never spends a receive,
// and writes nothing to the run's trail, since the run did not start.
//
// The place is taken once the delivery holds its unit's slot, just before it runs, so the window counts
// executions as they start. A delivery that then turns out not to run (a duplicate the gate or ledger
// replays) still spent its place: the limit counts deliveries let through, never more executions.
//
// The fallback is per process: while Redis is down, each workers process admits up to `max` per window
// on its own, so N processes can start up to N × max together. Redis and the processes' windows are
// separate counts: when Redis answers again its shared window applies, and the moment of the switch can
// let up to one window's `max` more through.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql } from '../../../db/client.ts';
import { knownDatabaseIdentity } from '../../../kv/database-identity.ts';
import { rateLimitKey } from '../../../kv/keys.ts';
import { admitInRedis, type RateDecision } from '../../../kv/rate-limit.ts';
import { redisFallback } from '../../../observe/redis-fallback.ts';
import { ProcessRateWindows } from './process-rate-windows.ts';
import type { RateLimit, WorkUnit } from '../../define/unit.ts';

/** The longest delay SQS gives a message sent back (SendMessage DelaySeconds). */
export const RATE_LIMIT_MAX_DELAY_SECONDS = 900;
/** How long a message waits when its place could not be counted in time (the stage deadline passed), seconds. */
export const RATE_LIMIT_UNCOUNTED_DELAY_SECONDS = 2;

export interface RateLimitDeps {
  sql: Sql;
  /** The Redis client while it answers, else undefined (the runtime's health probe decides). */
  redis: () => Redis | undefined;
  logger: Logger;
  /** The process's clock for its own windows (ms, never going back); default performance.now. */
  now?: () => number;
}

/**
 * Where a decision was taken (the shared window in Redis, or this process's own), the window's key in this
 * process (unit, and tenant for scope `tenant`), and its scope.
 */
export type RateVerdict = RateDecision & { via: 'redis' | 'process'; window: string; scope: 'unit' | 'tenant' };

export class RateLimits {
  readonly #limits: ReadonlyMap<string, Required<RateLimit>>;
  readonly #deps: RateLimitDeps;
  readonly #own = new ProcessRateWindows();

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
   * Redis failing, the process's own window decides. `json`: the message body parsed as JSON.
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
    const about = { window: tenant === null ? name : `${name}\u0000${tenant}`, scope: limit.scope };
    const redis = this.#deps.redis();
    const database = knownDatabaseIdentity(this.#deps.sql);
    if (redis && database !== undefined) {
      try {
        return { ...(await admitInRedis(redis, rateLimitKey(database, name, windowMs, tenant), limit.max, windowMs)), via: 'redis', ...about };
      } catch (error) {
        redisFallback('rate_limit');
        this.#deps.logger.debug({ err: error, unit: name }, 'rate limit: redis did not answer, this process counts on its own');
      }
    }
    const decision = this.#own.admit(about.window, limit.max, windowMs, this.#deps.now?.() ?? performance.now());
    return { ...decision, via: 'process', ...about };
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

/**
 * Seconds a message over its limit waits in the queue: until the window has room, plus a jitter of up
 * to a tenth of that (at least 0.25 s) so the messages refused together do not all come back in the same
 * instant; whole seconds (the queue's unit), at least 1, at most SQS's longest delay.
 */
export function rateLimitDelaySeconds(waitMs: number, random: () => number = Math.random): number {
  const jitterMs = random() * Math.max(250, waitMs / 10);
  return Math.min(RATE_LIMIT_MAX_DELAY_SECONDS, Math.max(1, Math.ceil((waitMs + jitterMs) / 1000)));
}
