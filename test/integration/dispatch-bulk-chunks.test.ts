// Bulk dispatch of any length up to MAX_BULK_RUNS without the caller chunking: dispatchMany writes the
// list in chunks of BULK_CHUNK_RUNS inside the caller's one transaction, a refusal names indexes of the
// caller's list and nothing of it is written; unique keys by the thousand hold a bounded number of locks.
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { BULK_CHUNK_RUNS, dispatchMany, DispatchError } from '../../src/work/runtime/produce/dispatch.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { UNIQUE_LOCK_BUCKETS } from '../../src/work/runtime/produce/unique-dispatch.ts';
import { refusal } from '../support/refusal.ts';
import type { TestDatabase } from '../support/services.ts';
import { createTenantMember, memberActor, workDatabase, type TenantMember } from './work-tables-support.ts';

const importRow = defineTask({
  name: 'imports.row',
  queue: 'bulk',
  payload: z.object({ row: z.number().int().min(0) }),
  async handler() {},
});

const LIST = 25_000;
let db: TestDatabase;
let sql: Sql;
let member: TenantMember;
let user: Actor;

beforeAll(async () => {
  db = await workDatabase();
  sql = db.sql;
  member = await createTenantMember(sql);
  user = memberActor(member);
});
afterAll(async () => {
  await db?.drop();
});

async function counts() {
  const [r] = await sql`SELECT (SELECT count(*) FROM task_runs)::int AS runs, (SELECT count(*) FROM task_run_events)::int AS events,
    (SELECT count(*) FROM task_run_user_actors)::int AS actors, (SELECT count(*) FROM outbox_messages)::int AS outbox`;
  return r!;
}

describe('bulk dispatch without the caller chunking', () => {
  it(`${LIST} payloads whose last is bad: the refusal names index ${LIST - 1} of the caller's list and none of the ${LIST} is written`, async () => {
    expect(LIST).toBeGreaterThan(2 * BULK_CHUNK_RUNS);
    const payloads: unknown[] = Array.from({ length: LIST }, (_, row) => ({ row }));
    payloads[LIST - 1] = { row: -1 };
    const before = await counts();
    const error = (await refusal(inUnitOfWork(sql, user, (tx) => dispatchMany(tx, importRow, payloads as never, { actor: user })))) as DispatchError;
    expect(error).toBeInstanceOf(DispatchError);
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.message).toContain(`#${LIST - 1}: row `);
    expect(error.message).toContain(`none of the ${LIST} was dispatched`);
    expect((error.details.invalid as Array<{ index: number }>).map((b) => b.index)).toEqual([LIST - 1]);
    expect(await counts()).toEqual(before);
  });

  it(`${LIST} good payloads are written in one transaction, in the caller's order, with every row of each run`, async () => {
    const before = await counts();
    const runs = await inUnitOfWork(sql, user, (tx) =>
      dispatchMany(tx, importRow, Array.from({ length: LIST }, (_, row) => ({ row })), { actor: user }));
    expect(runs).toHaveLength(LIST);
    expect(new Set(runs.map((r) => r.runId)).size).toBe(LIST);
    expect(runs.every((r, i) => r.envelope.payload !== null && (r.envelope.payload as { row: number }).row === i)).toBe(true);
    const after = await counts();
    expect({ runs: after.runs - before.runs, events: after.events - before.events, actors: after.actors - before.actors, outbox: after.outbox - before.outbox })
      .toEqual({ runs: LIST, events: LIST, actors: LIST, outbox: LIST });
    // The outbox rows carry the payload of the caller's index, across the chunk boundaries.
    const sample = [0, BULK_CHUNK_RUNS - 1, BULK_CHUNK_RUNS, 2 * BULK_CHUNK_RUNS, LIST - 1];
    const rows = await sql`SELECT run_id::text, (envelope -> 'payload' ->> 'row')::int AS row FROM outbox_messages
      WHERE run_id = ANY (${sample.map((i) => runs[i]!.runId)}::uuid[])`;
    expect(new Map(rows.map((r) => [r.run_id as string, r.row as number]))).toEqual(new Map(sample.map((i) => [runs[i]!.runId, i])));
  });

  it(`${LIST} distinct unique keys in one dispatchMany hold a bounded number of advisory locks, and dispatching them again writes nothing`, async () => {
    const payloads = Array.from({ length: LIST }, (_, row) => ({ row }));
    const options = { actor: user, uniqueKey: (p: { row: number }) => `row:${p.row}` };
    const [first, locks] = await inUnitOfWork(sql, user, async (tx) => {
      const runs = await dispatchMany(tx, importRow, payloads, options);
      // Each lock takes a slot of the server's shared lock table: one per key would be 25,000.
      const [held] = await tx`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`;
      return [runs, held!.n as number] as const;
    });
    expect(locks).toBeGreaterThan(0);
    expect(locks).toBeLessThanOrEqual(UNIQUE_LOCK_BUCKETS);
    expect(first.filter((r) => r.deduplicated)).toHaveLength(0);
    const before = await counts();
    const again = await inUnitOfWork(sql, user, (tx) => dispatchMany(tx, importRow, payloads, options));
    expect(again.map((r) => r.runId)).toEqual(first.map((r) => r.runId));
    expect(again.every((r) => r.deduplicated === true)).toBe(true);
    expect(await counts()).toEqual(before);
  });
});
