// Shutdown edges of the worker runtime: a handler blocked inside a SQL statement is still released
// within the stop budget, messages waiting for a unit slot go back to the queue as soon as fetching
// stops, and the readiness reason never carries the driver's raw error.
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSql } from '../../src/db/client.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import { queueUrl } from '../../src/queue/names.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { startWorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';

const sleepPayload = z.object({ key: z.string(), sleepMs: z.number().int().min(0) });

/** Blocks inside one SQL statement of the effect transaction, on the first attempt only. */
const pgSleepTask = defineTask({
  name: 'fixture.pg_sleep',
  queue: 'default',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 60,
  payload: sleepPayload,
  handler: async (p, run) => {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    if (run.attempt === 1) await run.transaction`SELECT pg_sleep(${p.sleepMs / 1000})`;
    return {};
  },
});

/** One at a time in this process, on a queue whose other unit leaves the consumer free slots. */
const oneAtATimeTask = defineTask({
  name: 'fixture.one_at_a_time',
  queue: 'bulk',
  context: 'system',
  concurrency: 1,
  timeoutSeconds: 30,
  payload: sleepPayload,
  handler: async (p, run) => {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    await sleep(p.sleepMs, undefined, { signal: run.signal });
    return {};
  },
});
const bulkNeighbourTask = defineTask({
  name: 'fixture.bulk_neighbour',
  queue: 'bulk',
  context: 'system',
  concurrency: 3,
  payload: z.object({}),
  handler: async () => ({}),
});

const UNITS: ReadonlyMap<string, WorkUnit> = new Map([
  ...RUNTIME_UNITS,
  ...[pgSleepTask, oneAtATimeTask, bulkNeighbourTask].map((u) => [u.name, u] as const),
]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
});
afterAll(async () => h?.close());

describe('worker release on shutdown', () => {
  it('R-WRK-10 R-WRK-09 a handler blocked in a SQL statement is cancelled at release: the run is queued with released_on_shutdown within the stop budget', async () => {
    const runtime = await h.startWorkers({ queues: ['default'], drainMs: 500 });
    const { runId } = await h.dispatch('fixture.pg_sleep', { key: 'pg-sleep-release', sleepMs: 20_000 });
    await h.relay();
    await h.waitForStatus(runId, ['running']);
    // Wait until the handler's pg_sleep is under way.
    for (let i = 0; i < 100; i++) {
      const [row] = await h.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND state = 'active' AND pid <> pg_backend_pid()`;
      if (row!.n > 0) break;
      await sleep(50);
    }
    const started = Date.now();
    await runtime.stop();
    // drain 500 ms + release; without the cancel the ROLLBACK waits for pg_sleep and the hard deadline (4.5 s) passes.
    expect(Date.now() - started).toBeLessThan(3_500);
    const released = await h.run(runId);
    expect(released!.status).toBe('queued');
    expect(events((await h.trail(runId)).filter((t) => t.event !== 'sent'))).toEqual(['queued', 'received', 'started', 'released_on_shutdown']);
    expect(await h.effects('pg-sleep-release')).toBe(0);
    // The message is visible again: the next worker runs attempt 2 (no sleep) to success.
    await h.startWorkers({ queues: ['default'] });
    expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect(await h.effects('pg-sleep-release')).toBe(1);
  });

  it('R-WRK-09 a message waiting for its unit slot goes back to the queue as soon as fetching stops, not at the end of the drain window', async () => {
    const runtime = await h.startWorkers({ queues: ['bulk'], drainMs: 6_000 });
    const first = await h.dispatch('fixture.one_at_a_time', { key: 'slot-first', sleepMs: 2_500 });
    await h.relay();
    await h.waitForStatus(first.runId, ['running']);
    const second = await h.dispatch('fixture.one_at_a_time', { key: 'slot-second', sleepMs: 0 });
    await h.relay();
    // The second message is held by the consumer, waiting for the unit's only slot.
    for (let i = 0; i < 100 && runtime.inFlight() < 2; i++) await sleep(50);
    expect(runtime.inFlight()).toBe(2);
    const stopping = runtime.stop();
    // While the first run still drains, the waiting message is visible to anyone else at once.
    const url = queueUrl(h.queueUrlPrefix, 'bulk');
    let got: string | undefined;
    const deadline = Date.now() + 1_500;
    while (!got && Date.now() < deadline) {
      const out = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, VisibilityTimeout: 30 }));
      got = out.Messages?.map((m) => (JSON.parse(m.Body ?? '{}') as { run_id?: string }).run_id).find(Boolean);
    }
    expect(got).toBe(second.runId);
    expect((await h.run(second.runId))!.status).toBe('queued');
    await stopping;
    expect((await h.run(first.runId))!.status).toBe('succeeded');
  });
});

describe('worker readiness', () => {
  it('R-EXE-09 an unreachable database is reported with fixed public words; the driver detail goes to the log only', async () => {
    const port = await freePort();
    const sql = createSql(`postgres://svc:do-not-echo@127.0.0.1:${port}/svc`, { max: 2 });
    const capture = captureLogger('debug');
    const runtime = await startWorkerRuntime({
      sql,
      sqs: h.sqs,
      queueUrlPrefix: h.queueUrlPrefix,
      queues: ['bulk'],
      units: UNITS,
      logger: capture.logger,
      latestMigration: '9999_never',
      schemaPollIntervalMs: 100,
      healthPort: 0,
      drainMs: 500,
    });
    try {
      for (let i = 0; i < 100 && !/unreachable/.test(String(runtime.state().reason)); i++) await sleep(50);
      expect(runtime.state().reason).toBe('the database is unreachable');
      const res = await fetch(`http://127.0.0.1:${runtime.healthPort}/readyz`);
      expect(res.status).toBe(503);
      const body = JSON.stringify(await res.json());
      expect(body).toContain('the database is unreachable');
      expect(body).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|do-not-echo/);
      expect(capture.text()).toContain('ECONNREFUSED');
      expect(capture.text()).not.toContain('do-not-echo');
    } finally {
      await runtime.stop();
      await sql.end({ timeout: 1 });
    }
  });
});
