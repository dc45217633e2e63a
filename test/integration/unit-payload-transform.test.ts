// A payload schema with transforms: dispatch validates the caller's payload with the schema and stores
// that payload (the schema's input side), so the worker's parse turns it into the output exactly once.
// Storing the output instead made the worker parse an output as an input: a permanent VALIDATION_FAILED.
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { compilePayloadSchema, payloadJsonSchema } from '../../src/work/define/payload-schema.ts';
import { createDispatcher, dispatchMany, dispatchTask } from '../../src/work/runtime/produce/dispatch.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { testUnit } from '../../src/work/testing.ts';
import type { TestDatabase } from '../support/services.ts';
import { createTenant, workDatabase } from './work-tables-support.ts';

let db: TestDatabase;
let tenant: string;
let actor: Actor;

beforeAll(async () => {
  db = await workDatabase();
  tenant = await createTenant(db.sql);
  actor = { kind: 'system', tenantId: tenant, label: 'payload-transform-test' };
});
afterAll(async () => {
  await db?.drop();
});

const received: unknown[] = [];
const charge = defineTask({
  name: 'billing.charge_parsed',
  queue: 'default',
  payload: z.object({ amount: z.string().transform(Number), tags: z.string().transform((s) => s.split(',')) }),
  async handler(p) {
    received.push(p);
    return { cents: Math.round(p.amount * 100), tags: p.tags.length };
  },
});
const parent = defineTask({
  name: 'billing.charge_parent',
  queue: 'default',
  payload: z.object({}),
  async handler(_p, run) {
    await run.dispatch(charge, { amount: '3.5', tags: 'x' });
  },
});

async function storedPayload(runId: string) {
  const [row] = await db.sql`SELECT envelope->'payload' AS payload FROM outbox_messages WHERE run_id = ${runId}`;
  return row!.payload;
}

describe('payload schemas with transforms', () => {
  it('typed dispatch stores the dispatched payload; the worker hands the handler the transformed values and the run succeeds', async () => {
    received.length = 0;
    const result = await testUnit(charge, { amount: '12.5', tags: 'a,b' }, { sql: db.sql, tenant });
    expect(result.error).toBeNull();
    expect(result.run.status).toBe('succeeded');
    expect(received).toEqual([{ amount: 12.5, tags: ['a', 'b'] }]);
    expect(result.outcome).toEqual({ cents: 1250, tags: 2 });
    expect(await storedPayload(result.run.runId)).toEqual({ amount: '12.5', tags: 'a,b' });
  });

  it('bulk dispatch and a follow-up store the input too', async () => {
    const runs = await inUnitOfWork(db.sql, actor, (tx) => dispatchMany(tx, charge, [{ amount: '1', tags: 'a' }, { amount: '2', tags: 'b,c' }], { actor }));
    expect(await storedPayload(runs[0]!.runId)).toEqual({ amount: '1', tags: 'a' });
    expect(await storedPayload(runs[1]!.runId)).toEqual({ amount: '2', tags: 'b,c' });
    const one = await inUnitOfWork(db.sql, actor, (tx) => dispatchTask(tx, charge, { amount: '7', tags: 'q' }, { actor }));
    expect(await storedPayload(one.runId)).toEqual({ amount: '7', tags: 'q' });

    const result = await testUnit(parent, {}, { sql: db.sql, tenant, units: [parent, charge] });
    expect(result.followUps).toHaveLength(1);
    expect(await storedPayload(result.followUps[0]!.runId)).toEqual({ amount: '3.5', tags: 'x' });
  });

  it("the API's dispatcher (the catalog's JSON Schema, the input side) accepts and stores the input", async () => {
    const check = compilePayloadSchema(payloadJsonSchema(charge.payload));
    const dispatcher = createDispatcher({ resolve: (name) => (name === charge.name ? { name, queue: 'default', context: 'tenant', check } : undefined) });
    const run = await inUnitOfWork(db.sql, actor, (tx) => dispatcher.dispatchTask(tx, charge.name, { amount: '4', tags: 'k,l' }, { actor }));
    expect(await storedPayload(run.runId)).toEqual({ amount: '4', tags: 'k,l' });
  });
});
