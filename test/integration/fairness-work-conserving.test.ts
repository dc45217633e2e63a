// Work-conserving fair share at the relay (SVC_TENANT_INFLIGHT_LONE_MAX), against real PostgreSQL,
// Redis and the local SQS-protocol server: a tenant alone on its queue may have more than the cap in
// flight, and from the moment another tenant contends (pending, in flight, or sent for lately) the burst
// is back to the cap while the newcomer's rows go out at once.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { connectedRedis, freshQueuePrefix, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import type { Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { afterCommit } from '../../src/kv/wake.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { queueUrl } from '../../src/queue/names.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { capRefillWaitMs, relayPass, startRelay, type RelayPassOptions } from '../../src/work/runtime/produce/relay.ts';
import { RecentGroups } from '../../src/work/runtime/produce/tenant-inflight.ts';
import { transitionRun } from '../../src/work/runtime/store/run-store.ts';
import { createTenant, workDatabase } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';
import { waitFor } from '../support/wait-for.ts';

let db: TestDatabase;
let sql: Sql;
let redis: Redis;
let sqs: SQSClient;
let prefix: string;
const dispatcher = testDispatcher();
const actorOf = (tenantId: string): Actor => ({ kind: 'system', tenantId, label: 'work-conserving-test' });

beforeAll(async () => {
  db = await workDatabase({ max: 12 });
  sql = db.sql;
  redis = await connectedRedis(await freshRedisUrl(), { name: 'work-conserving-test' });
  sqs = createSqsClient({ region: 'us-east-1', endpoint: freshQueuePrefix().endpoint, localCredentials: true }, { maxAttempts: 1 });
});

beforeEach(async () => {
  prefix = freshQueuePrefix().queueUrlPrefix;
  await provisionQueues(sqs, prefix);
  // Earlier tests' runs must not contend: their runs are finished, their outbox rows dropped.
  await sql`DELETE FROM outbox_messages`;
  await sql`UPDATE task_runs SET status = 'failed', finished_at = clock_timestamp() WHERE finished_at IS NULL`;
});

afterAll(async () => {
  redis?.disconnect();
  sqs?.destroy();
  await db?.drop();
});

async function dispatch(tenantId: string, n: number, task = 'demo.tenant_task'): Promise<string[]> {
  const actor = actorOf(tenantId);
  return afterCommit(
    redis,
    inUnitOfWork(sql, actor, async (tx) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) ids.push((await dispatcher.dispatchTask(tx, task, { n: i }, { actor })).runId);
      return ids;
    }),
  );
}

async function sentOf(runIds: readonly string[]): Promise<string[]> {
  const rows = await sql<{ run_id: string }[]>`SELECT run_id::text FROM outbox_messages WHERE run_id = ANY(${runIds as string[]}::uuid[]) AND sent_at IS NOT NULL ORDER BY id`;
  return rows.map((r) => r.run_id);
}

async function finish(tenantId: string, runIds: readonly string[]): Promise<void> {
  for (const runId of runIds) await sql.begin((tx) => transitionRun(tx, 'tenant', { runId, tenantId, to: 'succeeded', outcome: {} }));
}

describe('work-conserving fair share at the relay', () => {
  it('a lone tenant gets the lone room past the cap (its pass says so: the relay then looks again less often); a second tenant pending, in flight or sent for lately puts it back to the cap', async () => {
    const a = await createTenant(sql);
    const b = await createTenant(sql);
    const cap = 5;
    const recentGroups = new RecentGroups(60_000);
    const pass = (extra: Partial<RelayPassOptions> = {}) =>
      relayPass(sql, sqs, prefix, { instance: 'relay-wc', tenantInflightMax: cap, tenantInflightLoneMax: 12, recentGroups, ...extra }, ['tenant']);
    const burst = await dispatch(a, 40);

    // Alone: 12 in flight, not 5 (the cap alone sent 5).
    const alone = await pass();
    expect(alone.sent).toBe(12);
    expect(alone).toMatchObject({ capped: true, cappedLone: true });
    // The relay's loop makes its wait of the pass's result: a room signal right after this pass waits 40 ms.
    expect(capRefillWaitMs(alone, 'any', 0)).toBe(40);
    expect(await sentOf(burst)).toEqual(burst.slice(0, 12));
    expect((await pass()).sent).toBe(0);

    // B arrives while 10 of A's finished (2 left in flight): B's rows go out at once, A gets the cap's room only.
    const victim = await dispatch(b, 3);
    await finish(a, burst.slice(0, 10));
    const contended = await pass();
    expect(contended.sent).toBe(3 + (cap - 2));
    expect(contended).toMatchObject({ capped: true, cappedLone: false });
    expect(capRefillWaitMs(contended, 'any', 0)).toBe(20);
    expect(await sentOf(victim)).toEqual(victim);
    expect(await sentOf(burst)).toEqual(burst.slice(0, 15));

    // B's runs still in flight: A stays at the cap, even for a relay that never sent for B (no memory).
    await finish(a, burst.slice(10, 15));
    expect((await pass({ recentGroups: new RecentGroups(60_000) })).sent).toBe(cap);
    expect(await sentOf(burst)).toEqual(burst.slice(0, 20));

    // B's runs finished: the relay that sent them still remembers B, so A stays at the cap...
    await finish(b, victim);
    await finish(a, burst.slice(15, 20));
    const remembered = await pass();
    expect(remembered.sent).toBe(cap);
    expect(remembered.cappedLone).toBe(false);
    // ...while a relay that did not send for B lately gives A the lone room again.
    await finish(a, burst.slice(20, 25));
    const aloneAgain = await pass({ recentGroups: new RecentGroups(60_000) });
    expect(aloneAgain.sent).toBe(12);
    expect(aloneAgain.cappedLone).toBe(true);
  });

  it('a pass is lone only if every group with rows pending had its lone room: two tenants held at the cap on another queue keep the relay looking at their pace', async () => {
    const [a, b, c] = [await createTenant(sql), await createTenant(sql), await createTenant(sql)];
    const cap = 3;
    const pass = () => relayPass(sql, sqs, prefix, { instance: 'relay-wc-mixed', tenantInflightMax: cap, tenantInflightLoneMax: 8, recentGroups: new RecentGroups(60_000) }, ['tenant']);
    // B and C contend on `bulk` and reach the cap; A is alone on `default`.
    await dispatch(b, 5, 'demo.bulk_task');
    await dispatch(c, 5, 'demo.bulk_task');
    const first = await pass();
    expect(first.sent).toBe(2 * cap);
    expect(first).toMatchObject({ capped: true, cappedLone: false });
    // A's burst arrives: it gets its lone room, and B and C, held back at the cap, get nothing: still not lone.
    const burst = await dispatch(a, 20);
    const second = await pass();
    expect(second.sent).toBe(8);
    expect(await sentOf(burst)).toEqual(burst.slice(0, 8));
    expect(second).toMatchObject({ capped: true, cappedLone: false });
  });

  it('a pass that took every due row holds nothing back: not capped (no mark, no second look), as a trickle of single dispatches is; rows its room kept out make it capped', async () => {
    const [a, b] = [await createTenant(sql), await createTenant(sql)];
    const cap = 5;
    const pass = () => relayPass(sql, sqs, prefix, { instance: 'relay-wc-held', tenantInflightMax: cap, tenantInflightLoneMax: 8, recentGroups: new RecentGroups(60_000) }, ['tenant']);
    await dispatch(a, 1);
    expect(await pass()).toEqual({ sent: 1, failed: 0, full: false, capped: false });
    // Contended (B pending), and everything due still fits the rooms: nothing held back either.
    await dispatch(a, 2);
    await dispatch(b, 2);
    expect(await pass()).toEqual({ sent: 4, failed: 0, full: false, capped: false });
    // A's next rows go past its cap (3 in flight of 5): 2 go, 4 are held back.
    await dispatch(a, 6);
    expect(await pass()).toMatchObject({ sent: 2, capped: true, cappedScopes: ['tenant'], cappedLone: false });
  });

  it('a lone room given per queue applies on its queue only: a tenant alone on a queue without one gets the cap', async () => {
    const a = await createTenant(sql);
    const cap = 5;
    const pass = (loneMax: Record<string, number>) =>
      relayPass(sql, sqs, prefix, { instance: 'relay-wc-queues', tenantInflightMax: cap, tenantInflightLoneMax: loneMax, recentGroups: new RecentGroups(60_000) }, ['tenant']);
    const burst = await dispatch(a, 30); // demo.tenant_task: the `default` queue

    // Another queue's room is not this one's: the cap holds.
    expect((await pass({ bulk: 20 })).sent).toBe(cap);
    // Its own queue's room: up to 9 in flight, 4 more.
    expect((await pass({ bulk: 20, default: 9 })).sent).toBe(4);
    expect(await sentOf(burst)).toEqual(burst.slice(0, 9));
    // A room below the cap is the cap: nothing more goes while 9 are in flight.
    expect((await pass({ default: 2 })).sent).toBe(0);
  });

  it('the lone room stops while the tenant\'s sent runs wait for the workers: its oldest run sent and still queued past the bound gets it the cap only', async () => {
    const a = await createTenant(sql);
    const cap = 4;
    const pass = () =>
      relayPass(sql, sqs, prefix, { instance: 'relay-wc-age', tenantInflightMax: cap, tenantInflightLoneMax: 12, loneMaxWaitMs: 300, recentGroups: new RecentGroups(60_000) }, ['tenant']);
    const burst = await dispatch(a, 40);
    expect((await pass()).sent).toBe(12);
    await finish(a, burst.slice(0, 10));
    // The two left in flight, once sent longer ago than the bound with no worker taking them: the workers are not keeping up.
    const aged = burst.slice(10, 12);
    await waitFor(
      async () => (await sql`SELECT 1 FROM task_runs WHERE run_id = ANY(${aged}::uuid[]) AND status = 'queued' AND updated_at < clock_timestamp() - interval '400 ms'`).length === 2,
      10_000,
      { stepMs: 50, what: 'the sent runs waiting past the bound' },
    );
    expect((await pass()).sent).toBe(cap - 2);
    // Once a worker took them (running), nothing waits: the lone room again.
    await finish(a, burst.slice(12, 14));
    for (const runId of aged) await sql.begin((tx) => transitionRun(tx, 'tenant', { runId, tenantId: a, to: 'running', from: ['queued'], attempts: 'increment' }));
    expect((await pass()).sent).toBe(12 - 2);
  });

  it("a lone tenant's burst drains past the cap through a running relay; a tenant arriving mid-burst is sent at once and the burst is held to the cap meanwhile", async () => {
    const a = await createTenant(sql);
    const b = await createTenant(sql);
    const cap = 3;
    const loneMax = 15;
    // Workers: 8 loops, each runs a message ~10 ms (running, then succeeded), so a cap of 3 leaves them idle.
    // The lone room's bound in time is wide here (a loaded machine), the test above covers it.
    const url = queueUrl(prefix, 'default');
    let stopping = false;
    let peak = 0;
    const loops = Array.from({ length: 8 }, async () => {
      while (!stopping) {
        const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
        for (const m of Messages ?? []) {
          const env = JSON.parse(m.Body!) as { run_id: string; tenant_id: string };
          const key = { runId: env.run_id, tenantId: env.tenant_id };
          await sql.begin((tx) => transitionRun(tx, 'tenant', { ...key, to: 'running', from: ['queued', 'retrying'], attempts: 'increment' }));
          await new Promise((r) => setTimeout(r, 10));
          await sql.begin((tx) => transitionRun(tx, 'tenant', { ...key, to: 'succeeded', from: ['running'] }));
          await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '0', ReceiptHandle: m.ReceiptHandle! }] }));
        }
      }
    });
    const relay = startRelay({ sql, redis, sqs, queueUrlPrefix: prefix, sweepIntervalMs: 60_000, instance: 'relay-wc-run', tenantInflightMax: cap, tenantInflightLoneMax: loneMax, loneMaxWaitMs: 2_000, cappedPollMs: 10, batchSize: 50 });
    try {
      const burst = await dispatch(a, 150);
      const inFlightOfA = async () =>
        (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM outbox_messages o JOIN task_runs r ON r.run_id = o.run_id
          WHERE o.tenant_id = ${a} AND o.sent_at IS NOT NULL AND r.finished_at IS NULL`)[0]!.n;
      await waitFor(async () => (peak = Math.max(peak, await inFlightOfA())) > cap, 10_000, { stepMs: 5, what: 'the lone burst past the cap' });
      await waitFor(async () => (await sentOf(burst)).length >= 40, 20_000, { what: 'the lone burst draining' });
      const victim = await dispatch(b, cap);
      await waitFor(async () => (await sentOf(victim)).length === cap, 10_000, { stepMs: 5, what: "the newcomer's rows sent" });
      await waitFor(async () => (await sentOf(burst)).length === burst.length, 30_000, { what: 'the burst drained' });
      await waitFor(async () => (await sql`SELECT 1 FROM task_runs WHERE run_id = ANY(${[...burst, ...victim]}::uuid[]) AND finished_at IS NULL`).length === 0, 20_000, {
        what: 'every run finished',
      });

      expect(peak).toBeGreaterThan(cap);
      // Never past the lone room: rebuilt from the database clock at each of A's sends.
      const [rebuilt] = await sql<{ peak: number }[]>`
        SELECT max((SELECT count(*) FROM outbox_messages o JOIN task_runs r ON r.run_id = o.run_id
                     WHERE o.tenant_id = s.tenant_id AND o.sent_at <= s.sent_at AND (r.finished_at IS NULL OR r.finished_at > s.sent_at)))::int AS peak
          FROM outbox_messages s WHERE s.tenant_id = ${a} AND s.sent_at IS NOT NULL`;
      expect(rebuilt!.peak).toBeLessThanOrEqual(loneMax);
      expect(rebuilt!.peak).toBeGreaterThan(cap);
      // B's rows went out together, in one pass (one transaction), and that pass gave A the cap's room at most.
      const passes = await sql<{ xid: string; a: number; b: number }[]>`
        SELECT xmin::text AS xid, count(*) FILTER (WHERE tenant_id = ${a})::int AS a, count(*) FILTER (WHERE tenant_id = ${b})::int AS b
          FROM outbox_messages WHERE tenant_id IN (${a}, ${b}) AND sent_at IS NOT NULL GROUP BY 1`;
      const withB = passes.filter((p) => p.b > 0);
      expect(withB).toHaveLength(1);
      expect(withB[0]!.b).toBe(cap);
      expect(withB[0]!.a).toBeLessThanOrEqual(cap);
      // Alone, A's passes went past the cap.
      expect(Math.max(...passes.map((p) => p.a))).toBeGreaterThan(cap);
    } finally {
      await relay.stop();
      stopping = true;
      await Promise.all(loops);
    }
  });
});
