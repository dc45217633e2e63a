// The outbox relay against real PostgreSQL, Redis and the local SQS-protocol server, timings shortened.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { connectedRedis, freshQueuePrefix, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { observeCommands } from '../support/sqs-observe.ts';
import { stoppableRedis } from '../support/stoppable-redis.ts';
import { createSql, type Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { afterCommit, signalOutbox, waitForWake, WAKE_LIST_MAX } from '../../src/kv/wake.ts';
import { OUTBOX_WAKE_KEY } from '../../src/kv/keys.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { queueUrl, type QueueName } from '../../src/queue/names.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { relayPass, startRelay, type Relay } from '../../src/work/runtime/produce/relay.ts';
import { createTenantMember, workDatabase } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';
import { waitFor } from '../support/wait-for.ts';
import { recordingProxy } from '../support/recording-proxy.ts';
import { silentServer } from '../support/silent-server.ts';

let db: TestDatabase;
let sql: Sql;
let redis: Redis;
let sqs: SQSClient;
let endpoint: string;
let prefix: string;
let actor: Actor;
/**
 * The tenant of the tests that dispatch hundreds of runs. Of their own: runs whose outbox rows the next
 * beforeEach deletes count toward the fair pass's cap when their updated_at is past their queued_at,
 * which a dispatch's two column defaults give a few percent of runs, so they would cap `actor`.
 */
let bulkActor: Actor;
const system: Actor = { kind: 'system', label: 'relay-test' };
const dispatcher = testDispatcher();
const relays: Relay[] = [];
/** Entries per SendMessageBatch call the client made, observed on the real client. */
const batchCalls: number[] = [];

beforeAll(async () => {
  db = await workDatabase({ max: 12 });
  sql = db.sql;
  redis = await connectedRedis(await freshRedisUrl(), { name: 'relay-test' });
  const member = await createTenantMember(sql);
  actor = { kind: 'system', tenantId: member.tenantId, label: 'relay-test' };
  bulkActor = { kind: 'system', tenantId: (await createTenantMember(sql)).tenantId, label: 'relay-test' };
  const q = freshQueuePrefix();
  endpoint = q.endpoint;
  sqs = createSqsClient({ region: 'us-east-1', endpoint, localCredentials: true }, { maxAttempts: 1 });
  observeCommands(sqs, (_command, args) => {
    const input = args as { Entries?: unknown[]; QueueUrl?: string };
    if (input.Entries && input.QueueUrl) batchCalls.push(input.Entries.length);
  });
});

beforeEach(async () => {
  // Fresh queues per test so message counts never cross; outbox rows of earlier tests are dropped.
  prefix = freshQueuePrefix().queueUrlPrefix;
  await provisionQueues(sqs, prefix);
  await sql`DELETE FROM outbox_messages`;
  await sql`DELETE FROM platform_outbox_messages`;
  batchCalls.length = 0;
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

function relay(options: Partial<Parameters<typeof startRelay>[0]> = {}): Relay {
  const r = startRelay({ sql, redis, sqs, queueUrlPrefix: prefix, sweepIntervalMs: 60_000, instance: 'relay-test', ...options });
  relays.push(r);
  return r;
}

async function dispatchMany(n: number, options: { delaySeconds?: number; signal?: Redis | undefined; as?: Actor } = {}): Promise<string[]> {
  const by = options.as ?? actor;
  return afterCommit(
    options.signal,
    inUnitOfWork(sql, by, async (tx) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        ids.push((await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: i }, { actor: by, delaySeconds: options.delaySeconds })).runId);
      }
      return ids;
    }),
  );
}

async function pendingCount(): Promise<number> {
  const [r] = await sql`SELECT (SELECT count(*) FROM outbox_messages WHERE sent_at IS NULL)
    + (SELECT count(*) FROM platform_outbox_messages WHERE sent_at IS NULL) AS n`;
  return Number(r!.n);
}

/** Receives (and deletes) messages until `expected` arrived or the queue stays empty for a second. */
async function drain(queue: QueueName, expected: number): Promise<string[]> {
  const url = queueUrl(prefix, queue);
  const bodies: string[] = [];
  for (let idle = 0; idle < 2 && bodies.length <= expected; ) {
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: bodies.length >= expected ? 0 : 1 }));
    if (!Messages?.length) {
      idle++;
      if (bodies.length >= expected) break;
      continue;
    }
    bodies.push(...Messages.map((m) => m.Body!));
    await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }));
  }
  return bodies;
}

/** Waits until the relay's own Redis connection blocks on the wake list (BLMPOP, src/kv/wake.ts). */
async function relayListening(): Promise<void> {
  await waitFor(async () => {
    const clients = await redis.client('LIST') as string;
    return clients.split('\n').some((line) => line.includes('name=svc-relay-wake') && line.includes('cmd=blmpop'));
  }, 5_000, { stepMs: 20 });
}

describe('relay', () => {
  it('R-OBX-10 a wake signal makes the relay send within milliseconds', async () => {
    relay();
    await relayListening();
    const started = performance.now();
    const [runId] = await dispatchMany(1, { signal: redis });
    await waitFor(async () => (await pendingCount()) === 0, 2_000, { stepMs: 5 });
    const elapsed = performance.now() - started;
    expect(elapsed).toBeLessThan(500);
    const bodies = await drain('default', 1);
    expect(bodies.map((b) => JSON.parse(b).run_id)).toEqual([runId]);
  });

  it('R-OBX-10 one wake takes every signal waiting on svc:outbox:wake; a signal pushed after it wakes the next wait', async () => {
    const blocking = redis.duplicate({ connectionName: 'relay-test-wake', enableAutoPipelining: false, commandTimeout: undefined });
    try {
      await redis.del(OUTBOX_WAKE_KEY);
      for (let i = 0; i < 5; i++) expect(await signalOutbox(redis)).toBe(true);
      expect(await waitForWake(blocking, 1)).toBe('any');
      expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(0);
      // The list is capped, so one pop always empties it.
      for (let i = 0; i < WAKE_LIST_MAX + 4; i++) await signalOutbox(redis);
      expect(await waitForWake(blocking, 1)).toBe('any');
      expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(0);
      expect(await waitForWake(blocking, 0.05)).toBeNull();
      // A wait already blocking is woken by the next signal.
      const waiting = waitForWake(blocking, 2);
      await waitFor(async () => ((await redis.client('LIST')) as string).includes('name=relay-test-wake'), 2_000, { stepMs: 10 });
      await signalOutbox(redis);
      expect(await waiting).toBe('any');
    } finally {
      blocking.disconnect();
    }
  });

  it('R-OBX-10 a signal says whether its rows are recent: only recent signals, fewer than the list keeps, wake the wait as recent', async () => {
    const blocking = redis.duplicate({ connectionName: 'relay-test-wake-kind', enableAutoPipelining: false, commandTimeout: undefined });
    try {
      await waitFor(() => blocking.status === 'ready', 5_000, { stepMs: 10, what: 'the blocking connection is ready' });
      await redis.del(OUTBOX_WAKE_KEY);
      await signalOutbox(redis, { since: performance.now() });
      await signalOutbox(redis, { since: performance.now() - 100 });
      expect(await waitForWake(blocking, 1)).toBe('recent');
      // A transaction that began 500 ms or more before its signal (pinned literally: RECENT_WRITE_MS).
      await signalOutbox(redis, { since: performance.now() });
      await signalOutbox(redis, { since: performance.now() - 500 });
      expect(await waitForWake(blocking, 1)).toBe('any');
      // A caller that does not say, and an older release's signal.
      await signalOutbox(redis);
      expect(await waitForWake(blocking, 1)).toBe('any');
      await redis.lpush(OUTBOX_WAKE_KEY, '1');
      expect(await waitForWake(blocking, 1)).toBe('any');
      // A full list may have dropped an older signal that was not recent.
      for (let i = 0; i < WAKE_LIST_MAX; i++) await signalOutbox(redis, { since: performance.now() });
      expect(await waitForWake(blocking, 1)).toBe('any');
      for (let i = 0; i < WAKE_LIST_MAX - 1; i++) await signalOutbox(redis, { since: performance.now() });
      expect(await waitForWake(blocking, 1)).toBe('recent');
    } finally {
      blocking.disconnect();
    }
  });

  it('R-OBX-10 a Redis that refuses BLMPOP (older than 7.0, or an ACL without it) still wakes the wait, with BLPOP then DEL', async () => {
    const user = `no-blmpop-${process.pid}`;
    await redis.call('ACL', 'SETUSER', user, 'reset', 'on', '>relay-test-password', '~*', '&*', '+@all', '-blmpop');
    const blocking = redis.duplicate({
      username: user,
      password: 'relay-test-password',
      connectionName: 'relay-test-no-blmpop',
      enableAutoPipelining: false,
      commandTimeout: undefined,
    });
    try {
      await waitFor(() => blocking.status === 'ready', 5_000, { stepMs: 10, what: 'the restricted connection is ready' });
      await expect(blocking.blmpop(0.01, 1, OUTBOX_WAKE_KEY, 'LEFT', 'COUNT', 1)).rejects.toThrow(/NOPERM/);
      await redis.del(OUTBOX_WAKE_KEY);
      // Recent signals all the same: the DEL drops the ones BLPOP did not read, so the wait cannot say.
      for (let i = 0; i < 3; i++) await signalOutbox(redis, { since: performance.now() });
      expect(await waitForWake(blocking, 1)).toBe('any');
      expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(0);
      expect(await waitForWake(blocking, 0.05)).toBeNull();
      await signalOutbox(redis);
      expect(await waitForWake(blocking, 1)).toBe('any');
    } finally {
      blocking.disconnect();
      await redis.call('ACL', 'DELUSER', user);
    }
  });

  it('R-OBX-05 R-OBX-13 sets sent_at and writes the sent trail event; the message body is the envelope', async () => {
    const ids = await dispatchMany(3);
    const platform = await inUnitOfWork(sql, system, (tx) => dispatcher.dispatchTask(tx, 'demo.platform_task', { p: 1 }, { actor: system }));
    const result = await relayPass(sql, sqs, prefix, { instance: 'relay-test' });
    expect(result).toEqual({ sent: 4, failed: 0, full: false });
    const rows = await sql`SELECT o.run_id, o.sent_at IS NOT NULL AS sent, e.event, e.worker_instance, e.occurred_at >= o.sent_at AS same_tx
      FROM outbox_messages o JOIN task_run_events e ON e.run_id = o.run_id AND e.event = 'sent' WHERE o.run_id = ANY(${ids})`;
    expect(rows.length).toBe(3);
    for (const r of rows) expect(r).toMatchObject({ sent: true, event: 'sent', worker_instance: 'relay-test' });
    const [p] = await sql`SELECT count(*)::int AS n FROM platform_task_run_events WHERE run_id = ${platform.runId} AND event = 'sent'`;
    expect(p!.n).toBe(1);
    const [o] = await sql`SELECT envelope FROM outbox_messages WHERE run_id = ${ids[0]!}`;
    const bodies = await drain('default', 3);
    expect(bodies.map((b) => JSON.parse(b)).find((e) => e.run_id === ids[0])).toEqual(o!.envelope);
    expect((await drain('critical', 1)).map((b) => JSON.parse(b).run_id)).toEqual([platform.runId]);
    // The run itself stays queued: `sent` is a trail event, not a status.
    const [run] = await sql`SELECT status FROM task_runs WHERE run_id = ${ids[0]!}`;
    expect(run!.status).toBe('queued');
  });

  it('R-OBX-13 R-OBX-15 a full batch triggers the next pass at once: 25 rows go out on one wake, at most 10 per call', async () => {
    relay({ batchSize: 10 });
    await relayListening();
    const ids = await dispatchMany(25, { signal: redis });
    await waitFor(async () => (await pendingCount()) === 0, 3_000);
    expect(batchCalls.every((n) => n <= 10)).toBe(true);
    expect(batchCalls.reduce((a, b) => a + b, 0)).toBe(25);
    expect(new Set((await drain('default', 25)).map((b) => JSON.parse(b).run_id))).toEqual(new Set(ids));
  });

  it('R-OBX-12 R-OBX-13 R-OBX-15 a pass takes at most 500 due rows of an outbox by default, sent in calls of at most 10; a full pass says so and the next takes the rest', async () => {
    await dispatchMany(507, { as: bulkActor });
    expect(await relayPass(sql, sqs, prefix, { instance: 'relay-test' }, ['tenant'])).toEqual({ sent: 500, failed: 0, full: true });
    expect(batchCalls).toHaveLength(50);
    expect(batchCalls.every((n) => n === 10)).toBe(true);
    expect(await pendingCount()).toBe(7);
    expect(await relayPass(sql, sqs, prefix, { instance: 'relay-test' }, ['tenant'])).toEqual({ sent: 7, failed: 0, full: false });
    expect(await pendingCount()).toBe(0);
  });

  /** A dispatch whose transaction began a minute before it committed: its row became due a minute ago. */
  async function dispatchOld(): Promise<string> {
    return inUnitOfWork(sql, actor, async (tx) => {
      const { runId } = await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: -1 }, { actor });
      await tx`UPDATE outbox_messages SET available_at = available_at - interval '1 minute' WHERE run_id = ${runId}`;
      return runId;
    });
  }

  /** A relay whose last pass drained what it saw after a recent signal: its next recent-woken pass reads a window. */
  async function relayWithWindow(sweepIntervalMs: number): Promise<void> {
    relay({ sweepIntervalMs });
    await relayListening();
    await dispatchMany(1, { signal: redis });
    await waitFor(async () => (await pendingCount()) === 0, 5_000, { stepMs: 10 });
  }

  it('R-OBX-10 R-OBX-11 a row older than the window goes out at once when its signal says it may be old', async () => {
    await relayWithWindow(60_000);
    // The signal of a transaction that began a minute ago: the pass reads every due row (no sweep is due for 60 s).
    const old = await dispatchOld();
    await signalOutbox(redis, { since: performance.now() - 60_000 });
    await waitFor(async () => (await pendingCount()) === 0, 5_000, { stepMs: 10, what: 'the old row sent on its own signal' });
    expect((await drain('default', 2)).map((b) => JSON.parse(b).run_id)).toContain(old);
  });

  it('R-OBX-11 under a steady stream of recent signals, a row the window cannot see still goes out with the pass of the next sweep interval', async () => {
    await relayWithWindow(4_000);
    // The old row's signal is lost; a recent signal every 100 ms keeps the relay from ever sweeping on a timeout.
    const old = await dispatchOld();
    let streaming = true;
    const stream = (async () => {
      while (streaming) {
        await dispatchMany(1, { signal: redis });
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      await waitFor(async () => (await sql`SELECT 1 FROM outbox_messages WHERE run_id = ${old} AND sent_at IS NOT NULL`).length === 1, 10_000, { stepMs: 20, what: 'the old row sent' });
    } finally {
      streaming = false;
      await stream;
    }
    // The recent passes before it (the stream's rows they sent) did not read it: it went out with a later pass.
    const [marks] = await sql`SELECT count(DISTINCT xmin::text) FILTER (WHERE sent_at < (SELECT sent_at FROM outbox_messages WHERE run_id = ${old}))::int AS passes_before
                                FROM outbox_messages WHERE sent_at IS NOT NULL AND run_id <> ${old}`;
    expect(marks!.passes_before).toBeGreaterThanOrEqual(2);
  });

  it('R-OBX-07 a delayed row that became due after the last pass goes out with the next pass woken by a recent signal, not a sweep later', async () => {
    relay({ sweepIntervalMs: 60_000 });
    await relayListening();
    const [delayed] = await dispatchMany(1, { delaySeconds: 1, signal: redis });
    await waitFor(async () => (await sql`SELECT 1 FROM outbox_messages WHERE run_id = ${delayed!} AND available_at <= clock_timestamp()`).length === 1, 5_000, { stepMs: 20 });
    expect(await pendingCount()).toBe(1);
    const [fresh] = await dispatchMany(1, { signal: redis });
    await waitFor(async () => (await pendingCount()) === 0, 5_000, { stepMs: 10, what: 'both rows sent by the woken pass' });
    expect(new Set((await drain('default', 2)).map((b) => JSON.parse(b).run_id))).toEqual(new Set([delayed, fresh]));
  });

  it('R-OBX-07 R-OBX-03 a delayed row is not sent before available_at', async () => {
    relay({ sweepIntervalMs: 100 });
    const [runId] = await dispatchMany(1, { delaySeconds: 1.2, signal: redis });
    // Pending while it is not due, however many sweeps pass: checked until the database clock reaches
    // available_at (the row's own instant, not a sleep of the test's).
    await waitFor(
      async () => {
        const [row] = await sql`SELECT sent_at IS NULL AS pending, clock_timestamp() >= available_at AS due FROM outbox_messages WHERE run_id = ${runId!}`;
        expect(row!.pending || row!.due).toBe(true);
        return row!.due as boolean;
      },
      5_000,
      { stepMs: 50, what: 'the delayed row due' },
    );
    await waitFor(async () => (await pendingCount()) === 0, 3_000);
    const [o] = await sql`SELECT sent_at >= available_at AS after FROM outbox_messages WHERE run_id = ${runId!}`;
    expect(o!.after).toBe(true);
  });

  it('R-OBX-11 with Redis down the sweep alone still delivers', async () => {
    const down = await stoppableRedis('relay-private');
    try {
      const r = relay({ redis: down.redis, sweepIntervalMs: 300 });
      await down.stopServer();
      const ids = await dispatchMany(5, { signal: down.redis }); // the signal is lost
      await waitFor(async () => (await pendingCount()) === 0, 3_000);
      expect((await drain('default', 5)).length).toBe(ids.length);
      const t = performance.now();
      await r.stop();
      expect(performance.now() - t).toBeLessThan(1_000);
    } finally {
      await down.close();
    }
  });

  it('R-OBX-11 without any Redis the relay sweeps on its interval', async () => {
    relay({ redis: undefined, sweepIntervalMs: 200 });
    await dispatchMany(2);
    await waitFor(async () => (await pendingCount()) === 0, 2_000);
  });

  it('R-OBX-14 a send failure counts an attempt and leaves the row pending, then it goes out once the queue answers', async () => {
    const ids = await dispatchMany(3);
    const missing = freshQueuePrefix().queueUrlPrefix; // queues never created under this prefix
    const r1 = await relayPass(sql, sqs, missing);
    expect(r1).toEqual({ sent: 0, failed: 3, full: false });
    const down = `http://127.0.0.1:${await freePort()}/000000000000/`; // nothing listens there
    const r2 = await relayPass(sql, sqs, down);
    expect(r2.failed).toBe(3);
    const rows = await sql`SELECT attempts, sent_at FROM outbox_messages WHERE run_id = ANY(${ids})`;
    expect(rows.map((r) => [r.attempts, r.sent_at])).toEqual([[2, null], [2, null], [2, null]]);
    const [t] = await sql`SELECT count(*)::int AS n FROM task_run_events WHERE run_id = ANY(${ids}) AND event = 'sent'`;
    expect(t!.n).toBe(0);
    // A failing row does not keep the relay spinning, and is sent when the queue is back.
    relay({ sweepIntervalMs: 100 });
    await waitFor(async () => (await pendingCount()) === 0, 2_000);
    expect((await drain('default', 3)).length).toBe(3);
  });

  it('R-OBX-14 a queue service that never answers costs a pass one wave of 4 calls: the rows tried count an attempt, the rest stay pending untouched and go out once it answers', async () => {
    const ids = await dispatchMany(60, { as: bulkActor });
    const { endpoint, sockets, close } = await silentServer();
    const stalled = createSqsClient({ region: 'us-east-1', endpoint, localCredentials: true, requestTimeoutMs: 200 }, { maxAttempts: 1 });
    try {
      expect(await relayPass(sql, stalled, `${endpoint}/000000000000/`, { instance: 'relay-test' }, ['tenant'])).toEqual({ sent: 0, failed: 40, full: false });
      expect(sockets.size).toBe(4);
    } finally {
      stalled.destroy();
      await close();
    }
    const attempts = await sql<{ attempts: number; n: number }[]>`
      SELECT attempts, count(*)::int AS n FROM outbox_messages WHERE run_id = ANY(${ids}) AND sent_at IS NULL GROUP BY attempts ORDER BY attempts`;
    expect(attempts.map((r) => [r.attempts, r.n])).toEqual([[0, 20], [1, 40]]);
    expect(await relayPass(sql, sqs, prefix, { instance: 'relay-test' }, ['tenant'])).toEqual({ sent: 60, failed: 0, full: false });
  });

  it('R-OBX-12 rows locked by another transaction are skipped, not waited for', async () => {
    const ids = await dispatchMany(3);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = sql.begin(async (tx) => {
      await tx`SELECT id FROM outbox_messages WHERE run_id = ${ids[0]!} FOR UPDATE`;
      locked();
      await released;
    });
    await isLocked;
    const t = performance.now();
    const result = await relayPass(sql, sqs, prefix);
    expect(performance.now() - t).toBeLessThan(1_000);
    expect(result.sent).toBe(2);
    release();
    await holder;
    expect(await pendingCount()).toBe(1);
    expect((await relayPass(sql, sqs, prefix)).sent).toBe(1);
  });

  it('R-OBX-12 concurrent relays never send a row twice', async () => {
    const ids = await dispatchMany(120);
    for (let i = 0; i < 3; i++) relay({ batchSize: 10, sweepIntervalMs: 20, instance: `relay-${i}` });
    await waitFor(async () => (await pendingCount()) === 0, 10_000);
    const bodies = await drain('default', 120);
    const runIds = bodies.map((b) => JSON.parse(b).run_id);
    expect(runIds.length).toBe(120);
    expect(new Set(runIds)).toEqual(new Set(ids));
    const [t] = await sql`SELECT count(*)::int AS n, count(DISTINCT run_id)::int AS runs FROM task_run_events WHERE run_id = ANY(${ids}) AND event = 'sent'`;
    expect(t).toEqual({ n: 120, runs: 120 });
  });

  it('R-OBX-13 sent_at and the sent trail row commit together: a mark that fails after the send commits nothing, the pass fails, the next pass sends the row again', async () => {
    // The relay's marks (sent_at, then the `sent` trail rows) commit together or not at all: a failure in
    // the second must roll back the first, and must reach the caller (the relay logs and retries).
    const [runId] = await dispatchMany(1);
    await sql.unsafe(`CREATE FUNCTION relay_test_refuse_sent() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.event = 'sent' THEN RAISE EXCEPTION 'sent refused by the test'; END IF; RETURN NEW; END $$`);
    await sql.unsafe('CREATE TRIGGER relay_test_refuse_sent BEFORE INSERT ON task_run_events FOR EACH ROW EXECUTE FUNCTION relay_test_refuse_sent()');
    try {
      await expect(relayPass(sql, sqs, prefix)).rejects.toThrow('sent refused by the test');
      const [row] = await sql`SELECT sent_at FROM outbox_messages WHERE run_id = ${runId!}`;
      expect(row!.sent_at).toBeNull();
      const [events] = await sql`SELECT count(*)::int AS n FROM task_run_events WHERE run_id = ${runId!} AND event = 'sent'`;
      expect(events!.n).toBe(0);
    } finally {
      await sql.unsafe('DROP TRIGGER relay_test_refuse_sent ON task_run_events');
      await sql.unsafe('DROP FUNCTION relay_test_refuse_sent()');
    }
    expect(await relayPass(sql, sqs, prefix)).toEqual({ sent: 1, failed: 0, full: false });
    const [row] = await sql`SELECT sent_at FROM outbox_messages WHERE run_id = ${runId!}`;
    expect(row!.sent_at).not.toBeNull();
    const [events] = await sql`SELECT count(*)::int AS n FROM task_run_events WHERE run_id = ${runId!} AND event = 'sent'`;
    expect(events!.n).toBe(1);
    // Sent twice (once before the failed mark), the same envelope both times.
    const bodies = await drain('default', 2);
    expect(bodies.map((b) => JSON.parse(b).run_id)).toEqual([runId, runId]);
  });

  it('R-OBX-13 after the send, the marks, the sent rows and COMMIT go out in one write: one round trip, where the worker waiting for that commit waited for three', async () => {
    const proxy = await recordingProxy(db.url);
    const viaProxy = createSql(proxy.url, { max: 1, applicationName: 'relay-one-write-test' });
    try {
      // A first pass prepares the pass's statements on the connection (postgres.js describes a new
      // statement before it pipelines anything behind it), as on a relay that has been running.
      await dispatchMany(1);
      expect(await relayPass(viaProxy, sqs, prefix, { instance: 'relay-test' }, ['tenant'])).toMatchObject({ sent: 1 });
      proxy.directions.length = 0;
      const ids = await dispatchMany(3);
      expect(await relayPass(viaProxy, sqs, prefix, { instance: 'relay-test' }, ['tenant'])).toEqual({ sent: 3, failed: 0, full: false });
      // Writes that waited for an answer start a new burst: BEGIN with the due rows, then everything else.
      const bursts = proxy.directions.filter((d, i) => d === 'client' && proxy.directions[i - 1] !== 'client').length;
      expect(bursts).toBe(2);
      const [marked] = await sql`SELECT count(*) FILTER (WHERE o.sent_at IS NOT NULL)::int AS sent,
          (SELECT count(*)::int FROM task_run_events e WHERE e.run_id = ANY(${ids}) AND e.event = 'sent') AS trail
        FROM outbox_messages o WHERE o.run_id = ANY(${ids})`;
      expect(marked).toEqual({ sent: 3, trail: 3 });
    } finally {
      await viaProxy.end({ timeout: 5 });
      await proxy.close();
    }
    await drain('default', 4);
  });

  it('R-OBX-12 R-OBX-13 a pass over both outboxes is one transaction: an outbox with nothing due costs no BEGIN and COMMIT of its own, rows of both commit together, and a fair pass costs two round trips as one with fairness off', async () => {
    const proxy = await recordingProxy(db.url);
    const viaProxy = createSql(proxy.url, { max: 1, applicationName: 'relay-both-outboxes-test' });
    const bursts = () => proxy.directions.filter((d, i) => d === 'client' && proxy.directions[i - 1] !== 'client').length;
    const platformRun = () => inUnitOfWork(sql, system, (tx) => dispatcher.dispatchTask(tx, 'demo.platform_task', { p: 1 }, { actor: system }));
    try {
      // A first pass with rows in both outboxes prepares the pass's statements on the connection, as
      // on a relay that has been running.
      await dispatchMany(1);
      await platformRun();
      expect(await relayPass(viaProxy, sqs, prefix, { instance: 'relay-test' })).toEqual({ sent: 2, failed: 0, full: false });

      // Only the tenant outbox has a due row (a wake signal for one dispatch): BEGIN with the due rows
      // of both outboxes, then the marks with COMMIT. Two round trips, where a transaction per outbox took four.
      proxy.directions.length = 0;
      const [tenantOnly] = await dispatchMany(1);
      expect(await relayPass(viaProxy, sqs, prefix, { instance: 'relay-test' })).toEqual({ sent: 1, failed: 0, full: false });
      expect(bursts()).toBe(2);

      // Both outboxes have due rows: still two round trips, and one transaction wrote every `sent` row.
      proxy.directions.length = 0;
      const tenantIds = await dispatchMany(2);
      const platform = await platformRun();
      expect(await relayPass(viaProxy, sqs, prefix, { instance: 'relay-test' })).toEqual({ sent: 3, failed: 0, full: false });
      expect(bursts()).toBe(2);
      const writers = await sql<{ xmin: string }[]>`
        SELECT DISTINCT xmin::text AS xmin FROM (
          SELECT xmin FROM task_run_events WHERE run_id = ANY(${tenantIds}::uuid[]) AND event = 'sent'
          UNION ALL SELECT xmin FROM platform_task_run_events WHERE run_id = ${platform.runId} AND event = 'sent') e`;
      expect(writers).toHaveLength(1);
      const [marked] = await sql`SELECT
          (SELECT count(*)::int FROM outbox_messages WHERE run_id = ANY(${[...tenantIds, tenantOnly!]}::uuid[]) AND sent_at IS NOT NULL) AS tenant,
          (SELECT count(*)::int FROM platform_outbox_messages WHERE run_id = ${platform.runId} AND sent_at IS NOT NULL) AS platform`;
      expect(marked).toEqual({ tenant: 3, platform: 1 });

      // Fairness on (the default): BEGIN with the actor context and both outboxes' fair locks, and both
      // selections right behind them, then the marks with the empty outbox's look for waiting rows and
      // COMMIT: two round trips, as with fairness off (the selections waited for the locks' answer: three).
      const fair = { instance: 'relay-test', tenantInflightMax: 40 };
      await dispatchMany(1);
      await relayPass(viaProxy, sqs, prefix, fair);
      proxy.directions.length = 0;
      await dispatchMany(1);
      expect(await relayPass(viaProxy, sqs, prefix, fair)).toEqual({ sent: 1, failed: 0, full: false, capped: false });
      expect(bursts()).toBe(2);
    } finally {
      await viaProxy.end({ timeout: 5 });
      await proxy.close();
    }
    await drain('default', 6);
    await drain('critical', 2);
  });

  it('R-OBX-13 R-OBX-16 a mark that fails in one outbox takes back the other outbox\'s marks of the same pass: both rows stay pending and the next pass sends both again', async () => {
    const [tenantRun] = await dispatchMany(1);
    const platform = await inUnitOfWork(sql, system, (tx) => dispatcher.dispatchTask(tx, 'demo.platform_task', { p: 2 }, { actor: system }));
    await sql.unsafe(`CREATE FUNCTION relay_test_refuse_platform_sent() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.event = 'sent' THEN RAISE EXCEPTION 'platform sent refused by the test'; END IF; RETURN NEW; END $$`);
    await sql.unsafe('CREATE TRIGGER relay_test_refuse_platform_sent BEFORE INSERT ON platform_task_run_events FOR EACH ROW EXECUTE FUNCTION relay_test_refuse_platform_sent()');
    const marks = async () => {
      const [row] = await sql`SELECT
          (SELECT sent_at IS NOT NULL FROM outbox_messages WHERE run_id = ${tenantRun!}) AS tenant,
          (SELECT sent_at IS NOT NULL FROM platform_outbox_messages WHERE run_id = ${platform.runId}) AS platform,
          (SELECT count(*)::int FROM task_run_events WHERE run_id = ${tenantRun!} AND event = 'sent')
            + (SELECT count(*)::int FROM platform_task_run_events WHERE run_id = ${platform.runId} AND event = 'sent') AS trail`;
      return row;
    };
    try {
      await expect(relayPass(sql, sqs, prefix)).rejects.toThrow('platform sent refused by the test');
      expect(await marks()).toEqual({ tenant: false, platform: false, trail: 0 });
    } finally {
      await sql.unsafe('DROP TRIGGER relay_test_refuse_platform_sent ON platform_task_run_events');
      await sql.unsafe('DROP FUNCTION relay_test_refuse_platform_sent()');
    }
    expect(await relayPass(sql, sqs, prefix)).toEqual({ sent: 2, failed: 0, full: false });
    expect(await marks()).toEqual({ tenant: true, platform: true, trail: 2 });
    // Each sent twice (once before the failed marks), the same run both times.
    expect((await drain('default', 2)).map((b) => JSON.parse(b).run_id)).toEqual([tenantRun, tenantRun]);
    expect((await drain('critical', 2)).map((b) => JSON.parse(b).run_id)).toEqual([platform.runId, platform.runId]);
  });

  it('R-OBX-16 a resend after a lost mark carries the same run_id and envelope', async () => {
    const [runId] = await dispatchMany(1);
    await relayPass(sql, sqs, prefix);
    // As if the relay crashed after SendMessageBatch but before its transaction committed.
    await sql`UPDATE outbox_messages SET sent_at = NULL WHERE run_id = ${runId!}`;
    await relayPass(sql, sqs, prefix);
    const bodies = await drain('default', 2);
    expect(bodies.length).toBe(2);
    expect(bodies[0]).toBe(bodies[1]);
    expect(JSON.parse(bodies[0]!).run_id).toBe(runId);
  });
});
