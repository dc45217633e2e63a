// The worker's registration statements on real PostgreSQL: one delivery (startDelivery) or several
// arriving together (startDeliveries) move each run to `running` with its own `received` event in the
// same commit, and leave missing or finished runs untouched for the general path.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDeliveries, startDelivery, transitionRun } from '../../src/work/runtime/store/run-store.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { createTenant } from './work-tables-support.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ redis: false });
});
afterAll(async () => h?.close());

describe('worker registration statements', () => {
  it('R-WRK-01 R-TRL-08 deliveries registered together each become running with their own received event, committed together', async () => {
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const a = await h.dispatch('fixture.tenant_effect', { key: 'reg-a' }, actor);
    const b = await h.dispatch('fixture.tenant_effect', { key: 'reg-b' }, actor);
    const done = await h.dispatch('fixture.tenant_effect', { key: 'reg-done' }, actor);
    await inUnitOfWork(h.sql, actor, (tx) => transitionRun(tx, 'tenant', { runId: done.runId, tenantId, to: 'succeeded' }));
    const missing = randomUUID();
    const settings = { tenantId, userId: '', process: 'worker:fixture.tenant_effect' };

    const started = await startDeliveries(h.sql, 'tenant', settings, tenantId, 'reg-worker', [
      { runId: a.runId, receiveCount: 1 },
      { runId: b.runId, receiveCount: 3 },
      { runId: done.runId, receiveCount: 2 },
      { runId: missing, receiveCount: 1 },
    ]);
    expect([...started.keys()].sort()).toEqual([a.runId, b.runId].sort());
    expect(started.get(b.runId)!.run).toMatchObject({ status: 'running', attempts: 1, tenantId });
    expect(started.get(b.runId)!.scheduledFor).toBeNull();

    const [ra, rb, rdone] = await Promise.all([h.run(a.runId), h.run(b.runId), h.run(done.runId)]);
    expect([ra!.status, rb!.status, rdone!.status]).toEqual(['running', 'running', 'succeeded']);
    expect(ra!.started_at).not.toBeNull();
    const trailB = await h.trail(b.runId);
    // Nothing relayed these runs: the delivery proves the send and records it first.
    expect(events(trailB)).toEqual(['queued', 'sent', 'received']);
    expect(trailB[1]).toMatchObject({ attempt: 0, worker_instance: 'reg-worker', detail: { recorded_by: 'delivery' } });
    expect(trailB[2]).toMatchObject({ attempt: 1, receive_count: 3, worker_instance: 'reg-worker' });
    // The finished run got nothing: the general path records its late delivery.
    expect(events(await h.trail(done.runId))).toEqual(['queued']);
    // Both events belong to one transaction.
    const xmins = await h.sql`SELECT DISTINCT xmin::text AS x FROM task_run_events WHERE run_id IN (${a.runId}, ${b.runId}) AND event = 'received'`;
    expect(xmins).toHaveLength(1);

    // A new delivery of a running run is a new attempt.
    const again = await startDelivery(h.sql, 'tenant', settings, { runId: a.runId, tenantId, receiveCount: 2, workerInstance: 'reg-worker' });
    expect(again!.run).toMatchObject({ status: 'running', attempts: 2 });
    expect((await h.trail(a.runId)).filter((t) => t.event === 'received').map((t) => t.attempt)).toEqual([1, 2]);
  });

  it('R-WRK-01 a platform delivery (no schedule origin) registers with no scheduled moment and its received event', async () => {
    const p = await h.dispatch('fixture.effect', { key: 'reg-platform' });
    const settings = { tenantId: '', userId: '', process: 'worker:fixture.effect' };
    const started = await startDeliveries(h.sql, 'platform', settings, null, 'reg-worker', [{ runId: p.runId, receiveCount: 1 }]);
    expect(started.get(p.runId)!.run).toMatchObject({ status: 'running', attempts: 1, tenantId: null });
    expect(started.get(p.runId)!.scheduledFor).toBeNull();
    expect(events(await h.trail(p.runId))).toEqual(['queued', 'sent', 'received']);
  });
});
