// An operator's cancel reaches a running handler at once, pushed by the database (LISTEN/NOTIFY,
// src/work/runtime/execute/cancel-notices.ts), not at the next heartbeat poll; the poll stays the
// fallback. And a run cancelled while its handler ran keeps that attempt's `started` on its trail,
// though the effect transaction that wrote it rolled back. Real PostgreSQL, Redis and SQS server.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { cancelRunNow } from '../../src/work/operate/cancel-run.ts';
import { createSql } from '../../src/db/client.ts';
import { services } from '../support/services.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

vi.setConfig({ testTimeout: 60_000 });

/** Per key: when the handler began waiting, and when its signal aborted (performance.now()). */
const blockedAt = new Map<string, number>();
const abortedAt = new Map<string, number>();

/** Inserts its effect, then waits until its signal aborts: nothing else ends it. */
const blockedHandler = async (p: { key: string }, run: { runId: string; attempt: number; signal: AbortSignal; transaction: (s: TemplateStringsArray, ...v: unknown[]) => Promise<unknown> }) => {
  await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
  await new Promise((_, reject) => {
    run.signal.addEventListener('abort', () => {
      abortedAt.set(p.key, performance.now());
      reject(run.signal.reason as Error);
    }, { once: true });
    blockedAt.set(p.key, performance.now());
  });
  return { key: p.key };
};
const blocked = defineTask({ name: 'fixture.blocked', queue: 'default', context: 'system', timeoutSeconds: 50, payload: z.object({ key: z.string() }), handler: blockedHandler as never });
const blockedGroup = defineTask({ name: 'fixture.blocked_group', queue: 'default', context: 'system', timeoutSeconds: 50, groupCommit: true, payload: z.object({ key: z.string() }), handler: blockedHandler as never });
/** On `critical`, which only the runtime without the push consumes. */
const blockedPolled = defineTask({ name: 'fixture.blocked_polled', queue: 'critical', context: 'system', timeoutSeconds: 50, payload: z.object({ key: z.string() }), handler: blockedHandler as never });
const units: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, ...[blocked, blockedGroup, blockedPolled].map((u) => [u.name, u] as [string, WorkUnit])]);

let h: WorkHarness;

beforeAll(async () => {
  // Visibility 60 s: the heartbeats below (20 s) must stay under it, and no message comes back meanwhile.
  h = await workHarness({ units, visibilitySeconds: 60 });
  // Two runtimes side by side (stopped by h.close()): `default` with the push and a 20 s poll, so only
  // the push can abort within 1 s; `critical` without it, a 1.5 s poll its only way to learn.
  await h.startWorkers({ queues: ['default'], relay: { sweepIntervalMs: 200 }, heartbeatIntervalMs: 20_000 });
  await h.startWorkers({ queues: ['critical'], heartbeatIntervalMs: 1_500, cancelListen: false, workerInstance: 'test-worker-polled' });
});
afterAll(async () => h?.close());

/**
 * Dispatches a blocked run and waits until its handler is waiting and its run is `running` (registered
 * on its own once the handler has run 100 ms: src/work/runtime/execute/deferred-registration.ts).
 */
async function blockedRun(unit: string, key: string): Promise<string> {
  const { runId } = await h.dispatch(unit, { key });
  await waitFor(() => blockedAt.has(key), 20_000, { what: `the handler of ${key} blocked` });
  await waitFor(async () => (await h.run(runId))?.status === 'running', 20_000, { stepMs: 20, what: `the run of ${key} running` });
  return runId;
}

// This database's only: the cluster serves every test file at once, and their workers listen too.
const listeners = () =>
  h.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen %svc_run_cancelled%' AND pid <> pg_backend_pid()`;

/** The cancelled run settled: failed with CANCELLED, no effect, a trail with this attempt's `started` that reads causally. */
async function expectCancelledWithStart(runId: string, key: string) {
  // The settlement writes the attempt's `started` after the cancel made the run `failed`.
  // Bounded; should it not come, the assertions below say what the trail holds instead.
  await waitFor(async () => (await h.run(runId))!.status === 'failed' && events(await h.trail(runId)).includes('started'), 20_000).catch(() => {});
  expect(await h.effects(key)).toBe(0);
  expect(await h.run(runId)).toMatchObject({ status: 'failed', attempts: 1, outcome: { error: { code: 'CANCELLED' } } });
  const trail = await h.trail(runId);
  const started = trail.filter((t) => t.event === 'started');
  expect(started).toHaveLength(1);
  expect(started[0]).toMatchObject({ attempt: 1, detail: { effect: 'rolled_back' } });
  const { problems, events: read } = await causalProblems(h.sql, runId);
  expect({ problems, read }).toEqual({ problems: [], read: ['queued(0)', 'sent(0)', 'received(1)', 'started(1)', 'failed(1)'] });
}

describe('a running run learns of its cancel', () => {
  it('pushed: the handler signal aborts within 1 s of the cancel commit, the heartbeat poll being 20 s; its trail keeps started', async () => {
    const runId = await blockedRun('fixture.blocked', 'push');
    expect(await cancelRunNow(h.sql, { runId, by: 'op', reason: 'pushed' })).toMatchObject({ result: 'cancelled', previousStatus: 'running' });
    const committedAt = performance.now();
    // The notification is delivered at commit: the abort may even precede the client hearing of the commit.
    await waitFor(() => abortedAt.has('push'), 5_000, { what: 'the handler aborted' });
    expect(abortedAt.get('push')! - committedAt).toBeLessThan(1_000);
    await expectCancelledWithStart(runId, 'push');
  });

  it('pushed to a group-commit member as well (a group of one), within 1 s', async () => {
    const runId = await blockedRun('fixture.blocked_group', 'push-group');
    await cancelRunNow(h.sql, { runId, by: 'op' });
    const committedAt = performance.now();
    await waitFor(() => abortedAt.has('push-group'), 5_000, { what: 'the group member aborted' });
    expect(abortedAt.get('push-group')! - committedAt).toBeLessThan(1_000);
    await waitFor(async () => (await h.run(runId))!.status === 'failed', 20_000);
    expect(await h.effects('push-group')).toBe(0);
    await waitFor(async () => events(await h.trail(runId)).includes('started'), 10_000).catch(() => {});
    // A member alone in its group is registered at the group's finish: the cancel found it `queued`
    // (`failed` of attempt 0), and the settlement counts the attempt that ran and records its start.
    const { problems, events: read } = await causalProblems(h.sql, runId);
    expect({ problems, started: read.includes('started(1)') }).toEqual({ problems: [], started: true });
  });

  it('the listener connection killed: it listens again and checks its running runs, so a cancel is still seen well before the poll', async () => {
    const runId = await blockedRun('fixture.blocked', 'relisten');
    await waitFor(async () => (await listeners()).length > 0, 10_000, { what: 'the runtime listening' });
    const [listener] = await listeners();
    // Cancelled while the listener is down: its notification is lost with the connection.
    await h.sql`SELECT pg_terminate_backend(${listener!.pid})`;
    await cancelRunNow(h.sql, { runId, by: 'op' });
    const committedAt = performance.now();
    await waitFor(() => abortedAt.has('relisten'), 15_000, { what: 'the handler aborted' });
    expect(abortedAt.get('relisten')! - committedAt).toBeLessThan(10_000);
    await waitFor(async () => (await listeners()).some((l) => l.pid !== listener!.pid), 10_000, { what: 'a new listener' });
    await expectCancelledWithStart(runId, 'relisten');
  });

  it('a cancel while the database refuses the listener a new connection: listening again, the worker checks its running runs and aborts, well before the poll', async () => {
    await waitFor(async () => (await listeners()).length > 0, 10_000, { what: 'the runtime listening' });
    const runId = await blockedRun('fixture.blocked', 'outage');
    const [listener] = await listeners();
    // From the cluster's `postgres` database: a database cannot refuse connections from inside.
    const admin = createSql(services().pgAdminUrl, { max: 1 });
    const allowConnections = (allow: boolean) => admin.unsafe(`ALTER DATABASE "${h.db.name}" ALLOW_CONNECTIONS ${allow}`);
    let committedAt: number;
    await allowConnections(false);
    try {
      // The listener's connection is gone and cannot come back; the cancel goes down an open pool connection.
      await h.sql`SELECT pg_terminate_backend(${listener!.pid})`;
      await waitFor(async () => (await listeners()).length === 0, 10_000, { what: 'the listener gone' });
      await cancelRunNow(h.sql, { runId, by: 'op' });
      committedAt = performance.now();
    } finally {
      await allowConnections(true);
      await admin.end();
    }
    await waitFor(() => abortedAt.has('outage'), 15_000, { what: 'the handler aborted' });
    expect(abortedAt.get('outage')! - committedAt!).toBeLessThan(10_000);
    expect((await listeners()).length).toBeGreaterThan(0);
    await expectCancelledWithStart(runId, 'outage');
  });

  it('without the push (cancelListen off, as behind a transaction pooler), the heartbeat poll still cancels it; its trail keeps started', async () => {
    const runId = await blockedRun('fixture.blocked_polled', 'poll');
    await cancelRunNow(h.sql, { runId, by: 'op' });
    const committedAt = performance.now();
    await waitFor(() => abortedAt.has('poll'), 15_000, { what: 'the handler aborted' });
    expect(abortedAt.get('poll')! - committedAt).toBeLessThan(1_500 + 3_000);
    await expectCancelledWithStart(runId, 'poll');
  });
});
