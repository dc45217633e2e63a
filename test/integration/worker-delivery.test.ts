// A delivery through the worker runtime on real PostgreSQL, Redis and SQS: the status transitions and
// trail of a successful run, and exactly-once effects under duplicate deliveries.
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueUrl } from '../../src/queue/names.ts';
import { waitFor } from '../support/wait-for.ts';
import { databaseIdentityOf } from '../../src/kv/database-identity.ts';
import { idempotencyGateKey } from '../../src/kv/keys.ts';
import { idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { createTenant } from './work-tables-support.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness();
  await h.startWorkers();
});
afterAll(async () => h?.close());

describe('worker delivery', () => {
  it('R-WRK-01 R-WRK-02 R-TRL-08 R-IDM-10 R-IDM-12 a delivered run goes queued → running → succeeded with its trail in order', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'happy' });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(1);
    expect(run.finished_at).not.toBeNull();
    expect(run.started_at).not.toBeNull();
    expect(run.outcome).toEqual({ key: 'happy', attempt: 1 });
    const trail = await h.trail(runId);
    expect(events(trail).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
    expect(events(trail)).toContain('sent');
    const received = trail.find((t) => t.event === 'received')!;
    expect(received.receive_count).toBe(1);
    expect(received.worker_instance).toBe('test-worker');
    expect(await h.effects('happy')).toBe(1);
    // The ledger row keyed by SHA-256(unit name, run id) is completed with the outcome.
    const key = idempotencyKeyOf('fixture.effect', runId);
    const [ledger] = await h.sql`SELECT status, attempt, outcome FROM platform_idempotency_keys WHERE idempotency_key = ${key}`;
    expect(ledger).toMatchObject({ status: 'completed', attempt: 1, outcome: { key: 'happy', attempt: 1 } });
    // After commit the result is copied to Redis for fast replay.
    const cached = await h.redis!.get(idempotencyGateKey(await databaseIdentityOf(h.sql), 'platform', null, key.toString('hex')));
    expect(JSON.parse(cached!)).toMatchObject({ s: 'c', o: { key: 'happy', attempt: 1 } });
  });

  it('R-IDM-09 R-OBX-16 a sequential duplicate of a finished run replays without a second effect', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'seq-dup' });
    await h.relay();
    await h.waitForStatus(runId, ['succeeded']);
    await h.sendRaw('default', envelope);
    await h.waitForReceives(runId, 2, 10_000);
    // The relay's `sent` may land after the worker's `received`: compare the worker's own steps.
    expect(events(await h.trail(runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded', 'received']);
    expect(await h.effects('seq-dup')).toBe(1);
    expect((await h.run(runId))!.attempts).toBe(1);
  });

  it('R-IDM-11 R-OBX-16 the same message delivered twice concurrently has one effect', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'conc-dup', sleepMs: 1_500 });
    await h.sendRaw('default', envelope);
    await h.sendRaw('default', envelope);
    await h.waitForStatus(runId, ['succeeded']);
    // The first copy executes; the second meets the gate held, so the key's lock decides: held by the
    // live execution, it comes back after the lease and finds the run finished.
    await h.waitForReceives(runId, 3);
    const trail = await h.trail(runId);
    expect(trail.filter((t) => t.event === 'received').some((t) => t.detail.held === 'ledger')).toBe(true);
    expect(trail.filter((t) => t.event === 'started')).toHaveLength(1);
    expect(await h.effects('conc-dup')).toBe(1);
  });

  it('R-IDM-10 a declared business key makes a second run with the same key replay the first outcome', async () => {
    const first = await h.dispatch('fixture.business_key', { key: 'order-7' });
    await h.relay();
    await h.waitForStatus(first.runId, ['succeeded']);
    const second = await h.dispatch('fixture.business_key', { key: 'order-7' });
    await h.relay();
    const run = await h.waitForStatus(second.runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.outcome).toEqual({ key: 'order-7', attempt: 1 });
    expect(await h.effects('order-7')).toBe(1);
    const trail = (await h.trail(second.runId)).filter((t) => t.event !== 'sent');
    expect(trail.at(-1)).toMatchObject({ event: 'succeeded', detail: { replayed: true } });
  });

  it('R-IDM-10 R-IDM-11 a declared business key reused with another payload fails the second run (IDEMPOTENCY_KEY_REUSED) from the Redis gate; no second effect', async () => {
    const first = await h.dispatch('fixture.business_key', { key: 'order-9' });
    await h.relay();
    await h.waitForStatus(first.runId, ['succeeded']);
    // Same key, another payload (sleepMs 0 is a field the first did not have).
    const second = await h.dispatch('fixture.business_key', { key: 'order-9', sleepMs: 0 });
    await h.relay();
    const run = await h.waitForStatus(second.runId, ['succeeded', 'failed']);
    expect(run.status).toBe('failed');
    expect((await h.trail(second.runId)).find((t) => t.event === 'failed')?.error_code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await h.effects('order-9')).toBe(1);
  });

  it('R-IDM-13 when Redis lacks the key the database answers and the store is repopulated', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'repopulate' });
    await h.relay();
    await h.waitForStatus(runId, ['succeeded']);
    const key = idempotencyKeyOf('fixture.effect', runId);
    const gateKey = idempotencyGateKey(await databaseIdentityOf(h.sql), 'platform', null, key.toString('hex'));
    await h.redis!.del(gateKey);
    await h.sendRaw('default', envelope);
    const deadline = Date.now() + 10_000;
    // The duplicate first takes the gate (`p`), then copies the ledger's result into it (`c`): wait for `c`.
    const completed = async () => (JSON.parse((await h.redis!.get(gateKey)) ?? '{}') as { s?: string }).s === 'c';
    while (Date.now() < deadline && !(await completed())) await new Promise((r) => setTimeout(r, 50));
    expect(JSON.parse((await h.redis!.get(gateKey))!)).toMatchObject({ s: 'c', o: { key: 'repopulate' } });
    expect(await h.effects('repopulate')).toBe(1);
  });

  it('R-UNT-09 a tenant unit runs in task_runs with its effect committed with started and succeeded', async () => {
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const { runId } = await h.dispatch('fixture.tenant_effect', { key: 'tenant-1' }, actor);
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(events(await h.trail(runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
    const [row] = await h.sql`SELECT count(*)::int AS n FROM idempotency_keys WHERE tenant_id = ${tenantId} AND status = 'completed'`;
    expect(row!.n).toBe(1);
    // The effect row and the started/succeeded events share one transaction (same xmin).
    const [effect] = await h.sql`SELECT xmin::text AS x FROM fixture_effects WHERE key = 'tenant-1'`;
    const trailXmins = await h.sql`SELECT event, xmin::text AS x FROM task_run_events WHERE run_id = ${runId} AND event IN ('started', 'succeeded')`;
    expect(trailXmins.map((t) => t.x)).toEqual([effect!.x, effect!.x]);
  });

  it('R-WRK-08 a heartbeat keeps a message invisible while it is processed past its visibility timeout', async () => {
    // Visibility is 2 s in these tests; the handler takes 3.5 s; the heartbeat extends every 500 ms.
    const { runId } = await h.dispatch('fixture.effect', { key: 'heartbeat', sleepMs: 3_500 });
    await h.relay();
    await h.waitForStatus(runId, ['succeeded']);
    // Once the message is deleted (nothing visible or in flight), no second receive can come.
    await waitFor(async () => {
      const { Attributes: a } = await h.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl(h.queueUrlPrefix, 'default'), AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
      );
      return a?.ApproximateNumberOfMessages === '0' && a?.ApproximateNumberOfMessagesNotVisible === '0';
    }, 10_000, { what: 'the message deleted' });
    const trail = await h.trail(runId);
    expect(trail.filter((t) => t.event === 'received')).toHaveLength(1);
    expect(await h.effects('heartbeat')).toBe(1);
  });
});
