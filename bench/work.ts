// `npm run bench -- work [--smoke]`: the work runtime alone. Dispatch-to-succeeded throughput
// (runs/s) of a no-op tenant task and dispatch-to-started latency (p50, p99), with the relay inside
// the workers process as SVC_RELAY=true deploys it (bench/peers/ours-process.ts), plus a raw baseline in the same run:
// plain SendMessageBatch + ReceiveMessage/DeleteMessageBatch on the same SQS server, no database.
// The fixture is a default unit (what every shipped unit is): SUMMARY reports it. Then, unless
// `--unit default`, the same rounds run with the opt-in group commit and print their ROUND lines
// (system=ours-group) and one line, before SUMMARY:
//   MODE system=ours-group runs_per_s=<n> p50_ms=<n> p99_ms=<n> cpu_ms_per_run=<n> lost=<n> duplicated=<n>
// Last line, exactly: SUMMARY runs_per_s=<n> p50_ms=<n> p99_ms=<n> lost=<n> duplicated=<n> baseline_ratio=<x> cpu_ms_per_run=<n>
// (p50/p99: the steady producer at --rate, 200 runs/s by default; cpu_ms_per_run: median over the burn-down
// rounds of the CPU of every process involved — this process with the in-process SQS server, PostgreSQL's
// postmaster and backends, redis-server, the workers process with its relay — divided by the runs drained.)
//
// Throughput is a burn-down (runs dispatched while the relay is paused, then drained: runs / (last
// `succeeded` − first `started`)); latency comes from a steady producer dispatching one run per
// transaction at a fixed rate, with the wake signal after each commit. Targets (reported
// against, not asserted): ≥ 1,000 runs/s, p50 < 20 ms, p99 < 100 ms, nothing lost or duplicated.
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { createSql, type Sql } from '../src/db/client.ts';
import { createSqsClient } from '../src/queue/client.ts';
import { countMismatchLine, roundLine, type RoundResult } from './peers/report.ts';
import { startServices, type Services } from './peers/services.ts';
import { num, spread } from './peers/stats.ts';
import { gcPauseFields, recordGcPauses } from './peers/gc-pauses.ts';
import { EFFECTS_TABLE_DDL, type SystemContext } from './peers/system.ts';
import { ours, type OursAdapter } from './peers/systems/ours.ts';
import { nowMs, TallyBook } from './peers/tally.ts';
import { burnDown, steady, type RoundOptions } from './peers/workloads.ts';
import { applyNumericFlags } from './numeric-flags.ts';

interface WorkOptions {
  smoke: boolean;
  runs: number;
  rounds: number;
  concurrency: number;
  rate: number;
  seconds: number;
  warmupSeconds: number;
  timeoutSeconds: number;
  /** `both`: the default unit, then the same rounds with group commit; `default`: the default unit alone. */
  unit: 'both' | 'default';
}

const USAGE = `usage: npm run bench -- work [--smoke] [--runs N] [--rounds N] [--concurrency N] [--rate N] [--seconds N] [--unit both|default]
  defaults: --runs 20000 --rounds 3 --concurrency 10 --rate 200 --seconds 20 --unit both (smoke: 200 runs, 1 round, 50/s for 2 s)`;

export function parseWorkOptions(args: readonly string[]): WorkOptions {
  const smoke = args.includes('--smoke');
  const o: WorkOptions = {
    smoke,
    runs: smoke ? 200 : 20_000,
    rounds: smoke ? 1 : 3,
    concurrency: 10,
    rate: smoke ? 50 : 200,
    seconds: smoke ? 2 : 20,
    warmupSeconds: smoke ? 0.5 : 3,
    timeoutSeconds: smoke ? 30 : 900,
    unit: 'both',
  };
  const unitAt = args.indexOf('--unit');
  if (unitAt >= 0) {
    const value = args[unitAt + 1];
    if (value !== 'both' && value !== 'default') throw new Error(`BENCH_BAD_OPTION: --unit ${value ?? ''} (both or default)\n${USAGE}`);
    o.unit = value;
  }
  const numeric = unitAt >= 0 ? [...args.slice(0, unitAt), ...args.slice(unitAt + 2)] : args;
  const keys: Record<string, keyof WorkOptions> = {
    '--runs': 'runs',
    '--rounds': 'rounds',
    '--concurrency': 'concurrency',
    '--rate': 'rate',
    '--seconds': 'seconds',
    '--timeout-seconds': 'timeoutSeconds',
  };
  applyNumericFlags(numeric, keys, o, USAGE, { integers: false });
  if (o.warmupSeconds >= o.seconds) o.warmupSeconds = o.seconds / 4;
  return o;
}

/**
 * The queue server's own ceiling for the same hop: one sender sending `n` messages with
 * SendMessageBatch (10 per call, like the relay) while `loops` receivers ReceiveMessage (10 at a time)
 * and DeleteMessageBatch. messages/s = n / (last delete − first receive). Every body is counted.
 * cpuMsPerMessage: this process's CPU (the hop's client and the in-process SQS server: the whole hop)
 * over the call, per message.
 */
async function rawBaseline(sqs: SQSClient, queueUrl: string, n: number, loops: number, timeoutMs: number) {
  const seen = new Uint32Array(n);
  let deleted = 0;
  let firstReceive = Number.NaN;
  let lastDelete = Number.NaN;
  const deadline = nowMs() + timeoutMs;
  let sending = true;
  const receiver = async () => {
    while (nowMs() < deadline && (sending || deleted < n)) {
      const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      const messages = out.Messages ?? [];
      if (messages.length === 0) continue;
      if (Number.isNaN(firstReceive)) firstReceive = nowMs();
      for (const m of messages) {
        const s = Number(m.Body);
        if (Number.isInteger(s) && s >= 0 && s < n) seen[s] = (seen[s] as number) + 1;
      }
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: messages.map((m, k) => ({ Id: String(k), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
      deleted += messages.length;
      lastDelete = nowMs();
    }
  };
  const cpuBefore = process.cpuUsage();
  const receivers = Array.from({ length: loops }, receiver);
  for (let i = 0; i < n; i += 10) {
    const entries = [];
    for (let s = i; s < Math.min(n, i + 10); s++) entries.push({ Id: String(s - i), MessageBody: String(s) });
    await sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
  }
  sending = false;
  await Promise.all(receivers);
  let lost = 0;
  let duplicated = 0;
  for (const c of seen) {
    if (c === 0) lost += 1;
    if (c > 1) duplicated += c - 1;
  }
  const cpu = process.cpuUsage(cpuBefore);
  return { perS: (n * 1000) / (lastDelete - firstReceive), cpuMsPerMessage: (cpu.user + cpu.system) / 1000 / n, lost, duplicated };
}

/** Figures of one system's measured rounds (round 0, the warm-up, left out). */
function figures(results: readonly RoundResult[]) {
  const measured = (w: RoundResult['workload']) => results.filter((r) => r.workload === w && r.round > 0);
  return {
    runsPerS: spread(measured('burn').map((r) => r.jobsPerS)).median,
    p50: spread(measured('steady').map((r) => r.p50Ms)).median,
    p99: spread(measured('steady').map((r) => r.p99Ms)).median,
    lost: results.reduce((n, r) => n + r.lost + r.unexpected, 0),
    duplicated: results.reduce((n, r) => n + r.duplicated, 0),
    // cpuPer1000 is CPU seconds per 1,000 runs, i.e. CPU milliseconds per run.
    cpuMsPerRun: spread(measured('burn').map((r) => r.cpuPer1000)).median,
  };
}

/**
 * One system's rounds: an unmeasured warm-up burn-down, `o.rounds` burn-downs, `o.rounds` steady
 * rounds. `diagnostics`: after each steady round, where its runs spent their time and the GC pauses.
 */
async function measureSystem(
  adapter: OursAdapter,
  ctx: SystemContext,
  o: WorkOptions,
  roundOptions: RoundOptions,
  record: (r: RoundResult) => void,
  diagnostics: boolean,
): Promise<void> {
  await adapter.setup(ctx);
  try {
    // Round 0, unmeasured: a warm-up of the size peers uses. After 500 runs only, the first measured
    // round still paid a fifth more workers CPU (JIT, heap growth; bench/results/hot-path-levers-2026-11-25.md).
    record(await burnDown(adapter, ctx, 'burn', Math.min(o.runs, o.smoke ? 20 : 5_000), 0, roundOptions));
    for (let round = 1; round <= o.rounds; round++) record(await burnDown(adapter, ctx, 'burn', o.runs, round, roundOptions));
    // BENCH_STEADY_CHECKPOINT=true (a diagnostic, off by default): a CHECKPOINT between the burn-downs
    // and the steady rounds. The burn-downs leave this minutes-old cluster with shared_buffers nearly
    // all dirty, the work tables due for autovacuum and no WAL segment to recycle (a commit that needs a
    // new one waits while it is zero-filled). With it, steady round 1's p99 was 10.5-12.5 ms in six of
    // six runs, 12.8-32.9 ms in ten without (bench/results/hot-path-levers-2026-11-27c.md). Off by
    // default: the steady rounds keep measuring what follows a burst.
    if (process.env.BENCH_STEADY_CHECKPOINT === 'true') {
      const started = nowMs();
      await ctx.sql.unsafe('CHECKPOINT');
      ctx.log(`CHECKPOINT before the steady rounds ms=${num(nowMs() - started, 0)}`);
    }
    // GC pauses of the harness (producer and SQS server) and of the workers process, per steady round.
    const harnessGc = recordGcPauses();
    for (let round = 1; round <= o.rounds; round++) {
      harnessGc.take();
      await adapter.workersGcPauses();
      const result = await steady(adapter, ctx, o.rate, o.seconds, o.warmupSeconds, round, roundOptions);
      const gc = { harness: harnessGc.take(), workers: await adapter.workersGcPauses() };
      record(result);
      if (!diagnostics) continue;
      // Where the round's runs spent their time (docs/performance.md), with the same warm-up skipped.
      const c = await adapter.steadyChain(result.warmup ?? 0);
      ctx.log(
        `STEADY_CHAIN round=${round} runs=${c.runs} queued_ms=${num(c.queuedMs, 2)} sent_ms=${num(c.sentMs, 2)} ` +
          `received_ms=${num(c.receivedMs, 2)} started_ms=${num(c.startedMs, 2)} succeeded_ms=${num(c.succeededMs, 2)}`,
      );
      ctx.log(
        `STEADY_TAIL round=${round} runs=${c.tail.runs} windows_100ms=${c.tail.windows} queued_ms=${num(c.tail.queuedMs, 2)} ` +
          `sent_ms=${num(c.tail.sentMs, 2)} received_ms=${num(c.tail.receivedMs, 2)} started_ms=${num(c.tail.startedMs, 2)}`,
      );
      for (const [name, pauses] of Object.entries(gc)) ctx.log(`STEADY_GC round=${round} ${gcPauseFields(name, pauses)}`);
    }
    harnessGc.stop();
  } finally {
    await adapter.close();
  }
}

export async function main(args: string[]): Promise<number> {
  let o: WorkOptions;
  try {
    o = parseWorkOptions(args);
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const print = (line: string) => console.log(line);
  const log = (line: string) => console.error(`# ${line}`);
  let services: Services | undefined;
  const results: RoundResult[] = [];
  const groupResults: RoundResult[] = [];
  const baselines: number[] = [];
  const sdkBaselines: number[] = [];
  let baselineProblems = 0;
  try {
    services = await startServices({ sqs: true, log });
    const svc = services;
    const pools: Sql[] = [];
    // Each system on a database, Redis database and queues of its own: the group-commit system's
    // workers never meet the default system's runs, messages or keys.
    const contextFor = async (name: string, redisDb: number): Promise<SystemContext> => {
      const pgUrl = await svc.createDatabase(`bench_work_${name.replaceAll('-', '_')}`);
      const pool = createSql(pgUrl, { max: 3, applicationName: 'bench-harness' });
      pools.push(pool);
      await pool.unsafe(EFFECTS_TABLE_DDL);
      return {
        pgUrl,
        sql: pool,
        redisUrl: `${svc.redis.url}/${redisDb}`,
        redisPort: svc.redis.port,
        sqs: { endpoint: svc.sqs!.endpoint, queueUrlPrefix: `${svc.sqs!.queueUrlPrefix}${name.replaceAll('-', '_')}_` },
        concurrency: o.concurrency,
        book: new TallyBook(),
        log,
      };
    };
    try {
      const roundOptions: RoundOptions = {
        timeoutMs: o.timeoutSeconds * 1000,
        intervalMs: 1000,
        serverPids: () => svc.serverPids(),
        print,
      };
      const recordInto = (list: RoundResult[]) => (r: RoundResult) => {
        list.push(r);
        print(roundLine(r));
        const mismatch = countMismatchLine(r);
        if (mismatch) console.error(`!!! ${mismatch}`);
      };
      // The default unit first: what every shipped unit runs, and what SUMMARY reports.
      await measureSystem(ours(), await contextFor('ours', 1), o, roundOptions, recordInto(results), true);
      if (o.unit === 'both') {
        await measureSystem(ours({ groupCommit: true }), await contextFor('ours-group', 2), o, roundOptions, recordInto(groupResults), false);
      }
      // Two clients on the same server, alternated by round: the service's own (direct calls, what
      // baseline_ratio divides by) and the plain AWS SDK client the first figures were taken with
      // (printed for comparison only; docs/performance.md).
      const settings = { region: 'us-east-1', endpoint: svc.sqs!.endpoint, localCredentials: true };
      const clients: Array<{ name: string; sqs: SQSClient; rates: number[] }> = [
        { name: 'direct', sqs: createSqsClient(settings), rates: baselines },
        { name: 'sdk', sqs: createSqsClient(settings, { directCalls: false }), rates: sdkBaselines },
      ];
      try {
        const created = await clients[0]!.sqs.send(new CreateQueueCommand({ QueueName: 'bench-baseline' }));
        for (let round = 1; round <= o.rounds; round++) {
          for (const c of clients) {
            const b = await rawBaseline(c.sqs, created.QueueUrl!, o.runs, o.concurrency, o.timeoutSeconds * 1000);
            print(
              `BASELINE round=${round} client=${c.name} messages=${o.runs} messages_per_s=${num(b.perS)} ` +
                `cpu_ms_per_message=${num(b.cpuMsPerMessage, 3)} lost=${b.lost} duplicated=${b.duplicated}`,
            );
            c.rates.push(b.perS);
            baselineProblems += b.lost + b.duplicated;
          }
        }
      } finally {
        for (const c of clients) c.sqs.destroy();
      }
    } finally {
      for (const pool of pools) await pool.end({ timeout: 5 });
    }
  } finally {
    await services?.stop();
  }

  const { runsPerS, p50, p99, lost, duplicated, cpuMsPerRun } = figures(results);
  const baseline = spread(baselines).median;
  if (baselineProblems > 0) console.error(`!!! the raw baseline itself lost or duplicated ${baselineProblems} message(s)`);
  const sdkBaseline = spread(sdkBaselines).median;
  const ratio = (d: number) => (Number.isFinite(runsPerS / d) ? (runsPerS / d).toFixed(3) : 'nan');
  print(`BASELINES direct_messages_per_s=${num(baseline)} sdk_messages_per_s=${num(sdkBaseline)} ratio_to_sdk=${ratio(sdkBaseline)}`);
  let groupProblems = 0;
  if (groupResults.length > 0) {
    const g = figures(groupResults);
    groupProblems = g.lost + g.duplicated;
    print(
      `MODE system=ours-group runs_per_s=${num(g.runsPerS)} p50_ms=${num(g.p50, 2)} p99_ms=${num(g.p99, 2)} ` +
        `cpu_ms_per_run=${num(g.cpuMsPerRun, 3)} lost=${g.lost} duplicated=${g.duplicated}`,
    );
  }
  print(
    `SUMMARY runs_per_s=${num(runsPerS)} p50_ms=${num(p50, 2)} p99_ms=${num(p99, 2)} lost=${lost} duplicated=${duplicated} ` +
      `baseline_ratio=${ratio(baseline)} ` +
      `cpu_ms_per_run=${num(cpuMsPerRun, 3)}`,
  );
  return lost > 0 || duplicated > 0 || baselineProblems > 0 || groupProblems > 0 ? 1 : 0;
}
