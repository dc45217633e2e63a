// graphile-worker (pinned dev dependency), default settings and its fastest documented settings.
// The batched preset is the one its performance page publishes its figures with
// (https://worker.graphile.org/docs/performance): `localQueue: { size: 500 }`,
// `completeJobBatchDelay: 0`, `failJobBatchDelay: 0`; only the concurrency differs (ours for all).
import { Logger, makeWorkerUtils, run, type Runner, type Task, type WorkerUtils } from 'graphile-worker';
import type { Sql } from '../../../src/db/client.ts';
import { nowMs, type TallyBook } from '../tally.ts';
import type { BenchJob, SystemAdapter, SystemContext } from '../system.ts';

const TASK = 'bench';
const BULK_CHUNK = 1000;
const quietLogger = new Logger(() => () => {});

export function graphileWorker(options: { batched: boolean }): SystemAdapter {
  let ctx: SystemContext;
  let utils: WorkerUtils | undefined;
  let runner: Runner | undefined;
  const name = options.batched ? 'graphile-worker-batched' : 'graphile-worker';
  const batching = { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };

  const task = (book: TallyBook): Task => async (payload, helpers) => {
    const job = payload as BenchJob;
    book.start(job, nowMs());
    // graphile-worker has no transaction shared with job completion: the effect commits in its own
    // transaction on the worker's pool, then the job is marked complete.
    if (job.e) await helpers.query('INSERT INTO bench_effects (system, round, seq) VALUES ($1, $2, $3)', [name, job.r, job.s]);
    book.finish(job, nowMs());
  };

  return {
    name,
    durable: true,
    workers: 'in-process',
    get settings() {
      const pool = Math.max(10, (ctx?.concurrency ?? 0) + 2);
      return options.batched
        ? `concurrency=C, maxPoolSize=${pool}, localQueue.size=500, completeJobBatchDelay=0, failJobBatchDelay=0 (its published performance preset), pollInterval=2000 (default), prepared statements (default)`
        : `concurrency=C, maxPoolSize=${pool} (max(10, C+2), its documented recommendation), everything else default (pollInterval=2000, no local queue, no batched completion)`;
    },
    async setup(c) {
      ctx = c;
      utils = await makeWorkerUtils({ connectionString: c.pgUrl, logger: quietLogger });
      await utils.migrate();
    },
    async enqueueBulk(jobs) {
      for (let i = 0; i < jobs.length; i += BULK_CHUNK) {
        await utils!.addJobs(jobs.slice(i, i + BULK_CHUNK).map((payload) => ({ identifier: TASK, payload })));
      }
    },
    async enqueueOne(job) {
      await utils!.addJob(TASK, job);
    },
    async analyze() {
      await analyzeSchema(ctx.sql, 'graphile_worker');
    },
    async startWorkers() {
      runner = await run({
        connectionString: ctx.pgUrl,
        concurrency: ctx.concurrency,
        maxPoolSize: Math.max(10, ctx.concurrency + 2),
        noHandleSignals: true,
        logger: quietLogger,
        taskList: { [TASK]: task(ctx.book) },
        ...(options.batched ? { preset: { worker: batching } } : {}),
      });
    },
    async stopWorkers() {
      await runner?.stop();
      runner = undefined;
    },
    async incomplete() {
      // Completed jobs are deleted; whatever remains (queued, locked, failed) is not complete.
      const [row] = await ctx.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM graphile_worker._private_jobs`;
      return row?.n ?? 0;
    },
    async reset() {
      await ctx.sql`DELETE FROM graphile_worker._private_jobs`;
    },
    async close() {
      await runner?.stop();
      await utils?.release();
    },
  };
}

/** ANALYZE every table of a schema (partitions included: ANALYZE of a parent recurses). */
export async function analyzeSchema(sql: Sql, schema: string): Promise<void> {
  const tables = await sql<{ t: string }[]>`
    SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname = ${schema}`;
  for (const { t } of tables) await sql.unsafe(`ANALYZE ${t}`);
}
