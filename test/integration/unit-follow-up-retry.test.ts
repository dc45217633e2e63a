// Through the real worker runtime (SQS-protocol server, Redis, relay pass): follow-up runs written by
// run.dispatch / run.publish commit with the handler's effect or not at all, and a unit's own retry
// policy (fewer receives, its own backoff) drives settlement.
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { maxReceivesOf, retryDelaySeconds } from '../../src/work/runtime/complete/backoff.ts';
import { dispatchTask } from '../../src/work/runtime/produce/dispatch.ts';
import { defineSubscriber, defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { TransientFailure, ValidationFailure } from '../../src/work/define/unit-errors.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createEffectTable } from '../fixtures/units/runtime-units.ts';
import { createTenant } from './work-tables-support.ts';
import { waitFor } from '../support/wait-for.ts';
import { OUTBOX_WAKE_KEY } from '../../src/kv/keys.ts';

const child = defineTask({
  name: 'followup.child',
  queue: 'default',
  payload: z.object({ key: z.string() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${'child:' + p.key}, ${run.attempt})`;
  },
});
const systemTask = defineTask({ name: 'followup.system', queue: 'maintenance', context: 'system', payload: z.object({}), async handler() {} });
const subscriber = defineSubscriber({
  name: 'followup.on_done',
  event: { type: 'followup.done', version: 1 },
  queue: 'default',
  payload: z.object({ key: z.string() }),
  async handler() {},
});
const parent = defineTask({
  name: 'followup.parent',
  queue: 'default',
  payload: z.object({ key: z.string(), mode: z.enum(['ok', 'fail_after', 'mismatch', 'slow_after']) }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    if (p.mode === 'mismatch') await run.dispatch(systemTask, {});
    const followUp = await run.dispatch(child, { key: p.key });
    await run.publish({ type: 'followup.done', version: 1 }, { key: p.key });
    if (p.mode === 'fail_after') throw new ValidationFailure('failed after dispatching its follow-ups');
    // A handler that goes on after its follow-ups: they commit 600 ms after they became due.
    if (p.mode === 'slow_after') await new Promise((r) => setTimeout(r, 600));
    return { child: followUp.runId };
  },
});
const limited = defineTask({
  name: 'retry.limited',
  queue: 'default',
  // Two receives (the runtime allows five) and the unit's own backoff (the harness's default is 200 ms..1 s).
  retry: { maxReceives: 2, backoff: { baseMs: 3_000, capMs: 3_000, jitter: 'none' } },
  payload: z.object({}),
  async handler() {
    throw new TransientFailure('FIXTURE_TRANSIENT', 'always fails transiently');
  },
});
const UNITS: ReadonlyMap<string, WorkUnit> = new Map([parent, child, systemTask, subscriber, limited].map((u) => [u.name, u]));

let h: WorkHarness;
let tenant: Actor;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  await createEffectTable(h.sql);
  tenant = { kind: 'system', tenantId: await createTenant(h.sql), label: 'test' };
  await h.startWorkers();
});
afterAll(async () => {
  await h?.close();
});

async function dispatchParent(key: string, mode: 'ok' | 'fail_after' | 'mismatch' | 'slow_after') {
  const run = await inUnitOfWork(h.sql, tenant, (tx) => dispatchTask(tx, parent, { key, mode }, { actor: tenant }));
  await h.relay();
  return run;
}

const followUpsOf = (runId: string) =>
  h.sql`SELECT run_id, name, trigger, causation_id, correlation_id, actor_kind, tenant_id::text AS tenant_id FROM task_runs WHERE causation_id = ${runId} ORDER BY name`;

describe('follow-up runs', () => {
  it('run.dispatch and run.publish commit with the effect: caused by the run, same correlation id, same tenant; the relay sends them and they run', async () => {
    const run = await dispatchParent('ok-1', 'ok');
    const done = await h.waitForStatus(run.runId, ['succeeded']);
    const rows = await followUpsOf(run.runId);
    expect(rows.map((r) => [r.name, r.trigger])).toEqual([['followup.child', 'dispatch'], ['followup.on_done', 'event']]);
    for (const r of rows) {
      expect(r).toMatchObject({ run_id: expect.any(String), causation_id: run.runId, correlation_id: run.envelope.correlation_id, actor_kind: 'system', tenant_id: tenant.kind === 'system' ? tenant.tenantId : null });
    }
    expect(done.outcome).toEqual({ child: rows[0]!.run_id });
    // The follow-ups are real runs: a relay pass sends them and the workers run the child.
    const [childRow] = await h.sql`SELECT run_id FROM task_runs WHERE causation_id = ${run.runId} AND name = 'followup.child'`;
    await h.relay();
    await h.waitForStatus(childRow!.run_id, ['succeeded']);
    expect(await h.effects('child:ok-1')).toBe(1);
  });

  it('R-OBX-10 the wake signal after the effect commits says whether the follow-ups are recent: not when the handler went on for 500 ms or more after writing them', async () => {
    const signals = async () => {
      await waitFor(async () => (await h.redis!.llen(OUTBOX_WAKE_KEY)) > 0, 5_000, { stepMs: 10, what: 'the wake signal' });
      return h.redis!.lrange(OUTBOX_WAKE_KEY, 0, -1);
    };
    await h.redis!.del(OUTBOX_WAKE_KEY);
    await h.waitForStatus((await dispatchParent('recent-1', 'ok')).runId, ['succeeded']);
    expect(await signals()).toEqual(['recent']);
    await h.redis!.del(OUTBOX_WAKE_KEY);
    await h.waitForStatus((await dispatchParent('slow-1', 'slow_after')).runId, ['succeeded']);
    // Not 'recent': the relay's next pass reads every due row (src/work/runtime/produce/relay.ts).
    expect(await signals()).toEqual(['1']);
  });

  it('a handler failing after run.dispatch leaves no follow-up: they roll back with the effect', async () => {
    const run = await dispatchParent('fail-1', 'fail_after');
    await h.waitForStatus(run.runId, ['failed']);
    await h.waitForEvent(run.runId, 'dead_lettered');
    expect(await followUpsOf(run.runId)).toEqual([]);
    expect(await h.effects('fail-1')).toBe(0);
  });

  it('RUN_CONTEXT_MISMATCH: a tenant run dispatching a system task fails permanently at once, writing nothing', async () => {
    const run = await dispatchParent('mismatch-1', 'mismatch');
    await h.waitForStatus(run.runId, ['failed']);
    const trail = await h.waitForEvent(run.runId, 'dead_lettered');
    expect(trail.find((t) => t.event === 'failed')).toMatchObject({ error_code: 'RUN_CONTEXT_MISMATCH', attempt: 1 });
    expect(await followUpsOf(run.runId)).toEqual([]);
    const [row] = await h.sql`SELECT count(*)::int AS n FROM platform_task_runs WHERE name = 'followup.system'`;
    expect(row!.n).toBe(0);
  });
});

describe('retry policy per unit', () => {
  it('full jitter by default: a uniform draw from 0 to base x 2^(n-1) (capped); jitter none gives the bound; defaults from SVC_BACKOFF_*', () => {
    const defaults = { baseMs: 2_000, capMs: 300_000 };
    const none = { retry: null };
    expect([1, 2, 3, 4].map((n) => retryDelaySeconds(none, n, defaults, () => 0.999999))).toEqual([2, 4, 8, 16]);
    expect([1, 2, 3, 4].map((n) => retryDelaySeconds(none, n, defaults, () => 0))).toEqual([0, 0, 0, 0]);
    expect(retryDelaySeconds(none, 4, defaults, () => 0.5)).toBe(8);
    const own = { retry: { backoff: { baseMs: 10_000, capMs: 25_000 } } };
    expect([1, 2, 3].map((n) => retryDelaySeconds(own, n, defaults, () => 0.999999))).toEqual([10, 20, 25]);
    const fixed = { retry: { backoff: { baseMs: 1_000, jitter: 'none' as const } } };
    expect([1, 2, 3].map((n) => retryDelaySeconds(fixed, n, defaults, () => 0))).toEqual([1, 2, 4]);
    // Spread: 200 draws of the 4th receive are not all equal and never exceed the bound.
    const draws = Array.from({ length: 200 }, () => retryDelaySeconds(none, 4, defaults));
    expect(Math.max(...draws)).toBeLessThanOrEqual(16);
    expect(new Set(draws).size).toBeGreaterThan(5);
    expect([maxReceivesOf({ retry: null }), maxReceivesOf({ retry: { maxReceives: 2 } }), maxReceivesOf(undefined)]).toEqual([5, 2, 5]);
  });

  it('maxReceives 2 fails and dead-letters on the second receive; the delay is the unit policy (3 s, no jitter), not the workers default', async () => {
    const run = await inUnitOfWork(h.sql, tenant, (tx) => dispatchTask(tx, limited, {}, { actor: tenant }));
    await h.relay();
    await h.waitForStatus(run.runId, ['failed'], 30_000);
    const trail = (await h.waitForEvent(run.runId, 'dead_lettered')).filter((t) => t.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'started', 'failed', 'dead_lettered']);
    expect(trail.find((t) => t.event === 'retry_scheduled')!.detail.retryInSeconds).toBe(3);
    expect(trail.find((t) => t.event === 'failed')).toMatchObject({ error_code: 'FIXTURE_TRANSIENT', receive_count: 2, detail: { receivesExhausted: true } });
  });
});
