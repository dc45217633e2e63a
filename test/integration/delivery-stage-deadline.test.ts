// A delivery whose wait on the database never ends: the connection to PostgreSQL stalls (a proxy that
// accepts and passes nothing, as a server that stopped answering), so the effect transaction's BEGIN
// (and, for a fresh connection, the reserve) never settles while it lasts. Every wait of a delivery has
// a deadline (SVC_STAGE_TIMEOUT_MS): the delivery is released, its heartbeat stops extending it, the
// process reports not ready until the database answers again, and the run then completes exactly once.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../src/db/client.ts';
import { metricsRegistry } from '../../src/observe/metrics.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import type { WorkUnit } from '../../src/work/define/unit.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { observeCommands } from '../support/sqs-observe.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { stallingProxy, type StallingProxy } from '../support/stalling-proxy.ts';
import { waitFor, within } from '../support/wait-for.ts';

const VISIBILITY_SECONDS = 3;
const STAGE_TIMEOUT_MS = 800;
const HEARTBEAT_MS = 200;

let h: WorkHarness;
let proxy: StallingProxy;
let workerSql: Sql;
let workers: WorkerRuntime | undefined;
/** Polls the workers' /healthz while `watching`. */
let watching = false;
let watcher: Promise<void> | undefined;
/** Every ChangeMessageVisibility the workers sent: receipt handle, timeout, when. */
const visibilityChanges: Array<{ receipt: string; seconds: number; at: number }> = [];

beforeAll(async () => {
  h = await workHarness({ units: new Map<string, WorkUnit>([[effectTask.name, effectTask]]), visibilitySeconds: VISIBILITY_SECONDS });
  observeCommands(h.sqs, (command, input) => {
    if (command === 'ChangeMessageVisibilityCommand') {
      visibilityChanges.push({ receipt: String(input.ReceiptHandle), seconds: Number(input.VisibilityTimeout), at: performance.now() });
    }
  });
  proxy = await stallingProxy(h.db.url);
}, 60_000);

afterEach(async () => {
  watching = false;
  await watcher?.catch(() => {});
  proxy.resume();
  await workers?.stop();
  workers = undefined;
  await workerSql?.end({ timeout: 1 }).catch(() => {});
});

afterAll(async () => {
  await proxy?.close();
  await h?.close();
});

async function metric(stage: string): Promise<number> {
  return sampleValue(await metricsRegistry.metrics(), 'svc_delivery_stage_timeouts_total', { stage });
}

describe('a delivery whose database wait never settles', () => {
  // Open connections: the effect transaction's BEGIN goes out on one of them, into the stall, and never
  // gets an answer (no reconnect, no error). None: the reserve waits for a connection that cannot
  // finish its startup, and arrives after the deadline once the stall ends.
  it.each([
    { waits: 'BEGIN', warm: true, stages: ['begin'] },
    { waits: 'reserve', warm: false, stages: ['reserve'] },
  ])('a $waits that never settles is released at its stage deadline, its heartbeat stops, readiness goes not-ready then ready, and the run completes once', async ({ warm, stages }) => {
    visibilityChanges.length = 0;
    const logsFrom = h.logs().length;
    workerSql = createSql(proxy.url, { max: 8 });
    const [boot] = await h.sql<{ at: string }[]>`SELECT clock_timestamp()::text AS at`;
    const bootAt = boot!.at;
    workers = await h.startWorkers({
      queues: ['default'],
      sql: workerSql,
      stageTimeoutMs: STAGE_TIMEOUT_MS,
      heartbeatIntervalMs: HEARTBEAT_MS,
      visibilitySeconds: { default: VISIBILITY_SECONDS },
      maxReceives: 50,
      healthPort: 0,
      healthHost: '127.0.0.1',
    });
    const health = `http://127.0.0.1:${workers.healthPort}/healthz`;
    const readiness: boolean[] = [];
    watching = true;
    watcher = (async () => {
      while (watching) {
        const body = (await (await fetch(health)).json()) as { ready: boolean };
        readiness.push(body.ready);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    if (warm) await Promise.all(Array.from({ length: 8 }, () => workerSql`SELECT pg_sleep(0.05)`));
    else {
      // The workers read the database's identity at boot, on a connection of their pool: ended here, so
      // the pool is empty again and the delivery's reserve has to open a connection through the stall.
      const ended = async () =>
        (await h.sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                      WHERE datname = current_database() AND backend_start > ${bootAt}::timestamptz AND pid <> pg_backend_pid()`).length;
      await waitFor(async () => (await ended()) === 0, 10_000, { what: "the workers' boot connection ended" });
    }
    const before = await metric(stages[0]!);
    const key = `stall-${randomUUID()}`;
    const { runId } = await h.dispatch(effectTask.name, { key });
    proxy.stall();
    await h.relay();
    const released = (i: number) => {
      // A receipt's release: a visibility change other than an extension.
      const receipts = new Set(visibilityChanges.filter((v) => v.seconds !== VISIBILITY_SECONDS).map((v) => v.receipt));
      return receipts.size >= i;
    };
    try {
      // Released twice while the database stays away: the redelivery meets the same stall.
      await waitFor(() => released(2), 20_000, { what: 'the stuck delivery released twice while the database is stalled' });
      expect(readiness).toContain(false);
    } finally {
      proxy.resume();
    }
    await h.waitForStatus(runId, ['succeeded'], 20_000);
    await waitFor(() => readiness.at(-1) === true, 10_000, { what: 'the workers ready again' });
    watching = false;
    await watcher;

    // Nothing abandoned leaks: no session left inside a transaction (a BEGIN answered late was ended
    // with its session), and no connection left reserved (a reserve answered late went back to the
    // pool): the workers' pool still gives all its connections at once.
    await waitFor(
      async () => (await h.sql`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).length === 0,
      5_000,
      { what: 'no session idle in a transaction' },
    );
    const reserved = await within(Promise.all(Array.from({ length: 8 }, () => workerSql.reserve())), 5_000, 'all 8 connections of the pool reserved');
    for (const r of reserved) r.release();

    // No extension of a receipt after its release: the heartbeat stopped with the stuck delivery.
    const releaseAt = new Map<string, number>();
    for (const v of visibilityChanges) if (v.seconds !== VISIBILITY_SECONDS && !releaseAt.has(v.receipt)) releaseAt.set(v.receipt, v.at);
    const lateExtensions = visibilityChanges.filter((v) => v.seconds === VISIBILITY_SECONDS && releaseAt.has(v.receipt) && v.at > releaseAt.get(v.receipt)!);
    expect(lateExtensions).toEqual([]);
    // And within its deadline only: at most one extension per heartbeat interval of the deadline.
    for (const receipt of releaseAt.keys()) {
      const extensions = visibilityChanges.filter((v) => v.receipt === receipt && v.seconds === VISIBILITY_SECONDS).length;
      expect(extensions).toBeLessThanOrEqual(Math.ceil(STAGE_TIMEOUT_MS / HEARTBEAT_MS) + 1);
    }
    // Counted by stage and logged at warn with the stage.
    expect(await metric(stages[0]!)).toBeGreaterThan(before);
    const warned = h
      .logs()
      .slice(logsFrom)
      .split('\n')
      .filter((line) => line.includes('did not finish within its deadline'))
      .map((line) => JSON.parse(line) as { level: number; stage?: string });
    expect(warned.length).toBeGreaterThanOrEqual(2);
    for (const w of warned) {
      expect(w.level).toBe(40);
      expect(stages).toContain(w.stage);
    }
    // Exactly once: one effect, a causal trail, the run final.
    expect(await h.effects(key)).toBe(1);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
    expect(workers.state().ready).toBe(true);
  }, 90_000);
});
