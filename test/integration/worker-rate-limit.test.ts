// `rateLimit` in a unit definition: executions of the unit start at most `max` per `perSeconds`
// across every workers process (here two worker runtimes on one database, Redis and queue, and two
// workers processes for the 30-second check), per unit or per tenant. Deliveries over the limit go back
// to the queue without spending a receive: each run is received for execution once, attempted once, and
// nothing is lost or run twice. With Redis stopped, the database holds the window, shared by the
// workers as Redis's was: no second ever holds more than `max` places.
// Real PostgreSQL, Redis and SQS server; real child processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Redis } from 'ioredis';
import type { Actor } from '../../src/db/unit-of-work.ts';
import { startRedisServer, type RedisServer } from '../../src/kv/redis-server.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { startWorkerChild } from '../fixtures/worker-child-process.ts';
import { rateLimitedTask } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';
import { createTenant } from './work-tables-support.ts';
import { connectedRedis } from '../support/services.ts';

/** Executions per run id, over both runtimes (they share this test process). */
const executions = new Map<string, number>();
const handler = async (_payload: unknown, run: { runId: string }) => {
  executions.set(run.runId, (executions.get(run.runId) ?? 0) + 1);
  await new Promise((r) => setTimeout(r, 20));
};

const PER_SECOND = 10;
const limited = defineTask({
  name: 'rate.limited',
  queue: 'default',
  context: 'system',
  concurrency: 4,
  rateLimit: { max: PER_SECOND, perSeconds: 1 },
  payload: z.object({ n: z.number() }),
  handler,
});
const PER_TENANT = 4;
const perTenant = defineTask({
  name: 'rate.per_tenant',
  queue: 'bulk',
  context: 'tenant',
  concurrency: 4,
  rateLimit: { max: PER_TENANT, perSeconds: 1, scope: 'tenant' },
  payload: z.object({ n: z.number() }),
  handler,
});
const units = new Map<string, WorkUnit>([[limited.name, limited], [perTenant.name, perTenant], [rateLimitedTask.name, rateLimitedTask]]);

let h: WorkHarness;
let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  // A Redis of this file's own, so one test can stop it.
  h = await workHarness({ redis: false, units });
  server = await startRedisServer();
  redis = await connectedRedis(server.url, { name: 'rate-limit-test', autoPipelining: true });
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
  await h?.close();
});

/** Two worker runtimes of the same stack, as two workers processes. */
async function twoWorkers(queue: 'default' | 'bulk' | 'critical', withRedis: boolean) {
  const options = { queues: [queue], redis: withRedis ? redis : undefined, redisProbeIntervalMs: 200 };
  return [await h.startWorkers({ ...options, workerInstance: 'worker-a' }), await h.startWorkers({ ...options, workerInstance: 'worker-b' })];
}

async function relayAll(): Promise<void> {
  await waitFor(
    async () => {
      await h.relay();
      const [row] = await h.sql<{ n: number }[]>`
        SELECT (SELECT count(*) FROM outbox_messages WHERE sent_at IS NULL) + (SELECT count(*) FROM platform_outbox_messages WHERE sent_at IS NULL) AS n`;
      return Number(row!.n) === 0;
    },
    20_000,
    { what: 'every run sent' },
  );
}

/** The database instants (ms) at which the runs started (or were received), in order, and which worker did. */
async function starts(runIds: string[], event: 'started' | 'received' = 'started'): Promise<Array<{ at: number; worker: string }>> {
  const rows = await h.sql<{ at: string; worker: string }[]>`
    SELECT (extract(epoch FROM occurred_at) * 1000)::float8::text AS at, worker_instance AS worker FROM platform_task_run_events
     WHERE run_id = ANY(${runIds}::uuid[]) AND event = ${event}
    UNION ALL
    SELECT (extract(epoch FROM occurred_at) * 1000)::float8::text, worker_instance FROM task_run_events
     WHERE run_id = ANY(${runIds}::uuid[]) AND event = ${event}
    ORDER BY 1`;
  return rows.map((r) => ({ at: Number(r.at), worker: r.worker })).sort((a, b) => a.at - b.at);
}

/** Starts within [from, from + ms). */
const startedWithin = (at: number[], from: number, ms: number) => at.filter((t) => t >= from && t < from + ms).length;

/**
 * Each run succeeded, ran once, was received for execution once (receive 1) and attempted once. Ran once:
 * by this process's count, or by the trail (one `started`) for runs executed by child processes.
 */
async function expectEachRanOnceWithoutSpentReceives(runIds: string[], ranBy: 'this process' | 'children' = 'this process', timeoutMs = 30_000): Promise<void> {
  for (const runId of runIds) {
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], timeoutMs);
    expect(run.status, runId).toBe('succeeded');
    expect(run.attempts, runId).toBe(1);
    const trail = await h.trail(runId);
    if (ranBy === 'this process') expect(executions.get(runId), runId).toBe(1);
    else expect(trail.filter((e) => e.event === 'started'), runId).toHaveLength(1);
    expect(trail.filter((e) => e.event === 'received').map((e) => e.receive_count), runId).toEqual([1]);
    expect(trail.filter((e) => ['retry_scheduled', 'failed', 'dead_lettered'].includes(e.event)), runId).toEqual([]);
  }
}

/**
 * The pace over the backlog: after the first second (whose burst the window admits at once), the
 * starts of the next `seconds` are `perSecond` a second within ±10%.
 */
function expectPace(at: number[], perSecond: number, seconds: number): void {
  const first = at[0]!;
  const measured = startedWithin(at, first + 1_000, seconds * 1_000);
  expect(measured, `starts in the ${seconds} s after the first second: ${JSON.stringify(at.map((t) => Math.round(t - first)))}`).toBeGreaterThanOrEqual(
    Math.floor(perSecond * seconds * 0.9),
  );
  expect(measured).toBeLessThanOrEqual(Math.ceil(perSecond * seconds * 1.1));
  // Starts follow their admissions by a varying few ms (more when a burst is larger than the slots), so
  // seconds measured on starts get a margin of half the limit (at least 3) over the window's bounds (a
  // loaded machine delays some starts into the next second: 14 in a second at 10/s was seen):
  // once the windows the first burst weighs on are past (two seconds), `max` in any second; with the
  // first burst, under twice that (the estimate takes the burst as spread over its window, src/kv/rate-limit.ts).
  const margin = Math.max(3, Math.ceil(perSecond / 2));
  const busiest = (from: number) => Math.max(...at.filter((t) => t >= from).map((t) => startedWithin(at, t, 1_000)));
  if (process.env.SVC_TEST_RATE_LIMIT_REPORT) {
    console.log(`pace: ${measured} starts in ${seconds} s after the first second (limit ${perSecond}/s); busiest second ${busiest(first)}, after the first two ${busiest(first + 2_000)}`);
  }
  expect(busiest(first + 2_000)).toBeLessThanOrEqual(perSecond + margin);
  expect(busiest(first)).toBeLessThanOrEqual(2 * perSecond + margin);
}

describe('rateLimit', () => {
  it('a unit limited to 10/s over two workers runs at 10/s ±10%, spends no receive on waiting, loses and duplicates nothing', async () => {
    const workers = await twoWorkers('default', true);
    const runIds: string[] = [];
    for (let n = 0; n < 70; n++) runIds.push((await h.dispatch(limited.name, { n })).runId);
    await relayAll();
    await expectEachRanOnceWithoutSpentReceives(runIds);
    for (const w of workers) await w.stop();

    const started = await starts(runIds);
    expect(started).toHaveLength(70);
    expectPace(started.map((s) => s.at), PER_SECOND, 4);
    // Both workers ran the unit: the window they share is what held the pace.
    expect(new Set(started.map((s) => s.worker))).toEqual(new Set(['worker-a', 'worker-b']));
    await h.fenceAbandonedPolls('default');
  });

  it("scope 'tenant' paces each tenant on its own: two tenants at 4/s each run side by side", async () => {
    const workers = await twoWorkers('bulk', true);
    const tenants = [await createTenant(h.sql), await createTenant(h.sql)];
    const byTenant = new Map<string, string[]>(tenants.map((t) => [t, []]));
    for (let n = 0; n < 24; n++) {
      for (const t of tenants) {
        const actor: Actor = { kind: 'system', tenantId: t, label: 'rate-limit-test' };
        byTenant.get(t)!.push((await h.dispatch(perTenant.name, { n }, actor)).runId);
      }
    }
    await relayAll();
    await expectEachRanOnceWithoutSpentReceives([...byTenant.values()].flat());
    for (const w of workers) await w.stop();
    const firsts: number[] = [];
    for (const runIds of byTenant.values()) {
      const at = (await starts(runIds)).map((s) => s.at);
      expectPace(at, PER_TENANT, 4);
      firsts.push(at[0]!);
    }
    // Neither tenant waited for the other's backlog.
    expect(Math.abs(firsts[0]! - firsts[1]!)).toBeLessThan(1_000);
    await h.fenceAbandonedPolls('bulk');
  });

  it('a unit limited to 20/s over two workers processes runs at 20/s ±10% for 30 s, spends no receive on waiting, loses and duplicates nothing', async () => {
    // Two workers processes of their own (test/fixtures/worker-child.ts, CHILD_UNITS=rate), sharing Redis.
    const children = [];
    for (let i = 0; i < 2; i++) children.push(await startWorkerChild(h, 'rate', { CHILD_REDIS_URL: server.url, CHILD_REDIS_PROBE_INTERVAL_MS: '200' }));
    try {
      // 33 seconds' worth: the first second's burst, the 30 s measured, and the tail.
      const runIds: string[] = [];
      for (let n = 0; n < 20 * 33; n++) runIds.push((await h.dispatch(rateLimitedTask.name, { n })).runId);
      await relayAll();
      await expectEachRanOnceWithoutSpentReceives(runIds, 'children', 90_000);
      const started = await starts(runIds);
      expect(started).toHaveLength(20 * 33);
      expectPace(started.map((s) => s.at), 20, 30);
      // Both processes ran the unit: the window they share is what held the pace.
      expect(new Set(started.map((s) => s.worker)).size).toBe(2);
    } finally {
      for (const child of children) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
    }
    await h.fenceAbandonedPolls('critical');
  }, 180_000);

  it('with Redis stopped, the database holds the window for both workers: never more than 10 places in a second, nothing lost or duplicated', async () => {
    await server.stop();
    // Whatever the workers' probes have seen yet, Redis answers no command now: each delivery's place is
    // taken by its registration, in the database.
    const workers = await twoWorkers('default', true);
    const runIds: string[] = [];
    for (let n = 0; n < 70; n++) runIds.push((await h.dispatch(limited.name, { n })).runId);
    await relayAll();
    await expectEachRanOnceWithoutSpentReceives(runIds);
    for (const w of workers) await w.stop();

    const at = (await starts(runIds, 'received')).map((s) => s.at);
    const busiest = Math.max(...at.map((t) => startedWithin(at, t, 1_000)));
    if (process.env.SVC_TEST_RATE_LIMIT_REPORT) {
      console.log(`database window: busiest second ${busiest}, ${startedWithin(at, at[0]! + 1_000, 4_000)} places in the 4 s after the first second, ${Math.round(at.at(-1)! - at[0]!)} ms in all`);
    }
    // Exact: the database counts the places of the last second before it gives one (a sliding log).
    expect(busiest).toBeLessThanOrEqual(PER_SECOND);
    // The places: each run's one `received`, recorded with its window.
    const received = await h.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM platform_task_run_events
       WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'received' AND detail ->> 'rate_window' = ${limited.name}`;
    expect(received[0]!.n).toBe(70);
    // Each process alone would have admitted 10 a second: together, 20.
    expect(new Set((await starts(runIds)).map((s) => s.worker))).toEqual(new Set(['worker-a', 'worker-b']));
    // 70 places at 10 a second take at least six seconds after the first place.
    expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(6_000);
  });
});
