// R-HTTP-10 through a real worker, for the transitions http-run-status-eviction.test.ts does not cover:
// running → retrying, running → failed (permanent), the fifth receive's dead letter, release on
// shutdown (running → queued) and a scheduled skip.
//
// Each tenant case holds the handler at a latch, lets the API cache the run's `running` copy and then
// stretches that copy's life to one day. Only an eviction by the worker can now make the API show the
// next status: a missing one leaves the stale copy for a day, so the assertion does not depend on timing.
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.ts';
import { runStatusKey } from '../../src/kv/keys.ts';
import { fireSchedule } from '../../src/work/runtime/maintain/scheduler.ts';
import { defineTask, type TaskUnit, type WorkUnit } from '../../src/work/define/unit.ts';
import { TransientFailure, ValidationFailure } from '../../src/work/define/unit-errors.ts';
import { RUNTIME_UNITS, scheduledSkipTask } from '../fixtures/units/runtime-units.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';
import { createTenantMember } from './work-tables-support.ts';

const DAY_MS = 86_400_000;
/** The in-progress TTL the spec gives (R-HTTP-09): a stretched copy must outlive it. */
const SPEC_IN_PROGRESS_TTL_MS = 5_000;

function latch() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}
type Latch = ReturnType<typeof latch>;
/** Latches per `<key>#<attempt>`: the handler signals `entered` and waits for `release` (or its abort). */
const holds = new Map<string, { entered: Latch; release: Latch }>();
function hold(key: string, attempt: number) {
  const h = { entered: latch(), release: latch() };
  holds.set(`${key}#${attempt}`, h);
  return h;
}

const heldPayload = z.object({ key: z.string(), fail: z.enum(['transient', 'permanent']).optional() });

/** A tenant task that stops at the latch of its key and attempt, then fails as its payload says. */
const heldTask = defineTask({
  name: 'fixture.evict_held',
  queue: 'default',
  context: 'tenant',
  concurrency: 2,
  timeoutSeconds: 30,
  payload: heldPayload,
  async handler(p, run) {
    await run.transaction`SELECT 1`;
    const h = holds.get(`${p.key}#${run.attempt}`);
    if (h) {
      h.entered.open();
      const aborted = new Promise<never>((_, reject) => {
        if (run.signal.aborted) reject(run.signal.reason as Error);
        run.signal.addEventListener('abort', () => reject(run.signal.reason as Error), { once: true });
      });
      await Promise.race([h.release.opened, aborted]);
    }
    if (p.fail === 'transient') throw new TransientFailure('FIXTURE_TRANSIENT', 'the fixture fails transiently');
    if (p.fail === 'permanent') throw new ValidationFailure('the fixture fails permanently');
    return {};
  },
});
const UNITS: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [heldTask.name, heldTask]]);

let h: WorkHarness;
let redis: Redis;
let app: FastifyInstance;
let tenantId: string;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  redis = h.redis!;
  const member = await createTenantMember(h.sql);
  tenantId = member.tenantId;
  app = await buildApp({
    sql: h.sql,
    redis,
    resolver: new FakeSessionResolver().add('token', member),
    catalog: { version: 1, tasks: [], subscriptions: [] },
    latestMigration: 'test',
    config: { corsOrigins: [], corsCredentials: false },
    logger: false,
  });
  await app.ready();
});
afterAll(async () => {
  for (const l of holds.values()) l.release.open();
  await app?.close();
  await h?.close();
});

interface ApiRun {
  status: string;
  attempts: number;
}
async function apiRun(runId: string): Promise<ApiRun> {
  const res = await app.inject({ method: 'GET', url: `/task-runs/${runId}`, headers: { authorization: 'Bearer token' } });
  expect(res.statusCode).toBe(200);
  return res.json<{ data: ApiRun }>().data;
}

/**
 * Lets the API cache the run (GET until its copy is in Redis with `status`), then stretches that copy to
 * one day. Returns once the stretched copy is in place.
 */
async function cacheForADay(runId: string, status: string): Promise<void> {
  const key = runStatusKey(runId);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const run = await apiRun(runId);
    const entry = await redis.get(key);
    if (run.status === status && entry && JSON.parse(entry.slice(entry.indexOf('|') + 1)).status === status) {
      if ((await redis.pexpire(key, DAY_MS)) === 1) return;
    }
    await sleep(25);
  }
  throw new Error(`the API never cached run ${runId} as ${status}`);
}

/** The stretched copy is still there (nothing evicted it early), so only the coming transition can. */
async function expectStaleCopyInPlace(runId: string, status: string): Promise<void> {
  expect(await redis.pttl(runStatusKey(runId))).toBeGreaterThan(SPEC_IN_PROGRESS_TTL_MS);
  expect((await apiRun(runId)).status).toBe(status);
}

/** Polls the API until it shows `status`; the stale copy would hide it for a day. */
async function untilApiShows(runId: string, status: string, timeoutMs = 15_000): Promise<ApiRun> {
  const deadline = Date.now() + timeoutMs;
  let last: ApiRun | undefined;
  while (Date.now() < deadline) {
    last = await apiRun(runId);
    if (last.status === status) return last;
    await sleep(25);
  }
  throw new Error(`the API still shows ${JSON.stringify(last)} for run ${runId}, not ${status}: the cached copy was not evicted`);
}

async function dispatchHeld(payload: z.infer<typeof heldPayload>): Promise<string> {
  const { runId } = await h.dispatch(heldTask.name, payload, { kind: 'system', tenantId, label: 'test' });
  await h.relay();
  return runId;
}

describe('R-HTTP-10 every transition a real worker commits evicts the cached run status', () => {
  it('R-HTTP-10 R-WRK-04 running → retrying evicts the cached running copy', async () => {
    // A long backoff keeps the run in `retrying`, so no later transition could do the eviction instead.
    const runtime = await h.startWorkers({ queues: ['default'], backoff: { baseMs: 60_000, capMs: 60_000, jitter: 'none' } });
    try {
      const latchOf = hold('retry', 1);
      const runId = await dispatchHeld({ key: 'retry', fail: 'transient' });
      await latchOf.entered.opened;
      await cacheForADay(runId, 'running');
      await expectStaleCopyInPlace(runId, 'running');
      latchOf.release.open();
      await h.waitForStatus(runId, ['retrying']);
      expect(await untilApiShows(runId, 'retrying')).toMatchObject({ status: 'retrying', attempts: 1 });
      expect((await h.run(runId))!.status).toBe('retrying'); // still: the retrying transition itself evicted
    } finally {
      await runtime.stop();
    }
  });

  describe('with a worker on short backoff', () => {
    let stop: () => Promise<void>;
    beforeAll(async () => {
      const runtime = await h.startWorkers({ queues: ['default'] });
      stop = () => runtime.stop();
    });
    afterAll(async () => stop?.());

    it('R-HTTP-10 R-WRK-03 running → failed on a permanent failure (dead-lettered) evicts the cached running copy', async () => {
      const latchOf = hold('permanent', 1);
      const runId = await dispatchHeld({ key: 'permanent', fail: 'permanent' });
      await latchOf.entered.opened;
      await cacheForADay(runId, 'running');
      await expectStaleCopyInPlace(runId, 'running');
      latchOf.release.open();
      await h.waitForStatus(runId, ['failed']);
      expect(await untilApiShows(runId, 'failed')).toMatchObject({ status: 'failed', attempts: 1 });
      expect(events(await h.waitForEvent(runId, 'dead_lettered'))).toContain('failed');
    });

    it('R-HTTP-10 R-WRK-05 the fifth receive\'s transient failure (failed, dead-lettered) evicts the cached running copy', async () => {
      const latchOf = hold('fifth', 5);
      const runId = await dispatchHeld({ key: 'fifth', fail: 'transient' });
      await latchOf.entered.opened;
      await cacheForADay(runId, 'running');
      await expectStaleCopyInPlace(runId, 'running');
      latchOf.release.open();
      await h.waitForStatus(runId, ['failed']);
      expect(await untilApiShows(runId, 'failed')).toMatchObject({ status: 'failed', attempts: 5 });
      await h.waitForEvent(runId, 'dead_lettered');
    });
  });

  it('R-HTTP-10 R-WRK-10 release on shutdown (running → queued) evicts the cached running copy', async () => {
    const runtime = await h.startWorkers({ queues: ['default'], drainMs: 300 });
    const latchOf = hold('release', 1);
    const runId = await dispatchHeld({ key: 'release' });
    await latchOf.entered.opened;
    await cacheForADay(runId, 'running');
    await expectStaleCopyInPlace(runId, 'running');
    await runtime.stop(); // the handler never reaches its latch: the drain window ends and the run is released
    expect((await h.run(runId))!.status).toBe('queued');
    expect(events(await h.trail(runId))).toContain('released_on_shutdown');
    expect(await untilApiShows(runId, 'queued')).toMatchObject({ status: 'queued' });
  });

  it('R-HTTP-10 R-SCH-02 a scheduled skip (queued → skipped) deletes the run\'s cached status key', async () => {
    // A skipped platform run is not readable through the tenant API, and its id is born in the firing
    // transaction, so the eviction is observed on the wire: MONITOR sees every command Redis executes.
    const monitor = await redis.monitor();
    const deleted: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (String(args[0]).toLowerCase() === 'del') deleted.push(...args.slice(1).map(String));
    });
    try {
      const unit = scheduledSkipTask as TaskUnit;
      const first = await fireSchedule(h.sql, unit, new Date('2031-01-01T00:00:30Z'), { redis });
      expect(first.result).toBe('dispatched'); // stays queued: nothing consumes the maintenance queue here
      const second = await fireSchedule(h.sql, unit, new Date('2031-01-01T00:01:30Z'), { redis });
      expect(second.result).toBe('skipped');
      const skippedRunId = (second as { runId: string }).runId;
      expect((await h.run(skippedRunId))!.status).toBe('skipped');
      const deadline = Date.now() + 5_000;
      while (!deleted.includes(runStatusKey(skippedRunId)) && Date.now() < deadline) await sleep(25);
      expect(deleted).toContain(runStatusKey(skippedRunId));
    } finally {
      monitor.disconnect();
    }
  });
});
