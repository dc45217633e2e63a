// A default unit's usual delivery leaves its registration to its finish (src/work/runtime/execute/
// deferred-registration.ts): the run's `running` (attempts + 1) and its `received` row commit with the
// effect, `succeeded` and the ledger's key, in one transaction; a handler that outlives 100 ms or
// reports progress registers first, so a poller sees it `running`; a handler that fails registers
// late and its attempt counts once. Which transaction wrote a trail row is its `xmin`.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { resendRuns } from '../../src/work/runtime/store/run-store.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';
import { createTenant } from './work-tables-support.ts';

/** Inserts its effect; its first attempt then waits until the test lets it go. */
const held = new Map<string, () => void>();
const heldTask = defineTask({
  name: 'fixture.deferred_held',
  queue: 'critical',
  context: 'system',
  timeoutSeconds: 30,
  payload: z.object({ key: z.string() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    if (run.attempt === 1) await new Promise<void>((resolve) => held.set(p.key, resolve));
    return { key: p.key };
  },
});
const units: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [heldTask.name, heldTask]]);

let h: WorkHarness;
/** Sent before any worker runs: a delivery that read its run before the relay's pass committed would register the ordinary way (its `received` after `sent`). */
const early: { platform?: { runId: string; key: string }; tenant?: { runId: string } } = {};

beforeAll(async () => {
  h = await workHarness({ units });
  const key = `d-${randomUUID()}`;
  early.platform = { runId: (await h.dispatch('fixture.effect', { key })).runId, key };
  const tenantId = await createTenant(h.sql);
  early.tenant = { runId: (await h.dispatch('fixture.tenant_effect', { key: `d-${randomUUID()}` }, { kind: 'system', tenantId, label: 'test' })).runId };
  await h.relay();
  await h.startWorkers({ queues: ['default'] });
});
afterAll(async () => h?.close());

/** Each trail row of the run (without `sent` and `queued`, which the dispatch and the relay write) with its writing transaction. */
async function rows(runId: string) {
  return h.sql<{ event: string; attempt: number; receive_count: number; tx: string }[]>`
    SELECT event, attempt, receive_count, tx FROM (
      SELECT event, attempt, receive_count, xmin::text AS tx, occurred_at, id FROM platform_task_run_events WHERE run_id = ${runId}
      UNION ALL SELECT event, attempt, receive_count, xmin::text AS tx, occurred_at, id FROM task_run_events WHERE run_id = ${runId}) e
     WHERE event NOT IN ('queued', 'sent') ORDER BY occurred_at, id`;
}

describe('a default unit registers in its finish', () => {
  it('R-WRK-01 R-WRK-02 R-IDM-12 a short run commits `received`, `started`, `succeeded`, attempts 1 and its effect in one transaction', async () => {
    const { runId, key } = early.platform!;
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run).toMatchObject({ status: 'succeeded', attempts: 1 });
    const trail = await rows(runId);
    expect(trail.map((r) => [r.event, r.attempt, r.receive_count])).toEqual([
      ['received', 1, 1],
      ['started', 1, 1],
      ['succeeded', 1, 1],
    ]);
    // One writer: the registration went out with the finish, not in a transaction of its own before the handler.
    expect(new Set(trail.map((r) => r.tx)).size).toBe(1);
    const [effect] = await h.sql<{ tx: string }[]>`SELECT xmin::text AS tx FROM fixture_effects WHERE key = ${key}`;
    expect(effect!.tx).toBe(trail[0]!.tx);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });

  it('R-WRK-01 R-WRK-02 a tenant run too: its registration, effect and finish in one transaction', async () => {
    const { runId } = early.tenant!;
    expect(await h.waitForStatus(runId, ['succeeded', 'failed'])).toMatchObject({ status: 'succeeded', attempts: 1 });
    const trail = await rows(runId);
    expect(trail.map((r) => r.event)).toEqual(['received', 'started', 'succeeded']);
    expect(new Set(trail.map((r) => r.tx)).size).toBe(1);
  });

  it('R-WRK-01 a handler that runs past 100 ms is seen `running` while it runs, registered on its own before its finish', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: `d-${randomUUID()}`, sleepMs: 1_500 });
    await h.relay();
    // A condition, not a sleep: the run turns `running` while the handler still sleeps.
    await waitFor(async () => (await h.run(runId))?.status === 'running', 10_000, { stepMs: 20, what: 'the run seen running' });
    expect((await h.run(runId))!.attempts).toBe(1);
    await h.waitForStatus(runId, ['succeeded']);
    const trail = await rows(runId);
    expect(trail.map((r) => r.event)).toEqual(['received', 'started', 'succeeded']);
    expect(trail[0]!.tx).not.toBe(trail[2]!.tx);
    expect((await h.run(runId))!.attempts).toBe(1);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });

  it('R-WRK-04 R-RUN-08 a transient failure registers its attempt once, late, and the retry is attempt 2', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: `d-${randomUUID()}`, fail: 'transient', failUntilAttempt: 1 });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000);
    expect(run).toMatchObject({ status: 'succeeded', attempts: 2 });
    const trail = await rows(runId);
    expect(trail.map((r) => [r.event, r.attempt])).toEqual([
      ['received', 1],
      ['started', 1],
      ['retry_scheduled', 1],
      ['received', 2],
      ['started', 2],
      ['succeeded', 2],
    ]);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });

  it('R-WRK-01 a handler that reports progress is `running` with attempts 1 when its progress is written', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: `d-${randomUUID()}`, progress: 40, sleepMs: 1_000 });
    await h.relay();
    await waitFor(async () => (await h.run(runId))?.progress === 40, 10_000, { stepMs: 20, what: 'the progress written' });
    expect(await h.run(runId)).toMatchObject({ status: 'running', attempts: 1 });
    await h.waitForStatus(runId, ['succeeded']);
    expect((await rows(runId)).map((r) => r.event)).toEqual(['received', 'started', 'progress', 'succeeded']);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });

  it('R-WRK-07 R-IDM-09 a run sent again (the stranded-run rescue) while it executes with its registration deferred: that execution does not commit, the next one does, once', async () => {
    const key = `d-${randomUUID()}`;
    const { runId } = await h.dispatch('fixture.deferred_held', { key });
    await h.relay();
    // Started once the relay's pass has committed (see `early`), and its deferred registrations wait for
    // their finish however long the handler runs.
    await h.startWorkers({ queues: ['critical'], runningVisibleAfterMs: 600_000, workerInstance: 'test-worker-held' });
    await waitFor(() => held.has(key), 20_000, { stepMs: 10, what: 'the handler holding' });
    expect((await h.run(runId))!.status).toBe('queued'); // its registration waits for its finish
    // The rescue sends the run again, as it does one that looks lost (src/work/runtime/maintain/rescuer.ts).
    await inUnitOfWork(h.sql, { kind: 'system', label: 'test-rescuer' }, async (tx) => {
      await tx`SELECT 1 FROM platform_task_runs WHERE run_id = ${runId} FOR UPDATE`;
      await resendRuns(tx, 'platform', [{ runId, tenantId: null, queue: 'critical', attempt: 0, detail: { rescue: { test: true } } }], 'test-rescuer');
    });
    held.get(key)!();
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000);
    // The held execution's finish was refused (the run had moved on under it): its attempt counted, its
    // effect rolled back; the delivery of the message sent again executed the run.
    expect(run).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(await h.effects(key)).toBe(1);
    const trail = await rows(runId);
    expect(trail.filter((r) => r.event === 'succeeded').map((r) => r.attempt)).toEqual([2]);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });
});
