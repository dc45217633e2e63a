// The worker keeps to the spec's run status table and the trail's causal order on real services:
// every committed status change is one of the table's rows, `received` never precedes `sent`, a run
// another delivery failed is never overwritten by a late finish, outcome sizes are checked as the
// database measures them, and Redis keeps the replay copy only for its short TTL.
import fc from 'fast-check';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { jsonbTextBytes } from '../../src/db/jsonb-text.ts';
import { databaseIdentityOf } from '../../src/kv/database-identity.ts';
import { gateKeyOf, idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { appendTrailEvent } from '../../src/work/runtime/store/trail.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';

/** Returns `width` members `kNNN: 1`: compact JSON under 2048 bytes, jsonb text over it from ~190 members. */
const wideOutcomeTask = defineTask({
  name: 'fixture.wide_outcome',
  queue: 'default',
  context: 'system',
  payload: z.object({ width: z.number().int().min(0).max(1000) }),
  handler: async (p) => Object.fromEntries(Array.from({ length: p.width }, (_, i) => [`k${String(i).padStart(3, '0')}`, 1])),
});

const UNITS: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [wideOutcomeTask.name, wideOutcomeTask]]);
const CACHE_TTL_MS = 5_000;

/** The spec's run status table (States and transitions), as from → to. */
const SPEC_TRANSITIONS = new Set([
  'queued>running', 'running>succeeded', 'running>failed', 'queued>skipped', 'running>retrying',
  'retrying>running', 'retrying>failed', 'running>queued',
]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  // Every committed status change of a platform run, in commit order.
  await h.sql.unsafe(`
    CREATE TABLE seen_transitions (id bigint GENERATED ALWAYS AS IDENTITY, run_id uuid, from_status text, to_status text);
    CREATE FUNCTION record_transition() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.status IS DISTINCT FROM OLD.status THEN
        INSERT INTO seen_transitions (run_id, from_status, to_status) VALUES (NEW.run_id, OLD.status, NEW.status);
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER record_transition AFTER UPDATE ON platform_task_runs FOR EACH ROW EXECUTE FUNCTION record_transition();`);
  await h.startWorkers({ queues: ['critical', 'default'], cacheTtlMs: CACHE_TTL_MS });
});
afterAll(async () => h?.close());

async function transitionsOf(runId: string): Promise<string[]> {
  const rows = await h.sql<{ t: string }[]>`SELECT from_status || '>' || to_status AS t FROM seen_transitions WHERE run_id = ${runId} ORDER BY id`;
  return rows.map((r) => r.t);
}

describe('worker transitions', () => {
  it('R-TRL-08 received follows sent in the trail even when the message arrives before the relay commits', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'trail-order' });
    // A slow relay: the outbox row is locked and the message sent; `sent` commits only later.
    await h.sql.begin(async (tx) => {
      await tx`SELECT 1 FROM platform_outbox_messages WHERE run_id = ${runId} FOR UPDATE`;
      await h.sendRaw('default', envelope);
      // The worker receives the message meanwhile, and its registration waits for this lock.
      for (const deadline = Date.now() + 10_000; ; await sleep(20)) {
        const waiting = await h.sql`SELECT 1 FROM pg_stat_activity
                                     WHERE wait_event_type = 'Lock' AND query ILIKE '%platform_outbox_messages%' LIMIT 1`;
        if (waiting.length > 0) break;
        if (Date.now() > deadline) throw new Error('no registration waited for the outbox row lock');
      }
      await tx`UPDATE platform_outbox_messages SET sent_at = clock_timestamp() WHERE run_id = ${runId}`;
      await appendTrailEvent(tx, 'platform', { runId, event: 'sent', attempt: 0, queue: 'default', workerInstance: 'slow-relay' });
    });
    await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(events(await h.trail(runId))).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
  });

  it('R-WRK-01 R-WRK-02 R-WRK-03 R-WRK-04 R-WRK-05 every committed status change is a row of the spec table, early failures included', async () => {
    const ok = await h.dispatch('fixture.effect', { key: 'table-ok' });
    const permanent = await h.dispatch('fixture.effect', { key: 'table-permanent', fail: 'permanent' });
    const transient = await h.dispatch('fixture.effect', { key: 'table-transient', fail: 'transient', failUntilAttempt: 1 });
    await h.relay();
    // A unit these workers do not know: retried (an early, transient failure), failed at the fifth receive.
    const unknown = randomUUID();
    await h.sql`INSERT INTO platform_task_runs (run_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
                VALUES (${unknown}, 'fixture.from_the_future', 'default', 'dispatch', 'system', 'test', ${unknown}, ${unknown})`;
    await h.sendRaw('default', { run_id: unknown, kind: 'task', name: 'fixture.from_the_future', payload: {}, correlation_id: unknown, causation_id: unknown });
    // An invalid payload: an early, permanent failure.
    const invalid = await h.dispatch('fixture.effect', { key: 'table-invalid' });
    await h.sql`DELETE FROM platform_outbox_messages WHERE run_id = ${invalid.runId}`;
    await h.sendRaw('default', { ...invalid.envelope, payload: { key: 42 } });

    expect((await h.waitForStatus(ok.runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect((await h.waitForStatus(permanent.runId, ['failed'])).status).toBe('failed');
    expect((await h.waitForStatus(transient.runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect((await h.waitForStatus(invalid.runId, ['failed'])).status).toBe('failed');
    expect((await h.waitForStatus(unknown, ['failed'], 30_000)).status).toBe('failed');

    expect(await transitionsOf(ok.runId)).toEqual(['queued>running', 'running>succeeded']);
    expect(await transitionsOf(permanent.runId)).toEqual(['queued>running', 'running>failed']);
    expect(await transitionsOf(transient.runId)).toEqual(['queued>running', 'running>retrying', 'retrying>running', 'running>succeeded']);
    expect(await transitionsOf(invalid.runId)).toEqual(['queued>running', 'running>failed']);
    expect(await transitionsOf(unknown)).toEqual([
      'queued>running', 'running>retrying', ...Array(3).fill(['retrying>running', 'running>retrying']).flat(), 'retrying>running', 'running>failed',
    ]);
    const all = await h.sql<{ t: string }[]>`SELECT DISTINCT from_status || '>' || to_status AS t FROM seen_transitions`;
    expect(all.map((r) => r.t).filter((t) => !SPEC_TRANSITIONS.has(t))).toEqual([]);
  });

  it('R-WRK-02 a run that left running while its handler ran (failed by another delivery) is not overwritten, and the effect rolls back', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'late-finish', sleepMs: 1_500 });
    await h.relay();
    await h.waitForStatus(runId, ['running']);
    // What an early failure of a duplicate delivery commits meanwhile (running → failed).
    await h.sql`UPDATE platform_task_runs SET status = 'failed', finished_at = clock_timestamp() WHERE run_id = ${runId} AND status = 'running'`;
    // The handler finishes, its finish is refused, and the delivery settles without overwriting.
    for (const deadline = Date.now() + 15_000; !h.logs().includes('its own settlement stands'); await sleep(50)) {
      if (Date.now() > deadline) throw new Error('the delivery never settled');
    }
    const run = await h.run(runId);
    expect(run!.status).toBe('failed');
    expect(await h.effects('late-finish')).toBe(0);
    expect(events(await h.trail(runId))).not.toContain('succeeded');
  });
});

describe('json sizes', () => {
  it('R-RUN-09 R-TRL-05 the size check agrees with the database: jsonbTextBytes equals octet_length(x::jsonb::text)', async () => {
    const json = fc.jsonValue({ maxDepth: 3 }).filter((v) => !JSON.stringify(v).includes('\\u0000'));
    const samples = fc.sample(fc.dictionary(fc.string(), json, { maxKeys: 12 }), 150);
    samples.push({ small: 1.5e-7, big: 1e21, neg: -2.5e-3, unicode: 'é😀\u2028', nested: { a: [1, { b: [] }] } });
    for (const value of samples) {
      const [row] = await h.sql<{ n: number }[]>`SELECT octet_length(${h.sql.json(value)}::jsonb::text)::int AS n`;
      expect(jsonbTextBytes(value), JSON.stringify(value)).toBe(row!.n);
    }
  });

  it('R-RUN-09 an outcome whose compact JSON fits but whose jsonb text is over 2048 bytes fails as a validation failure, not a CHECK violation', async () => {
    const { runId } = await h.dispatch('fixture.wide_outcome', { width: 200 });
    await h.relay();
    const run = await h.waitForStatus(runId, ['failed', 'succeeded']);
    expect(run.status).toBe('failed');
    expect(run.attempts).toBe(1);
    const failed = (await h.trail(runId)).find((t) => t.event === 'failed');
    expect(failed).toMatchObject({ error_code: 'VALIDATION_FAILED' });
    // Just under the limit as jsonb text: succeeds with the outcome stored.
    const fits = await h.dispatch('fixture.wide_outcome', { width: 180 });
    await h.relay();
    expect((await h.waitForStatus(fits.runId, ['failed', 'succeeded'])).status).toBe('succeeded');
  });
});

describe('replay copy in Redis', () => {
  it('R-IDM-11 R-IDM-13 the Redis copy of a result lives for SVC_IDEMPOTENCY_CACHE_TTL_MS, not the ledger retention', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'cache-ttl' });
    await h.relay();
    await h.waitForStatus(runId, ['succeeded']);
    const gateKey = gateKeyOf(await databaseIdentityOf(h.sql), 'platform', null, idempotencyKeyOf('fixture.effect', runId));
    let ttl = -2;
    for (let i = 0; i < 40 && ttl < 0; i++) {
      ttl = await h.redis!.pttl(gateKey);
      if (ttl < 0) await sleep(50);
    }
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(CACHE_TTL_MS);
    // The ledger keeps the result for its own retention (60 s in the harness), well past the copy.
    const [ledger] = await h.sql<{ ms: number }[]>`SELECT extract(epoch FROM expires_at - clock_timestamp())::float8 * 1000 AS ms
      FROM platform_idempotency_keys WHERE status = 'completed' ORDER BY updated_at DESC LIMIT 1`;
    expect(ledger!.ms).toBeGreaterThan(CACHE_TTL_MS);
  });
});
