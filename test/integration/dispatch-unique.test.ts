// Unique dispatch (uniqueKey, uniqueFor, uniqueStates): at most one live run of a unit per key and
// tenant, decided by the database under concurrent dispatch (an advisory lock per key taken before the
// lookup), for dispatchTask, dispatchMany (within the batch too) and run.dispatch.
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { dispatchMany, dispatchTask, DispatchError } from '../../src/work/runtime/produce/dispatch.ts';
import { createFollowUps } from '../../src/work/runtime/produce/follow-up.ts';
import { showRun } from '../../src/work/operate/show-run.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { refusal } from '../support/refusal.ts';
import type { TestDatabase } from '../support/services.ts';
import { createTenantMember, memberActor, workDatabase, type TenantMember } from './work-tables-support.ts';

const syncAccount = defineTask({
  name: 'billing.sync_account',
  queue: 'default',
  payload: z.object({ accountId: z.string() }),
  async handler() {},
});
const otherTask = defineTask({ name: 'billing.other', queue: 'default', payload: z.object({ accountId: z.string() }), async handler() {} });
const platformTask = defineTask({ name: 'billing.close_books', queue: 'maintenance', context: 'system', payload: z.object({}), async handler() {} });

const CONCURRENT = 50;
let db: TestDatabase;
let sql: Sql;
let member: TenantMember;
let user: Actor;

beforeAll(async () => {
  // One connection per concurrent dispatcher (and one spare), so all 50 transactions are open at once.
  db = await workDatabase({ max: CONCURRENT + 2 });
  sql = db.sql;
  member = await createTenantMember(sql);
  user = memberActor(member);
});
afterAll(async () => {
  await db?.drop();
});

const runsOf = async (name: string, key: string) =>
  (await sql`SELECT r.run_id::text, r.tenant_id::text FROM task_runs r JOIN task_run_events e USING (run_id, tenant_id)
    WHERE r.name = ${name} AND e.event = 'queued' AND e.detail ->> 'unique_key' = ${key} ORDER BY r.queued_at`).map((r) => r.run_id as string);
const finish = (runId: string) =>
  sql`UPDATE task_runs SET status = 'succeeded', attempts = 1, started_at = clock_timestamp(), finished_at = clock_timestamp(),
    updated_at = clock_timestamp() WHERE run_id = ${runId}`;
const totals = async () => {
  const [r] = await sql`SELECT (SELECT count(*) FROM task_runs)::int AS runs, (SELECT count(*) FROM task_run_events)::int AS events,
    (SELECT count(*) FROM outbox_messages)::int AS outbox, (SELECT count(*) FROM platform_task_runs)::int AS platform_runs`;
  return r!;
};

describe('unique dispatch', () => {
  it(`${CONCURRENT} concurrent dispatches of one key, each in its own transaction, make exactly one run and all return its id`, async () => {
    // Every transaction is open (its first statement done) before any dispatches: they all race for the key.
    let arrived = 0;
    let release!: () => void;
    const allOpen = new Promise<void>((resolve) => (release = resolve));
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        inUnitOfWork(sql, user, async (tx) => {
          await tx`SELECT 1`;
          if (++arrived === CONCURRENT) release();
          await allOpen;
          return dispatchTask(tx, syncAccount, { accountId: `a-${i}` }, { actor: user, uniqueKey: 'account:1' });
        }),
      ),
    );
    const runs = await runsOf('billing.sync_account', 'account:1');
    expect(runs).toHaveLength(1);
    expect(new Set(results.map((r) => r.runId))).toEqual(new Set(runs));
    expect(results.filter((r) => r.deduplicated === true)).toHaveLength(CONCURRENT - 1);
    expect(results.filter((r) => r.deduplicated === undefined)).toHaveLength(1);
    // The deduplicated dispatches wrote nothing: one queued event, one outbox row for the key's run.
    const [w] = await sql`SELECT (SELECT count(*) FROM task_run_events WHERE run_id = ${runs[0]!})::int AS events,
      (SELECT count(*) FROM outbox_messages WHERE run_id = ${runs[0]!})::int AS outbox`;
    expect(w).toEqual({ events: 1, outbox: 1 });
    // And svc runs show names the key.
    expect((await showRun(sql, runs[0]!)).uniqueKey).toBe('account:1');
  });

  it('once the key\'s run is final, a dispatch with the key makes a new run (default states); another unit\'s run never holds it', async () => {
    const first = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '2' }, { actor: user, uniqueKey: 'account:2' }));
    const again = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '2' }, { actor: user, uniqueKey: 'account:2' }));
    expect(again).toMatchObject({ runId: first.runId, deduplicated: true, name: 'billing.sync_account', scope: 'tenant', tenantId: member.tenantId });
    expect(again.envelope).toEqual(first.envelope);
    const other = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, otherTask, { accountId: '2' }, { actor: user, uniqueKey: 'account:2' }));
    expect(other.runId).not.toBe(first.runId);
    expect(other.deduplicated).toBeUndefined();

    await finish(first.runId);
    const second = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '2' }, { actor: user, uniqueKey: 'account:2' }));
    expect(second.runId).not.toBe(first.runId);
    expect(second.deduplicated).toBeUndefined();
    expect(await runsOf('billing.sync_account', 'account:2')).toEqual([first.runId, second.runId]);
  });

  it('with uniqueFor 3600 a dispatch after the first run succeeded still returns the first run; uniqueStates chooses the states', async () => {
    const opts = { actor: user, uniqueKey: 'account:3', uniqueFor: 3600 };
    const first = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '3' }, opts));
    await finish(first.runId);
    const again = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '3' }, opts));
    expect(again).toMatchObject({ runId: first.runId, deduplicated: true });
    // Without the window, the succeeded run no longer holds the key under the default states...
    const fresh = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '3' }, { actor: user, uniqueKey: 'account:3' }));
    expect(fresh.runId).not.toBe(first.runId);
    // ...but does when the states name it: the latest holding run is returned.
    await finish(fresh.runId);
    const bySucceeded = await inUnitOfWork(sql, user, (tx) =>
      dispatchTask(tx, syncAccount, { accountId: '3' }, { actor: user, uniqueKey: 'account:3', uniqueStates: ['succeeded'] }));
    expect(bySucceeded).toMatchObject({ runId: fresh.runId, deduplicated: true });
  });

  it('different tenants with the same key get their own runs; a platform run has its own scope', async () => {
    const otherMember = await createTenantMember(sql);
    const otherUser: Actor = { kind: 'user', ...otherMember, label: `user:${otherMember.userId}` };
    const a = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '4' }, { actor: user, uniqueKey: 'shared' }));
    const b = await inUnitOfWork(sql, otherUser, (tx) => dispatchTask(tx, syncAccount, { accountId: '4' }, { actor: otherUser, uniqueKey: 'shared' }));
    expect(b.runId).not.toBe(a.runId);
    expect([a.deduplicated, b.deduplicated]).toEqual([undefined, undefined]);
    expect(b.tenantId).toBe(otherMember.tenantId);
    const b2 = await inUnitOfWork(sql, otherUser, (tx) => dispatchTask(tx, syncAccount, { accountId: '4' }, { actor: otherUser, uniqueKey: 'shared' }));
    expect(b2).toMatchObject({ runId: b.runId, deduplicated: true });

    const system: Actor = { kind: 'system', label: 'test' };
    const p1 = await inUnitOfWork(sql, system, (tx) => dispatchTask(tx, platformTask, {}, { actor: system, uniqueKey: 'shared' }));
    const p2 = await inUnitOfWork(sql, system, (tx) => dispatchTask(tx, platformTask, {}, { actor: system, uniqueKey: 'shared' }));
    expect(p1.scope).toBe('platform');
    expect(p2).toMatchObject({ runId: p1.runId, deduplicated: true, scope: 'platform', tenantId: null });
    expect((await showRun(sql, p1.runId)).uniqueKey).toBe('shared');
  });

  it('a key on dispatchMany dedups within the batch and against runs already there', async () => {
    const existing = await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: 'x' }, { actor: user, uniqueKey: 'acct:x' }));
    const payloads = ['a', 'b', 'a', 'x', 'c', 'b', 'x'].map((accountId) => ({ accountId }));
    const before = await totals();
    const runs = await inUnitOfWork(sql, user, (tx) =>
      dispatchMany(tx, syncAccount, payloads, { actor: user, uniqueKey: (p) => `acct:${p.accountId}` }));
    expect(runs).toHaveLength(payloads.length);
    const ids = runs.map((r) => r.runId);
    expect(ids[2]).toBe(ids[0]);
    expect(ids[5]).toBe(ids[1]);
    expect(ids[3]).toBe(existing.runId);
    expect(ids[6]).toBe(existing.runId);
    expect(new Set([ids[0], ids[1], ids[4], existing.runId]).size).toBe(4);
    expect(runs.map((r) => r.deduplicated === true)).toEqual([false, false, true, true, false, true, true]);
    const after = await totals();
    // Three new runs (a, b, c), each with its queued event and outbox row.
    expect({ runs: after.runs - before.runs, events: after.events - before.events, outbox: after.outbox - before.outbox }).toEqual({ runs: 3, events: 3, outbox: 3 });

    // One string key for the whole batch: one run, returned for every payload.
    const one = await inUnitOfWork(sql, user, (tx) =>
      dispatchMany(tx, syncAccount, [{ accountId: '1' }, { accountId: '2' }, { accountId: '3' }], { actor: user, uniqueKey: 'batch-key' }));
    expect(new Set(one.map((r) => r.runId)).size).toBe(1);
    expect(await runsOf('billing.sync_account', 'batch-key')).toEqual([one[0]!.runId]);
  });

  it('run.dispatch from a handler takes the unique options too', async () => {
    const runId = (await inUnitOfWork(sql, user, (tx) => dispatchTask(tx, otherTask, { accountId: 'p' }, { actor: user }))).runId;
    const [first, second] = await sql.begin(async (tx) => {
      const followUps = createFollowUps({ tx, runId, correlationId: runId, tenantId: member.tenantId, units: new Map(), instance: 'test' });
      const a = await followUps.api.dispatch(syncAccount, { accountId: 'f' }, { uniqueKey: 'follow-up' });
      const b = await followUps.api.dispatch(syncAccount, { accountId: 'f' }, { uniqueKey: 'follow-up' });
      return [a, b];
    });
    expect(second).toMatchObject({ runId: first.runId, deduplicated: true });
    expect(await runsOf('billing.sync_account', 'follow-up')).toEqual([first.runId]);
  });

  it('bad unique options and a transaction that could not see a concurrent run are refused with DISPATCH_UNIQUE_INVALID, writing nothing', async () => {
    const before = await totals();
    for (const options of [{ uniqueKey: '' }, { uniqueKey: 'k'.repeat(256) }, { uniqueKey: 'k', uniqueFor: -1 }, { uniqueKey: 'k', uniqueStates: ['done'] as never }]) {
      const error = await refusal(inUnitOfWork(sql, user, (tx) => dispatchTask(tx, syncAccount, { accountId: '9' }, { actor: user, ...options })));
      expect(error, JSON.stringify(options)).toBeInstanceOf(DispatchError);
      expect(error.code).toBe('DISPATCH_UNIQUE_INVALID');
    }
    const repeatable = await refusal(sql.begin('isolation level repeatable read', (tx) =>
      dispatchTask(tx as never, syncAccount, { accountId: '9' }, { actor: { kind: 'system', label: 'test', tenantId: member.tenantId }, uniqueKey: 'k' })));
    expect(repeatable.code).toBe('DISPATCH_UNIQUE_INVALID');
    expect(repeatable.message).toMatch(/READ COMMITTED/);
    expect(await totals()).toEqual(before);
  });
});
