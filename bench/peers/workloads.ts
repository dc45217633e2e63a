// The three workloads, driven identically for every system: (a) burn-down, (b) steady producer,
// (c) burn-down whose handler writes one row. Each round is verified (counts) before it returns.
import { CpuMeter } from './cpu.ts';
import { intervalLine, latencyPercentiles, type RoundResult } from './report.ts';
import type { BenchJob, SystemAdapter, SystemContext, Workload } from './system.ts';
import { anchorWallClock, nowMs, type RoundTally } from './tally.ts';
import { pgStatementsProbe } from './pg-statements.ts';

export interface RoundOptions {
  /** Drain deadline of one round in ms; a round that misses it counts what is missing as lost. */
  timeoutMs: number;
  /** Every this many ms an INTERVAL line. */
  intervalMs: number;
  /** PIDs of servers whose CPU every system pays for. */
  serverPids: () => number[];
  print: (line: string) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Jobs done so far: handler returns in-process, or what an external adapter's store reports. */
async function doneCount(adapter: SystemAdapter, tally: RoundTally): Promise<number> {
  if (adapter.workers === 'in-process') return tally.finished;
  return (await adapter.collect?.(tally.round)) ?? 0;
}

/** Prints an INTERVAL line every `intervalMs` until stopped; the count comes from `done()`. */
function intervals(
  labels: { system: string; workload: Workload; round: number },
  done: () => Promise<number>,
  options: RoundOptions,
): { stop(): Promise<void> } {
  const t0 = nowMs();
  let last = 0;
  let lastAt = t0;
  let busy: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    busy = busy.then(async () => {
      const n = await done().catch(() => last);
      const at = nowMs();
      options.print(
        intervalLine({ ...labels, tS: (at - t0) / 1000, done: n, rate: ((n - last) * 1000) / Math.max(1, at - lastAt) }),
      );
      last = n;
      lastAt = at;
    });
  }, options.intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await busy;
    },
  };
}

/**
 * Waits until every job of the round has run and the store says complete. Returns the instant the
 * store first reported completion (NaN on timeout) and what was still incomplete then.
 */
async function drain(
  adapter: SystemAdapter,
  tally: RoundTally,
  deadline: number,
): Promise<{ completedAt: number; incomplete: number }> {
  // In-process handlers report their returns: no need to query the store until they all returned.
  if (adapter.workers === 'in-process') {
    while (tally.finished < tally.size && nowMs() < deadline) await sleep(5);
  }
  for (;;) {
    const incomplete = await adapter.incomplete(tally.round, tally.size);
    if (incomplete === 0) return { completedAt: nowMs(), incomplete };
    if (nowMs() >= deadline) return { completedAt: Number.NaN, incomplete };
    // External systems are polled through their database: keep that load small (the exact completion
    // instant comes from lastCompletion(), not from this poll).
    await sleep(adapter.workers === 'in-process' ? 20 : 250);
  }
}

function firstStart(tally: RoundTally): number {
  let min = Number.POSITIVE_INFINITY;
  for (const at of tally.startedAt) if (at < min) min = at;
  return Number.isFinite(min) ? min : Number.NaN;
}

async function verify(
  adapter: SystemAdapter,
  ctx: SystemContext,
  tally: RoundTally,
  incompleteInStore: number,
  workload: Workload,
): Promise<{ lost: number; duplicated: number; unexpected: number }> {
  if (adapter.collect) {
    // External workers: the starts (and how often each job started) come from the system's store.
    await adapter.collect(tally.round, (job, at, executions) => {
      for (let k = 0; k < Math.max(1, executions); k++) tally.start(job, at);
    });
  }
  // A job the handler ran but the store does not hold as complete is not done either; counted once.
  const ranButIncomplete = Math.max(0, incompleteInStore - (tally.size - tally.started));
  const v = tally.verdict(ranButIncomplete);
  let lost = v.lost;
  let duplicated = v.duplicated;
  if (workload === 'effect') {
    const [row] = await ctx.sql<{ total: number; distinct: number }[]>`
      SELECT count(*)::int AS total, count(DISTINCT seq)::int AS distinct
      FROM bench_effects WHERE system = ${adapter.name} AND round = ${tally.round}`;
    const total = row?.total ?? 0;
    const distinct = row?.distinct ?? 0;
    lost = Math.max(lost, tally.size - distinct);
    duplicated = Math.max(duplicated, total - distinct);
  }
  return { lost, duplicated, unexpected: v.unexpected };
}

/** (a) and (c): bulk enqueue with no worker running, ANALYZE, then drain. */
export async function burnDown(
  adapter: SystemAdapter,
  ctx: SystemContext,
  workload: 'burn' | 'effect',
  jobs: number,
  round: number,
  options: RoundOptions,
): Promise<RoundResult> {
  await adapter.reset();
  // The round's instants on the wall clock as it is now: some systems' come from their database's clock.
  anchorWallClock();
  const tally = ctx.book.open(jobs);
  const t = nowMs();
  const batch: BenchJob[] = Array.from({ length: jobs }, (_, s) =>
    workload === 'effect' ? { r: tally.round, s, t, e: 1 } : { r: tally.round, s, t },
  );
  const enq0 = nowMs();
  await adapter.enqueueBulk(batch);
  const enqueuePerS = (jobs * 1000) / Math.max(1, nowMs() - enq0);
  await adapter.analyze?.();

  const statements = await pgStatementsProbe(ctx.sql);
  await statements?.begin();
  const cpu = new CpuMeter(() => [...options.serverPids(), ...(adapter.externalPids?.() ?? [])]);
  cpu.begin();
  const deadline = nowMs() + options.timeoutMs;
  const ticker = intervals({ system: adapter.name, workload, round }, () => doneCount(adapter, tally), options);
  let outcome: { completedAt: number; incomplete: number };
  try {
    await adapter.startWorkers(workload);
    outcome = await drain(adapter, tally, deadline);
  } finally {
    await ticker.stop();
  }
  const used = cpu.end();
  const parts = cpu.breakdown().map((b) => `${b.label}=${b.seconds.toFixed(2)}`);
  ctx.log(`CPU_BREAKDOWN system=${adapter.name} workload=${workload} round=${round} jobs=${jobs} harness=${used.self.toFixed(2)} ${parts.join(' ')}`);
  await statements?.report(`system=${adapter.name} workload=${workload} round=${round}`, jobs, ctx.log);
  await adapter.stopWorkers();
  // After verify: for external workers the start instants arrive through collect().
  const counts = await verify(adapter, ctx, tally, outcome.incomplete, workload);
  const completedAt =
    adapter.lastCompletion && !Number.isNaN(outcome.completedAt) ? await adapter.lastCompletion(tally.round) : outcome.completedAt;
  const seconds = (completedAt - firstStart(tally)) / 1000;
  return {
    system: adapter.name,
    workload,
    round,
    jobs,
    jobsPerS: jobs / seconds,
    enqueuePerS,
    p50Ms: Number.NaN,
    p95Ms: Number.NaN,
    p99Ms: Number.NaN,
    cpuPer1000: (used.total / jobs) * 1000,
    ...counts,
    timedOut: Number.isNaN(outcome.completedAt),
  };
}

/** (b): workers running, one producer enqueuing single jobs at a fixed rate. */
export async function steady(
  adapter: SystemAdapter,
  ctx: SystemContext,
  rate: number,
  seconds: number,
  warmupSeconds: number,
  round: number,
  options: RoundOptions,
): Promise<RoundResult> {
  await adapter.reset();
  const total = Math.max(1, Math.round(rate * seconds));
  const warmup = Math.min(total - 1, Math.round(rate * warmupSeconds));
  const tally = ctx.book.open(total);
  await adapter.startWorkers('steady');
  // The round's instants on the wall clock as it is now: some systems' come from their database's clock.
  // Before the CPU meter starts: the anchor spins up to a millisecond.
  anchorWallClock();
  const statements = await pgStatementsProbe(ctx.sql);
  await statements?.begin();
  const cpu = new CpuMeter(() => [...options.serverPids(), ...(adapter.externalPids?.() ?? [])]);
  cpu.begin();
  const ticker = intervals({ system: adapter.name, workload: 'steady', round }, () => doneCount(adapter, tally), options);
  const inFlight = new Set<Promise<void>>();
  let enqueueErrors = 0;
  let outcome: { completedAt: number; incomplete: number };
  const t0 = nowMs();
  try {
    for (let s = 0; s < total; s++) {
      const due = t0 + (s * 1000) / rate;
      const wait = due - nowMs();
      if (wait > 1) await sleep(wait);
      // A producer that outruns the system must not grow without bound: wait for a slot.
      while (inFlight.size >= 1000) await Promise.race(inFlight);
      const p: Promise<void> = adapter
        .enqueueOne({ r: tally.round, s, t: nowMs() })
        .catch((error: unknown) => {
          enqueueErrors += 1;
          if (enqueueErrors <= 3) options.print(`ENQUEUE_ERROR system=${adapter.name} error=${JSON.stringify(String(error))}`);
        })
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    outcome = await drain(adapter, tally, nowMs() + options.timeoutMs);
  } finally {
    await ticker.stop();
  }
  const produced = (nowMs() - t0) / 1000;
  const used = cpu.end();
  const parts = cpu.breakdown().map((b) => `${b.label}=${b.seconds.toFixed(2)}`);
  ctx.log(`CPU_BREAKDOWN system=${adapter.name} workload=steady round=${round} jobs=${total} harness=${used.self.toFixed(2)} ${parts.join(' ')}`);
  await statements?.report(`system=${adapter.name} workload=steady round=${round}`, total, ctx.log);
  await adapter.stopWorkers();
  const counts = await verify(adapter, ctx, tally, outcome.incomplete, 'steady');
  const measured = Array.from(tally.latencyMs.subarray(warmup));
  const { p50, p95, p99 } = latencyPercentiles(measured);
  return {
    system: adapter.name,
    workload: 'steady',
    round,
    jobs: total,
    jobsPerS: tally.started / produced,
    enqueuePerS: Number.NaN,
    p50Ms: p50,
    p95Ms: p95,
    p99Ms: p99,
    cpuPer1000: (used.total / total) * 1000,
    ...counts,
    timedOut: Number.isNaN(outcome.completedAt),
    rate,
    warmup,
  };
}
