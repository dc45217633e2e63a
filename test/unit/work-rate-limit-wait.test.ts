// How long a delivery over its unit's rate limit waits, and where: the time until the sliding window
// has room (the in-process window's arithmetic, the Redis script's twin), the queue delay made of it (whole
// seconds, jittered, capped at SQS's 900 s), and which waits stay in the process.
import { describe, expect, it } from 'vitest';
import { RATE_LIMIT_MAX_DELAY_SECONDS, rateLimitDelaySeconds, waitsInProcess, type RateVerdict } from '../../src/work/runtime/consume/rate-limit.ts';
import { waitForRoom } from '../../src/work/runtime/consume/process-rate-windows.ts';

describe('waitForRoom', () => {
  it('a full window waits for the next, until its count has faded below the limit', () => {
    // 10 at 200 ms into the window: 800 ms to its end, then 10 × (1 − y) < 10 for any y > 0.
    expect(waitForRoom(10, 1_000, 200, 0, 10)).toBe(801);
    // 20 counted (a burst over two workers' races cannot pass 10, but a changed limit can): half the next window too.
    expect(waitForRoom(10, 1_000, 200, 0, 20)).toBe(1_301);
  });

  it("room in this window's count waits for the previous window's weight to fade", () => {
    // 10 last window, 4 now: at 300 ms the estimate is 10 × 0.7 + 4 = 11; at 400 ms 10 × 0.6 + 4 = 10, not
    // under 10 yet; just past it, it is.
    expect(waitForRoom(10, 1_000, 300, 10, 4)).toBe(101);
  });

  it('never answers less than 1 ms', () => {
    expect(waitForRoom(10, 1_000, 999, 10, 9)).toBeGreaterThanOrEqual(1);
  });
});

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
