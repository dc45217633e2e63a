// The in-process fallback of units' rate limits (process-rate-windows.ts): while Redis is down, one
// workers process holds its own sliding windows with the Redis script's arithmetic, so a single process
// still admits at most `max` per window; RateLimits decides there whenever Redis is unusable.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import type { Sql } from '../../src/db/client.ts';
import { ProcessRateWindows } from '../../src/work/runtime/consume/process-rate-windows.ts';
import { RateLimits } from '../../src/work/runtime/consume/rate-limit.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { z } from 'zod';

/** Admissions of `calls` attempts spread evenly over [from, from + spanMs). */
function admittedOver(w: ProcessRateWindows, key: string, max: number, windowMs: number, from: number, spanMs: number, calls: number): number[] {
  const at: number[] = [];
  for (let i = 0; i < calls; i++) {
    const now = from + Math.floor((i * spanMs) / calls);
    if (w.admit(key, max, windowMs, now).admitted) at.push(now);
  }
  return at;
}

describe('ProcessRateWindows', () => {
  it('admits max in a window, then refuses with the wait until the window has room', () => {
    const w = new ProcessRateWindows();
    for (let i = 0; i < 10; i++) expect(w.admit('u', 10, 1_000, 5_200).admitted).toBe(true);
    // Full at 200 ms into the window: 800 ms to its end, then the previous count must fade below 10.
    expect(w.admit('u', 10, 1_000, 5_200)).toEqual({ admitted: false, waitMs: 801 });
    // Just into the next window, 10 × (1 − 0.001) < 10: one more fits.
    expect(w.admit('u', 10, 1_000, 6_001).admitted).toBe(true);
  });

  it('a steady stream far over the limit is held to max per window over many windows', () => {
    const w = new ProcessRateWindows();
    // 100 attempts a second for 20 s, at most 10 a second admitted.
    const at = admittedOver(w, 'u', 10, 1_000, 0, 20_000, 2_000);
    // Past the first window, every one-second stretch holds at most max (+1 at a window boundary,
    // where the estimate counts the previous window as spread evenly).
    for (let from = 1_000; from <= 19_000; from += 100) {
      expect(at.filter((t) => t >= from && t < from + 1_000).length, `from ${from}`).toBeLessThanOrEqual(11);
    }
    // Over the whole stretch, max per window within a tenth.
    expect(at.length).toBeGreaterThanOrEqual(180);
    expect(at.length).toBeLessThanOrEqual(210);
  });

  it('keeps windows apart by key and by window length', () => {
    const w = new ProcessRateWindows();
    expect(w.admit('a', 1, 1_000, 0).admitted).toBe(true);
    expect(w.admit('a', 1, 1_000, 1).admitted).toBe(false);
    expect(w.admit('b', 1, 1_000, 1).admitted).toBe(true);
    // A changed window length starts afresh.
    expect(w.admit('a', 1, 2_000, 2).admitted).toBe(true);
  });

  it('a clock that went back keeps the newer window', () => {
    const w = new ProcessRateWindows();
    expect(w.admit('u', 1, 1_000, 10_500).admitted).toBe(true);
    expect(w.admit('u', 1, 1_000, 9_000).admitted).toBe(false);
  });

  it('forgets windows that weigh on no decision any more', () => {
    const w = new ProcessRateWindows();
    for (let t = 0; t < 50; t++) w.admit(`tenant-${t}`, 1, 1_000, 0);
    expect(w.size).toBe(50);
    w.admit('later', 1, 1_000, 60_000);
    expect(w.size).toBe(1);
  });
});

describe('RateLimits without Redis', () => {
  const unit = defineTask({
    name: 'demo.paced',
    queue: 'default',
    context: 'system',
    rateLimit: { max: 3, perSeconds: 1 },
    payload: z.object({}),
    async handler() {},
  });
  // Never queried: without Redis the identity is not needed (a lookup that fails is swallowed).
  const sql = (() => Promise.reject(new Error('no database here'))) as unknown as Sql;

  it('this process decides on its own window: max per window, then a wait', async () => {
    let now = 10_000;
    const limits = RateLimits.forUnits([unit], { sql, redis: () => undefined, logger: pino({ level: 'silent' }), now: () => now });
    const verdicts = [];
    for (let i = 0; i < 4; i++) verdicts.push(await limits.admit({ name: unit.name }));
    expect(verdicts.map((v) => v?.admitted)).toEqual([true, true, true, false]);
    expect(verdicts.every((v) => v?.via === 'process')).toBe(true);
    expect(verdicts[3]).toMatchObject({ admitted: false, waitMs: 1_001 });
    now += 1_001;
    expect(await limits.admit({ name: unit.name })).toMatchObject({ admitted: true, via: 'process' });
    // Another unit's message is not limited.
    expect(await limits.admit({ name: 'demo.other' })).toBeNull();
  });
});
