// `ours`: this service's own path, end to end. The harness plays the API: it dispatches the fixture
// task `bench.job` (bench/fixtures/units) inside a transaction (run row `queued`, trail event, outbox
// row), commits, and pushes the wake signal. The relay sends the outbox rows to the SQS server with
// SendMessageBatch; the workers receive them, claim the idempotency key, run the handler in the effect
// transaction and mark the run `succeeded` with its trail events.
//
// The relay runs inside the workers process (bench/peers/ours-process.ts, BENCH_RELAY=true), as the
// workers service with SVC_RELAY=true runs it in the deployment the README describes; the process is
// alive for the whole invocation. The relay is paused while the harness fills the outbox with a burst
// (so the burst waits in the outbox, as the peers' bursts wait in their tables) and resumed to drain it.
// Each round dispatches for a tenant of its own, so its runs are counted through the
// (tenant_id, queued_at) index; runs and trails are never deleted (the database refuses it).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { createSql, type Sql } from '../../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../../src/db/unit-of-work.ts';
import { createRedis } from '../../../src/kv/client.ts';
import { signalOutbox } from '../../../src/kv/wake.ts';
import { WORKERS_NODE_FLAGS } from '../../../src/main/workers-node-flags.ts';
import { applyMigrations } from '../../../src/migrator/runner.ts';
import { createSqsClient } from '../../../src/queue/client.ts';
import { provisionQueues } from '../../../src/queue/provision.ts';
import { createDispatcher, type Dispatcher } from '../../../src/work/runtime/produce/dispatch.ts';
import { benchJob } from '../../fixtures/units/bench/job.task.ts';
import type { GcPause } from '../gc-pauses.ts';
import type { BenchJob, SystemAdapter, SystemContext } from '../system.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..', '..');
const PROCESS_FILE = path.join(here, '..', 'ours-process.ts');
const TASK = benchJob.name;
/** Runs dispatched per transaction by the bulk enqueue (the burst). */
const BULK_CHUNK = 500;
const READY_TIMEOUT_MS = 60_000;

export interface OursProcess {
  child: ChildProcess;
  /** Relay only: sends `pause`/`resume` and resolves when the process confirms. */
  command(message: 'pause' | 'resume'): Promise<void>;
  /** The process's GC pauses since the last call (IPC `gc-pauses`). */
  gcPauses(): Promise<GcPause[]>;
  stop(): Promise<void>;
}

/** Spawns a relay or workers process of ours and resolves once it prints READY. */
export async function spawnOurs(role: 'relay' | 'workers', env: Record<string, string>): Promise<OursProcess> {
  // The flags the deployment starts the workers process with (src/main/workers-node-flags.ts); the relay
  // runs in that process when deployed. BENCH_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=dist/prof`)
  // adds node flags after them (a later flag wins).
  const nodeArgs = [...WORKERS_NODE_FLAGS, ...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0)];
  const child = spawn(process.execPath, [...nodeArgs, PROCESS_FILE], {
    env: { ...process.env, ...env, BENCH_ROLE: role },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ours ${role} process did not report READY within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (line.trim() === 'READY') {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`ours ${role} process exited before READY (code ${code}, signal ${signal})`));
    });
  }).catch(async (error: unknown) => {
    child.kill('SIGKILL');
    await exited;
    throw error;
  });
  /** Sends `message` over IPC and resolves with the first answer `answerOf` recognises; rejects if the process exits first. */
  const ask = <T>(message: string, answerOf: (m: unknown) => T | undefined, doing: string) =>
    new Promise<T>((resolve, reject) => {
      const onMessage = (m: unknown) => {
        const answer = answerOf(m);
        if (answer === undefined) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(answer);
      };
      const onExit = () => {
        child.off('message', onMessage);
        reject(new Error(`ours ${role} process exited while ${doing}`));
      };
      child.on('message', onMessage);
      child.once('exit', onExit);
      child.send(message);
    });
  return {
    child,
    async command(message) {
      const answer = message === 'pause' ? 'paused' : 'resumed';
      await ask(message, (m) => (m === answer ? true : undefined), `asked to ${message}`);
    },
    gcPauses() {
      return ask(
        'gc-pauses',
        (m) => {
          const pauses = (m as { gcPauses?: GcPause[] } | null)?.gcPauses;
          return Array.isArray(pauses) ? pauses : undefined;
        },
        'asked for its GC pauses',
      );
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A tenant to dispatch for (raw SQL: the benchmark only needs the row the runs reference). */
export async function createBenchTenant(sql: Sql, label: string): Promise<string> {
  const actor: Actor = { kind: 'system', tenantId: null, label: 'bench' };
  return inUnitOfWork(sql, actor, async (tx) => {
    const [bp] = await tx<{ id: string }[]>`
      INSERT INTO platform_tenant_blueprints (name, description) VALUES ('bench', 'benchmark fixture')
      ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description RETURNING id::text AS id`;
    const uid = `bench-${label}-${randomBytes(4).toString('hex')}`;
    const [tenant] = await tx<{ id: string }[]>`
      INSERT INTO tenants (uid, name, blueprint_id) VALUES (${uid}, ${uid}, ${bp!.id}) RETURNING id::text AS id`;
    return tenant!.id;
  });
}

export interface OursStack {
  sql: Sql;
  redis: Redis;
  dispatcher: Dispatcher;
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Migrates the database, provisions the queues and builds the dispatcher the harness dispatches with. */
export async function prepareOurs(o: {
  pgUrl: string;
  redisUrl: string;
  sqs: { endpoint: string; queueUrlPrefix: string };
  concurrency: number;
  log: (line: string) => void;
}): Promise<OursStack> {
  if (!o.sqs.endpoint) throw new Error('ours needs the SQS server: it was not started');
  const sql = createSql(o.pgUrl, { max: 12, applicationName: 'bench-ours-producer' });
  await applyMigrations(sql, { root }, (line) => o.log(`ours: ${line}`));
  const sqs = createSqsClient({ region: 'us-east-1', endpoint: o.sqs.endpoint, localCredentials: true });
  try {
    await provisionQueues(sqs, o.sqs.queueUrlPrefix, {}, ['default']);
  } finally {
    sqs.destroy();
  }
  const redis = createRedis(o.redisUrl, { name: 'bench-ours-producer' });
  redis.on('error', () => {});
  const dispatcher = createDispatcher({
    resolve: (name) =>
      name === TASK ? { name, queue: benchJob.queue, context: benchJob.context, payload: benchJob.payload } : undefined,
    instance: `bench-producer-${process.pid}`,
  });
  return {
    sql,
    redis,
    dispatcher,
    env: {
      BENCH_DATABASE_URL: o.pgUrl,
      BENCH_REDIS_URL: o.redisUrl,
      BENCH_SQS_ENDPOINT: o.sqs.endpoint,
      BENCH_SQS_QUEUE_URL_PREFIX: o.sqs.queueUrlPrefix,
      BENCH_CONCURRENCY: String(o.concurrency),
    },
    async close() {
      redis.disconnect();
      await sql.end({ timeout: 5 });
    },
  };
}

/** Dispatches jobs for a tenant: one transaction per chunk, then one wake signal. */
export async function dispatchJobs(stack: OursStack, tenantId: string, jobs: readonly BenchJob[], chunk = BULK_CHUNK): Promise<void> {
  const actor: Actor = { kind: 'system', tenantId, label: 'bench-producer' };
  for (let i = 0; i < jobs.length; i += chunk) {
    const part = jobs.slice(i, i + chunk);
    const since = performance.now();
    await inUnitOfWork(stack.sql, actor, async (tx) => {
      for (const job of part) await stack.dispatcher.dispatchTask(tx, TASK, job, { actor });
    });
    await signalOutbox(stack.redis, { since });
  }
}

/**
 * Where a steady round's runs spent their time, from the trail (the database clock, the machine clock
 * the harness reads too): medians over the runs past the warm-up of the instants each step was recorded
 * at, in ms after the harness's instant before the dispatch call. `sent` is the relay's mark after its
 * send was answered; `received` the registration; `started` the attempt's start (for a key new to the
 * ledger, the `received` instant: the finish writes it); `succeeded` the finish.
 */
export interface SteadyChain {
  runs: number;
  queuedMs: number;
  sentMs: number;
  receivedMs: number;
  startedMs: number;
  succeededMs: number;
  /** The slowest hundredth of those runs: how many, in how many 100 ms windows, and their medians. */
  tail: { runs: number; windows: number; queuedMs: number; sentMs: number; receivedMs: number; startedMs: number };
}

export type OursAdapter = SystemAdapter & {
  /** The chain of the round that ran last (a steady one), skipping its first `warmup` runs (bench/work.ts prints it). */
  steadyChain(warmup: number): Promise<SteadyChain>;
  /** The workers process's GC pauses since the last call (bench/work.ts prints a steady round's). */
  workersGcPauses(): Promise<GcPause[]>;
};

/** `groupCommit`: the fixture unit with the opt-in group commit, reported as the system `ours-group`. */
export function ours(options: { groupCommit?: boolean } = {}): OursAdapter {
  const groupCommit = options.groupCommit === true;
  const unitEnv = { BENCH_GROUP_COMMIT: String(groupCommit) };
  let ctx: SystemContext;
  let stack: OursStack | undefined;
  // BENCH_RELAY_SEPARATE=true: the older topology (bench/results/hot-path-levers-2026-11-24.md), the
  // relay in a process of its own, kept to compare against.
  const separateRelay = process.env.BENCH_RELAY_SEPARATE === 'true';
  const relaySetting = `wake signal + 5 s sweep, its default batch settings, fairness ${Number(process.env.BENCH_TENANT_INFLIGHT_MAX ?? 0) > 0 ? `on (cap ${process.env.BENCH_TENANT_INFLIGHT_MAX})` : 'off (BENCH_TENANT_INFLIGHT_MAX=40 runs it at the service default)'}`;
  /** The workers process, which runs the relay too unless `separateRelay` (then `relay`). */
  let workers: OursProcess | undefined;
  let relay: OursProcess | undefined;
  let tenantId = '';
  /** Tenant of each round, so collect() finds the round's runs. */
  const tenants = new Map<number, string>();
  let nextRound = 0;

  const roundTenant = (round: number) => tenants.get(round) ?? tenantId;

  return {
    name: groupCommit ? 'ours-group' : 'ours',
    durable: true,
    workers: 'external',
    get settings() {
      return `fixture task bench.job (tenant context, queue default, unit concurrency=C, ${groupCommit ? 'groupCommit: true' : 'a default unit: no groupCommit'}), ${separateRelay ? `workers process (pool 2C+2, long poll 2 s) and relay process (${relaySetting}) separate` : `one workers process (pool 2C+2, long poll 2 s) running the relay too, as SVC_RELAY=true does (${relaySetting})`}; the harness dispatches in transactions of ${BULK_CHUNK} runs (burst) or 1 run (steady) and pushes the wake signal after commit; PostgreSQL durable, Redis gate/cache/wake, fauxqs SQS server in the harness process`;
    },
    async setup(c) {
      ctx = c;
      stack = await prepareOurs({ pgUrl: c.pgUrl, redisUrl: c.redisUrl, sqs: c.sqs, concurrency: c.concurrency, log: c.log });
      if (separateRelay) {
        workers = await spawnOurs('workers', { ...stack.env, ...unitEnv });
        relay = await spawnOurs('relay', { ...stack.env, BENCH_RELAY_PAUSED: 'true' });
      } else {
        workers = await spawnOurs('workers', { ...stack.env, ...unitEnv, BENCH_RELAY: 'true', BENCH_RELAY_PAUSED: 'true' });
      }
    },
    async enqueueBulk(jobs) {
      const round = jobs[0]?.r ?? 0;
      tenants.set(round, tenantId);
      await dispatchJobs(stack!, tenantId, jobs);
    },
    async enqueueOne(job) {
      tenants.set(job.r, tenantId);
      await dispatchJobs(stack!, tenantId, [job], 1);
    },
    async analyze() {
      for (const table of ['task_runs', 'task_run_events', 'outbox_messages', 'idempotency_keys']) {
        await ctx.sql.unsafe(`ANALYZE ${table}`);
      }
    },
    async startWorkers() {
      await (relay ?? workers)!.command('resume');
    },
    async stopWorkers() {
      await (relay ?? workers)?.command('pause');
    },
    async incomplete(round, size) {
      const [row] = await ctx.sql<{ total: number; done: number }[]>`
        SELECT count(*)::int AS total, count(*) FILTER (WHERE status = 'succeeded')::int AS done
        FROM task_runs WHERE tenant_id = ${roundTenant(round)}`;
      return size - (row?.done ?? 0);
    },
    async collect(round, record) {
      const tenant = roundTenant(round);
      if (!record) {
        const [row] = await ctx.sql<{ done: number }[]>`
          SELECT count(*)::int AS done FROM task_runs WHERE tenant_id = ${tenant} AND status = 'succeeded'`;
        return row?.done ?? 0;
      }
      // Start instants come from the trail (database clock, the same machine clock as the harness);
      // a run whose effect committed twice would show two `started` events. For a key new to the ledger
      // `started` carries the `received` instant: the handler starts one answer of the registration later.
      const rows = await ctx.sql<{ s: number; t: number; started_ms: number | null; starts: number; succeeded: boolean }[]>`
        SELECT (o.envelope->'payload'->>'s')::int AS s,
               (o.envelope->'payload'->>'t')::float8 AS t,
               (extract(epoch FROM e.first_start) * 1000)::float8 AS started_ms,
               coalesce(e.starts, 0)::int AS starts,
               r.status = 'succeeded' AS succeeded
        FROM task_runs r
        JOIN outbox_messages o ON o.run_id = r.run_id
        LEFT JOIN LATERAL (
          SELECT min(occurred_at) AS first_start, count(*) AS starts
          FROM task_run_events ev WHERE ev.run_id = r.run_id AND ev.event = 'started'
        ) e ON true
        WHERE r.tenant_id = ${tenant}`;
      let done = 0;
      for (const row of rows) {
        if (row.succeeded) done += 1;
        if (row.started_ms !== null && row.starts > 0) record({ r: round, s: row.s, t: row.t }, row.started_ms, row.starts);
      }
      return done;
    },
    async lastCompletion(round) {
      const [row] = await ctx.sql<{ at: number | null }[]>`
        SELECT (extract(epoch FROM max(finished_at)) * 1000)::float8 AS at FROM task_runs WHERE tenant_id = ${roundTenant(round)}`;
      return row?.at ?? Number.NaN;
    },
    async reset() {
      // Runs are permanent: a new round gets a tenant of its own instead of an emptied table.
      tenantId = await createBenchTenant(stack!.sql, `r${++nextRound}`);
    },
    async steadyChain(warmup) {
      // One read of the trail for both: the medians over every run past the warm-up, and over the slowest
      // hundredth (started − t at or past the round's p99) with the number of distinct 100 ms windows of
      // the dispatch clock they fell in (few windows: one stall of a process; many: a cost spread over the round).
      type Medians = { queued: number | null; sent: number | null; received: number | null; started: number | null };
      const [row] = await ctx.sql<(Medians & { runs: number; succeeded: number | null; tail: Medians & { runs: number; windows: number } })[]>`
        WITH x AS MATERIALIZED (
          SELECT (o.envelope->'payload'->>'t')::float8 AS t, extract(epoch FROM r.queued_at) * 1000 AS queued, e.*
            FROM task_runs r
            JOIN outbox_messages o ON o.run_id = r.run_id
            CROSS JOIN LATERAL (
              SELECT extract(epoch FROM min(occurred_at) FILTER (WHERE event = 'sent')) * 1000 AS sent,
                     extract(epoch FROM min(occurred_at) FILTER (WHERE event = 'received')) * 1000 AS received,
                     extract(epoch FROM min(occurred_at) FILTER (WHERE event = 'started')) * 1000 AS started,
                     extract(epoch FROM min(occurred_at) FILTER (WHERE event = 'succeeded')) * 1000 AS succeeded
                FROM task_run_events ev WHERE ev.run_id = r.run_id) AS e
           WHERE r.tenant_id = ${tenantId} AND (o.envelope->'payload'->>'s')::int >= ${warmup}),
        cut AS (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY started - t) AS p99 FROM x),
        slow AS (SELECT x.* FROM x, cut WHERE x.started - x.t >= cut.p99)
        SELECT count(*)::int AS runs,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY queued - t) AS queued,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY sent - t) AS sent,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY received - t) AS received,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY started - t) AS started,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY succeeded - t) AS succeeded,
               (SELECT json_build_object(
                         'runs', count(*), 'windows', count(DISTINCT floor(t / 100)),
                         'queued', percentile_cont(0.5) WITHIN GROUP (ORDER BY queued - t),
                         'sent', percentile_cont(0.5) WITHIN GROUP (ORDER BY sent - t),
                         'received', percentile_cont(0.5) WITHIN GROUP (ORDER BY received - t),
                         'started', percentile_cont(0.5) WITHIN GROUP (ORDER BY started - t))
                  FROM slow) AS tail
          FROM x`;
      const ms = (v: number | null) => (v === null ? Number.NaN : Number(v));
      return {
        runs: row!.runs,
        queuedMs: ms(row!.queued),
        sentMs: ms(row!.sent),
        receivedMs: ms(row!.received),
        startedMs: ms(row!.started),
        succeededMs: ms(row!.succeeded),
        tail: {
          runs: row!.tail.runs,
          windows: row!.tail.windows,
          queuedMs: ms(row!.tail.queued),
          sentMs: ms(row!.tail.sent),
          receivedMs: ms(row!.tail.received),
          startedMs: ms(row!.tail.started),
        },
      };
    },
    workersGcPauses() {
      return workers!.gcPauses();
    },
    externalPids() {
      return [workers?.child.pid, relay?.child.pid].filter((p): p is number => p !== undefined);
    },
    async close() {
      await relay?.stop();
      await workers?.stop();
      relay = undefined;
      workers = undefined;
      await stack?.close();
      stack = undefined;
    },
  };
}
