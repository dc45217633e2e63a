// Typed dispatch with the definition object (payload checked by TypeScript and by the unit's schema)
// and bulk dispatch (dispatchMany, publishMany): N runs, their `queued` events, actor and outbox rows
// in a few multi-row statements, all or nothing, one wake per transaction.
import { z } from 'zod';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { OUTBOX_WAKE_KEY } from '../../src/kv/keys.ts';
import { afterCommit } from '../../src/kv/wake.ts';
import { dispatchMany, dispatchTask, DispatchError, MAX_BULK_RUNS } from '../../src/work/runtime/produce/dispatch.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { refusal } from '../support/refusal.ts';
import { connectedRedis, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { createTenantMember, memberActor, workDatabase, type TenantMember } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';

const sendInvoice = defineTask({
  name: 'billing.send_invoice',
  queue: 'default',
  payload: z.object({ invoiceId: z.string().regex(/^[0-9]+$/), copies: z.number().int().min(1).default(1) }),
  async handler() {},
});
const platformTask = defineTask({ name: 'billing.close_books', queue: 'maintenance', context: 'system', payload: z.object({}), async handler() {} });

let db: TestDatabase;
let sql: Sql;
let redis: Redis;
let member: TenantMember;
let user: Actor;

beforeAll(async () => {
  db = await workDatabase();
  sql = db.sql;
  redis = await connectedRedis(await freshRedisUrl(), { name: 'dispatch-typed-bulk-test' });
  member = await createTenantMember(sql);
  user = memberActor(member);
});
afterAll(async () => {
  redis?.disconnect();
  await db?.drop();
});

async function counts() {
  const [r] = await sql`SELECT (SELECT count(*) FROM task_runs)::int AS runs, (SELECT count(*) FROM task_run_events)::int AS events,
    (SELECT count(*) FROM task_run_user_actors)::int AS actors, (SELECT count(*) FROM outbox_messages)::int AS outbox,
    (SELECT count(*) FROM platform_task_runs)::int AS platform_runs`;
  return r!;
}

describe('typed dispatch', () => {
  it('dispatchTask(tx, definition, payload) writes the run with the payload as dispatched; a schema refusal names unit, field and rule', async () => {
    const run = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, sendInvoice, { invoiceId: '42' }, { actor: user }));
    expect(run).toMatchObject({ name: 'billing.send_invoice', queue: 'default', scope: 'tenant', tenantId: member.tenantId });
    const [row] = await sql`SELECT r.status, o.envelope FROM task_runs r JOIN outbox_messages o USING (run_id) WHERE run_id = ${run.runId}`;
    expect(row!.status).toBe('queued');
    // The payload as dispatched is what is written: the worker's parse applies the default (and any transform) once.
    expect(row!.envelope.payload).toEqual({ invoiceId: '42' });

    const before = await counts();
    const bad = await refusal(inUnitOfWork(sql, user, (tx) =>
      // A payload the compiler accepts but the schema's rule refuses.
      dispatchTask(tx, sendInvoice, { invoiceId: 'INV-1' }, { actor: user })));
    expect(bad).toBeInstanceOf(DispatchError);
    expect((bad as DispatchError).code).toBe('PAYLOAD_INVALID');
    expect((bad as DispatchError).message).toMatch(/billing\.send_invoice.*invoiceId/);
    expect((bad as DispatchError).details.issues).toEqual([{ path: 'invoiceId', rule: expect.any(String) }]);
    expect(await counts()).toEqual(before);
  });

  it('the payload is type-checked against the definition (npm run typecheck verifies the @ts-expect-error lines)', async () => {
    const typed = async (tx: Parameters<Parameters<typeof inUnitOfWork>[2]>[0]) => {
      // @ts-expect-error invoiceId must be a string
      await dispatchTask(tx, sendInvoice, { invoiceId: 42 }, { actor: user });
      // @ts-expect-error a required field is missing
      await dispatchTask(tx, sendInvoice, { copies: 2 }, { actor: user });
      // @ts-expect-error every payload of a bulk dispatch is checked too
      await dispatchMany(tx, sendInvoice, [{ invoiceId: '1' }, { invoice: '2' }], { actor: user });
    };
    // At run time the schema refuses the same payload, so nothing is written either way.
    const error = await refusal(inUnitOfWork(sql, user, typed));
    expect((error as DispatchError).code).toBe('PAYLOAD_INVALID');
  });

  it('RUN_CONTEXT_MISMATCH applies to typed dispatch: a system task is refused for a tenant user', async () => {
    const error = await refusal(inUnitOfWork(sql, user, (tx) => dispatchTask(tx, platformTask, {}, { actor: user })));
    expect((error as DispatchError).code).toBe('RUN_CONTEXT_MISMATCH');
    expect((error as DispatchError).details).toMatchObject({ unit: 'billing.close_books' });
  });
});

describe('bulk dispatch', () => {
  it('dispatchMany writes N runs with their queued events, user-actor rows and outbox rows, in order, with one wake for the transaction', async () => {
    await redis.del(OUTBOX_WAKE_KEY);
    const before = await counts();
    const payloads = Array.from({ length: 1000 }, (_, i) => ({ invoiceId: String(i) }));
    const runs = await afterCommit(redis, inUnitOfWork(sql, user, (tx) => dispatchMany(tx, sendInvoice, payloads, { actor: user, delaySeconds: 5 })));
    expect(runs).toHaveLength(1000);
    expect(new Set(runs.map((r) => r.runId)).size).toBe(1000);
    const after = await counts();
    expect({ runs: after.runs - before.runs, events: after.events - before.events, actors: after.actors - before.actors, outbox: after.outbox - before.outbox })
      .toEqual({ runs: 1000, events: 1000, actors: 1000, outbox: 1000 });
    const ids = runs.map((r) => r.runId);
    const rows = await sql`SELECT r.run_id, r.status, r.trigger, r.actor_kind, r.correlation_id, r.causation_id, o.envelope,
        o.available_at > r.queued_at + interval '4 seconds' AS delayed, e.detail, a.user_id::text AS user_id
      FROM task_runs r JOIN outbox_messages o USING (run_id) JOIN task_run_events e USING (run_id) JOIN task_run_user_actors a USING (run_id)
      WHERE r.run_id = ANY(${ids}::uuid[]) AND e.event = 'queued'`;
    expect(rows).toHaveLength(1000);
    const byId = new Map(rows.map((r) => [r.run_id as string, r]));
    runs.forEach((run, i) => {
      const r = byId.get(run.runId)!;
      expect(r).toMatchObject({ status: 'queued', trigger: 'dispatch', actor_kind: 'user', delayed: true, user_id: member.userId });
      expect(r.envelope).toEqual(run.envelope);
      expect(r.envelope.payload).toEqual({ invoiceId: String(i) });
      expect(r.detail).toEqual({ trigger: 'dispatch', delay_seconds: 5 });
      // Each run is its own chain unless the caller names a correlation id.
      expect(r.causation_id).toBe(r.correlation_id);
    });
    expect(new Set(rows.map((r) => r.correlation_id)).size).toBe(1000);
    // One signal for the whole transaction (the list would hold up to 16 if each run had signalled).
    expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(1);
  });

  it('a bulk refusal is all or nothing and names the index of each bad payload, the unit, the field and the rule', async () => {
    const before = await counts();
    const payloads: unknown[] = Array.from({ length: 50 }, (_, i) => ({ invoiceId: String(i) }));
    payloads[3] = { invoiceId: 'x' };
    payloads[17] = {};
    payloads[42] = { invoiceId: '1', copies: 0 };
    const error = (await refusal(inUnitOfWork(sql, user, (tx) => dispatchMany(tx, sendInvoice, payloads as never, { actor: user })))) as DispatchError;
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.message).toContain('billing.send_invoice');
    expect(error.message).toMatch(/#3: invoiceId .*#17: invoiceId .*#42: copies /);
    expect((error.details.invalid as Array<{ index: number; issues: Array<{ path: string }> }>).map((b) => [b.index, b.issues.map((i) => i.path)]))
      .toEqual([[3, ['invoiceId']], [17, ['invoiceId']], [42, ['copies']]]);
    expect(await counts()).toEqual(before);
    // Too many payloads in one call (past the memory bound, not the statement size), or not an array at all.
    const one = { invoiceId: '1' };
    const big = (await refusal(inUnitOfWork(sql, user, (tx) =>
      dispatchMany(tx, sendInvoice, Array.from({ length: MAX_BULK_RUNS + 1 }, () => one), { actor: user })))) as DispatchError;
    expect(big.code).toBe('DISPATCH_BATCH_TOO_LARGE');
    expect(big.details).toMatchObject({ unit: 'billing.send_invoice', count: 1_000_001, max: 1_000_000 });
    expect(await counts()).toEqual(before);
    const delay = (await refusal(inUnitOfWork(sql, user, (tx) =>
      dispatchMany(tx, sendInvoice, [{ invoiceId: '1' }], { actor: user, delaySeconds: -1 })))) as DispatchError;
    expect(delay.code).toBe('DISPATCH_DELAY_INVALID');
    expect(delay.details).toMatchObject({ unit: 'billing.send_invoice', delaySeconds: '-1' });
    expect(await counts()).toEqual(before);
    // An empty batch writes nothing and is not an error.
    expect(await inUnitOfWork(sql, user, (tx) => dispatchMany(tx, sendInvoice, [], { actor: user }))).toEqual([]);
  });

  it('publishMany writes one run per subscriber per event, sharing a correlation id per event; a bad payload for any subscriber refuses all', async () => {
    const dispatcher = testDispatcher();
    const before = await counts();
    const runs = await inUnitOfWork(sql, user, (tx) =>
      dispatcher.publishMany(tx, 'demo.happened', 1, [{ who: 'a' }, { who: 'b' }, { who: 'c' }], { actor: user }));
    expect(runs.map((r) => [r.name, (r.envelope.payload as { who: string }).who])).toEqual([
      ['demo.sub_a', 'a'], ['demo.sub_a', 'b'], ['demo.sub_a', 'c'],
      ['demo.sub_b', 'a'], ['demo.sub_b', 'b'], ['demo.sub_b', 'c'],
    ]);
    expect(runs.every((r) => r.kind === 'event' && r.envelope.event === 'demo.happened')).toBe(true);
    const corr = (who: string) => new Set(runs.filter((r) => (r.envelope.payload as { who: string }).who === who).map((r) => r.envelope.correlation_id));
    expect([corr('a').size, corr('b').size, corr('c').size]).toEqual([1, 1, 1]);
    expect((await counts()).outbox - before.outbox).toBe(6);
    const mid = await counts();
    // demo.sub_b requires `who`: index 1 is refused, and demo.sub_a gets nothing either.
    const error = (await refusal(inUnitOfWork(sql, user, (tx) =>
      dispatcher.publishMany(tx, 'demo.happened', 1, [{ who: 'a' }, { nobody: true }], { actor: user })))) as DispatchError;
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.details).toMatchObject({ unit: 'demo.sub_b', invalid: [{ index: 1, issues: [{ path: 'who' }] }] });
    expect(await counts()).toEqual(mid);
  });

  it('dispatchMany for platform runs (a system process without tenant) writes the platform tables', async () => {
    const system: Actor = { kind: 'system', label: 'billing-job' };
    const before = await counts();
    const runs = await inUnitOfWork(sql, system, (tx) => dispatchMany(tx, platformTask, [{}, {}, {}], { actor: system }));
    expect(runs.map((r) => r.scope)).toEqual(['platform', 'platform', 'platform']);
    const [row] = await sql`SELECT count(*)::int AS n FROM platform_outbox_messages WHERE run_id = ANY(${runs.map((r) => r.runId)}::uuid[])`;
    expect(row!.n).toBe(3);
    expect((await counts()).platform_runs - before.platform_runs).toBe(3);
  });
});

describe('run ids', () => {
  it('are UUIDv7 (time-ordered, RFC 9562 variant), so a batch lands on the right edge of the run indexes', async () => {
    const runs = await inUnitOfWork(sql, user, (tx) => dispatchMany(tx, sendInvoice, [{ invoiceId: '1' }, { invoiceId: '2' }], { actor: user }));
    for (const r of runs) expect(r.runId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // The first 48 bits are the creation time in ms (within a minute of the test's clock).
    const ms = parseInt(runs[0]!.runId.replace(/-/g, '').slice(0, 12), 16);
    expect(Math.abs(ms - Date.now())).toBeLessThan(60_000);
    expect(new Set(runs.map((r) => r.runId)).size).toBe(2);
  });
});
