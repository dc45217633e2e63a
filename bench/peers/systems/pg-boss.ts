// pg-boss (pinned dev dependency, 12.x API), in its best documented configuration for this workload
// and with its defaults.
//
// best: `useListenNotify: true` on the instance and `notify: true` on the queue (a created job wakes
// the workers at once instead of after a polling interval), batch fetches with `burstWhenBatchFull`
// (keep fetching with no delay while batches come back full, so a burst's backlog drains
// continuously). A batch is a prefetch, like graphile-worker's local queue: the handler runs the
// batch's jobs through one semaphore of C slots shared by all fetch loops, so no more than C jobs
// run at once, as for every other system. pg-boss documents no batch size; `BEST_SHAPE` is the
// fastest shape measured on this machine (see bench/peers/README.md).
//
// default: `localConcurrency: C`, everything else default: batchSize 1 and a 2 s polling interval
// after every fetch, i.e. by design at most C / 2 jobs per second.
import { PgBoss, type Job } from 'pg-boss';
import { nowMs } from '../tally.ts';
import type { BenchJob, SystemAdapter, SystemContext } from '../system.ts';
import { analyzeSchema } from './graphile-worker.ts';

const QUEUE = 'bench';
const BULK_CHUNK = 1000;
/** Its default polling interval (seconds), the ceiling of the default configuration. */
const DEFAULT_POLLING_SECONDS = 2;
/** Fetch loops and jobs per fetch of the best configuration. */
export const BEST_SHAPE = { loops: 1, batchSize: 500 };

/** At most `slots` callers inside at once. */
function semaphore(slots: number) {
  let free = slots;
  const waiting: Array<() => void> = [];
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    if (free > 0) free -= 1;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else free += 1;
    }
  };
}

export function pgBoss(options: { best: boolean; shape?: { loops: number; batchSize: number } }): SystemAdapter {
  let ctx: SystemContext;
  let boss: PgBoss | undefined;
  let workerId: string | undefined;
  const name = options.best ? 'pg-boss' : 'pg-boss-default';
  const best = options.shape ?? BEST_SHAPE;
  let slot: ReturnType<typeof semaphore> = semaphore(1);

  const shape = (concurrency: number) =>
    options.best ? { localConcurrency: best.loops, batchSize: best.batchSize } : { localConcurrency: concurrency, batchSize: 1 };

  const noop = (data: BenchJob) => async () => {
    ctx.book.start(data, nowMs());
    ctx.book.finish(data, nowMs());
  };

  return {
    name,
    durable: true,
    workers: 'in-process',
    get settings() {
      const c = ctx?.concurrency ?? 0;
      const { localConcurrency, batchSize } = shape(c);
      const pool = Math.max(10, c + 2);
      return options.best
        ? `useListenNotify=true, queue notify=true, localConcurrency=${localConcurrency}, batchSize=${batchSize}, burstWhenBatchFull=true, max=${pool}, jobs of a batch run through a shared semaphore of C slots; effect workload: transactional=true (the writes and the completion of a batch commit together)`
        : `localConcurrency=C (=${localConcurrency}), max=${pool}, everything else default (batchSize=1, pollingIntervalSeconds=2, no LISTEN/NOTIFY); effect workload: transactional=true (the workload asks for the write inside the job's transaction)`;
    },
    designCeiling(concurrency) {
      return options.best ? Number.POSITIVE_INFINITY : concurrency / DEFAULT_POLLING_SECONDS;
    },
    async setup(c) {
      ctx = c;
      slot = semaphore(c.concurrency);
      boss = new PgBoss({
        connectionString: c.pgUrl,
        max: Math.max(10, c.concurrency + 2),
        ...(options.best ? { useListenNotify: true } : {}),
      });
      boss.on('error', (error) => c.log(`pg-boss error: ${error.message}`));
      await boss.start();
      await boss.createQueue(QUEUE, options.best ? { notify: true } : {});
    },
    async enqueueBulk(jobs) {
      for (let i = 0; i < jobs.length; i += BULK_CHUNK) {
        await boss!.insert(QUEUE, jobs.slice(i, i + BULK_CHUNK).map((data) => ({ data })));
      }
    },
    async enqueueOne(job) {
      await boss!.send(QUEUE, job);
    },
    async analyze() {
      await analyzeSchema(ctx.sql, 'pgboss');
    },
    async startWorkers(workload) {
      const { localConcurrency, batchSize } = shape(ctx.concurrency);
      const polling = options.best ? { burstWhenBatchFull: true } : {};
      if (workload === 'effect') {
        // `transactional`: the effect rows commit together with the completion of the batch.
        workerId = await boss!.work(
          QUEUE,
          { localConcurrency, batchSize, ...polling, transactional: true },
          async (jobs: Job<object>[], tx) => {
            // One transaction is one connection: its statements run one after another.
            for (const job of jobs) {
              const data = job.data as BenchJob;
              ctx.book.start(data, nowMs());
              await tx.executeSql('INSERT INTO bench_effects (system, round, seq) VALUES ($1, $2, $3)', [name, data.r, data.s]);
              ctx.book.finish(data, nowMs());
            }
          },
        );
      } else {
        workerId = await boss!.work(QUEUE, { localConcurrency, batchSize, ...polling }, async (jobs: Job<object>[]) => {
          await Promise.all(jobs.map((job) => slot(noop(job.data as BenchJob))));
        });
      }
    },
    async stopWorkers() {
      if (workerId) await boss!.offWork(QUEUE, { wait: true });
      workerId = undefined;
    },
    async incomplete() {
      const [row] = await ctx.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pgboss.job WHERE name = ${QUEUE} AND state <> 'completed'`;
      return row?.n ?? 0;
    },
    async reset() {
      await boss!.deleteAllJobs(QUEUE);
    },
    async close() {
      await boss?.stop({ graceful: true, timeout: 10_000 });
    },
  };
}
