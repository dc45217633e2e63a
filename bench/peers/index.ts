// `npm run bench -- peers [--smoke]`: the same workloads through ours (a default unit, and `ours-group`
// with the opt-in group commit), graphile-worker (default and batched), pg-boss (best and default) and BullMQ, in one invocation, on this machine, against the
// same PostgreSQL 18 and Redis. See bench/peers/README.md for what is measured and how.
import fs from 'node:fs';
import path from 'node:path';
import { describeMachine } from './machine.ts';
import { OptionsError, parsePeersOptions, scaleForCeiling, USAGE, type PeersOptions, type SystemName } from './options.ts';
import { countMismatchLine, renderMarkdown, renderSvg, roundLine, summarize, summaryLine, type RoundResult, type SystemInfo } from './report.ts';
import { startServices, type Services } from './services.ts';
import { EFFECTS_TABLE_DDL, type SystemAdapter, type SystemContext } from './system.ts';
import { TallyBook } from './tally.ts';
import { burnDown, steady, type RoundOptions } from './workloads.ts';
import { createSql, type Sql } from '../../src/db/client.ts';

async function makeAdapter(name: SystemName): Promise<SystemAdapter> {
  switch (name) {
    case 'graphile-worker':
      return (await import('./systems/graphile-worker.ts')).graphileWorker({ batched: false });
    case 'graphile-worker-batched':
      return (await import('./systems/graphile-worker.ts')).graphileWorker({ batched: true });
    case 'pg-boss': {
      // BENCH_PG_BOSS_SHAPE=<loops>,<batchSize> re-runs the search for its fastest batch shape.
      const [loops, batchSize] = (process.env.BENCH_PG_BOSS_SHAPE ?? '').split(',').map(Number);
      const shape = loops && batchSize ? { loops, batchSize } : undefined;
      return (await import('./systems/pg-boss.ts')).pgBoss({ best: true, shape });
    }
    case 'pg-boss-default':
      return (await import('./systems/pg-boss.ts')).pgBoss({ best: false });
    case 'bullmq':
      return (await import('./systems/bullmq.ts')).bullmq();
    case 'ours':
      return (await import('./systems/ours.ts')).ours();
    case 'ours-group':
      return (await import('./systems/ours.ts')).ours({ groupCommit: true });
  }
}

interface Entry {
  adapter: SystemAdapter;
  ctx: SystemContext;
  pool: Sql;
  jobs: number;
  effectJobs: number;
  rate: number;
  scaled?: string;
}

function today(): string {
  return new Date().toISOString().slice(0, 10);
}

export async function main(args: string[]): Promise<number> {
  let options: PeersOptions;
  try {
    options = parsePeersOptions(args);
  } catch (error) {
    if (error instanceof OptionsError) {
      console.error(`${error.code}: ${error.message}`);
      return 2;
    }
    throw error;
  }
  if (options.help) {
    console.log(USAGE);
    return 0;
  }

  const print = (line: string) => console.log(line);
  const log = (line: string) => console.error(`# ${line}`);
  const failures: string[] = [];
  const results: RoundResult[] = [];
  const book = new TallyBook();
  const entries: Entry[] = [];
  /** What each system ran with, captured while its adapter is alive. */
  const infos: SystemInfo[] = [];
  let services: Services | undefined;
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    log('interrupted: finishing the current round, then stopping everything');
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const started = Date.now();
  try {
    services = await startServices({ sqs: options.systems.some((s) => s === 'ours' || s === 'ours-group'), log });
    const svc = services;
    const machine = describeMachine({ postgres: svc.postgresVersion, redis: svc.redisVersion });
    log(`machine: ${JSON.stringify(machine)}`);
    log(`options: ${JSON.stringify(options)}`);

    // A system capped by its design gets bursts of about this many seconds of its ceiling.
    const burstSeconds = options.smoke ? 3 : 30;
    // Set every system up first, so rounds can be interleaved across systems.
    let redisDb = 1;
    for (const name of options.systems) {
      let adapter: SystemAdapter;
      try {
        adapter = await makeAdapter(name);
      } catch (error) {
        failures.push(`${name}: cannot load its adapter: ${(error as Error).message}`);
        continue;
      }
      const dbName = `bench_${name.replaceAll('-', '_')}`;
      let pool: Sql | undefined;
      try {
        const pgUrl = await svc.createDatabase(dbName);
        pool = createSql(pgUrl, { max: 3, applicationName: 'bench-harness' });
        await pool.unsafe(EFFECTS_TABLE_DDL);
        const ctx: SystemContext = {
          pgUrl,
          sql: pool,
          redisUrl: `${svc.redis.url}/${redisDb++}`,
          redisPort: svc.redis.port,
          // Queues of the system's own (ours and ours-group share the SQS server, never a queue).
          sqs: { endpoint: svc.sqs?.endpoint ?? '', queueUrlPrefix: svc.sqs ? `${svc.sqs.queueUrlPrefix}${name.replaceAll('-', '_')}_` : '' },
          concurrency: options.concurrency,
          book,
          log,
        };
        log(`setting up ${name}`);
        await adapter.setup(ctx);
        const ceiling = adapter.designCeiling?.(options.concurrency);
        const scaled = scaleForCeiling(ceiling, options, burstSeconds);
        const note = scaled.scaled
          ? `its documented design caps it at ${ceiling} jobs/s with concurrency ${options.concurrency}, so it ran ${scaled.jobs} burn-down jobs, ${scaled.effectJobs} effect jobs and a steady rate of ${scaled.rate} jobs/s (about ${burstSeconds} s of its ceiling per round) instead of ${options.jobs}, ${options.effectJobs} and ${options.rate}.`
          : undefined;
        entries.push({ adapter, ctx, pool, jobs: scaled.jobs, effectJobs: scaled.effectJobs, rate: scaled.rate, scaled: note });
        infos.push({ name, durable: adapter.durable, settings: adapter.settings, scaled: note });
      } catch (error) {
        failures.push(`${name}: setup failed: ${(error as Error).message}`);
        log(`${name}: setup failed: ${(error as Error).stack}`);
        await adapter.close().catch(() => {});
        await pool?.end({ timeout: 5 });
      }
    }

    const roundOptions: RoundOptions = {
      timeoutMs: options.timeoutSeconds * 1000,
      intervalMs: 1000,
      serverPids: () => svc.serverPids(),
      print,
    };
    const record = (r: RoundResult) => {
      results.push(r);
      print(roundLine(r));
      const line = countMismatchLine(r);
      if (line) {
        print(line);
        console.error(`!!! ${line}`);
        failures.push(line);
      }
    };
    const guarded = async (entry: Entry, label: string, fn: () => Promise<RoundResult>, jobs: number, workload: RoundResult['workload'], round: number) => {
      if (interrupted) return;
      try {
        record(await fn());
      } catch (error) {
        log(`${entry.adapter.name} ${label} failed: ${(error as Error).stack}`);
        failures.push(`${entry.adapter.name} ${label}: ${(error as Error).message}`);
        await entry.adapter.stopWorkers().catch(() => {});
        record({
          system: entry.adapter.name, workload, round, jobs, jobsPerS: Number.NaN, enqueuePerS: Number.NaN,
          p50Ms: Number.NaN, p95Ms: Number.NaN, p99Ms: Number.NaN, cpuPer1000: Number.NaN,
          lost: jobs, duplicated: 0, unexpected: 0, timedOut: true,
        });
      }
    };

    // Warm-up: a verified burn-down per system, excluded from the medians.
    for (const e of entries) {
      const jobs = Math.max(1, Math.min(e.jobs, options.smoke ? 20 : Math.max(200, Math.ceil(e.jobs / 10))));
      await guarded(e, 'warm-up', () => burnDown(e.adapter, e.ctx, 'burn', jobs, 0, roundOptions), jobs, 'burn', 0);
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const e of entries) {
        await guarded(e, `burn round ${round}`, () => burnDown(e.adapter, e.ctx, 'burn', e.jobs, round, roundOptions), e.jobs, 'burn', round);
      }
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const e of entries) {
        const total = Math.round(e.rate * options.steadySeconds);
        await guarded(
          e,
          `steady round ${round}`,
          () => steady(e.adapter, e.ctx, e.rate, options.steadySeconds, options.steadyWarmupSeconds, round, roundOptions),
          total,
          'steady',
          round,
        );
      }
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const e of entries) {
        await guarded(e, `effect round ${round}`, () => burnDown(e.adapter, e.ctx, 'effect', e.effectJobs, round, roundOptions), e.effectJobs, 'effect', round);
      }
    }

    // A job of an earlier round that ran again later still counts against that round.
    for (const [roundId, tally] of book.rounds) {
      const v = tally.verdict();
      if (v.duplicated > 0) log(`round ${roundId}: ${v.duplicated} duplicate execution(s) in total at the end`);
    }
    if (book.strays > 0) failures.push(`${book.strays} execution(s) of jobs no round enqueued`);

    // Close the systems before writing anything, so no late log line lands after the SUMMARY lines.
    for (const e of entries) {
      await e.adapter.close().catch((error: unknown) => log(`${e.adapter.name}: close failed: ${(error as Error).message}`));
      await e.pool.end({ timeout: 5 });
    }
    entries.length = 0;

    const date = today();
    const stem = options.smoke ? `peers-smoke-${date}` : `peers-${date}`;
    fs.mkdirSync(options.outDir, { recursive: true });
    const svgFile = `${stem}.svg`;
    fs.writeFileSync(
      path.join(options.outDir, svgFile),
      renderSvg(infos, results, `Peers benchmark ${date}: concurrency ${options.concurrency}, ${machine.nproc} CPUs`),
    );
    const notes: string[] = [];
    if (failures.length > 0) notes.push(`**Failures in this run:** ${failures.map((f) => f.replaceAll('|', '\\|')).join('; ')}`);
    notes.push(`Wall time of the whole invocation: ${((Date.now() - started) / 1000).toFixed(0)} s.`);
    const md = renderMarkdown({
      date,
      smoke: options.smoke,
      machine,
      concurrency: options.concurrency,
      rounds: options.rounds,
      burnJobs: options.jobs,
      effectJobs: options.effectJobs,
      steadyRate: options.rate,
      steadySeconds: options.steadySeconds,
      steadyWarmupSeconds: options.steadyWarmupSeconds,
      systems: infos,
      results,
      plotFile: svgFile,
      notes,
    });
    const mdFile = path.join(options.outDir, `${stem}.md`);
    fs.writeFileSync(mdFile, md);
    await svc.stop();
    services = undefined;
    log(`results: ${mdFile}`);
    for (const f of failures) console.error(`!!! FAILURE ${f}`);

    // The last lines: exactly one per requested system.
    for (const name of options.systems) {
      print(summaryLine(summarize(name, infos.find((i) => i.name === name)?.durable ?? true, results)));
    }
    return failures.length > 0 || interrupted ? 1 : 0;
  } finally {
    for (const e of entries) {
      await e.adapter.close().catch(() => {});
      await e.pool.end({ timeout: 5 }).catch(() => {});
    }
    await services?.stop();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

