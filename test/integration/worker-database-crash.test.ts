// PostgreSQL crashes while the delivery path's commits without a flush (src/db/commit-without-flush.ts)
// are not yet on disk. A cluster of this test's own: every durable commit writes its WAL out as in
// production (synchronous_commit on), without the fsync (the test's crashes are of PostgreSQL, not of
// the machine, so what the kernel holds survives them, and the other test files' disks are spared). The WAL writer is
// frozen (SIGSTOP) before the commits at risk, so their WAL stays in PostgreSQL's buffers, as it does
// for the few hundred ms before the WAL writer's next round; then it is killed (SIGKILL), and
// PostgreSQL ends every session and recovers from the WAL on disk, which loses those buffers, as a crash
// of the server does. What must hold: the relay's marks or a registration taken back leave the state of
// a crash just before them, the run completes exactly once and its trail stays causal.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSql, type Sql } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { applyMigrations } from '../../src/migrator/runner.ts';
import { queueUrl } from '../../src/queue/names.ts';
import { relayPass } from '../../src/work/runtime/produce/relay.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
// Longer than the other runtime tests' 2 s, and many receives allowed: on a starved machine a late
// heartbeat or a crash's failed settlement adds receives, and receive exhaustion is not this test's subject.
const VISIBILITY_SECONDS = 10;
/** An advisory lock key: while the test holds it, a handler of barrierEffect waits inside its effect transaction. */
const BARRIER = 7_311_001;
/** fixture.effect's effect row, then a wait at the barrier: the crash lands while the handler runs, whatever the machine's speed. */
const barrierEffect = defineTask({
  name: 'fixture.barrier_effect',
  queue: 'default',
  context: 'system',
  concurrency: 2,
  // Short, so that a redelivery held by the crashed attempt's Redis gate waits a short lease.
  timeoutSeconds: 5,
  payload: z.object({ key: z.string().min(1) }),
  handler: async (p, run) => {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    await run.transaction`SELECT pg_advisory_xact_lock(${BARRIER}::bigint)`;
    return { key: p.key };
  },
});
const units: ReadonlyMap<string, WorkUnit> = new Map<string, WorkUnit>([
  [effectTask.name, effectTask],
  [barrierEffect.name, barrierEffect],
]);

let scratch: string;
let pg: EmbeddedPostgres;
let sql: Sql;
let h: WorkHarness;
let workers: WorkerRuntime | undefined;

/** The WAL writer's pid. */
async function walWriter(): Promise<number> {
  const [row] = await sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`;
  return row!.pid;
}

/**
 * Freezes the WAL writer: from now on only a commit that waits for the disk writes WAL out. It is frozen
 * asleep (its wait event says so once stopped), never inside a write, where it would hold the lock that
 * every durable commit needs.
 */
async function freezeWalWriter(): Promise<void> {
  await waitFor(
    async () => {
      const pid = await walWriter();
      process.kill(pid, 'SIGSTOP');
      const [row] = await sql<{ wait: string | null }[]>`SELECT wait_event AS wait FROM pg_stat_activity WHERE pid = ${pid}`;
      if (row?.wait === 'WalWriterMain') return true;
      process.kill(pid, 'SIGCONT');
      return false;
    },
    10_000,
    { stepMs: 5, what: 'the WAL writer frozen while asleep' },
  );
}

/**
 * Kills the WAL writer (frozen or not) with SIGKILL: PostgreSQL ends every session and recovers. Resolves
 * once the server answers again with a new WAL writer, so never before it has noticed the crash.
 */
async function crashPostgres(): Promise<void> {
  const killed = await walWriter();
  process.kill(killed, 'SIGKILL');
  await waitFor(async () => {
    const again = createSql(pg.url, { max: 1 });
    try {
      const [row] = await again<{ pid: number | null }[]>`
        SELECT (SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter') AS pid WHERE NOT pg_is_in_recovery()`;
      return row?.pid != null && row.pid !== killed;
    } catch {
      return false; // refused while the server restarts and recovers
    } finally {
      await again.end({ timeout: 1 }).catch(() => {});
    }
  }, 30_000, { stepMs: 50, what: 'PostgreSQL back after the crash' });
}

/** Messages on the `default` queue, visible or in flight. */
async function messagesOnQueue(): Promise<number> {
  const out = await h.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl(h.queueUrlPrefix, 'default'), AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
  );
  return Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
}

/** Sessions waiting for the barrier: a handler of barrierEffect is at it. */
async function waitingAtBarrier(): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${BARRIER} AND NOT granted`;
  return row!.n;
}

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-crash-test-'));
  fs.chmodSync(scratch, 0o755);
  pg = await startEmbeddedPostgres({ dataDir: path.join(scratch, 'pg'), port: await freePort(), fast: true });
  sql = createSql(pg.url, { max: 30 });
  // Commits wait for their WAL to be written, as in production: the fast cluster turns that off on its
  // command line, which this database's own default overrides for every session.
  // Besides the frozen WAL writer, the background writer (a dirty page written out writes the WAL
  // before it) and autovacuum could write WAL out before a crash of the test: both are off, and a
  // first crash restarts every server process with these settings.
  await sql`ALTER DATABASE postgres SET synchronous_commit = on`;
  await sql`ALTER SYSTEM SET bgwriter_lru_maxpages = 0`;
  await sql`ALTER SYSTEM SET autovacuum = off`;
  await sql`SELECT pg_reload_conf()`;
  await waitFor(async () => {
    const fresh = createSql(pg.url, { max: 1 });
    try {
      const [row] = await fresh`SELECT current_setting('bgwriter_lru_maxpages') AS n, current_setting('synchronous_commit') AS s`;
      return row!.n === '0' && row!.s === 'on';
    } finally {
      await fresh.end({ timeout: 1 });
    }
  }, 10_000);
  await applyMigrations(sql, { root: ROOT });
  await crashPostgres();
  h = await workHarness({ units, database: { name: 'postgres', url: pg.url, sql, drop: async () => {} }, visibilitySeconds: VISIBILITY_SECONDS });
}, 120_000);

/** A test that failed between the freeze and the crash leaves the WAL writer stopped: wake it, or every later commit would wait for it. */
async function thawWalWriter(): Promise<void> {
  if (pg) await walWriter().then((pid) => process.kill(pid, 'SIGCONT'), () => {});
}

afterEach(async () => {
  await thawWalWriter();
  await workers?.stop();
  workers = undefined;
});

afterAll(async () => {
  try {
    await thawWalWriter();
    await h?.close();
    await sql?.end({ timeout: 5 });
  } finally {
    await pg?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  }
});

/** A runtime on `default` only, with this test's visibility and receive allowance. */
function startWorkers(): Promise<WorkerRuntime> {
  return h.startWorkers({ queues: ['default'], visibilitySeconds: { default: VISIBILITY_SECONDS }, drainMs: 2_000, maxReceives: 20 });
}

/** Waits for the run to succeed (the harness's wait reports the trail; the workers' log is added). */
async function waitForSuccess(runId: string): Promise<void> {
  try {
    await h.waitForStatus(runId, ['succeeded'], 45_000);
  } catch (error) {
    throw new Error(`${(error as Error).message}; worker log tail:\n${h.logs().split('\n').slice(-30).join('\n')}`, { cause: error });
  }
}

const dispatch = async (payload: unknown, name = effectTask.name) => (await h.dispatch(name, payload)).runId;
const runRow = async (runId: string) => {
  const row = await h.run(runId);
  return { status: row!.status, attempts: row!.attempts };
};
const eventsOf = async (runId: string) => events(await h.trail(runId));

describe('PostgreSQL crashes before the commits without a flush reach the disk', () => {
  it("the relay's marks are taken back: the delivery records the send, the relay does not send again, one effect", async () => {
    const key = `crash-relay-${randomUUID()}`;
    const runId = await dispatch({ key });
    await freezeWalWriter();
    expect((await relayPass(sql, h.sqs, h.queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(1);
    // Committed and visible...
    expect(await eventsOf(runId)).toEqual(['queued', 'sent']);
    await crashPostgres();
    // ...and taken back by the crash: the row is pending again, its message already on the queue.
    expect(await eventsOf(runId)).toEqual(['queued']);
    const [row] = await sql`SELECT sent_at FROM platform_outbox_messages WHERE run_id = ${runId}`;
    expect(row!.sent_at).toBeNull();

    workers = await startWorkers();
    await workers.consuming;
    await waitForSuccess(runId);
    expect((await relayPass(sql, h.sqs, h.queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(0);
    expect(await h.effects(key)).toBe(1);
    const trail = await h.trail(runId);
    expect(events(trail)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
    expect(trail[1]!.detail).toMatchObject({ recorded_by: 'delivery' });
    expect((await causalProblems(sql, runId)).problems).toEqual([]);
  }, 120_000);

  it('a registration is taken back while its handler runs: the run is queued again, runs once more, one effect', async () => {
    const key = `crash-registration-${randomUUID()}`;
    // The test holds the barrier, so the handler waits inside its effect transaction; the crash ends this
    // session and with it the barrier, so the next attempt passes.
    const barrier = createSql(pg.url, { max: 1 });
    await barrier`SELECT pg_advisory_lock(${BARRIER}::bigint)`;
    const runId = await dispatch({ key }, barrierEffect.name);
    expect((await relayPass(sql, h.sqs, h.queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(1);
    // A commit that waits for the disk flushes the relay's marks with it: only the registration is at risk.
    await sql`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (gen_random_uuid(), 'flush', 0)`;
    await freezeWalWriter();
    // No worker ran until now, so the registration comes after that flush.
    workers = await startWorkers();
    await waitFor(async () => (await eventsOf(runId)).includes('received'), 30_000, { what: 'the registration' });
    expect(await runRow(runId)).toEqual({ status: 'running', attempts: 1 });
    await waitFor(async () => (await waitingAtBarrier()) > 0, 30_000, { what: 'the handler at the barrier' });
    await crashPostgres();
    await barrier.end({ timeout: 1 }).catch(() => {});

    // The worker's transaction died with the crash; the message comes back and the run executes again.
    // The crash's rollback is read from the end state, not from the run right after the crash: the
    // retry (its backoff has full jitter, from 0 ms) can have run by then. A registration that survived
    // would show as attempts 2 and a second `received` row.
    await waitForSuccess(runId);
    expect(await runRow(runId)).toEqual({ status: 'succeeded', attempts: 1 });
    expect(await h.effects(key)).toBe(1);
    const trail = await h.trail(runId);
    expect(events(trail)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
    // The receive the crash took back left no row; the queue still counted it.
    expect(trail[2]).toMatchObject({ attempt: 1 });
    expect(trail[2]!.receive_count).toBeGreaterThan(1);
    expect((await causalProblems(sql, runId)).problems).toEqual([]);
  }, 120_000);

  it("the relay's marks are taken back and the relay sends again first: two messages, one effect, both settled", async () => {
    const key = `crash-resend-${randomUUID()}`;
    const runId = await dispatch({ key });
    await freezeWalWriter();
    expect((await relayPass(sql, h.sqs, h.queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(1);
    await crashPostgres();
    expect(await eventsOf(runId)).toEqual(['queued']);
    // The row is pending again: the relay sends a second message for the run.
    expect((await relayPass(sql, h.sqs, h.queueUrlPrefix, { instance: 'crash-relay' })).sent).toBe(1);

    workers = await startWorkers();
    await waitForSuccess(runId);
    // Both messages end: the second finds the run executing (held for the lease) or finished, and is acknowledged.
    await waitFor(async () => (await messagesOnQueue()) === 0, 30_000);
    expect(await h.effects(key)).toBe(1);
    const seen = await eventsOf(runId);
    expect(seen.filter((e) => e === 'started')).toHaveLength(1);
    expect(seen.filter((e) => e === 'sent')).toHaveLength(1);
    expect(seen.filter((e) => e === 'received').length).toBeGreaterThanOrEqual(2);
    expect((await causalProblems(sql, runId)).problems).toEqual([]);
  }, 120_000);
});
