// `npm run bench -- fairness [--smoke]`: one tenant's burst must not starve the others, and a tenant
// alone must not be held back. Tenant A dumps --runs runs at once (in transactions of 500 while the relay
// is paused: the burst waits in the outbox), then the relay resumes and, from --victim-delay-ms after
// that (A's burst is alone meanwhile, so B arrives behind whatever a lone burst may have in flight),
// tenant B dispatches --rate runs/s (one per transaction, wake signal after commit) for the rest of the
// drain. Measured: B's dispatch → started latency (payload instant → `started` trail event, database
// clock) and the drain throughput (A's and B's runs finished by A's last one / (that instant − resume)),
// in three modes of one invocation, against the same PostgreSQL, Redis, SQS server and workers process
// (bench/peers): `fair` (SVC_TENANT_INFLIGHT_MAX = --cap, SVC_TENANT_INFLIGHT_LONE_MAX = --lone-max),
// `lone` (the same relay, no tenant B: a lone burst) and `unfair` (fairness off, 0). `lone` is measured
// twice and `unfair`, the baseline, three times, in turns (fair, unfair, lone, unfair, lone, unfair),
// and the ratios are of their means: the machine's speed drifts from one mode to the next (on this
// project's VM, up to ±20 % between two 20-second modes) and each mode runs on the larger tables the
// ones before it left, so one mode of each would put that drift on one side of a ratio.
// Before the first mode, --warmup runs (default 2,000) pass through the workers unmeasured, so the
// mode measured first does not carry the workers' JIT warm-up alone.
//
// Lines (stdout, fixed format):
//   INTERVAL mode=<fair|lone|unfair> t_s=<n> a_done=<n> b_done=<n> b_p99_ms=<n> a_in_flight=<n> count_ms=<n>
//     per second of the drain; b_p99_ms over B's runs started in that second; a_in_flight is the
//     relay's own count for A (sql/work/0018_tenant-fairness.sql) and count_ms how long that count took.
//   MODE mode=<m> runs=<n> seconds=<n> runs_per_s=<n> victim_p50_ms=<n> victim_p99_ms=<n> lost=<n> duplicated=<n>
//   CPU mode=<m> ms_per_run=<n> <process>=<ms per run> ...
//     CPU of the drain per run (harness with the in-process SQS server, PostgreSQL, Redis, relay,
//     workers; bench/peers/cpu.ts): what fairness costs end to end.
//   GROUPS mode=<m> runs_per_commit=<n>
//     A's runs per finishing transaction: 1 for the default unit the bench runs; with BENCH_GROUP_COMMIT=true, how full the groups were.
//   COST inflight_index_bytes=<n> pending_index_bytes=<n> count_ms_p50=<n> count_ms_max=<n>
//     what the in-flight accounting costs: its partial index holds the runs in flight, not the backlog.
//   SUMMARY victim_p99_ms=<n> unfair_victim_p99_ms=<n> throughput_ratio=<fair/unfair> lone_throughput_ratio=<lone/unfair> (lone, unfair: the means of their turns)
//           lone_cpu_ratio=<lone/unfair CPU ms per run> lost=<n> duplicated=<n>
//   With BENCH_PG_STATEMENTS=true, each mode's statements per run on stderr (bench/peers/pg-statements.ts).
// Targets (reported against, not asserted): victim_p99_ms ≤ 150, lone_throughput_ratio ≥ 0.9, lone_cpu_ratio
// ≤ 1, nothing lost or duplicated. Exit code 1 when anything is lost or duplicated.
import type { Sql } from '../src/db/client.ts';
import { DEFAULT_TENANT_INFLIGHT_MAX } from '../src/config/workers.ts';
import { startServices, type Services } from './peers/services.ts';
import { CpuMeter } from './peers/cpu.ts';
import { num, percentile } from './peers/stats.ts';
import { createBenchTenant, dispatchJobs, prepareOurs, spawnOurs, type OursStack } from './peers/systems/ours.ts';
import type { BenchJob } from './peers/system.ts';
import { anchorWallClock, nowMs } from './peers/tally.ts';
import { applyNumericFlags } from './numeric-flags.ts';
import { pgStatementsProbe } from './peers/pg-statements.ts';

interface FairnessOptions {
  smoke: boolean;
  unfairFirst: boolean;
  runs: number;
  rate: number;
  cap: number;
  /** SVC_TENANT_INFLIGHT_LONE_MAX; null: unset, each queue's room from its units (the service's default). */
  loneMax: number | null;
  victimDelayMs: number;
  concurrency: number;
  warmup: number;
  timeoutSeconds: number;
}

const USAGE = `usage: npm run bench -- fairness [--smoke] [--unfair-first] [--runs N] [--rate N] [--cap N] [--lone-max N] [--victim-delay-ms N] [--concurrency N] [--warmup N] [--timeout-seconds N]
  defaults: --runs 20000 --rate 20 --cap ${DEFAULT_TENANT_INFLIGHT_MAX} (SVC_TENANT_INFLIGHT_MAX's default) --lone-max unset (as SVC_TENANT_INFLIGHT_LONE_MAX's default: the queue's room from its units, here concurrency + twice the cap; 1: none) --victim-delay-ms 2000 --concurrency 10 --warmup 2000 (smoke: 400 runs, no warm-up, victim delay 300)`;

export function parseFairnessOptions(args: readonly string[]): FairnessOptions {
  const smoke = args.includes('--smoke');
  const o: FairnessOptions = {
    smoke,
    unfairFirst: args.includes('--unfair-first'),
    runs: smoke ? 400 : 20_000,
    rate: 20,
    cap: DEFAULT_TENANT_INFLIGHT_MAX,
    loneMax: null,
    victimDelayMs: smoke ? 300 : 2_000,
    concurrency: 10,
    warmup: smoke ? 0 : 2_000,
    timeoutSeconds: smoke ? 60 : 900,
  };
  const keys: Record<string, keyof FairnessOptions> = {
    '--runs': 'runs',
    '--rate': 'rate',
    '--cap': 'cap',
    '--lone-max': 'loneMax',
    '--victim-delay-ms': 'victimDelayMs',
    '--concurrency': 'concurrency',
    '--warmup': 'warmup',
    '--timeout-seconds': 'timeoutSeconds',
  };
  applyNumericFlags(args.filter((a) => a !== '--unfair-first'), keys, o, USAGE, { integers: true });
  return o;
}

type Mode = 'fair' | 'lone' | 'unfair';

interface ModeResult {
  mode: Mode;
  cpuPerRun: number;
  runs: number;
  seconds: number;
  runsPerS: number;
  victimP50: number;
  victimP99: number;
  lost: number;
  duplicated: number;
  countMs: number[];
}

/** Per run of a tenant: dispatch instant (payload t), first `started`, number of `started`, succeeded. */
async function tenantRuns(sql: Sql, tenantId: string, sinceMs = 0) {
  return sql<{ t: number; started_ms: number | null; starts: number; succeeded: boolean; finished_ms: number | null }[]>`
    SELECT (o.envelope->'payload'->>'t')::float8 AS t,
           (extract(epoch FROM e.first_start) * 1000)::float8 AS started_ms,
           coalesce(e.starts, 0)::int AS starts,
           r.status = 'succeeded' AS succeeded,
           (extract(epoch FROM r.finished_at) * 1000)::float8 AS finished_ms
      FROM task_runs r
      JOIN outbox_messages o ON o.run_id = r.run_id
      LEFT JOIN LATERAL (
        SELECT min(occurred_at) AS first_start, count(*) AS starts
          FROM task_run_events ev WHERE ev.run_id = r.run_id AND ev.event = 'started') e ON true
     WHERE r.tenant_id = ${tenantId}
       ${sinceMs > 0 ? sql`AND e.first_start >= to_timestamp(${sinceMs / 1000}::float8)` : sql``}`;
}

async function doneCount(sql: Sql, tenantId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM task_runs WHERE tenant_id = ${tenantId} AND status = 'succeeded'`;
  return row?.n ?? 0;
}

/** The relay's own in-flight count of one tenant (the partial index), and how long it took. */
async function inFlight(sql: Sql, tenantId: string): Promise<{ n: number; ms: number }> {
  const started = nowMs();
  const [row] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM task_runs r
     WHERE r.tenant_id = ${tenantId} AND r.queue = 'default'
       AND (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at))
       AND (SELECT p.sent_at IS NULL FROM outbox_messages p WHERE p.run_id = r.run_id) IS NOT TRUE`;
  return { n: row?.n ?? 0, ms: nowMs() - started };
}

async function runMode(
  stack: OursStack,
  services: Services,
  workersPid: number,
  o: FairnessOptions,
  mode: Mode,
  round: number,
  print: (line: string) => void,
  log: (line: string) => void,
): Promise<ModeResult> {
  const sql = stack.sql;
  const relay = await spawnOurs('relay', {
    ...stack.env,
    BENCH_RELAY_PAUSED: 'true',
    BENCH_TENANT_INFLIGHT_MAX: String(mode === 'unfair' ? 0 : o.cap),
    ...(mode === 'unfair' || o.loneMax !== null ? { BENCH_TENANT_INFLIGHT_LONE_MAX: String(mode === 'unfair' ? 0 : o.loneMax) } : {}),
    BENCH_SQS_FAIR_GROUPS: 'true',
  });
  try {
    const a = await createBenchTenant(sql, `${mode}-${round}-a`);
    const b = await createBenchTenant(sql, `${mode}-${round}-b`);
    // The mode's instants on the wall clock as it is now: the runs' starts come from the database's clock.
    anchorWallClock();
    const dumpAt = nowMs();
    const burst: BenchJob[] = Array.from({ length: o.runs }, (_, s) => ({ r: round, s, t: dumpAt }));
    await dispatchJobs(stack, a, burst);
    await sql.unsafe('ANALYZE task_runs');
    await sql.unsafe('ANALYZE outbox_messages');
    log(`${mode}: tenant A dumped ${o.runs} runs in ${num((nowMs() - dumpAt) / 1000)} s; resuming the relay`);

    const cpu = new CpuMeter(() => [...services.serverPids(), workersPid, relay.child.pid!]);
    // BENCH_PG_STATEMENTS=true: the drain's statements, per run (bench/peers/pg-statements.ts).
    const statements = await pgStatementsProbe(sql);
    await statements?.begin();
    cpu.begin();
    const resumedAt = nowMs();
    await relay.command('resume');
    let bSent = 0;
    let producing = true;
    const producer = (async () => {
      if (mode === 'lone') return;
      const every = 1000 / o.rate;
      while (producing) {
        const due = resumedAt + o.victimDelayMs + bSent * every;
        const wait = due - nowMs();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (!producing) break;
        await dispatchJobs(stack, b, [{ r: round, s: bSent, t: nowMs() }], 1);
        bSent += 1;
      }
    })();

    const countMs: number[] = [];
    const deadline = resumedAt + o.timeoutSeconds * 1000;
    let aDone = 0;
    let second = 0;
    let lastTick = resumedAt;
    try {
      while (aDone < o.runs && nowMs() < deadline) {
        await new Promise((r) => setTimeout(r, Math.max(0, lastTick + 1000 - nowMs())));
        const tickStart = lastTick;
        lastTick = nowMs();
        second += 1;
        aDone = await doneCount(sql, a);
        const bDone = await doneCount(sql, b);
        const window = (await tenantRuns(sql, b, tickStart)).filter((r) => r.started_ms !== null).map((r) => r.started_ms! - r.t);
        const f = await inFlight(sql, a);
        countMs.push(f.ms);
        print(
          `INTERVAL mode=${mode} t_s=${second} a_done=${aDone} b_done=${bDone} b_p99_ms=${num(percentile(window, 99))} ` +
            `a_in_flight=${f.n} count_ms=${num(f.ms, 2)}`,
        );
      }
    } finally {
      producing = false;
      await producer.catch((error: unknown) => log(`producer failed: ${String(error)}`));
    }
    // The drain ends when B's runs are done too: with fairness off they wait behind the whole burst, so
    // this can take as long again (bounded by --timeout-seconds); what is unfinished then counts as lost.
    while ((await doneCount(sql, b)) < bSent && nowMs() < deadline) await new Promise((r) => setTimeout(r, 100));
    const spent = cpu.end();
    const parts = cpu.breakdown();
    await statements?.report(`mode=${mode}`, o.runs + bSent, log);

    const aRuns = await tenantRuns(sql, a);
    const bRuns = await tenantRuns(sql, b);
    const all = [...aRuns, ...bRuns];
    const lost = all.filter((r) => !r.succeeded).length + (o.runs - aRuns.length) + (bSent - bRuns.length);
    const duplicated = all.reduce((n, r) => n + Math.max(0, r.starts - 1), 0);
    // The drain ends with the burst's last run: B keeps dispatching at its own rate until the harness's
    // next one-second tick notices, and those runs would round the drain up to whole seconds.
    const aLast = Math.max(...aRuns.map((r) => r.finished_ms ?? Number.NaN).filter((v) => Number.isFinite(v)));
    const drained = all.filter((r) => r.finished_ms !== null && r.finished_ms <= aLast).length;
    const seconds = (aLast - resumedAt) / 1000;
    const victim = bRuns.filter((r) => r.started_ms !== null).map((r) => r.started_ms! - r.t);
    const result: ModeResult = {
      mode,
      cpuPerRun: (spent.total * 1000) / all.length,
      runs: all.length,
      seconds,
      runsPerS: drained / seconds,
      victimP50: percentile(victim, 50),
      victimP99: percentile(victim, 99),
      lost,
      duplicated,
      countMs,
    };
    // How many of A's runs each finishing transaction carried: a `groupCommit` unit's groups are only as
    // large as what the relay keeps in flight (40 in flight over 10 slots: about 4 a group).
    const [commits] = await sql<{ runs: number; commits: number }[]>`
      SELECT count(*)::int AS runs, count(DISTINCT e.xmin::text)::int AS commits FROM task_run_events e JOIN task_runs r ON r.run_id = e.run_id
       WHERE r.tenant_id = ${a} AND e.event = 'succeeded'`;
    print(`GROUPS mode=${mode} runs_per_commit=${num(commits!.runs / commits!.commits, 2)}`);
    const perRun = (seconds: number) => num((seconds * 1000) / result.runs, 3);
    print(
      `CPU mode=${mode} ms_per_run=${perRun(spent.total)} harness=${perRun(spent.self)} ` +
        parts.map((p) => `${p.label}=${perRun(p.seconds)}`).join(' '),
    );
    print(
      `MODE mode=${mode} runs=${result.runs} seconds=${num(seconds, 2)} runs_per_s=${num(result.runsPerS)} ` +
        `victim_p50_ms=${num(result.victimP50)} victim_p99_ms=${num(result.victimP99)} lost=${lost} duplicated=${duplicated}`,
    );
    return result;
  } finally {
    await relay.stop();
  }
}

/**
 * Unmeasured: --warmup runs through the workers and a relay (fairness off) before the first mode, so
 * neither mode pays the workers' JIT warm-up (the mode measured first would otherwise carry it alone).
 */
async function warmUp(stack: OursStack, o: FairnessOptions, log: (line: string) => void): Promise<void> {
  if (o.warmup === 0) return;
  const relay = await spawnOurs('relay', { ...stack.env, BENCH_TENANT_INFLIGHT_MAX: '0' });
  try {
    const w = await createBenchTenant(stack.sql, 'warmup');
    const started = nowMs();
    await dispatchJobs(stack, w, Array.from({ length: o.warmup }, (_, s) => ({ r: 0, s, t: nowMs() })));
    const deadline = started + o.timeoutSeconds * 1000;
    while ((await doneCount(stack.sql, w)) < o.warmup && nowMs() < deadline) await new Promise((r) => setTimeout(r, 100));
    log(`warm-up: ${o.warmup} runs in ${num((nowMs() - started) / 1000)} s (not measured)`);
  } finally {
    await relay.stop();
  }
}

export async function main(args: string[]): Promise<number> {
  let o: FairnessOptions;
  try {
    o = parseFairnessOptions(args);
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const print = (line: string) => console.log(line);
  const log = (line: string) => console.error(`# ${line}`);
  log(`runs=${o.runs} rate=${o.rate}/s cap=${o.cap} concurrency=${o.concurrency} (workers process: unit concurrency, pool 2C+2)`);
  let services: Services | undefined;
  const results: ModeResult[] = [];
  let cost: string;
  try {
    services = await startServices({ sqs: true, log });
    const pgUrl = await services.createDatabase('bench_fairness');
    const stack = await prepareOurs({
      pgUrl,
      redisUrl: `${services.redis.url}/1`,
      sqs: { endpoint: services.sqs!.endpoint, queueUrlPrefix: services.sqs!.queueUrlPrefix },
      concurrency: o.concurrency,
      log,
    });
    // The workers wake a capped relay as runs finish, as SVC_TENANT_INFLIGHT_MAX > 0 has them do (harmless with the cap off).
    const workers = await spawnOurs('workers', { ...stack.env, BENCH_ROOM_SIGNALS: 'true' });
    try {
      await warmUp(stack, o, log);
      // Each mode runs on a larger task_runs than the one before (their runs stay), and the machine's
      // speed drifts: `lone` and `unfair` in turns spread both over the two sides of the lone ratios.
      // The mode measured first pays a little more (one order measured 0.91, the other 1.09 on the same
      // code): --unfair-first turns the order round, to check a ratio against it.
      const turns: Mode[] = ['unfair', 'lone', 'unfair', 'lone', 'unfair'];
      const order: Mode[] = o.unfairFirst ? [...turns, 'fair'] : ['fair', ...turns];
      for (const [i, mode] of order.entries()) results.push(await runMode(stack, services, workers.child.pid!, o, mode, i + 1, print, log));
      const [sizes] = await stack.sql<{ inflight: number; pending: number }[]>`
        SELECT pg_relation_size('task_runs_in_flight')::float8 AS inflight,
               pg_relation_size('outbox_messages_due_by_tenant')::float8 AS pending`;
      const counts = results[0]!.countMs;
      cost =
        `COST inflight_index_bytes=${sizes!.inflight} pending_index_bytes=${sizes!.pending} ` +
        `count_ms_p50=${num(percentile(counts, 50), 2)} count_ms_max=${num(Math.max(...counts), 2)}`;
    } finally {
      await workers.stop();
      await stack.close();
    }
  } finally {
    await services?.stop();
  }
  const fair = results.find((r) => r.mode === 'fair')!;
  // `lone` and `unfair` by the mean of their turns (unfair's victim p99: the worst).
  const meanOf = (mode: Mode) => {
    const turns = results.filter((r) => r.mode === mode);
    const mean = (f: (r: ModeResult) => number) => turns.reduce((n, r) => n + f(r), 0) / turns.length;
    log(`${mode}: ${turns.map((r) => `${num(r.runsPerS)} runs/s at ${num(r.cpuPerRun, 3)} ms a run`).join(', then ')}`);
    return { runsPerS: mean((r) => r.runsPerS), cpuPerRun: mean((r) => r.cpuPerRun), victimP99: Math.max(...turns.map((r) => r.victimP99)) };
  };
  const lone = meanOf('lone');
  const unfair = meanOf('unfair');
  const lost = results.reduce((n, r) => n + r.lost, 0);
  const duplicated = results.reduce((n, r) => n + r.duplicated, 0);
  const ratio = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : 'nan');
  print(cost);
  print(
    `SUMMARY victim_p99_ms=${num(fair.victimP99)} unfair_victim_p99_ms=${num(unfair.victimP99)} ` +
      `throughput_ratio=${ratio(fair.runsPerS / unfair.runsPerS)} lone_throughput_ratio=${ratio(lone.runsPerS / unfair.runsPerS)} ` +
      `lone_cpu_ratio=${ratio(lone.cpuPerRun / unfair.cpuPerRun)} lost=${lost} duplicated=${duplicated}`,
  );
  return lost > 0 || duplicated > 0 ? 1 : 0;
}
