// BullMQ (pinned dev dependency) on the shared Redis with its default setup: jobs live in Redis
// without durable commits (no AOF, no fsync), so it is reported as the non-durable ceiling, not the
// bar. Concurrency C is its Worker `concurrency`. The effect of workload (c) is written to
// PostgreSQL by the handler in its own transaction (BullMQ has no transaction with completion).
import { Queue, Worker, type Job } from 'bullmq';
import { createSql, type Sql } from '../../../src/db/client.ts';
import { nowMs } from '../tally.ts';
import type { BenchJob, SystemAdapter, SystemContext } from '../system.ts';

const QUEUE = 'bench';
const BULK_CHUNK = 1000;

export function bullmq(): SystemAdapter {
  let ctx: SystemContext;
  let queue: Queue | undefined;
  let worker: Worker | undefined;
  let effects: Sql | undefined;
  const name = 'bullmq';

  const connection = () => {
    const url = new URL(ctx.redisUrl);
    return {
      host: url.hostname,
      port: Number(url.port),
      db: Number(url.pathname.slice(1) || 0),
      // Workers need blocking commands to wait forever (BullMQ refuses otherwise).
      maxRetriesPerRequest: null,
    };
  };

  return {
    name,
    durable: false,
    workers: 'in-process',
    settings: 'Worker concurrency=C, default job options (completed jobs kept), Redis without persistence (appendonly no, save ""); effect: postgres.js pool of C+2 connections, one INSERT per job',
    async setup(c) {
      ctx = c;
      queue = new Queue(QUEUE, { connection: connection() });
      await queue.waitUntilReady();
      effects = createSql(c.pgUrl, { max: c.concurrency + 2, applicationName: 'bench-bullmq' });
    },
    async enqueueBulk(jobs) {
      for (let i = 0; i < jobs.length; i += BULK_CHUNK) {
        await queue!.addBulk(jobs.slice(i, i + BULK_CHUNK).map((data) => ({ name: QUEUE, data })));
      }
    },
    async enqueueOne(job) {
      await queue!.add(QUEUE, job);
    },
    async startWorkers() {
      worker = new Worker(
        QUEUE,
        async (job: Job<BenchJob>) => {
          const data = job.data;
          ctx.book.start(data, nowMs());
          if (data.e) await effects!`INSERT INTO bench_effects (system, round, seq) VALUES (${name}, ${data.r}, ${data.s})`;
          ctx.book.finish(data, nowMs());
        },
        { connection: connection(), concurrency: ctx.concurrency },
      );
      worker.on('error', (error) => ctx.log(`bullmq worker error: ${error.message}`));
      await worker.waitUntilReady();
    },
    async stopWorkers() {
      await worker?.close();
      worker = undefined;
    },
    async incomplete(_round, size) {
      const counts = await queue!.getJobCounts('completed');
      return Math.max(0, size - (counts.completed ?? 0));
    },
    async reset() {
      await queue!.obliterate({ force: true });
    },
    async close() {
      await worker?.close();
      await queue?.close();
      await effects?.end({ timeout: 5 });
    },
  };
}
