// Debounce (uniqueKey + debounceSeconds): a burst of dispatches of one key makes one run, due
// debounceSeconds after the burst's last dispatch, carrying the first payload or (debouncePayload
// 'last') the last one; once its message was sent, the next dispatch of the key makes a new run. The
// database decides under concurrent dispatch (the unique key's advisory lock, then an UPDATE that
// rechecks the row is still unsent), also against a relay that sends the row meanwhile.
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { dispatchMany, dispatchTask } from '../../src/work/runtime/produce/dispatch.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import { SYSTEM_ACTOR, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { refusal } from '../support/refusal.ts';
import type { TestDatabase } from '../support/services.ts';
import { waitFor } from '../support/wait-for.ts';
import { createTenantMember, memberActor, workDatabase, type TenantMember } from './work-tables-support.ts';

const refreshAccount = defineTask({
  name: 'billing.refresh_account',
  queue: 'default',
  payload: z.object({ accountId: z.string(), n: z.number().int() }),
  async handler() {},
});

const CONCURRENT = 50;
let db: TestDatabase;
let sql: Sql;
let member: TenantMember;
let user: Actor;

beforeAll(async () => {
  db = await workDatabase({ max: CONCURRENT + 3 });
  sql = db.sql;
  member = await createTenantMember(sql);
  user = memberActor(member);
});
afterAll(async () => {
  await db?.drop();
});

const runsOf = async (key: string) =>
  (await sql`SELECT r.run_id::text FROM task_runs r JOIN task_run_events e USING (run_id, tenant_id)
    WHERE r.name = 'billing.refresh_account' AND e.event = 'queued' AND e.detail ->> 'unique_key' = ${key} ORDER BY r.queued_at`).map((r) => r.run_id as string);
/** The run's outbox row: its payload and how many seconds from now it is due (database clock). */
const outboxOf = async (runId: string) => {
  const [row] = await sql<[{ payload: { n: number }; due_in: number; sent: boolean }]>`
    SELECT envelope -> 'payload' AS payload, extract(epoch FROM available_at - clock_timestamp())::float8 AS due_in, sent_at IS NOT NULL AS sent
      FROM outbox_messages WHERE run_id = ${runId}`;
  return row;
};
const dispatchOne = (key: string, n: number, extra: Record<string, unknown> = {}) =>
  inUnitOfWork(sql, user, (tx) =>
    dispatchTask(tx, refreshAccount, { accountId: key, n }, { actor: user, uniqueKey: `acct:${key}`, debounceSeconds: 30, ...extra }));

describe('debounced dispatch', () => {
  it(`${CONCURRENT} concurrent dispatches of one key make one run, due debounceSeconds after the last, with the first payload`, async () => {
    let arrived = 0;
    let release!: () => void;
    const allOpen = new Promise<void>((resolve) => (release = resolve));
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        inUnitOfWork(sql, user, async (tx) => {
          await tx`SELECT 1`;
          if (++arrived === CONCURRENT) release();
          await allOpen;
          return dispatchTask(tx, refreshAccount, { accountId: 'burst', n: i }, { actor: user, uniqueKey: 'acct:burst', debounceSeconds: 30 });
        }),
      ),
    );
    const runs = await runsOf('acct:burst');
    expect(runs).toHaveLength(1);
    expect(new Set(results.map((r) => r.runId))).toEqual(new Set(runs));
    expect(results.filter((r) => r.deduplicated === undefined)).toHaveLength(1);
    const first = results.find((r) => r.deduplicated === undefined)!;
    const row = (await outboxOf(runs[0]!));
    // The run kept the payload of the dispatch that wrote it, and is due 30 s after the last dispatch.
    expect(row.payload).toEqual((first.envelope as { payload: unknown }).payload);
    expect(row.due_in).toBeGreaterThan(25);
    expect(row.due_in).toBeLessThanOrEqual(30);
    expect(row.sent).toBe(false);
  });

  it('each dispatch of the key moves the run later; with debouncePayload last it carries the last payload', async () => {
    const first = await dispatchOne('moving', 1, { debounceSeconds: 10, debouncePayload: 'last' });
    const dueFirst = (await outboxOf(first.runId)).due_in;
    const second = await dispatchOne('moving', 2, { debounceSeconds: 20, debouncePayload: 'last' });
    expect(second).toMatchObject({ runId: first.runId, deduplicated: true });
    const row = (await outboxOf(first.runId));
    expect(row.payload).toEqual({ accountId: 'moving', n: 2 });
    expect(row.due_in).toBeGreaterThan(dueFirst + 5);
    expect(row.due_in).toBeLessThanOrEqual(20);
    // Default (first): the payload stays the run's first.
    const kept = await dispatchOne('kept', 1);
    await dispatchOne('kept', 2);
    expect((await outboxOf(kept.runId)).payload).toEqual({ accountId: 'kept', n: 1 });
  });

  it('once the run was sent, or runs, the next dispatch of the key writes a new run', async () => {
    const first = await dispatchOne('sent', 1);
    await sql`UPDATE outbox_messages SET sent_at = clock_timestamp() WHERE run_id = ${first.runId}`;
    const second = await dispatchOne('sent', 2);
    expect(second.runId).not.toBe(first.runId);
    expect(second.deduplicated).toBeUndefined();
    expect(await runsOf('acct:sent')).toEqual([first.runId, second.runId]);
  });

  it('a relay sending the row while the dispatch waits for it: the dispatch finds it sent and writes a new run', async () => {
    const first = await dispatchOne('race', 1);
    let locked!: () => void;
    const rowLocked = new Promise<void>((resolve) => (locked = resolve));
    const relayHolds = sql.begin(async (tx) => {
      await tx`SELECT id FROM outbox_messages WHERE run_id = ${first.runId} FOR UPDATE`;
      locked();
      // The dispatch's UPDATE now waits on this row lock (seen in pg_locks as a waiting backend).
      await waitFor(async () => {
        const [w] = await sql<[{ n: number }]>`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'`;
        return w.n > 0;
      }, 10_000, { what: 'the dispatch waiting on the row the relay holds' });
      await tx`UPDATE outbox_messages SET sent_at = clock_timestamp() WHERE run_id = ${first.runId}`;
    });
    // The dispatch starts once the relay's transaction holds the row.
    await rowLocked;
    const second = await dispatchOne('race', 2);
    await relayHolds;
    expect(second.runId).not.toBe(first.runId);
    expect(second.deduplicated).toBeUndefined();
    expect(await runsOf('acct:race')).toHaveLength(2);
  });

  it('dispatchMany dedups its own keys and moves a waiting run, the last payload of each key kept with last', async () => {
    const waiting = await dispatchOne('m1', 0);
    const runs = await inUnitOfWork(sql, user, (tx) =>
      dispatchMany(tx, refreshAccount, [{ accountId: 'm1', n: 1 }, { accountId: 'm2', n: 1 }, { accountId: 'm2', n: 2 }, { accountId: 'm1', n: 3 }], {
        actor: user,
        uniqueKey: (p) => `acct:${p.accountId}`,
        debounceSeconds: 30,
        debouncePayload: 'last',
      }));
    expect(runs[0]).toMatchObject({ runId: waiting.runId, deduplicated: true });
    expect(runs[3]).toMatchObject({ runId: waiting.runId, deduplicated: true });
    expect(runs[2]).toMatchObject({ runId: runs[1]!.runId, deduplicated: true });
    expect((await outboxOf(waiting.runId)).payload).toEqual({ accountId: 'm1', n: 3 });
    expect((await outboxOf(runs[1]!.runId)).payload).toEqual({ accountId: 'm2', n: 2 });
    expect(await runsOf('acct:m2')).toHaveLength(1);
  });

  it('refuses what does not make sense, with DISPATCH_UNIQUE_INVALID and nothing written', async () => {
    const [before] = await sql`SELECT count(*)::int AS n FROM task_runs`;
    const attempts: Array<Record<string, unknown>> = [
      { uniqueKey: undefined, debounceSeconds: 5 },
      { debounceSeconds: 0 },
      { debounceSeconds: -1 },
      { debounceSeconds: 86_401 },
      { debounceSeconds: Number.NaN },
      { debounceSeconds: 5, uniqueFor: 10 },
      { debounceSeconds: 5, uniqueStates: ['queued'] },
      { debounceSeconds: 5, delaySeconds: 3 },
      { debounceSeconds: undefined, debouncePayload: 'last' },
      { debounceSeconds: 5, debouncePayload: 'newest' },
    ];
    for (const extra of attempts) {
      const error = await refusal(dispatchOne('refused', 1, extra));
      expect(error.code, JSON.stringify(extra)).toBe('DISPATCH_UNIQUE_INVALID');
    }
    const [after] = await sql`SELECT count(*)::int AS n FROM task_runs`;
    expect(after!.n).toBe(before!.n);
  });
});

describe('debounce end to end', () => {
  let h: WorkHarness;
  beforeAll(async () => {
    h = await workHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a burst of dispatches runs once, after it goes quiet: the relay sends nothing during it', async () => {
    await h.startWorkers();
    const key = `debounce-${Date.now()}`;
    const ids = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const run = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) =>
        dispatchTask(tx, effectTask, { key }, { actor: SYSTEM_ACTOR, uniqueKey: key, debounceSeconds: 1 }));
      ids.add(run.runId);
      await h.relay();
    }
    expect(ids.size).toBe(1);
    const [runId] = [...ids];
    // During the burst (8 dispatches, each moving the run 1 s later) no relay pass sent it.
    expect((await h.trail(runId!)).map((t) => t.event)).toEqual(['queued']);
    // Once it is due, a pass sends it and the workers run it once.
    await waitFor(async () => {
      await h.relay();
      return (await h.trail(runId!)).some((t) => t.event === 'sent');
    }, 15_000, { stepMs: 100, what: 'the debounced run sent once due' });
    await h.waitForStatus(runId!, ['succeeded']);
    expect(await h.effects(key)).toBe(1);
  });
});
