// A worker process killed with SIGKILL mid-handler: the message reappears after its visibility, the
// idempotency lease of the dead holder runs out, another worker executes it, and the run ends
// succeeded with exactly one effect.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerChild } from '../fixtures/worker-child-process.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { CHAOS_GROUP_UNITS } from '../fixtures/units/runtime-units.ts';
import { waitFor } from '../support/wait-for.ts';
import { createTenant } from './work-tables-support.ts';

let h: WorkHarness;
let child: ChildProcess | undefined;

beforeAll(async () => {
  h = await workHarness({ units: CHAOS_GROUP_UNITS });
});
afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await h?.close();
});

const startChild = (units: 'runtime' | 'group' = 'runtime') => startWorkerChild(h, units);

/**
 * Waits until the child holds the run key's advisory lock (inside its effect transaction: a condition,
 * not a sleep), then kills it with SIGKILL and waits for it to be gone.
 */
async function killInsideTransaction(what: string): Promise<void> {
  await waitFor(async () => (await h.sql`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1`).length > 0, 10_000, { stepMs: 20, what });
  const exited = new Promise((r) => child!.once('exit', r));
  child!.kill('SIGKILL');
  await exited;
}

describe('worker crash', () => {
  it('R-WRK-07 R-IDM-09 a worker killed with SIGKILL mid-handler: the message reappears and the run succeeds with one effect', async () => {
    child = await startChild();
    // A tenant unit: timeout 20 s, so the dead worker's gate (timeout + 1 s margin) outlives the
    // queue's 2 s visibility by far.
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const { runId } = await h.dispatch('fixture.tenant_effect', { key: 'crash', sleepMs: 30_000, sleepUntilAttempt: 1 }, actor);
    await h.relay();
    // Wait until the child is inside the handler (the run is running with one attempt).
    await h.waitForStatus(runId, ['running']);
    // ...and inside its effect transaction: the key's advisory lock is held (a condition, not a sleep).
    await killInsideTransaction('the child inside the effect transaction');
    // A surviving worker picks the message up once its visibility expires.
    await h.startWorkers({ queues: ['default'] });
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(2);
    expect(await h.effects('crash')).toBe(1);
    const trail = (await h.trail(runId)).filter((t) => t.event !== 'sent');
    // The dead worker's `started` rolled back with its transaction; the next delivery is a new attempt.
    expect(events(trail)[0]).toBe('queued');
    expect(trail[1]).toMatchObject({ event: 'received', receive_count: 1 });
    expect(trail[1]!.worker_instance).toMatch(/^child:/);
    expect(events(trail).slice(-3)).toEqual(['received', 'started', 'succeeded']);
    // The crash cost one extra receive: the first redelivery takes over although the dead worker's
    // Redis gate (lease = timeout 20 s + margin 1 s) outlives the queue's 2 s visibility.
    expect(trail.at(-3)!.receive_count).toBe(2);
    expect(trail.filter((t) => t.event === 'received' && t.detail.held !== undefined)).toEqual([]);
    expect(trail.at(-1)!.worker_instance).toBe('test-worker');
  });

  it('R-WRK-07 R-IDM-09 a worker killed with SIGKILL mid-handler of a group-commit run alone in its group: the run succeeds once, its trail causal', async () => {
    child = await startChild('group');
    const { runId } = await h.dispatch('fixture.group_effect', { key: 'crash-group-one', sleepMs: 30_000, sleepUntilAttempt: 1 }, { kind: 'system' as const, label: 'test' });
    await h.relay();
    // A group of one: past 100 ms its handler is registered on its own (running), and the group's
    // transaction holds the key's advisory lock.
    await h.waitForStatus(runId, ['running']);
    await killInsideTransaction('the child inside the group transaction');
    await h.startWorkers({ queues: ['bulk'] });
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000);
    expect(run).toMatchObject({ status: 'succeeded', attempts: 2 });
    // The dead attempt's effect rolled back with its group: one effect, committed with the one succeeded.
    expect(await h.effects('crash-group-one')).toBe(1);
    const trail = await h.trail(runId);
    expect(trail.filter((t) => t.event === 'succeeded')).toMatchObject([{ attempt: 2 }]);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });
});
