// `npm run bench -- dispatch [--smoke] [--runs N] [--batch N] [--rounds N]`: enqueue
// throughput of the dispatch path alone, on one durable embedded PostgreSQL 18 database in one run:
//   single: one dispatchTask call per run (run, user-actor-free system actor, `queued` event and
//           outbox row written by that call), `batch` calls per transaction;
//   bulk:   one dispatchMany call per transaction of `batch` payloads (multi-row unnest statements);
//   unique: like single, each call with a unique key of its own (the key's advisory lock and lookup);
//   debounce: like unique, with debounceSeconds (the lookup also reads the outbox row).
// Both commit the same number of runs per transaction, so the ratio is the cost of the per-run
// statements the bulk path removes, not of commits. Lines, in order:
//   INTERVAL mode=<single|bulk|unique|debounce> round=<r> t_s=<elapsed> runs=<cumulative> runs_per_s=<rate in the interval>  (about once a second)
//   MODE mode=<single|bulk|unique|debounce> round=<r> runs=<n> seconds=<s> runs_per_s=<n>
//   OPTION option=<unique|debounce> runs_per_s=<n> us_per_run=<n> extra_us_per_run=<over single>  (medians)
//   COUNT_MISMATCH ... (only when rows are missing: the benchmark then exits 1)
// and last, exactly: SUMMARY single_runs_per_s=<n> bulk_runs_per_s=<n> ratio=<bulk/single>
// (the median of the rounds). Targets (reported against, not asserted): bulk ≥ 10,000 runs/s, ratio ≥ 8.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSql, type Sql } from '../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../src/db/unit-of-work.ts';
import { applyMigrations } from '../src/migrator/runner.ts';
import { dispatchMany, dispatchTask } from '../src/work/runtime/produce/dispatch.ts';
import { benchJob } from './fixtures/units/bench/job.task.ts';
import { startServices, type Services } from './peers/services.ts';
import { num, percentile } from './peers/stats.ts';
import { createBenchTenant } from './peers/systems/ours.ts';
import { nowMs } from './peers/tally.ts';
import { applyNumericFlags } from './numeric-flags.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface DispatchBenchOptions {
  smoke: boolean;
  /** Runs per mode and round. */
  runs: number;
  /** Runs per transaction (and per dispatchMany call). */
  batch: number;
  rounds: number;
}

const USAGE = `usage: npm run bench -- dispatch [--smoke] [--runs N] [--batch N] [--rounds N]
  defaults: --runs 20000 --batch 1000 --rounds 3 (smoke: 1000 runs, 1 round)`;

export function parseDispatchOptions(args: readonly string[]): DispatchBenchOptions {
  const smoke = args.includes('--smoke');
  const o: DispatchBenchOptions = { smoke, runs: smoke ? 1_000 : 20_000, batch: 1_000, rounds: smoke ? 1 : 3 };
  const keys: Record<string, 'runs' | 'batch' | 'rounds'> = { '--runs': 'runs', '--batch': 'batch', '--rounds': 'rounds' };
  applyNumericFlags(args, keys, o, USAGE, { integers: true });
  if (o.batch > 10_000) throw new Error(`BENCH_BAD_OPTION: --batch ${o.batch} is over dispatchMany's 10000\n${USAGE}`);
  return o;
}

const MODES = ['single', 'bulk', 'unique', 'debounce'] as const;
type Mode = (typeof MODES)[number];

async function measure(sql: Sql, actor: Actor, mode: Mode, round: number, o: DispatchBenchOptions, print: (line: string) => void): Promise<number> {
  const start = nowMs();
  let lastAt = start;
  let lastRuns = 0;
  let done = 0;
  while (done < o.runs) {
    const n = Math.min(o.batch, o.runs - done);
    const payloads = Array.from({ length: n }, (_, k) => ({ r: round, s: done + k, t: Date.now() }));
    await inUnitOfWork(sql, actor, async (tx) => {
      if (mode === 'bulk') await dispatchMany(tx, benchJob, payloads, { actor });
      else if (mode === 'single') for (const p of payloads) await dispatchTask(tx, benchJob, p, { actor });
      else {
        for (const p of payloads) {
          const uniqueKey = `bench-${mode}-${round}-${p.s}`;
          await dispatchTask(tx, benchJob, p, mode === 'unique' ? { actor, uniqueKey } : { actor, uniqueKey, debounceSeconds: 3_600 });
        }
      }
    });
    done += n;
    const now = nowMs();
    if (now - lastAt >= 1_000 || done === o.runs) {
      print(`INTERVAL mode=${mode} round=${round} t_s=${num((now - start) / 1000, 2)} runs=${done} runs_per_s=${num(((done - lastRuns) * 1000) / (now - lastAt))}`);
      lastAt = now;
      lastRuns = done;
    }
  }
  const seconds = (nowMs() - start) / 1000;
  const perS = o.runs / seconds;
  print(`MODE mode=${mode} round=${round} runs=${o.runs} seconds=${num(seconds, 3)} runs_per_s=${num(perS)}`);
  return perS;
}

export async function main(args: string[]): Promise<number> {
  let o: DispatchBenchOptions;
  try {
    o = parseDispatchOptions(args);
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const print = (line: string) => console.log(line);
  const log = (line: string) => console.error(`# ${line}`);
  let services: Services | undefined;
  let sql: Sql | undefined;
  try {
    services = await startServices({ sqs: false, log });
    const url = await services.createDatabase('bench_dispatch');
    sql = createSql(url, { max: 2, applicationName: 'bench-dispatch' });
    await applyMigrations(sql, { root }, (line) => log(`migrate: ${line}`));
    const tenantId = await createBenchTenant(sql, 'dispatch');
    const actor: Actor = { kind: 'system', tenantId, label: 'bench-dispatch' };
    log(`PostgreSQL ${services.postgresVersion}; ${o.runs} runs per mode and round, ${o.batch} per transaction, ${o.rounds} round(s)`);
    // Warm-up: plans and connections, both paths, not measured.
    for (const mode of MODES) await measure(sql, actor, mode, 0, { ...o, runs: Math.min(o.batch, 500) }, () => {});
    // A fresh database's work tables hold one page when a connection first checks a foreign key: the
    // check's plan, cached for the connection, is then a sequential scan, which grows with the table
    // (~0.5 ms per row at a few thousand runs). A live database has statistics (autovacuum's ANALYZE
    // invalidates those plans); give this one the same before measuring.
    await sql`ANALYZE task_runs, task_run_events, task_run_user_actors, outbox_messages`;
    const rates = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
    for (let round = 1; round <= o.rounds; round++) {
      // Alternate the order, so a drift of the (shared, noisy) machine does not favour one mode.
      const order: Mode[] = round % 2 ? [...MODES] : [...MODES].reverse();
      for (const mode of order) rates.get(mode)!.push(await measure(sql, actor, mode, round, o, print));
    }
    const expected = MODES.length * (o.runs * o.rounds + Math.min(o.batch, 500));
    const [c] = await sql<{ runs: number; events: number; outbox: number }[]>`
      SELECT (SELECT count(*) FROM task_runs WHERE tenant_id = ${tenantId})::int AS runs,
             (SELECT count(*) FROM task_run_events WHERE tenant_id = ${tenantId} AND event = 'queued')::int AS events,
             (SELECT count(*) FROM outbox_messages WHERE tenant_id = ${tenantId})::int AS outbox`;
    if (c!.runs !== expected || c!.events !== expected || c!.outbox !== expected) {
      print(`COUNT_MISMATCH expected=${expected} runs=${c!.runs} queued_events=${c!.events} outbox=${c!.outbox}`);
      return 1;
    }
    const s = percentile(rates.get('single')!, 50);
    const b = percentile(rates.get('bulk')!, 50);
    // What each dispatch option costs per run, beside a plain single dispatch in the same run.
    for (const option of ['unique', 'debounce'] as const) {
      const r = percentile(rates.get(option)!, 50);
      print(`OPTION option=${option} runs_per_s=${num(r)} us_per_run=${num(1e6 / r, 1)} extra_us_per_run=${num(1e6 / r - 1e6 / s, 1)}`);
    }
    print(`SUMMARY single_runs_per_s=${num(s)} bulk_runs_per_s=${num(b)} ratio=${num(b / s, 2)}`);
    return 0;
  } finally {
    await sql?.end({ timeout: 5 });
    await services?.stop();
  }
}
