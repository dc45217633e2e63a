// `npm run bench -- unit-of-work [--smoke] [--units N] [--rounds N]`: what one unit of work
// costs, in the shape of the work bench's steady producer (one dispatchTask per transaction), on one
// durable embedded PostgreSQL 18 database and ONE connection, so units run one after another and their
// time is their latency. Two forms, alternated by round:
//   begin:     postgres.js's sql.begin (BEGIN awaited on its own), the actor context sent with the
//              work's first statement: the form inUnitOfWork had before it pipelined BEGIN;
//   pipelined: inUnitOfWork as it is (src/db/pipelined-begin.ts inPipelinedTransaction): BEGIN, the
//              guard, the context and the work's first statement in one write.
// `pg_cpu_us_per_unit` is the CPU of the connection's PostgreSQL backend (/proc/<pid>/stat) over the
// round, per unit. Lines, in order:
//   INTERVAL mode=<begin|pipelined> round=<r> t_s=<elapsed> units=<cumulative> units_per_s=<rate in the interval>  (about once a second)
//   MODE mode=<begin|pipelined> round=<r> units=<n> us_per_unit=<wall> pg_cpu_us_per_unit=<n>
//   COUNT_MISMATCH ... (only when runs are missing: the benchmark then exits 1)
// and last, exactly: SUMMARY begin_us_per_unit=<n> pipelined_us_per_unit=<n> ratio=<begin/pipelined>
// begin_pg_cpu_us=<n> pipelined_pg_cpu_us=<n> (medians of the rounds).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSql, type Sql, type TxSql } from '../src/db/client.ts';
import { actorContextSelect, inUnitOfWork, type Actor } from '../src/db/unit-of-work.ts';
import { applyMigrations } from '../src/migrator/runner.ts';
import { dispatchTask } from '../src/work/runtime/produce/dispatch.ts';
import { benchJob } from './fixtures/units/bench/job.task.ts';
import { parseProcStat } from './peers/cpu.ts';
import { startServices, type Services } from './peers/services.ts';
import { num, percentile } from './peers/stats.ts';
import { createBenchTenant } from './peers/systems/ours.ts';
import { nowMs } from './peers/tally.ts';
import { applyNumericFlags } from './numeric-flags.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface UnitOfWorkBenchOptions {
  smoke: boolean;
  /** Units per mode and round. */
  units: number;
  rounds: number;
}

const USAGE = `usage: npm run bench -- unit-of-work [--smoke] [--units N] [--rounds N]
  defaults: --units 5000 --rounds 4 (smoke: 300 units, 1 round)`;

export function parseUnitOfWorkOptions(args: readonly string[]): UnitOfWorkBenchOptions {
  const smoke = args.includes('--smoke');
  const o: UnitOfWorkBenchOptions = { smoke, units: smoke ? 300 : 5_000, rounds: smoke ? 1 : 4 };
  applyNumericFlags(args, { '--units': 'units', '--rounds': 'rounds' }, o, USAGE, { integers: true });
  return o;
}

type Mode = 'begin' | 'pipelined';

/** The unit of work as inUnitOfWork ran it before: sql.begin, the context not awaited before the work's first statement. */
function beginForm<T>(sql: Sql, actor: Actor, work: (tx: TxSql) => Promise<T>): Promise<T> {
  return sql.begin(async (tx) => {
    const applied = actorContextSelect(tx, actor).execute();
    applied.catch(() => {}); // awaited below
    const result = await work(tx);
    await applied;
    return result;
  }) as Promise<T>;
}

/** Clock ticks (user + system) the backend has used so far. */
function backendTicks(pid: number): number {
  return parseProcStat(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))?.ticks ?? Number.NaN;
}

async function measure(sql: Sql, backend: number, actor: Actor, mode: Mode, round: number, units: number, print: (line: string) => void) {
  const unit = mode === 'begin' ? beginForm : inUnitOfWork;
  const ticks0 = backendTicks(backend);
  const start = nowMs();
  let lastAt = start;
  let lastUnits = 0;
  for (let done = 1; done <= units; done++) {
    await unit(sql, actor, (tx) => dispatchTask(tx, benchJob, { r: round, s: done, t: Date.now() }, { actor }));
    const now = nowMs();
    if (now - lastAt >= 1_000 || done === units) {
      print(`INTERVAL mode=${mode} round=${round} t_s=${num((now - start) / 1000, 2)} units=${done} units_per_s=${num(((done - lastUnits) * 1000) / (now - lastAt))}`);
      lastAt = now;
      lastUnits = done;
    }
  }
  const usPerUnit = ((nowMs() - start) * 1000) / units;
  // /proc counts in clock ticks (USER_HZ, 100 on Linux): 10,000 µs each.
  const pgCpuUs = ((backendTicks(backend) - ticks0) * 10_000) / units;
  print(`MODE mode=${mode} round=${round} units=${units} us_per_unit=${num(usPerUnit, 1)} pg_cpu_us_per_unit=${num(pgCpuUs, 1)}`);
  return { usPerUnit, pgCpuUs };
}

export async function main(args: string[]): Promise<number> {
  let o: UnitOfWorkBenchOptions;
  try {
    o = parseUnitOfWorkOptions(args);
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
    const url = await services.createDatabase('bench_unit_of_work');
    const setup = createSql(url, { max: 1, applicationName: 'bench-unit-of-work-setup' });
    let tenantId: string;
    try {
      await applyMigrations(setup, { root }, (line) => log(`migrate: ${line}`));
      tenantId = await createBenchTenant(setup, 'unit-of-work');
    } finally {
      await setup.end({ timeout: 5 });
    }
    // One connection for every unit, so one backend does all their database work.
    sql = createSql(url, { max: 1, applicationName: 'bench-unit-of-work' });
    const [{ pid }] = (await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
    const actor: Actor = { kind: 'system', tenantId, label: 'bench-unit-of-work' };
    log(`PostgreSQL ${services.postgresVersion}; ${o.units} units per mode and round, ${o.rounds} round(s), one connection`);
    // Warm-up: plans, prepared statements, both forms, not measured.
    for (const mode of ['begin', 'pipelined'] as const) await measure(sql, pid, actor, mode, 0, Math.min(o.units, 500), () => {});
    await sql`ANALYZE task_runs, task_run_events, outbox_messages`;
    const wall: Record<Mode, number[]> = { begin: [], pipelined: [] };
    const cpu: Record<Mode, number[]> = { begin: [], pipelined: [] };
    for (let round = 1; round <= o.rounds; round++) {
      // Alternate the order, so a drift of the (shared, noisy) machine does not favour one form.
      const order: Mode[] = round % 2 ? ['begin', 'pipelined'] : ['pipelined', 'begin'];
      for (const mode of order) {
        const m = await measure(sql, pid, actor, mode, round, o.units, print);
        wall[mode].push(m.usPerUnit);
        cpu[mode].push(m.pgCpuUs);
      }
    }
    const expected = 2 * o.units * o.rounds + 2 * Math.min(o.units, 500);
    const [c] = await sql<{ runs: number }[]>`SELECT count(*)::int AS runs FROM task_runs WHERE tenant_id = ${tenantId}`;
    if (c!.runs !== expected) {
      print(`COUNT_MISMATCH expected=${expected} runs=${c!.runs}`);
      return 1;
    }
    const b = percentile(wall.begin, 50);
    const p = percentile(wall.pipelined, 50);
    print(
      `SUMMARY begin_us_per_unit=${num(b, 1)} pipelined_us_per_unit=${num(p, 1)} ratio=${num(b / p, 2)} ` +
        `begin_pg_cpu_us=${num(percentile(cpu.begin, 50), 1)} pipelined_pg_cpu_us=${num(percentile(cpu.pipelined, 50), 1)}`,
    );
    return 0;
  } finally {
    await sql?.end({ timeout: 5 });
    await services?.stop();
  }
}
