// PostgreSQL crashes while the delivery path's commits without a flush (src/db/commit-without-flush.ts)
// are not yet on disk. A cluster of this test's own, durable as in production. The WAL writer is
// frozen (SIGSTOP) before the commits at risk, so their WAL stays in PostgreSQL's buffers, as it does
// for the few hundred ms before the WAL writer's next round; then it is killed (SIGKILL), and
// PostgreSQL ends every session and recovers from the WAL on disk, which loses those buffers, as a crash
// of the server does. What must hold: the relay's marks or a registration taken back leave the state of
// a crash just before them, the run completes exactly once and its trail stays causal.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createSql, type Sql } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { createRedis } from '../../src/kv/client.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import { applyMigrations } from '../../src/migrator/runner.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { createDispatcher } from '../../src/work/dispatch.ts';
import { relayPass } from '../../src/work/relay.ts';
import type { WorkUnit } from '../../src/work/unit.ts';
import { startWorkerRuntime, type WorkerRuntime } from '../../src/work/worker-runtime.ts';
import { createEffectTable, effectTask } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { TEST_RUNTIME_TIMINGS } from '../fixtures/runtime-timings.ts';
import { freshQueuePrefix, freshRedisUrl } from '../support/services.ts';
import { waitFor } from '../support/wait-for.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const SYSTEM = { kind: 'system' as const, label: 'crash-test' };
const units: ReadonlyMap<string, WorkUnit> = new Map([[effectTask.name, effectTask]]);

let scratch: string;
let pg: EmbeddedPostgres;
let sql: Sql;
let redis: Redis;
let sqs: ReturnType<typeof createSqsClient>;
let queueUrlPrefix: string;
let workers: WorkerRuntime | undefined;
const dispatcher = createDispatcher({
  resolve: (name) => (name === effectTask.name ? { name, queue: effectTask.queue, context: effectTask.context, payload: effectTask.payload } : undefined),
  instance: 'crash-test',
});

/** The WAL writer's pid. */
async function walWriter(): Promise<number> {
  const [row] = await sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`;
  return row!.pid;
}

/** Freezes the WAL writer: from now on only a commit that waits for the disk writes WAL out. */
async function freezeWalWriter(): Promise<void> {
  process.kill(await walWriter(), 'SIGSTOP');
}

/** Kills a server process (by default the frozen WAL writer) with SIGKILL; resolves once PostgreSQL has recovered. */
async function crashPostgres(pid?: number): Promise<void> {
  process.kill(pid ?? (await walWriter()), 'SIGKILL');
  await waitFor(async () => {
    const again = createSql(pg.url, { max: 1 });
    try {
      return (await again`SELECT NOT pg_is_in_recovery() AS up`)[0]!.up === true;
    } catch {
      return false;
    } finally {
      await again.end({ timeout: 1 }).catch(() => {});
    }
  }, 30_000);
}

async function dispatch(payload: unknown): Promise<string> {
  return (await inUnitOfWork(sql, SYSTEM, (tx) => dispatcher.dispatchTask(tx, effectTask.name, payload, { actor: SYSTEM }))).runId;
}

async function runRow(runId: string) {
  const [row] = await sql<{ status: string; attempts: number }[]>`SELECT status, attempts FROM platform_task_runs WHERE run_id = ${runId}`;
  return row!;
}

async function trail(runId: string) {
  return sql<{ event: string; attempt: number; receive_count: number; detail: Record<string, unknown> }[]>`
    SELECT event, attempt, receive_count, detail FROM platform_task_run_events WHERE run_id = ${runId} ORDER BY occurred_at, id`;
}

async function effects(key: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM fixture_effects WHERE key = ${key}`;
  return row!.n;
}

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-crash-test-'));
  fs.chmodSync(scratch, 0o755);
  pg = await startEmbeddedPostgres({ dataDir: path.join(scratch, 'pg'), port: await freePort() });
  sql = createSql(pg.url, { max: 12 });
  // Besides the frozen WAL writer, the background writer (a dirty page written out flushes the WAL
  // before it) and autovacuum could write WAL out before a crash of the test: both are off, and a
  // first crash restarts every server process with these settings.
  await sql`ALTER SYSTEM SET bgwriter_lru_maxpages = 0`;
  await sql`ALTER SYSTEM SET autovacuum = off`;
  await sql`SELECT pg_reload_conf()`;
  await waitFor(async () => {
    const fresh = createSql(pg.url, { max: 1 });
    try {
      return (await fresh`SELECT current_setting('bgwriter_lru_maxpages') AS n`)[0]!.n === '0';
    } finally {
      await fresh.end({ timeout: 1 });
    }
  }, 10_000);
  await applyMigrations(sql, { root: ROOT });
  await createEffectTable(sql);
  await crashPostgres();
  redis = createRedis(await freshRedisUrl(), { name: 'crash-test', autoPipelining: true });
  await new Promise((resolve) => redis.once('ready', resolve));
  const queues = freshQueuePrefix();
  queueUrlPrefix = queues.queueUrlPrefix;
  sqs = createSqsClient({ region: 'us-east-1', endpoint: queues.endpoint, localCredentials: true });
  await provisionQueues(sqs, queueUrlPrefix, { critical: 2, default: 2, bulk: 2, maintenance: 2 });
}, 120_000);

afterAll(async () => {
  await workers?.stop();
  // A test that failed between the freeze and the crash leaves the WAL writer stopped: wake it for the stop.
  if (pg) await walWriter().then((pid) => process.kill(pid, 'SIGCONT'), () => {});
  redis?.disconnect();
  sqs?.destroy();
  await sql?.end({ timeout: 5 });
  await pg?.stop();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

function startWorkers(): Promise<WorkerRuntime> {
  return startWorkerRuntime({
    sql,
    redis,
    sqs,
    queueUrlPrefix,
    queues: ['default'],
    units,
    logger: captureLogger('debug').logger,
    workerInstance: 'crash-worker',
    visibilitySeconds: { default: 2 },
    ...TEST_RUNTIME_TIMINGS,
    drainMs: 2_000,
    relay: null,
    localScheduler: null,
  });
}

describe('PostgreSQL crashes before the commits without a flush reach the disk', () => {
  it("the relay's marks are taken back: the delivery records the send, the relay does not send again, one effect", async () => {
    const key = `crash-relay-${randomUUID()}`;
    const runId = await dispatch({ key });
    await freezeWalWriter();
    expect((await relayPass(sql, sqs, queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(1);
    // Committed and visible...
    expect((await trail(runId)).map((t) => t.event)).toEqual(['queued', 'sent']);
    await crashPostgres();
    // ...and taken back by the crash: the row is pending again, its message already on the queue.
    expect((await trail(runId)).map((t) => t.event)).toEqual(['queued']);
    const [row] = await sql`SELECT sent_at FROM platform_outbox_messages WHERE run_id = ${runId}`;
    expect(row!.sent_at).toBeNull();

    workers = await startWorkers();
    await workers.consuming;
    await waitFor(async () => (await runRow(runId)).status === 'succeeded', 20_000);
    expect((await relayPass(sql, sqs, queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(0);
    expect(await effects(key)).toBe(1);
    const events = await trail(runId);
    expect(events.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
    expect(events[1]!.detail).toMatchObject({ recorded_by: 'delivery' });
    expect((await causalProblems(sql, runId)).problems).toEqual([]);
    await workers.stop();
    workers = undefined;
  });

  it('a registration is taken back while its handler runs: the run is queued again, runs once more, one effect', async () => {
    const key = `crash-registration-${randomUUID()}`;
    const runId = await dispatch({ key, sleepMs: 3_000 });
    expect((await relayPass(sql, sqs, queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(1);
    // A commit that waits for the disk (a dispatch nothing relays) flushes the relay's marks with it:
    // only the registration is at risk.
    await dispatch({ key: `crash-flush-${randomUUID()}` });
    await freezeWalWriter();
    // No worker ran until now, so the registration comes after that flush.
    workers = await startWorkers();
    await waitFor(async () => (await trail(runId)).some((t) => t.event === 'received'), 10_000);
    expect(await runRow(runId)).toEqual({ status: 'running', attempts: 1 });
    await crashPostgres();
    expect(await runRow(runId)).toEqual({ status: 'queued', attempts: 0 });
    expect((await trail(runId)).map((t) => t.event)).toEqual(['queued', 'sent']);

    // The worker's transaction died with the crash; the message comes back and the run executes again.
    await waitFor(async () => (await runRow(runId)).status === 'succeeded', 30_000);
    expect(await effects(key)).toBe(1);
    const events = await trail(runId);
    expect(events.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
    // The receive the crash took back left no row; the queue still counted it.
    expect(events[2]).toMatchObject({ attempt: 1 });
    expect(events[2]!.receive_count).toBeGreaterThan(1);
    expect((await causalProblems(sql, runId)).problems).toEqual([]);
  });
});
