// `tenantConcurrency` in a unit definition: a tenant's share of the unit's slots in one worker
// process. Real worker runtime, PostgreSQL, Redis and SQS server (test/fixtures/work-harness.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Actor } from '../../src/db/unit-of-work.ts';
import { defineTask, unitProblems, type WorkUnit } from '../../src/work/define/unit.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createTenant } from './work-tables-support.ts';

/** Executions in progress and the most seen at once, per tenant. */
const active = new Map<string, number>();
const peak = new Map<string, number>();
const startedAt = new Map<string, number>();
const finishedAt = new Map<string, number>();

const fairSlow = defineTask({
  name: 'fair.slow',
  queue: 'default',
  context: 'tenant',
  concurrency: 4,
  tenantConcurrency: 1,
  payload: z.object({ tenant: z.string(), n: z.number() }),
  async handler(payload) {
    const key = payload.tenant;
    active.set(key, (active.get(key) ?? 0) + 1);
    peak.set(key, Math.max(peak.get(key) ?? 0, active.get(key)!));
    startedAt.set(`${key}:${payload.n}`, performance.now());
    await new Promise((r) => setTimeout(r, 300));
    finishedAt.set(`${key}:${payload.n}`, performance.now());
    active.set(key, active.get(key)! - 1);
  },
});

const fairQuick = defineTask({
  name: 'fair.quick',
  queue: 'bulk',
  context: 'tenant',
  payload: z.object({ n: z.number() }),
  async handler() {},
});

let h: WorkHarness;
beforeAll(async () => {
  h = await workHarness({ units: new Map<string, WorkUnit>([[fairSlow.name, fairSlow], [fairQuick.name, fairQuick]]) });
});
afterAll(async () => {
  await h?.close();
});

describe('tenantConcurrency', () => {
  it('is validated against the unit concurrency', () => {
    expect(unitProblems({ ...fairSlow, tenantConcurrency: 5 })).toEqual([expect.stringContaining('tenantConcurrency')]);
    expect(unitProblems({ ...fairSlow, tenantConcurrency: 0 })).toEqual([expect.stringContaining('tenantConcurrency')]);
    expect(unitProblems(fairSlow)).toEqual([]);
  });

  it("holds a tenant to its share of the unit's slots; other tenants run beside it; going back spends no receive", async () => {
    const a = await createTenant(h.sql);
    const b = await createTenant(h.sql);
    const actor = (tenantId: string): Actor => ({ kind: 'system', tenantId, label: 'fairness-worker-test' });
    const runs: string[] = [];
    for (let n = 0; n < 4; n++) runs.push((await h.dispatch('fair.slow', { tenant: 'a', n }, actor(a))).runId);
    for (let n = 0; n < 2; n++) runs.push((await h.dispatch('fair.slow', { tenant: 'b', n }, actor(b))).runId);
    await h.relay();
    await h.startWorkers();
    for (const runId of runs) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000)).status).toBe('succeeded');

    expect(peak.get('a')).toBe(1);
    expect(peak.get('b')).toBe(1);
    // B's first run did not wait for A's four: it started before A's last one finished.
    const lastA = Math.max(...[0, 1, 2, 3].map((n) => finishedAt.get(`a:${n}`)!));
    expect(startedAt.get('b:0')!).toBeLessThan(lastA);
    for (const runId of runs) {
      const trail = await h.trail(runId);
      const received = trail.filter((e) => e.event === 'received');
      expect(received.map((e) => e.receive_count), runId).toEqual([1]);
      expect(trail.some((e) => e.event === 'dead_lettered'), runId).toBe(false);
    }
  });

  it("R-OBX-10 a relay whose cap holds a lone tenant's burst back is woken by the runs that finish: the burst drains without waiting for its capped poll", async () => {
    const t = await createTenant(h.sql);
    const actor: Actor = { kind: 'system', tenantId: t, label: 'fairness-worker-test' };
    const runs: string[] = [];
    for (let n = 0; n < 12; n++) runs.push((await h.dispatch('fair.quick', { n }, actor)).runId);
    // Cap 2 and a capped poll of a minute: past the first two runs, only the finishes' signals send more.
    const workers = await h.startWorkers({ queues: ['bulk'], relay: { tenantInflightMax: 2, cappedPollMs: 60_000, sweepIntervalMs: 60_000 } });
    try {
      for (const runId of runs) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000)).status).toBe('succeeded');
    } finally {
      await workers.stop();
    }
    // The cap held: each `sent` came after all but at most one of the earlier sent runs had finished.
    const order = await h.sql<{ run_id: string; sent: Date; finished: Date }[]>`
      SELECT r.run_id, e.occurred_at AS sent, r.finished_at AS finished FROM task_runs r
        JOIN task_run_events e ON e.run_id = r.run_id AND e.event = 'sent'
       WHERE r.run_id = ANY(${runs}::uuid[]) ORDER BY e.occurred_at`;
    expect(order).toHaveLength(12);
    for (const [i, row] of order.entries()) {
      const stillInFlight = order.slice(0, i).filter((earlier) => earlier.finished > row.sent).length;
      expect(stillInFlight, `runs in flight when run ${i} was sent`).toBeLessThanOrEqual(1);
    }
  });
});
