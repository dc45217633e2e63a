// Fair share between tenants at the relay, against real PostgreSQL, Redis and the local
// SQS-protocol server. A small in-test consumer plays the workers: it receives messages, moves each run
// queued → running → succeeded with the run-store functions the runtime uses, and deletes the message.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { connectedRedis, freshQueuePrefix, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { observeCommands } from '../support/sqs-observe.ts';
import type { Sql, TxSql } from '../../src/db/client.ts';
import { actorContextSelect, inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { OUTBOX_WAKE_KEY } from '../../src/kv/keys.ts';
import { afterCommit } from '../../src/kv/wake.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { queueUrl, type QueueName } from '../../src/queue/names.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { relayPass, startRelay, type Relay, type RelayOptions } from '../../src/work/runtime/produce/relay.ts';
import { transitionRun } from '../../src/work/runtime/store/run-store.ts';
import { inFlightByGroup, selectFairRows, takeFairPasses } from '../../src/work/runtime/produce/tenant-inflight.ts';
import { createTenant, workDatabase } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';
import { stoppableRedis } from '../support/stoppable-redis.ts';
import { waitFor } from '../support/wait-for.ts';

let db: TestDatabase;
let sql: Sql;
let redis: Redis;
let sqs: SQSClient;
let prefix: string;
let tenantA: string;
let tenantB: string;
const actorOf = (tenantId: string): Actor => ({ kind: 'system', tenantId, label: 'fairness-test' });
const system: Actor = { kind: 'system', label: 'fairness-test' };
const dispatcher = testDispatcher();
const relays: Relay[] = [];
/** Every SendMessageBatch entry the real client sent: queue URL and MessageGroupId (undefined when absent). */
const sentEntries: Array<{ queueUrl: string; groupId: string | undefined }> = [];

beforeAll(async () => {
  db = await workDatabase({ max: 16 });
  sql = db.sql;
  redis = await connectedRedis(await freshRedisUrl(), { name: 'fairness-test' });
  tenantA = await createTenant(sql);
  tenantB = await createTenant(sql);
  sqs = createSqsClient({ region: 'us-east-1', endpoint: freshQueuePrefix().endpoint, localCredentials: true }, { maxAttempts: 1 });
  observeCommands(sqs, (_command, args) => {
    const input = args as { QueueUrl?: string; Entries?: Array<{ MessageGroupId?: string; MessageBody?: string }> };
    if (input.QueueUrl && input.Entries?.[0]?.MessageBody !== undefined) {
      for (const e of input.Entries) sentEntries.push({ queueUrl: input.QueueUrl, groupId: e.MessageGroupId });
    }
  });
});

beforeEach(async () => {
  prefix = freshQueuePrefix().queueUrlPrefix;
  await provisionQueues(sqs, prefix);
  // Earlier tests' rows must not count: their runs are finished, their outbox rows dropped.
  await sql`DELETE FROM outbox_messages`;
  await sql`DELETE FROM platform_outbox_messages`;
  await sql`UPDATE task_runs SET status = 'failed', finished_at = clock_timestamp() WHERE finished_at IS NULL`;
  await sql`UPDATE platform_task_runs SET status = 'failed', finished_at = clock_timestamp() WHERE finished_at IS NULL`;
  sentEntries.length = 0;
});

afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
});

afterAll(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
  redis?.disconnect();
  sqs?.destroy();
  await db?.drop();
});

function relay(cap: number, instance: string, options: Partial<RelayOptions> = {}): Relay {
  const r = startRelay({ sql, redis, sqs, queueUrlPrefix: prefix, sweepIntervalMs: 60_000, instance, tenantInflightMax: cap, fairGroups: true, cappedPollMs: 10, batchSize: 7, ...options });
  relays.push(r);
  return r;
}

/**
 * One fair pass of the tenant outbox, and how many outbox rows it read (by index or sequential scan).
 * The counters are read before and after the pass: pg_stat_xact_user_tables also holds the backend's
 * counts not yet flushed (PostgreSQL flushes them at most once a second), so a statement that ran on the
 * same connection just before (this test's own setup) would otherwise count as the pass's reads.
 */
async function fairPassReads(cap: number): Promise<{ runIds: string[]; rowsRead: number }> {
  return sql.begin(async (tx) => {
    const read = async () => {
      const [r] = await tx<{ n: number }[]>`
        SELECT (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'outbox_messages'`;
      return r?.n ?? 0;
    };
    // The pass's hold and planner settings first, in a statement of their own, as the relay's opening.
    expect((await takeFairPasses(tx, ['tenant'])).fair_tenant).toBe(true);
    const before = await read();
    const rows = await selectFairRows(tx, 'tenant', cap, 100, actorContextSelect(tx, system));
    return { runIds: rows.map((r) => r.run_id), rowsRead: (await read()) - before };
  });
}

async function dispatch(tenantId: string, n: number, first = 0): Promise<string[]> {
  const actor = actorOf(tenantId);
  return afterCommit(
    redis,
    inUnitOfWork(sql, actor, async (tx) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) ids.push((await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: first + i }, { actor })).runId);
      return ids;
    }),
  );
}

interface FakeWorkers {
  /** Receives per run id. */
  receives: Map<string, number>;
  stop(): Promise<void>;
}

/** Consumes `queue` with `parallel` loops; each run runs ~`workMs` between running and succeeded. */
function fakeWorkers(queue: QueueName, parallel: number, workMs: number): FakeWorkers {
  const receives = new Map<string, number>();
  let stopping = false;
  const url = queueUrl(prefix, queue);
  const loop = async () => {
    while (!stopping) {
      const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
      for (const m of Messages ?? []) {
        const env = JSON.parse(m.Body!) as { run_id: string; tenant_id?: string };
        receives.set(env.run_id, (receives.get(env.run_id) ?? 0) + 1);
        const scope = env.tenant_id ? 'tenant' : 'platform';
        const key = { runId: env.run_id, tenantId: env.tenant_id ?? null };
        await sql.begin((tx) => transitionRun(tx, scope, { ...key, to: 'running', from: ['queued', 'retrying'], attempts: 'increment' }));
        await new Promise((r) => setTimeout(r, workMs * (0.5 + Math.random())));
        await sql.begin((tx) => transitionRun(tx, scope, { ...key, to: 'succeeded', from: ['running'] }));
        await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '0', ReceiptHandle: m.ReceiptHandle! }] }));
      }
    }
  };
  const loops = Array.from({ length: parallel }, loop);
  return {
    receives,
    async stop() {
      stopping = true;
      await Promise.all(loops);
    },
  };
}

/**
 * The most runs of one tenant ever in flight, rebuilt from the database clock: at each send, the runs
 * of that tenant sent (outbox sent_at) by then and not finished (finished_at) by then.
 */
async function maxInFlightAtSends(): Promise<Record<string, number>> {
  const rows = await sql`
    SELECT s.tenant_id::text AS tenant, max((
      SELECT count(*) FROM outbox_messages o JOIN task_runs r ON r.run_id = o.run_id
       WHERE o.tenant_id = s.tenant_id AND o.sent_at <= s.sent_at AND (r.finished_at IS NULL OR r.finished_at > s.sent_at)))::int AS peak
      FROM outbox_messages s WHERE s.sent_at IS NOT NULL GROUP BY 1`;
  return Object.fromEntries(rows.map((r) => [r.tenant as string, r.peak as number]));
}

describe('fair share between tenants at the relay', () => {
  it('the cap holds under concurrent dispatch, two relays and relay restarts; nothing is lost or sent twice', async () => {
    const cap = 4;
    const workers = fakeWorkers('default', 6, 15);
    let peakSeen = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const g of await sql.begin((tx) => inFlightByGroup(tx, 'tenant'))) peakSeen = Math.max(peakSeen, g.inFlight);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    relay(cap, 'relay-1');
    relay(cap, 'relay-2');
    // Concurrent dispatch: six transactions at once, two tenants.
    const dispatched = (await Promise.all([
      dispatch(tenantA, 15, 0), dispatch(tenantA, 15, 15), dispatch(tenantA, 15, 30),
      dispatch(tenantB, 10, 0), dispatch(tenantB, 10, 10), dispatch(tenantA, 15, 45),
    ])).flat();
    // Restart both relays mid-drain (a deploy), then once more with one relay only.
    await waitFor(async () => workers.receives.size >= 20, 20_000);
    await Promise.all(relays.splice(0).map((r) => r.stop()));
    relay(cap, 'relay-3');
    relay(cap, 'relay-4');
    await waitFor(async () => workers.receives.size >= 50, 20_000);
    await Promise.all(relays.splice(0).map((r) => r.stop()));
    relay(cap, 'relay-5');
    await waitFor(async () => {
      const [r] = await sql`SELECT count(*)::int AS n FROM task_runs WHERE run_id = ANY(${dispatched}::uuid[]) AND status = 'succeeded'`;
      return r!.n === dispatched.length;
    }, 30_000, { stepMs: 20 });
    sampling = false;
    await sampler;
    await workers.stop();

    expect(peakSeen).toBeGreaterThan(0);
    expect(peakSeen).toBeLessThanOrEqual(cap);
    const peaks = await maxInFlightAtSends();
    expect(peaks[tenantA]).toBeLessThanOrEqual(cap);
    expect(peaks[tenantB]).toBeLessThanOrEqual(cap);
    expect(peaks[tenantA]).toBe(cap); // the cap is reached, not merely respected by a trickle
    expect([...workers.receives.keys()].sort()).toEqual([...dispatched].sort());
    expect([...workers.receives.values()].every((n) => n === 1)).toBe(true);
  });

  it("a tenant's own runs go out in dispatch order, and a second tenant is not queued behind the first one's burst", async () => {
    const workers = fakeWorkers('default', 3, 5);
    const a = await dispatch(tenantA, 40);
    const b = await dispatch(tenantB, 5);
    relay(3, 'relay-order');
    await waitFor(async () => workers.receives.size === 45, 30_000, { stepMs: 20 });
    await workers.stop();
    const sent = await sql`SELECT o.run_id, o.tenant_id::text AS tenant FROM outbox_messages o
      JOIN task_run_events e ON e.run_id = o.run_id AND e.event = 'sent' ORDER BY e.id`;
    const order = sent.map((r) => r.run_id as string);
    expect(order.filter((id) => a.includes(id))).toEqual(a);
    expect(order.filter((id) => b.includes(id))).toEqual(b);
    // Round robin: B's five runs all leave before A's twentieth, though A dispatched forty first.
    expect(order.indexOf(b[4]!)).toBeLessThan(order.indexOf(a[19]!));
  });

  it('R-OBX-10 a run that finishes after a capped pass counted it, before the relay marked itself capped, still wakes the relay: it looks once more with its mark in place', async () => {
    // A Redis of its own, whose writes the test pauses (CLIENT PAUSE WRITE) from before the relay's
    // first pass: the pass sends the first run and finds the cap holding, the run finishes while the
    // relay's mark waits in the pause (so no finish could take it), and only then does the mark land.
    const own = await stoppableRedis('fairness-relay-race', { commandTimeoutMs: 10_000 });
    const tenant = await createTenant(sql);
    try {
      const [first, second] = await dispatch(tenant, 2);
      await own.redis.call('CLIENT', 'PAUSE', '2000', 'WRITE');
      relay(1, 'relay-race', { redis: own.redis, cappedPollMs: 60_000 });
      const sentAt = async (runId: string) => (await sql<{ sent: boolean }[]>`SELECT sent_at IS NOT NULL AS sent FROM outbox_messages WHERE run_id = ${runId}`)[0]!.sent;
      await waitFor(() => sentAt(first!), 1_500, { stepMs: 10, what: 'the first run sent while Redis writes are paused' });
      expect(await sentAt(second!)).toBe(false);
      await sql.begin((tx) => transitionRun(tx, 'tenant', { runId: first!, tenantId: tenant, to: 'succeeded', outcome: {} }));
      // Without the second look, the relay would sleep its capped poll (a minute) with the second run held back.
      await waitFor(() => sentAt(second!), 10_000, { what: 'the second run sent once the first finished' });
    } finally {
      await Promise.all(relays.splice(0).map((r) => r.stop()));
      await own.close();
    }
  });

  it('with SVC_TENANT_INFLIGHT_MAX=0 the relay behaves as before: every due row goes out at once and runs are not stamped', async () => {
    const a = await dispatch(tenantA, 30);
    const before = await sql`SELECT run_id, updated_at FROM task_runs WHERE run_id = ANY(${a}::uuid[]) ORDER BY run_id`;
    const result = await relayPass(sql, sqs, prefix, { instance: 'relay-off', tenantInflightMax: 0 });
    expect(result).toEqual({ sent: 30, failed: 0, full: false });
    const after = await sql`SELECT run_id, updated_at FROM task_runs WHERE run_id = ANY(${a}::uuid[]) ORDER BY run_id`;
    expect(after).toEqual(before);
    // Workers start those 30 (running counts as in flight whoever sent it); with the cap on, a second
    // burst gets only the room that is left, the rest waits.
    await sql`UPDATE task_runs SET status = 'running', attempts = 1, started_at = clock_timestamp(), updated_at = clock_timestamp()
      WHERE run_id = ANY(${a}::uuid[])`;
    const more = await dispatch(tenantA, 30);
    const capped = await relayPass(sql, sqs, prefix, { instance: 'relay-on', tenantInflightMax: 35 });
    expect(capped).toMatchObject({ sent: 5, capped: true });
    const [pending] = await sql`SELECT count(*)::int AS n FROM outbox_messages WHERE run_id = ANY(${more}::uuid[]) AND sent_at IS NULL`;
    expect(pending!.n).toBe(25);
  });

  it('a platform burst is its own group: tenant runs go out beside it, and each is capped', async () => {
    const platform = await inUnitOfWork(sql, system, async (tx) => {
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) ids.push((await dispatcher.dispatchTask(tx, 'demo.platform_task', { i }, { actor: system })).runId);
      return ids;
    });
    const a = await dispatch(tenantA, 3);
    const result = await relayPass(sql, sqs, prefix, { instance: 'relay-platform', tenantInflightMax: 5 });
    expect(result.sent).toBe(8);
    const [p] = await sql`SELECT count(*)::int AS n FROM platform_outbox_messages WHERE run_id = ANY(${platform}::uuid[]) AND sent_at IS NOT NULL`;
    expect(p!.n).toBe(5);
    const [t] = await sql`SELECT count(*)::int AS n FROM outbox_messages WHERE run_id = ANY(${a}::uuid[]) AND sent_at IS NOT NULL`;
    expect(t!.n).toBe(3);
  });

  it('a fair pass reads about the rows it may send, never the rows already sent nor the whole backlog', async () => {
    // A burst the statistics were taken on while every row was pending (as right after a dump), then
    // drained but for its last 40: the selection must not walk the 1,160 sent rows on every pass (it
    // did, by the primary key, and hashed every pending row for its final join: 10 ms a pass, 1 ms a run).
    const a = await dispatch(tenantA, 1_200);
    await sql`ANALYZE outbox_messages`;
    await sql`ANALYZE task_runs`;
    const sent = a.slice(0, 1_160);
    await sql`UPDATE outbox_messages SET sent_at = clock_timestamp() WHERE run_id = ANY(${sent}::uuid[])`;
    await sql`UPDATE task_runs SET status = 'succeeded', attempts = 1, started_at = clock_timestamp(), finished_at = clock_timestamp(),
      updated_at = clock_timestamp() WHERE run_id = ANY(${sent}::uuid[])`;
    const { runIds, rowsRead } = await fairPassReads(25);
    expect(runIds).toEqual(a.slice(1_160, 1_185));
    // 25 candidates and the 25 rows locked, plus the group walk (measured 51–54, alone or in this file's
    // order): far from the 1,160 sent rows (by index) or the 1,200 rows of the table (by a sequential scan).
    expect(rowsRead).toBeLessThan(200);
  });

  it('a fair selection selects and locks nothing unless its transaction took the fair pass first: one sent behind another relay\'s, or with no opening at all, finds no rows', async () => {
    // The relay sends its selections in the write of its opening, before knowing whether the opening
    // took the outbox's fair pass: a selection without it would pass the cap beside the holder's.
    const a = await dispatch(tenantA, 3);
    const select = (tx: TxSql) => selectFairRows(tx, 'tenant', 25, 100, actorContextSelect(tx, system));
    await sql.begin(async (holder) => {
      expect((await takeFairPasses(holder, ['tenant'])).fair_tenant).toBe(true);
      await sql.begin(async (other) => {
        expect((await takeFairPasses(other, ['tenant'])).fair_tenant).toBe(false);
        expect(await select(other)).toEqual([]);
      });
      await sql.begin(async (unopened) => expect(await select(unopened)).toEqual([]));
      // Nothing was locked meanwhile: the holder's selection takes every row.
      expect((await select(holder)).map((r) => r.run_id)).toEqual(a);
    });
  });

  it("a fair pass does not read a tenant's delayed rows: a backlog not yet due ahead of due rows costs nothing", async () => {
    // Delayed rows (delaySeconds, or a failed row backing off) sit in the pending index in dispatch
    // order; due rows behind them must be found without fetching every delayed row on every pass.
    const actor = actorOf(tenantA);
    await inUnitOfWork(sql, actor, async (tx) => {
      for (let i = 0; i < 1_000; i++) await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: i }, { actor, delaySeconds: 3_600 });
    });
    const due = await dispatch(tenantA, 25);
    await sql`ANALYZE outbox_messages`;
    const { runIds, rowsRead } = await fairPassReads(25);
    expect(runIds).toEqual(due);
    // Far from the 1,000 delayed rows, by index or by a sequential scan.
    expect(rowsRead).toBeLessThan(200);
  });

  it('while a tenant stays capped, the sweep still looks at the platform outbox (no wake signal reaches it)', async () => {
    // A capped tenant makes the relay poll its outbox every few ms; those polls look at that outbox
    // only, and must not starve the other one of its sweep when the wake signal is lost (Redis down).
    await dispatch(tenantA, 6);
    relay(2, 'relay-sweep', { redis: undefined, sweepIntervalMs: 300 });
    await waitFor(async () => {
      const [s] = await sql`SELECT count(*)::int AS n FROM outbox_messages WHERE sent_at IS NOT NULL`;
      return s!.n === 2;
    }, 10_000);
    // Nobody consumes: tenant A stays at its cap. A platform run is dispatched with no wake signal.
    const platform = await inUnitOfWork(sql, system, (tx) => dispatcher.dispatchTask(tx, 'demo.platform_task', { i: 1 }, { actor: system }));
    await waitFor(async () => {
      const [p] = await sql`SELECT sent_at IS NOT NULL AS sent FROM platform_outbox_messages WHERE run_id = ${platform.runId}`;
      return p!.sent as boolean;
    }, 5_000);
    const [a] = await sql`SELECT count(*)::int AS n FROM outbox_messages WHERE sent_at IS NOT NULL`;
    expect(a!.n).toBe(2);
  });

  /**
   * A run the queue refuses to take: its message over the queue's size limit (256 KiB). A dispatch
   * refuses such a payload, and the relay escapes any character SQS refuses, so it is written directly.
   */
  async function dispatchPoison(tenantId: string): Promise<string> {
    const actor = actorOf(tenantId);
    return inUnitOfWork(sql, actor, async (tx) => {
      const { runId } = await dispatcher.dispatchTask(tx, 'demo.any_payload', { s: '' }, { actor });
      await tx`UPDATE outbox_messages SET envelope = jsonb_set(envelope, '{payload,s}', to_jsonb(repeat('x', 300000))) WHERE run_id = ${runId}`;
      return runId;
    });
  }

  /** Waits until `workers` have finished every run of `ids`, then stops them. */
  async function drainedBy(workers: FakeWorkers, ids: readonly string[]): Promise<void> {
    try {
      await waitFor(async () => {
        const [r] = await sql`SELECT count(*)::int AS n FROM task_runs WHERE run_id = ANY(${ids as string[]}::uuid[]) AND status = 'succeeded'`;
        return r!.n === ids.length;
      }, 10_000, { stepMs: 20 });
    } finally {
      await workers.stop();
    }
  }

  it("a row the queue refuses does not keep its tenant's room: the tenant's later runs still go out (cap 1)", async () => {
    // The oldest row of a group was a candidate in every pass and took the whole room at cap 1;
    // failing, it never entered the in-flight count, so the tenant's next runs waited for ever.
    const poison = await dispatchPoison(tenantA);
    const a = await dispatch(tenantA, 3);
    relay(1, 'relay-poison-own', { sweepIntervalMs: 200 });
    await drainedBy(fakeWorkers('default', 2, 5), a);
    const [p] = await sql`SELECT sent_at, attempts FROM outbox_messages WHERE run_id = ${poison}`;
    expect(p!.sent_at).toBeNull();
    expect(p!.attempts).toBeGreaterThan(0);
  });

  it("a row the queue refuses in one tenant does not end the short polls for another tenant's capped rows", async () => {
    // A failed send made every pass report `capped: false`, and the poison row was a candidate in
    // every pass: one bad payload of one tenant sent every other capped tenant to the sweep interval.
    await dispatchPoison(tenantB);
    const a = await dispatch(tenantA, 12);
    // Without A's wake signal: only the short polls may move A's rows after the first pass (the signal
    // would end the relay's first wait whatever that pass reported).
    await redis.del(OUTBOX_WAKE_KEY);
    relay(2, 'relay-poison-other');
    await drainedBy(fakeWorkers('default', 3, 5), a);
  });

  it('MessageGroupId is the tenant uid (platform runs: "platform") when configured, absent otherwise; the local server accepts it', async () => {
    const [uidA] = await sql`SELECT uid FROM tenants WHERE id = ${tenantA}`;
    await dispatch(tenantA, 2);
    await inUnitOfWork(sql, system, (tx) => dispatcher.dispatchTask(tx, 'demo.platform_task', { i: 1 }, { actor: system }));
    const on = await relayPass(sql, sqs, prefix, { instance: 'relay-groups', fairGroups: true });
    expect(on).toMatchObject({ sent: 3, failed: 0 });
    expect(sentEntries.map((e) => e.groupId).sort()).toEqual([uidA!.uid, uidA!.uid, 'platform'].sort());

    sentEntries.length = 0;
    await dispatch(tenantA, 2);
    const off = await relayPass(sql, sqs, prefix, { instance: 'relay-no-groups', fairGroups: false });
    expect(off).toMatchObject({ sent: 2, failed: 0 });
    expect(sentEntries.map((e) => e.groupId)).toEqual([undefined, undefined]);
  });
});
