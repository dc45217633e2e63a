// PostgreSQL stops while the workers drain a backlog and starts again a moment later (a restart of the
// server: every session ends, connections are refused meanwhile). Whatever a delivery was waiting on
// then, nothing may stay stuck: every run ends final with exactly one effect and a causal trail, and
// no delivery is left in flight (a stuck one would hold its slot and keep its message invisible).
// A cluster of this test's own, stopped and started through src/db/embedded-postgres.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { applyMigrations } from '../../src/migrator/runner.ts';
import type { WorkUnit } from '../../src/work/define/unit.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const RUNS = 60;
/** How long the server stays down: the fault's shape, not a synchronisation. */
const OUTAGE_MS = 2_000;
const VISIBILITY_SECONDS = 5;

let scratch: string;
let pgPort: number;
let pg: EmbeddedPostgres | undefined;
let sql: Sql;
let h: WorkHarness;
let workers: WorkerRuntime | undefined;

const startPg = () => startEmbeddedPostgres({ dataDir: path.join(scratch, 'pg'), port: pgPort, fast: true });

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-restart-test-'));
  fs.chmodSync(scratch, 0o755);
  pgPort = await freePort();
  pg = await startPg();
  sql = createSql(pg.url, { max: 30 });
  // Commits wait for their WAL to be written, as in production (the fast cluster turns that off on its
  // command line): an immediate shutdown then loses no commit a client saw succeed, and a run left
  // behind can only be one the workers left.
  await sql`ALTER DATABASE postgres SET synchronous_commit = on`;
  await applyMigrations(sql, { root: ROOT });
  h = await workHarness({
    units: new Map<string, WorkUnit>([[effectTask.name, effectTask]]),
    database: { name: 'postgres', url: pg.url, sql, drop: async () => {} },
    visibilitySeconds: VISIBILITY_SECONDS,
  });
}, 120_000);

afterAll(async () => {
  try {
    await workers?.stop();
    await h?.close();
    await sql?.end({ timeout: 5 });
  } finally {
    await pg?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  }
});

/**
 * Stops the server as `pg_ctl stop -m immediate` does (SIGQUIT to the postmaster: every backend quits
 * at once, no checkpoint, crash recovery at the next start) or `-m fast` (embedded-postgres.ts's stop:
 * sessions terminated, a clean shutdown). Resolves once the postmaster is gone.
 */
async function stopPg(mode: 'immediate' | 'fast'): Promise<void> {
  const server = pg!;
  pg = undefined;
  if (mode === 'immediate') {
    const postmaster = Number(fs.readFileSync(path.join(server.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(postmaster, 'SIGQUIT');
    await waitFor(
      () => {
        try {
          process.kill(postmaster, 0);
          return false;
        } catch {
          return true;
        }
      },
      20_000,
      { what: 'the postmaster gone after an immediate shutdown' },
    );
  }
  // Gives this process's lease up; after an immediate shutdown there is no server left to stop.
  await server.stop();
}

/** The harness's reads, retried while the server is away. */
const settled = async <T>(read: () => Promise<T>): Promise<T | undefined> => read().catch(() => undefined);

describe('PostgreSQL restarts while the workers drain', () => {
  it.each(['immediate', 'fast'] as const)('a %s stop and a start leave no run running or queued: every run final with one effect and a causal trail, nothing in flight', async (mode) => {
    const keys = Array.from({ length: RUNS }, () => `restart-${randomUUID()}`);
    const runIds: string[] = [];
    // Each handler sleeps a little inside its effect transaction: the stop lands on transactions in flight.
    for (const key of keys) runIds.push((await h.dispatch(effectTask.name, { key, sleepMs: 150 })).runId);
    await h.relay();
    workers = await h.startWorkers({
      queues: ['default'],
      visibilitySeconds: { default: VISIBILITY_SECONDS },
      stageTimeoutMs: 1_000,
      maxReceives: 100,
      drainMs: 2_000,
    });
    const finished = async () => {
      const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM platform_task_runs WHERE run_id IN ${sql(runIds)} AND status = 'succeeded'`;
      return row!.n;
    };
    // Mid-drain: some runs done, most still to do.
    await waitFor(async () => ((await settled(finished)) ?? 0) >= 5, 30_000, { what: 'the drain under way' });
    expect(await finished()).toBeLessThan(RUNS);
    expect(workers.inFlight()).toBeGreaterThan(0);
    await stopPg(mode);
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    pg = await startPg();

    await waitFor(async () => (await settled(finished)) === RUNS, 90_000, { what: `all ${RUNS} runs succeeded after the restart` }).catch(async (error: unknown) => {
      const open = await sql<{ run_id: string; status: string }[]>`SELECT run_id, status FROM platform_task_runs WHERE run_id IN ${sql(runIds)} AND status <> 'succeeded'`;
      throw new Error(`${(error as Error).message}: ${JSON.stringify(open)}; in flight ${workers?.inFlight()}; log tail:\n${h.logs().split('\n').slice(-20).join('\n')}`);
    });
    for (const key of keys) expect(await h.effects(key)).toBe(1);
    for (const runId of runIds) expect((await causalProblems(sql, runId)).problems).toEqual([]);
    await waitFor(() => workers!.inFlight() === 0, 10_000, { what: 'no delivery left in flight' });
    await workers.stop();
    workers = undefined;
  }, 180_000);
});
