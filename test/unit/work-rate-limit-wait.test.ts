// How long a delivery over its unit's rate limit waits, and where: the queue delay made of the time until
// the window has room (whole seconds, jittered, capped at SQS's 900 s), which waits stay in the process,
// and who decides while Redis is unusable (the database, at registration: execute/rate-window.ts).
import { describe, expect, it } from 'vitest';
import { waitsInProcess, type RateVerdict } from '../../src/work/runtime/consume/rate-limit.ts';
import { RATE_LIMIT_MAX_DELAY_SECONDS, rateLimitDelaySeconds } from '../../src/work/runtime/execute/rate-window.ts';
import pino from 'pino';
import { z } from 'zod';
import type { Sql } from '../../src/db/client.ts';
import { RateLimits } from '../../src/work/runtime/consume/rate-limit.ts';
import { defineTask } from '../../src/work/define/unit.ts';

describe('rateLimitDelaySeconds', () => {
  it('is whole seconds, at least 1, the wait plus up to a tenth (at least 0.25 s) of jitter', () => {
    expect(rateLimitDelaySeconds(100, () => 0)).toBe(1);
    expect(rateLimitDelaySeconds(1_500, () => 0)).toBe(2);
    expect(rateLimitDelaySeconds(1_900, () => 0.99)).toBe(3);
    expect(rateLimitDelaySeconds(10_000, () => 0.99)).toBe(11);
  });

  it("is capped at SQS's longest delay", () => {
    expect(rateLimitDelaySeconds(3_600_000, () => 0.5)).toBe(RATE_LIMIT_MAX_DELAY_SECONDS);
  });
});

describe('waitsInProcess', () => {
  const refused = (waitMs: number, scope: 'unit' | 'tenant' = 'unit'): RateVerdict => ({ admitted: false, waitMs, via: 'redis', window: 'u', scope });

  it('waits here under a second, within the unit share and a bounded number of times', () => {
    expect(waitsInProcess(refused(200), 0, 0, 4)).toBe(true);
    expect(waitsInProcess(refused(1_000), 0, 0, 4)).toBe(false);
    expect(waitsInProcess(refused(200), 0, 4, 4)).toBe(false);
    expect(waitsInProcess(refused(200), 10, 0, 4)).toBe(false);
    expect(waitsInProcess({ admitted: true, via: 'redis', window: 'u', scope: 'unit' }, 0, 0, 4)).toBe(false);
  });

  it("one tenant's waiting messages take at most half of the unit's share", () => {
    expect(waitsInProcess(refused(200, 'tenant'), 0, 1, 4)).toBe(true);
    expect(waitsInProcess(refused(200, 'tenant'), 0, 2, 4)).toBe(false);
    expect(waitsInProcess(refused(200, 'tenant'), 0, 0, 1)).toBe(true);
  });
});

describe('RateLimits without Redis', () => {
  const unit = defineTask({
    name: 'demo.paced',
    queue: 'default',
    context: 'tenant',
    rateLimit: { max: 3, perSeconds: 1.5, scope: 'tenant' },
    payload: z.object({}),
    async handler() {},
  });
  // Never queried: without Redis the identity is not needed (a lookup that fails is swallowed).
  const sql = (() => Promise.reject(new Error('no database here'))) as unknown as Sql;

  it('admits every delivery and hands its window to the database, which takes the place at registration', async () => {
    const limits = RateLimits.forUnits([unit], { sql, redis: () => undefined, logger: pino({ level: 'silent' }) });
    for (let i = 0; i < 5; i++) {
      expect(await limits.admit({ name: unit.name, tenant_id: '7' })).toEqual({
        admitted: true,
        via: 'database',
        database: { key: 'demo.paced/7', max: 3, windowMs: 1_500 },
        window: 'demo.paced/7',
        scope: 'tenant',
      });
    }
    // Another unit's message is not limited.
    expect(await limits.admit({ name: 'demo.other' })).toBeNull();
  });
});
