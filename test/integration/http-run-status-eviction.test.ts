// R-HTTP-10 end to end: the API caches a run in progress for 5 s, and every transition the worker
// commits (progress, succeeded) evicts that copy, so the API shows it at once, not after the TTL.
// The worker runs in this process with a unit held at latches the test opens.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.ts';
import { runStatusKey } from '../../src/kv/keys.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';
import { createTenantMember } from './work-tables-support.ts';

function latch() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}
const entered = latch();
const mayReportProgress = latch();
const progressReported = latch();
const mayFinish = latch();

/** A tenant task that stops twice: before reporting progress, and with the effect transaction open after it. */
const heldTask = defineTask({
  name: 'fixture.held',
  queue: 'default',
  context: 'tenant',
  timeoutSeconds: 30,
  payload: z.object({}),
  async handler(_payload, run) {
    await run.transaction`SELECT 1`; // the effect transaction is open from here on
    entered.open();
    await mayReportProgress.opened;
    await run.progress(50);
    progressReported.open();
    await mayFinish.opened;
    return { held: 'released' };
  },
});
const UNITS: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [heldTask.name, heldTask]]);

let h: WorkHarness;
let app: FastifyInstance;
let tenantId: string;
/** The spec's cache life of a run in progress (R-HTTP-09). */
const SPEC_IN_PROGRESS_TTL_MS = 5_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  const member = await createTenantMember(h.sql);
  tenantId = member.tenantId;
  app = await buildApp({
    sql: h.sql,
    redis: h.redis!,
    resolver: new FakeSessionResolver().add('token', member),
    catalog: { version: 1, tasks: [], subscriptions: [] },
    latestMigration: 'test',
    config: { corsOrigins: [], corsCredentials: false },
    logger: false,
  });
  await app.ready();
  await h.startWorkers();
});
afterAll(async () => {
  // Let a handler still held finish, so the runtime stops without waiting for its drain window.
  for (const l of [mayReportProgress, mayFinish]) l.open();
  await app?.close();
  await h?.close();
});

interface ApiRun {
  status: string;
  progress: number;
}
async function apiRun(runId: string): Promise<ApiRun> {
  const res = await app.inject({ method: 'GET', url: `/task-runs/${runId}`, headers: { authorization: 'Bearer token' } });
  expect(res.statusCode).toBe(200);
  return res.json<{ data: ApiRun }>().data;
}
/** GETs until the API's copy is in Redis (the worker's own eviction of `running` may still be in flight). */
async function apiRunCached(runId: string): Promise<ApiRun> {
  for (let i = 0; i < 40; i += 1) {
    const run = await apiRun(runId);
    if (await h.redis!.exists(runStatusKey(runId))) return run;
    await sleep(25);
  }
  throw new Error('the API never cached the run');
}
/** Polls the API until `check` holds; returns how long it took. */
async function untilApi(runId: string, check: (run: ApiRun) => boolean, timeoutMs: number): Promise<number> {
  const start = Date.now();
  let last: ApiRun | undefined;
  while (Date.now() - start < timeoutMs) {
    last = await apiRun(runId);
    if (check(last)) return Date.now() - start;
    await sleep(20);
  }
  throw new Error(`the API still shows ${JSON.stringify(last)} after ${timeoutMs} ms`);
}

describe('run-status cache eviction by the worker', () => {
  it('R-HTTP-10 R-HTTP-09 R-UNT-08 progress and succeeded committed by the worker replace the cached running copy well before its 5 s TTL', async () => {
    const { runId } = await h.dispatch('fixture.held', {}, { kind: 'system', tenantId, label: 'test' });
    await h.relay();
    await entered.opened;

    // `running` once the handler has run 100 ms (its registration, deferred to its finish, written on
    // its own then, which evicts a `queued` copy cached meanwhile); cached while running, progress 0.
    expect(await untilApi(runId, (r) => r.status === 'running', SPEC_IN_PROGRESS_TTL_MS - 1_000)).toBeLessThan(1_000);
    expect(await apiRunCached(runId)).toMatchObject({ status: 'running', progress: 0 });
    const entry = (await h.redis!.get(runStatusKey(runId)))!; // `<tenantId>|<data JSON>`
    expect(JSON.parse(entry.slice(entry.indexOf('|') + 1))).toMatchObject({ status: 'running', progress: 0 });

    // progress(50) commits in its own transaction while the effect transaction stays open.
    mayReportProgress.open();
    await progressReported.opened;
    const progressSeenAfter = await untilApi(runId, (r) => r.progress === 50, SPEC_IN_PROGRESS_TTL_MS - 1_000);
    expect(progressSeenAfter).toBeLessThan(1_000);
    expect(await apiRunCached(runId)).toMatchObject({ status: 'running', progress: 50 });
    const [open] = await h.sql`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'idle in transaction'`;
    expect(open!.n).toBeGreaterThanOrEqual(1); // the held handler's effect transaction

    // The worker commits succeeded: the cached running copy is evicted, not left for its TTL.
    mayFinish.open();
    const finished = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(finished.status).toBe('succeeded');
    const succeededSeenAfter = await untilApi(runId, (r) => r.status === 'succeeded', SPEC_IN_PROGRESS_TTL_MS - 1_000);
    expect(succeededSeenAfter).toBeLessThan(1_000);
    expect(await apiRun(runId)).toMatchObject({ status: 'succeeded', progress: 100 });
  });
});
