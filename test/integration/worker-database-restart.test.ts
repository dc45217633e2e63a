// PostgreSQL stops while the workers drain a backlog and starts again a moment later (a restart of the
// server: every session ends, connections are refused meanwhile). Whatever a delivery was waiting on
// then, nothing may stay stuck: every run ends final with exactly one effect and a causal trail, and
// no delivery is left in flight (a stuck one would hold its slot and keep its message invisible).
// A cluster of this test's own, stopped and started through src/db/embedded-postgres.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import type { WorkUnit } from '../../src/work/define/unit.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { ownCluster, type OwnCluster } from '../support/own-cluster.ts';
import { waitFor } from '../support/wait-for.ts';

const RUNS = 60;
/** How long the server stays down: the fault's shape, not a synchronisation. */
const OUTAGE_MS = 2_000;
const VISIBILITY_SECONDS = 5;

let cluster: OwnCluster;
let sql: Sql;
let h: WorkHarness;
let workers: WorkerRuntime | undefined;

beforeAll(async () => {
  cluster = await ownCluster('svc-restart-test');
  sql = cluster.sql;
  h = await workHarness({
    units: new Map<string, WorkUnit>([[effectTask.name, effectTask]]),
    database: cluster.database,
    visibilitySeconds: VISIBILITY_SECONDS,
  });
}, 120_000);

afterAll(async () => {
  try {
    await workers?.stop();
    await h?.close();
  } finally {
    await cluster?.close();
  }
});

/** The harness's reads, retried while the server is away. */
const settled = async <T>(read: () => Promise<T>): Promise<T | undefined> => read().catch(() => undefined);

describe('PostgreSQL restarts while the workers drain', () => {
  it('every session of the cluster commits synchronously, as in production: an immediate stop takes back no COMMIT that answered', async () => {
    // Every connection of the pool the workers share, each busy at once (so none is used twice).
    const settings = await Promise.all(
      Array.from({ length: 30 }, () => sql<{ s: string }[]>`SELECT current_setting('synchronous_commit') AS s, pg_sleep(0.2)`.then((rows) => rows[0]!.s)),
    );
    expect(settings).toEqual(Array.from({ length: 30 }, () => 'on'));
  });

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
    await cluster.stop(mode);
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    await cluster.start();

    await waitFor(async () => (await settled(finished)) === RUNS, 90_000, { what: `all ${RUNS} runs succeeded after the restart` }).catch(async (error: unknown) => {
      const open = await sql<{ run_id: string; status: string }[]>`SELECT run_id, status FROM platform_task_runs WHERE run_id IN ${sql(runIds)} AND status <> 'succeeded'`;
      // Each open run's trail and the log lines that name it: where its delivery stopped.
      const trails = await sql<{ run_id: string; event: string; detail: unknown; occurred_at: string }[]>`
        SELECT run_id, event, detail, occurred_at::text FROM platform_task_run_events
         WHERE run_id IN ${sql(open.length > 0 ? open.map((r) => r.run_id) : ['00000000-0000-0000-0000-000000000000'])} ORDER BY occurred_at, id`;
      const named = h.logs().split('\n').filter((line) => open.some((r) => line.includes(r.run_id)));
      throw new Error(`${(error as Error).message}: ${JSON.stringify(open)}; in flight ${workers?.inFlight()}; trails ${JSON.stringify(trails)}; their log lines:\n${named.slice(-30).join('\n')}\nlog tail:\n${h.logs().split('\n').slice(-20).join('\n')}`);
    });
    for (const key of keys) expect(await h.effects(key)).toBe(1);
    for (const runId of runIds) expect((await causalProblems(sql, runId)).problems).toEqual([]);
    await waitFor(() => workers!.inFlight() === 0, 10_000, { what: 'no delivery left in flight' });
    await workers.stop();
    workers = undefined;
  }, 180_000);
});
